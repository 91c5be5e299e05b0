// Tokenizer construction (validation, special tokens, end-of-generation set) and the parts of
// encode/decode shared by both algorithms.
#include "loader/tokenizer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <stdexcept>

#include "loader/error.h"
#include "loader/tokenizer_internal.h"

namespace pacer::loader {

namespace {

using Impl = Tokenizer::Impl;
namespace keys = tokenizer_keys;

// Texts llama.cpp treats as end-of-generation whatever their declared type (they are then
// forced to Control).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<|eom_id|>",
};
// Texts that name the end-of-turn token when the file gives no tokenizer.ggml.eot_token_id.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<EOT>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek's
};
constexpr std::string_view kFimEogTexts[] = {"<|fim_pad|>",  "<fim-pad>",     "<PAD>",
                                             "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                             "<REPO>",       "<|file_sep|>"};

const std::string kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
      out += ' ';
      i += kSpmSpace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// "<0xAB>" -> 0xAB; -1 if the text is not a byte token's.
int parse_byte_token(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  int v = 0;
  for (char c : s.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      v |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      v |= c - 'a' + 10;
    } else {
      return -1;
    }
  }
  return v;
}

bool is_special_type(TokenType t) {
  return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct Builder {
  const Vocab& v;
  Impl& t;
  const KeyOffset& key_offset;

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw LoadError(t.source, std::string(key), key_offset(key), what);
  }

  // A special id from the file: must name a token. The padding id is informational only, so an
  // out-of-range one is dropped (llama.cpp warns and ignores it) rather than refusing the file.
  int32_t special_id(std::string_view key, const std::optional<int64_t>& id, int32_t fallback,
                     bool lenient = false) const {
    if (!id) return fallback < t.n_vocab() ? fallback : -1;
    if (*id < 0) return -1;
    if (*id >= t.n_vocab()) {
      if (lenient) return -1;
      fail(key, "token id " + std::to_string(*id) + " is outside the vocabulary (" +
                    std::to_string(t.n_vocab()) + " tokens)");
    }
    return static_cast<int32_t>(*id);
  }

  void read_kind() {
    t.model = v.model;
    if (v.model == "llama") {
      t.kind = Impl::Kind::Spm;
    } else if (v.model == "gpt2") {
      t.kind = Impl::Kind::Bpe;
      t.pre_name = v.pre.empty() ? "default" : v.pre;
      const std::optional<PreTokenizer> pre = pre_tokenizer_from_name(t.pre_name);
      if (!pre) {
        fail(keys::kPre, "unsupported pre-tokenizer '" + t.pre_name +
                             "' (supported: " + std::string(supported_pre_tokenizer_names()) + ")");
      }
      t.pre = *pre;
      t.ignore_merges = t.pre_name == "llama3" || t.pre_name == "llama-v3" ||
                        t.pre_name == "llama-bpe" || t.pre_name == "falcon3";
    } else {
      fail(keys::kModel,
           v.model.empty() ? std::string("missing tokenizer model")
                           : "unsupported tokenizer model '" + v.model +
                                 "' (supported: 'llama' = SentencePiece, 'gpt2' = byte-level BPE)");
    }
  }

  void read_tokens() {
    const size_t n = v.tokens.size();
    if (n == 0) fail(keys::kTokens, "the vocabulary is empty");
    if (n > static_cast<size_t>(INT32_MAX)) fail(keys::kTokens, "too many tokens");
    if (!v.scores.empty() && v.scores.size() != n) {
      fail(keys::kScores,
           std::to_string(v.scores.size()) + " scores for " + std::to_string(n) + " tokens");
    }
    if (!v.token_types.empty() && v.token_types.size() != n) {
      fail(keys::kTokenType, std::to_string(v.token_types.size()) + " token types for " +
                                 std::to_string(n) + " tokens");
    }
    t.text = v.tokens;
    t.score = v.scores.empty() ? std::vector<float>(n, 0.0f) : v.scores;
    t.type.resize(n, TokenType::Normal);
    for (size_t i = 0; i < v.token_types.size(); ++i) {
      const int32_t ty = v.token_types[i];
      // Values outside the enum are "undefined", as in llama.cpp.
      t.type[i] = (ty >= 0 && ty <= 6) ? static_cast<TokenType>(ty) : TokenType::Undefined;
    }
    t.strip.assign(n, 0);
  }

  void index_texts() {
    const bool bpe = t.kind == Impl::Kind::Bpe;
    if (bpe) t.bpe_bytes.resize(t.text.size());
    t.by_text.reserve(t.text.size());
    for (size_t i = 0; i < t.text.size(); ++i) {
      if (t.text[i].empty()) continue;  // never matches anything
      if (bpe) {
        std::optional<std::string> bytes = gpt2_unmap(t.text[i]);
        if (!bytes) continue;  // not in the byte alphabet: no byte string produces it
        t.bpe_bytes[i] = std::move(*bytes);
        t.by_text.insert_or_assign(std::string_view(t.bpe_bytes[i]), static_cast<int32_t>(i));
      } else {
        t.by_text.insert_or_assign(std::string_view(t.text[i]), static_cast<int32_t>(i));
      }
    }
  }

  void find_specials() {
    const bool spm = t.kind == Impl::Kind::Spm;
    t.bos = special_id(keys::kBos, v.bos_id, spm ? 1 : -1);
    t.eos = special_id(keys::kEos, v.eos_id, spm ? 2 : -1);
    t.unk = special_id(keys::kUnk, v.unk_id, spm ? 0 : -1);
    t.pad = special_id(keys::kPad, v.pad_id, -1, /*lenient=*/true);
    t.eot = special_id(keys::kEot, v.eot_id, -1);
    t.eom = special_id(keys::kEom, v.eom_id, -1);
    t.add_bos = v.add_bos.value_or(spm || t.ignore_merges);  // llama3-style BPE adds BOS too
    t.add_eos = v.add_eos.value_or(false);
    t.add_space_prefix = v.add_space_prefix.value_or(spm);
    if (t.add_bos && t.bos < 0) fail(keys::kBos, "missing, but the vocabulary adds a BOS token");
    if (t.add_eos && t.eos < 0) fail(keys::kEos, "missing, but the vocabulary adds an EOS token");

    // End of generation, by id and by the well-known texts (forced to Control, as llama.cpp).
    auto force_control = [&](int32_t id) { t.type[id] = TokenType::Control; };
    if (t.eot < 0) {
      for (std::string_view s : kEotTexts) {
        if (const int32_t id = lookup_stored(s); id >= 0) {
          t.eot = id;
          break;
        }
      }
    }
    if (t.eom < 0) t.eom = lookup_stored("<|eom_id|>");
    std::vector<int32_t> eog;
    for (std::string_view s : kEogTexts) {
      if (const int32_t id = lookup_stored(s); id >= 0) eog.push_back(id);
    }
    for (std::string_view s : kFimEogTexts) {
      if (const int32_t id = lookup_stored(s); id >= 0) eog.push_back(id);
    }
    for (int32_t id : eog) force_control(id);
    for (int32_t id : {t.eos, t.eot, t.eom}) {
      if (id >= 0) eog.push_back(id);
    }
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
    t.eog = std::move(eog);
  }

  // Stored text -> id, last one winning (independent of the BPE byte index).
  int32_t lookup_stored(std::string_view s) const {
    for (size_t i = t.text.size(); i-- > 0;) {
      if (t.text[i] == s) return static_cast<int32_t>(i);
    }
    return -1;
  }

  void per_model_attributes() {
    // llama.cpp sets these by model name because GGUF has no per-token strip attributes.
    const std::string name = lowercase(v.name);
    if (t.pre_name.find("jina-v2-") != std::string::npos) {
      if (const int32_t id = lookup_stored("<mask>"); id >= 0) t.strip[id] |= Impl::kLstrip;
    } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
      for (size_t i = 0; i < t.type.size(); ++i) {
        if (is_special_type(t.type[i])) t.strip[i] |= Impl::kRstrip;
      }
      if (const int32_t id = lookup_stored("</s>"); id >= 0) t.strip[id] |= Impl::kRstrip;
      for (std::string_view s : {"<unk>", "<s>", "<|endoftext|>"}) {
        if (const int32_t id = lookup_stored(s); id >= 0) t.strip[id] &= ~Impl::kRstrip;
      }
    }
  }

  void render_pieces() {
    const bool spm = t.kind == Impl::Kind::Spm;
    t.piece.resize(t.text.size());
    t.byte_token.fill(-1);
    for (size_t i = 0; i < t.text.size(); ++i) {
      const std::string& s = t.text[i];
      switch (t.type[i]) {
        case TokenType::Normal:
          if (spm) {
            t.piece[i] = unescape_spaces(s);
          } else {
            // Characters outside the byte alphabet are kept as they are.
            t.piece[i] = !t.bpe_bytes[i].empty() ? t.bpe_bytes[i] : s;
          }
          break;
        case TokenType::Byte: {
          const int b = parse_byte_token(s);
          if (b < 0) {
            fail(keys::kTokens, "token " + std::to_string(i) + " '" + s +
                                    "' has type byte but is not of the form <0xXX>");
          }
          t.piece[i] = std::string(1, static_cast<char>(b));
          break;
        }
        case TokenType::Control:
        case TokenType::UserDefined:
        case TokenType::Unknown:
          t.piece[i] = s;
          break;
        case TokenType::Unused:
        case TokenType::Undefined:
          break;  // renders as nothing
      }
    }
    // Byte fallback (SPM: "<0xXX>", else the one-byte token) / single-byte tokens (BPE).
    for (unsigned b = 0; b < 256; ++b) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const std::string spelled = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
      const int32_t as_byte_token = spm ? t.lookup(spelled) : -1;
      t.byte_token[b] =
          as_byte_token >= 0 ? as_byte_token : t.lookup(std::string(1, static_cast<char>(b)));
    }
  }

  void collect_special_tokens() {
    for (size_t i = 0; i < t.type.size(); ++i) {
      if (is_special_type(t.type[i]) && !t.text[i].empty()) {
        t.special_tokens.push_back(static_cast<int32_t>(i));
      }
    }
    std::stable_sort(t.special_tokens.begin(), t.special_tokens.end(),
                     [&](int32_t a, int32_t b) { return t.text[a].size() > t.text[b].size(); });
  }
};

// One piece of the input after special-token splitting: a token id, or text to tokenize.
struct Fragment {
  int32_t token;          // -1 for text
  std::string_view text;  // when token < 0
};

// llama.cpp's tokenizer_st_partition: for each special token, longest first, split every text
// fragment at each occurrence. User-defined tokens always split; control and unknown tokens only
// when parse_special.
std::vector<Fragment> split_special(const Impl& t, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, text});
  // Vocabularies can have thousands of special tokens (Gemma's <unusedN>): skip at once those
  // whose first byte the text does not contain.
  std::array<bool, 256> has_byte{};
  for (char c : text) has_byte[static_cast<uint8_t>(c)] = true;
  std::vector<Fragment> next;
  for (const int32_t id : t.special_tokens) {
    if (!parse_special && t.type[id] != TokenType::UserDefined) continue;
    const std::string& s = t.text[id];
    if (!has_byte[static_cast<uint8_t>(s[0])]) continue;
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t at; (at = rest.find(s)) != std::string_view::npos;) {
        changed = true;
        std::string_view left = rest.substr(0, at);
        if (t.strip[id] & Impl::kLstrip) {
          while (!left.empty() && std::isspace(static_cast<unsigned char>(left.back()))) {
            left.remove_suffix(1);
          }
        }
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({id, {}});
        rest = rest.substr(at + s.size());
        if (t.strip[id] & Impl::kRstrip) {
          while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) {
            rest.remove_prefix(1);
          }
        }
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

void check_id(const Impl& t, int32_t id) {
  if (id < 0 || id >= t.n_vocab()) {
    throw std::out_of_range(t.source + ": token id " + std::to_string(id) +
                            " is outside the vocabulary (" + std::to_string(t.n_vocab()) +
                            " tokens)");
  }
}

}  // namespace

std::shared_ptr<const Impl> build_tokenizer_tables(const Vocab& v, std::string source,
                                                   const KeyOffset& key_offset) {
  auto t = std::make_shared<Impl>();
  t->source = std::move(source);
  Builder b{v, *t, key_offset};
  b.read_kind();
  b.read_tokens();
  b.index_texts();
  b.find_specials();
  b.per_model_attributes();
  b.render_pieces();
  b.collect_special_tokens();
  if (t->kind == Impl::Kind::Bpe) {
    if (v.merges.empty()) b.fail(keys::kMerges, "missing: a gpt2 (BPE) vocabulary needs merges");
    build_bpe_merges(*t, v.merges, key_offset);
  }
  return t;
}

Tokenizer Tokenizer::from_vocab(const Vocab& vocab, std::string source) {
  return Tokenizer(build_tokenizer_tables(vocab, std::move(source),
                                          [](std::string_view) -> int64_t { return -1; }));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Impl& t = *impl_;
  // Symbols hold 32-bit offsets.
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw std::length_error("tokenizer: text of " + std::to_string(text.size()) +
                            " bytes is too long (at most 2 GiB)");
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && t.add_bos) out.push_back(t.bos);
  const std::vector<Fragment> frags = split_special(t, text, parse_special);
  if (t.kind == Impl::Kind::Spm) {
    bool after_special = true;  // the text start counts as "after a special token"
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      std::string escaped = (t.add_space_prefix && after_special) ? kSpmSpace : std::string();
      escaped += escape_spaces(f.text);
      spm_encode_fragment(t, escaped, out);
      after_special = false;
    }
  } else {
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
      } else {
        bpe_encode_fragment(t, f.text, out);
      }
    }
  }
  if (add_special && t.add_eos) out.push_back(t.eos);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  const Impl& t = *impl_;
  std::string out;
  // SPM: the space the encoder prefixed, removed from the first rendered piece.
  bool strip_space = t.kind == Impl::Kind::Spm && t.add_space_prefix;
  for (const int32_t id : ids) {
    check_id(t, id);
    const TokenType ty = t.type[id];
    if (!render_special && (ty == TokenType::Control || ty == TokenType::Unknown)) continue;
    std::string_view p = t.piece[id];
    if (p.empty()) continue;
    if (strip_space && ty == TokenType::Normal && p.front() == ' ') p.remove_prefix(1);
    strip_space = false;
    out += p;
  }
  return out;
}

std::string Tokenizer::piece(int32_t id) const {
  check_id(*impl_, id);
  return impl_->piece[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(*impl_, id);
  return impl_->text[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(*impl_, id);
  return impl_->type[id];
}

int32_t Tokenizer::bos() const noexcept {
  return impl_->bos;
}
int32_t Tokenizer::eos() const noexcept {
  return impl_->eos;
}
int32_t Tokenizer::eot() const noexcept {
  return impl_->eot;
}
int32_t Tokenizer::unk() const noexcept {
  return impl_->unk;
}
int32_t Tokenizer::pad() const noexcept {
  return impl_->pad;
}
bool Tokenizer::add_bos() const noexcept {
  return impl_->add_bos;
}
bool Tokenizer::add_eos() const noexcept {
  return impl_->add_eos;
}
bool Tokenizer::add_space_prefix() const noexcept {
  return impl_->add_space_prefix;
}
bool Tokenizer::is_eog(int32_t id) const noexcept {
  return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}
const std::vector<int32_t>& Tokenizer::eog_ids() const noexcept {
  return impl_->eog;
}
int64_t Tokenizer::n_vocab() const noexcept {
  return impl_->n_vocab();
}
int64_t Tokenizer::n_merges() const noexcept {
  return impl_->n_merges;
}
std::string_view Tokenizer::model() const noexcept {
  return impl_->model;
}
std::string_view Tokenizer::pre() const noexcept {
  return impl_->pre_name;
}

}  // namespace pacer::loader
