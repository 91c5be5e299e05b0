// Synthetic vocabularies (see synth_vocab.h). The merged pieces come from a small deterministic
// BPE training run over a built-in English word list, so common words and affixes become single
// tokens; pseudo-words fill the rest of n_vocab.
#include "loader/synth_vocab.h"

#include <algorithm>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "loader/error.h"
#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/tokenizer.h"
#include "loader/tokenizer_internal.h"
#include "loader/tokenizer_unicode.h"

namespace pacer::loader {

namespace {

// Frequent English words, most frequent first (the rank sets the training weight).
constexpr std::string_view kWords =
    "the of and to a in is it you that he was for on are with as I his they be at one have this "
    "from or had by hot word but what some we can out other were all there when up use your how "
    "said an each she which do their time if will way about many then them write would like so "
    "these her long make thing see him two has look more day could go come did number sound no "
    "most people my over know water than call first who may down side been now find any new work "
    "part take get place made live where after back little only round man year came show every "
    "good me give our under name very through just form sentence great think say help low line "
    "differ turn cause much mean before move right boy old too same tell does set three want air "
    "well also play small end put home read hand port large spell add even land here must big "
    "high such follow act why ask men change went light kind off need house picture try us again "
    "animal point mother world near build self earth father head stand own page should country "
    "found answer school grow study still learn plant cover food sun four between state keep eye "
    "never last let thought city tree cross farm hard start might story saw far sea draw left "
    "late run while press close night real life few north open seem together next white children "
    "begin got walk example ease paper group always music those both mark often letter until mile "
    "river car feet care second book carry took science eat room friend began idea fish mountain "
    "stop once base hear horse cut sure watch color face wood main enough plain girl usual young "
    "ready above ever red list though feel talk bird soon body dog family direct pose leave song "
    "measure door product black short numeral class wind question happen complete ship area half "
    "rock order fire south problem piece told knew pass since top whole king space heard best hour "
    "better true during hundred five remember step early hold west ground interest reach fast verb "
    "sing listen six table travel less morning ten simple several vowel toward war lay against "
    "pattern slow center love person money serve appear road map rain rule govern pull cold notice "
    "voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star "
    "box noun field rest correct able pound done beauty drive stood contain front teach week final "
    "gave green oh quick develop ocean warm free minute strong special mind behind clear tail "
    "produce fact street inch multiply nothing course stay wheel full force blue object decide "
    "surface deep moon island foot system busy test record boat common gold possible plane stead "
    "dry wonder laugh thousand ago ran check game shape equate miss brought heat snow tire bring "
    "yes distant fill east paint language among model memory time token compute process thread "
    "frequency performance measure result report value cache speed run running jumps jumped lazy "
    "brown fox over times worst age wisdom foolishness";

// Pieces seen inside and after words (punctuation, whitespace), with their own weights.
struct Extra {
  std::string_view text;
  int64_t weight;
};
constexpr Extra kExtras[] = {
    {".", 60000}, {",", 60000},  {"'s", 8000},   {"n't", 6000},  {"'re", 2000},  {":", 4000},
    {";", 1500},  {"?", 3000},   {"!", 2000},    {"\"", 3000},   {"(", 3000},    {")", 3000},
    {"-", 3000},  {"...", 800},  {"ing", 9000},  {"ed", 8000},   {"ly", 6000},   {"tion", 5000},
    {"er", 6000}, {"est", 3000}, {"ment", 3000}, {"ness", 2000}, {"able", 1500}, {"ers", 2500},
};

// Syllables for filler pseudo-words.
constexpr std::string_view kSyllables[] = {
    "ba",  "be",  "bi", "bo", "ca", "co", "con", "de",  "di",   "do",   "en", "er",  "fa",
    "fe",  "fi",  "ga", "ge", "go", "ha", "he",  "hi",  "in",   "ka",   "la", "le",  "li",
    "lo",  "ma",  "me", "mi", "mo", "na", "ne",  "ni",  "no",   "pa",   "pe", "pi",  "po",
    "pro", "ra",  "re", "ri", "ro", "sa", "se",  "si",  "so",   "ta",   "te", "ter", "ti",
    "to",  "tra", "un", "va", "ve", "vi", "wa",  "ing", "tion", "ment", "ly", "ous", "al",
    "ic",  "ist", "or", "an", "ar", "st", "th",  "ch",  "sh",
};

const std::string kSpmSpace = "\xE2\x96\x81";

// splitmix64: a fixed, portable generator (std distributions differ between libraries).
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t end = std::min(s.find(' ', pos), s.size());
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

std::string capitalized(std::string_view w) {
  std::string s(w);
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

// The weighted training words: the way the tokenizer's splitter presents text to the merge step
// (a leading space, or "▁" for SentencePiece, belongs to the word).
std::vector<std::pair<std::string, int64_t>> training_corpus(VocabKind kind) {
  const std::string space = kind != VocabKind::Gpt2Qwen2 ? kSpmSpace : std::string(" ");
  std::vector<std::pair<std::string, int64_t>> corpus;
  const std::vector<std::string_view> words = split_words(kWords);
  for (size_t rank = 0; rank < words.size(); ++rank) {
    const auto w = static_cast<int64_t>(1000000 / (rank + 10));
    corpus.emplace_back(space + std::string(words[rank]), w);
    corpus.emplace_back(space + capitalized(words[rank]), w / 4 + 1);
    corpus.emplace_back(capitalized(words[rank]), w / 6 + 1);
    corpus.emplace_back(std::string(words[rank]), w / 8 + 1);
  }
  for (const Extra& e : kExtras) corpus.emplace_back(std::string(e.text), e.weight);
  if (kind == VocabKind::Gpt2Qwen2) {
    // Whitespace runs the qwen2 splitter produces: indentation and paragraph breaks.
    corpus.emplace_back("  ", 3000);
    corpus.emplace_back("    ", 2000);
    corpus.emplace_back("\n\n", 4000);
    corpus.emplace_back(".\n", 3000);
  }
  return corpus;
}

// Characters of a string (UTF-8 sequences) as separate strings.
std::vector<std::string> characters(std::string_view s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t len = unicode::decode_utf8(s, pos).len;
    out.emplace_back(s.substr(pos, len));
    pos += len;
  }
  return out;
}

// The distinct characters of the corpus, most frequent (by weight) first, ties by text.
std::vector<std::string> characters_by_frequency(
    const std::vector<std::pair<std::string, int64_t>>& corpus) {
  std::unordered_map<std::string, int64_t> weight;
  for (const auto& [text, w] : corpus) {
    for (const std::string& c : characters(text)) weight[c] += w;
  }
  std::vector<std::pair<std::string, int64_t>> sorted(weight.begin(), weight.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> out;
  for (auto& [c, w] : sorted) out.push_back(std::move(c));
  return out;
}

struct MergeRule {
  std::string left, right;
};

// Byte-pair-encoding training with incrementally maintained pair counts: repeatedly merge the
// most frequent adjacent pair (ties: smallest symbol ids, i.e. the earliest-seen symbols) until
// `max_new_pieces` new strings exist or nothing is left to merge.
class BpeTrainer {
 public:
  explicit BpeTrainer(const std::vector<std::pair<std::string, int64_t>>& corpus) {
    for (const auto& [text, weight] : corpus) {
      Word w{{}, weight};
      for (const std::string& c : characters(text)) w.symbols.push_back(intern(c));
      words_.push_back(std::move(w));
    }
    for (size_t wi = 0; wi < words_.size(); ++wi) count_pairs(wi, +1);
  }

  // Symbol strings of length-1 characters seen in the corpus (always tokens).
  std::vector<std::string> initial_symbols() const { return {text_.begin(), text_.end()}; }

  std::vector<MergeRule> train(size_t max_new_pieces, std::unordered_set<std::string>& pieces) {
    std::vector<MergeRule> rules;
    while (pieces.size() < max_new_pieces) {
      const std::optional<uint64_t> best = pop_best();
      if (!best) break;
      const int32_t a = static_cast<int32_t>(*best >> 32), b = static_cast<int32_t>(*best);
      const int32_t merged = intern(text_[a] + text_[b]);
      rules.push_back({text_[a], text_[b]});
      pieces.insert(text_[merged]);
      apply(*best, a, b, merged);
    }
    return rules;
  }

 private:
  struct Word {
    std::vector<int32_t> symbols;
    int64_t weight;
  };
  struct Candidate {
    int64_t count;
    uint64_t pair;
    bool operator<(const Candidate& o) const {  // max-heap: highest count, then smallest pair
      return count < o.count || (count == o.count && pair > o.pair);
    }
  };

  int32_t intern(const std::string& s) {
    auto [it, inserted] = ids_.try_emplace(s, static_cast<int32_t>(text_.size()));
    if (inserted) text_.push_back(s);
    return it->second;
  }
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void count_pairs(size_t wi, int sign) {
    const Word& w = words_[wi];
    for (size_t k = 0; k + 1 < w.symbols.size(); ++k) {
      const uint64_t p = key(w.symbols[k], w.symbols[k + 1]);
      int64_t& c = counts_[p];
      c += sign * w.weight;
      if (sign > 0) where_[p].push_back(static_cast<int32_t>(wi));
      // Every change gets a heap entry; pop_best() skips the outdated ones.
      if (c > 0) heap_.push({c, p});
    }
  }

  std::optional<uint64_t> pop_best() {
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      heap_.pop();
      auto it = counts_.find(top.pair);
      if (it != counts_.end() && it->second == top.count && top.count > 0) return top.pair;
    }
    return std::nullopt;
  }

  void apply(uint64_t pair, int32_t a, int32_t b, int32_t merged) {
    std::vector<int32_t> affected = std::move(where_[pair]);
    where_.erase(pair);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    for (const int32_t wi : affected) {
      Word& w = words_[wi];
      count_pairs(wi, -1);
      std::vector<int32_t> out;
      out.reserve(w.symbols.size());
      for (size_t k = 0; k < w.symbols.size(); ++k) {
        if (k + 1 < w.symbols.size() && w.symbols[k] == a && w.symbols[k + 1] == b) {
          out.push_back(merged);
          ++k;
        } else {
          out.push_back(w.symbols[k]);
        }
      }
      w.symbols = std::move(out);
      count_pairs(wi, +1);
    }
    counts_.erase(pair);
  }

  std::vector<std::string> text_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<Word> words_;
  std::unordered_map<uint64_t, int64_t> counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::priority_queue<Candidate> heap_;
};

// Adds pseudo-words (two existing word-like pieces joined) until `target` pieces exist.
void add_filler(std::vector<MergeRule>& rules, std::unordered_set<std::string>& pieces,
                const std::vector<std::string>& bases, const std::string& space, size_t target,
                uint64_t seed) {
  Rng rng{seed ^ 0x5EED5EED5EED5EEDull};
  // Left parts: any word-like piece, with or without the word-initial space; right parts:
  // lower-case pieces without a space (the word continues).
  std::vector<std::string> lefts, rights;
  for (const std::string& s : bases) {
    lefts.push_back(s);
    if (s.rfind(space, 0) != 0 &&
        std::all_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
      rights.push_back(s);
    }
  }
  size_t attempts = 0;
  const size_t max_attempts = 64 * (target + 1000);
  while (pieces.size() < target) {
    if (++attempts > max_attempts) {
      throw std::invalid_argument("synthetic vocabulary: cannot generate " +
                                  std::to_string(target) + " distinct pieces");
    }
    const std::string& l = lefts[rng.below(lefts.size())];
    const std::string& r = rights[rng.below(rights.size())];
    std::string joined = l + r;
    if (pieces.count(joined) || joined.size() > 24) continue;
    pieces.insert(joined);
    rules.push_back({l, r});
  }
}

}  // namespace

Vocab make_synthetic_vocab(VocabKind kind, int64_t n_vocab, uint64_t seed) {
  if (n_vocab < kMinSyntheticVocab || n_vocab > INT32_MAX) {
    throw std::invalid_argument("synthetic vocabulary: n_vocab " + std::to_string(n_vocab) +
                                " outside [" + std::to_string(kMinSyntheticVocab) + ", 2^31-1]");
  }
  const bool spm = kind != VocabKind::Gpt2Qwen2;
  const std::string space = spm ? kSpmSpace : std::string(" ");
  Vocab v;
  v.model = spm ? "llama" : "gpt2";
  v.pre = spm ? "default" : "qwen2";
  v.name = spm ? "pacer synthetic sentencepiece" : "pacer synthetic qwen2";
  const auto n = static_cast<size_t>(n_vocab);

  // Fixed part of the vocabulary.
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(static_cast<int32_t>(type));
  };
  if (spm) {
    add("<unk>", 0, TokenType::Unknown);
    add("<s>", 0, TokenType::Control);
    add("</s>", 0, TokenType::Control);
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (unsigned b = 0; b < 256; ++b) {
      add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, TokenType::Byte);
    }
  } else {
    // GPT-2 order: the printable bytes first, then the others (as GPT-2 and Qwen2 vocabularies).
    std::vector<unsigned> order;
    for (unsigned b = 0; b < 256; ++b) {
      if (gpt2_byte_to_cpt(static_cast<uint8_t>(b)) == b) order.push_back(b);
    }
    for (unsigned b = 0; b < 256; ++b) {
      if (gpt2_byte_to_cpt(static_cast<uint8_t>(b)) != b) order.push_back(b);
    }
    for (unsigned b : order)
      add(gpt2_map(std::string(1, static_cast<char>(b))), 0, TokenType::Normal);
  }
  const bool phi3 = kind == VocabKind::SentencePiecePhi3;
  const size_t n_specials_at_end = spm ? (phi3 ? 2 : 0) : 3;

  // Single characters: byte-level BPE has them all as byte tokens. SentencePiece gets the most
  // frequent characters of the word list, then the rest of printable ASCII, as tokens of their
  // own (its merges do not need them: any adjacent pair whose concatenation is a token merges);
  // a small vocabulary keeps at least half of its free ids for merged pieces, and characters
  // left out fall back to byte tokens.
  const std::vector<std::pair<std::string, int64_t>> corpus = training_corpus(kind);
  BpeTrainer trainer(corpus);
  std::vector<std::string> chars = trainer.initial_symbols();
  if (spm) {
    chars = characters_by_frequency(corpus);
    for (unsigned c = 0x21; c < 0x7F; ++c) {
      const std::string ch(1, static_cast<char>(c));
      if (std::find(chars.begin(), chars.end(), ch) == chars.end()) chars.push_back(ch);
    }
    chars.resize(std::min(chars.size(), (n - v.tokens.size()) / 2));
  }
  const size_t fixed = v.tokens.size() + (spm ? chars.size() : 0) + n_specials_at_end;
  if (fixed >= n) {
    throw std::invalid_argument("synthetic vocabulary: n_vocab " + std::to_string(n_vocab) +
                                " leaves no room for merged pieces");
  }
  const size_t n_pieces = n - fixed;

  std::unordered_set<std::string> pieces;
  // A piece must not repeat a single character (SPM) or byte (BPE) token.
  for (const std::string& c : chars) pieces.insert(c);
  const size_t base = pieces.size();
  std::vector<MergeRule> rules = trainer.train(base + n_pieces, pieces);
  if (pieces.size() < base + n_pieces) {
    std::vector<std::string> bases(chars);
    for (const MergeRule& r : rules) bases.push_back(r.left + r.right);
    bases.insert(bases.end(), std::begin(kSyllables), std::end(kSyllables));
    std::sort(bases.begin(), bases.end());
    bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
    // Join only word-like tokens (letters, optionally after the word-initial space); syllables
    // qualify once training has made them tokens.
    auto word_like = [&](const std::string& s) {
      const std::string_view body =
          s.rfind(space, 0) == 0 ? std::string_view(s).substr(space.size()) : std::string_view(s);
      return !body.empty() && std::all_of(body.begin(), body.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      });
    };
    bases.erase(
        std::remove_if(bases.begin(), bases.end(),
                       [&](const std::string& s) { return !pieces.count(s) || !word_like(s); }),
        bases.end());
    add_filler(rules, pieces, bases, space, base + n_pieces, seed);
  }

  // Emit pieces in rule order (a result that two rules produce appears once).
  std::unordered_set<std::string> emitted;
  float score = -1.0f;
  if (spm) {
    for (const std::string& c : chars) add(c, -1e6f, TokenType::Normal);  // below every piece
  }
  for (const MergeRule& r : rules) {
    std::string joined = r.left + r.right;
    if (!spm) v.merges.push_back(gpt2_map(r.left) + " " + gpt2_map(r.right));
    if (!emitted.insert(joined).second) continue;
    add(spm ? joined : gpt2_map(joined), score, TokenType::Normal);
    score -= 1.0f;
  }
  if (spm) {
    v.bos_id = 1, v.eos_id = 2, v.unk_id = 0;
    v.add_bos = true, v.add_eos = false;
    if (phi3) {
      add("<|endoftext|>", 0, TokenType::Control);
      add("<|end|>", 0, TokenType::Control);
    }
  } else {
    const auto first_special = static_cast<int64_t>(v.tokens.size());
    add("<|endoftext|>", 0, TokenType::Control);
    add("<|im_start|>", 0, TokenType::Control);
    add("<|im_end|>", 0, TokenType::Control);
    v.bos_id = first_special, v.eos_id = first_special + 2, v.pad_id = first_special;
    v.add_bos = false, v.add_eos = false;
    v.scores.clear();  // byte-level BPE files carry no scores
  }
  if (v.tokens.size() != n) {
    throw std::logic_error("synthetic vocabulary: built " + std::to_string(v.tokens.size()) +
                           " tokens instead of " + std::to_string(n));
  }
  return v;
}

void write_synthetic_vocab(GgufWriter& w, VocabKind kind, int64_t n_vocab, uint64_t seed) {
  const Vocab v = make_synthetic_vocab(kind, n_vocab, seed);
  namespace keys = tokenizer_keys;
  w.set_string(keys::kModel, v.model);
  w.set_string(keys::kPre, v.pre);
  w.set_string_array(keys::kTokens, std::span<const std::string>(v.tokens));
  if (!v.scores.empty()) w.set_array(keys::kScores, v.scores);
  w.set_array(keys::kTokenType, v.token_types);
  if (!v.merges.empty()) w.set_string_array(keys::kMerges, std::span<const std::string>(v.merges));
  w.set_u32(keys::kBos, static_cast<uint32_t>(*v.bos_id));
  w.set_u32(keys::kEos, static_cast<uint32_t>(*v.eos_id));
  if (v.unk_id) w.set_u32(keys::kUnk, static_cast<uint32_t>(*v.unk_id));
  if (v.pad_id) w.set_u32(keys::kPad, static_cast<uint32_t>(*v.pad_id));
  w.set_bool(keys::kAddBos, *v.add_bos);
  w.set_bool(keys::kAddEos, *v.add_eos);
}

void copy_vocab(GgufWriter& w, const GgufFile& vocab_file) {
  if (!vocab_file.find(tokenizer_keys::kTokens)) {
    throw LoadError(vocab_file.path().string(), std::string(tokenizer_keys::kTokens), -1,
                    "missing: no vocabulary to copy");
  }
  for (const GgufKv& kv : vocab_file.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, GgufMetaValue::from(kv.value));
  }
}

}  // namespace pacer::loader
