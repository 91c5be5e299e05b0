// Byte-level BPE (GGUF model "gpt2"). GGUF stores tokens and merges in GPT-2's byte-to-unicode
// alphabet; pacer unmaps them once at load and then works on raw bytes, with every byte string
// that a merge touches interned as an integer "symbol" so the merge loop never builds strings.
// Per pre-tokenized piece: one symbol per byte, then repeatedly apply the adjacent merge with the
// lowest rank (ties: leftmost), as llama.cpp's llm_tokenizer_bpe_session does.
#include <array>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "loader/error.h"
#include "loader/tokenizer_internal.h"
#include "loader/tokenizer_unicode.h"

namespace pacer::loader {

namespace {

bool is_printable_latin1(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Gpt2Alphabet {
  std::array<uint32_t, 256> to_cpt{};
  std::array<int16_t, 324> to_byte{};  // code points 0..323 cover the whole alphabet
  Gpt2Alphabet() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      to_cpt[b] = is_printable_latin1(b) ? b : next++;
      to_byte[to_cpt[b]] = static_cast<int16_t>(b);
    }
  }
};

const Gpt2Alphabet& alphabet() {
  static const Gpt2Alphabet a;
  return a;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Symbol {
  int32_t prev;
  int32_t next;
  int32_t id;      // symbol id (token id when < n_vocab)
  uint32_t start;  // byte offset in the piece
  uint32_t len;    // 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left;
  int32_t right;
  int32_t left_id;  // the symbols' ids when queued (stale entries no longer match)
  int32_t right_id;
  int32_t rank;
  int32_t result;
};

// std::priority_queue pops the "largest": lowest rank, then the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

uint32_t gpt2_byte_to_cpt(uint8_t byte) noexcept {
  return alphabet().to_cpt[byte];
}

int gpt2_cpt_to_byte(uint32_t cpt) noexcept {
  return cpt < alphabet().to_byte.size() ? alphabet().to_byte[cpt] : -1;
}

std::optional<std::string> gpt2_unmap(std::string_view mapped) {
  std::string bytes;
  bytes.reserve(mapped.size());
  for (size_t pos = 0; pos < mapped.size();) {
    const unicode::Decoded d = unicode::decode_utf8(mapped, pos);
    const int b = d.cpt == unicode::kInvalid ? -1 : gpt2_cpt_to_byte(d.cpt);
    if (b < 0) return std::nullopt;
    bytes += static_cast<char>(b);
    pos += d.len;
  }
  return bytes;
}

std::string gpt2_map(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) unicode::append_utf8(out, gpt2_byte_to_cpt(static_cast<uint8_t>(c)));
  return out;
}

void build_bpe_merges(Tokenizer::Impl& t, const std::vector<std::string>& merges,
                      const KeyOffset& key_offset) {
  // Byte strings that are no token get ids after the vocabulary.
  std::unordered_map<std::string, int32_t> extra;
  const auto n_vocab = static_cast<int32_t>(t.n_vocab());
  auto intern = [&](const std::string& bytes) -> int32_t {
    const int32_t id = t.lookup(bytes);
    if (id >= 0) return id;
    auto [it, inserted] = extra.try_emplace(bytes, n_vocab + static_cast<int32_t>(extra.size()));
    return it->second;
  };
  for (unsigned b = 0; b < 256; ++b)
    t.byte_symbol[b] = intern(std::string(1, static_cast<char>(b)));

  t.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    // "left right": the separator is the first space after the first character (a merge never
    // starts with a space, since spaces are mapped to 'Ġ').
    const size_t sep = m.find(' ', 1);
    if (sep == std::string::npos || sep + 1 >= m.size()) {
      throw LoadError(t.source,
                      std::string(tokenizer_keys::kMerges) + "[" + std::to_string(i) + "]",
                      key_offset(tokenizer_keys::kMerges),
                      "merge '" + m + "' is not two pieces separated by a space");
    }
    const std::optional<std::string> left = gpt2_unmap(std::string_view(m).substr(0, sep));
    const std::optional<std::string> right = gpt2_unmap(std::string_view(m).substr(sep + 1));
    // A piece outside the byte alphabet can never occur in a word: the merge is unreachable.
    if (!left || !right) continue;
    const int32_t l = intern(*left), r = intern(*right), result = intern(*left + *right);
    t.merges.try_emplace(pair_key(l, r), Tokenizer::Impl::Merge{static_cast<int32_t>(i), result});
  }
  t.n_merges = static_cast<int64_t>(merges.size());
}

void bpe_encode_fragment(const Tokenizer::Impl& t, std::string_view text,
                         std::vector<int32_t>& out) {
  std::vector<Symbol> sym;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  for (const std::string_view word : pre_tokenize(t.pre, text)) {
    if (t.ignore_merges) {
      const int32_t id = t.lookup(word);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    sym.clear();
    for (size_t k = 0; k < word.size(); ++k) {
      const auto i = static_cast<int32_t>(k);
      sym.push_back({i - 1, k + 1 == word.size() ? -1 : i + 1,
                     t.byte_symbol[static_cast<uint8_t>(word[k])], static_cast<uint32_t>(k), 1});
    }
    auto try_add = [&](int32_t l, int32_t r) {
      if (l < 0 || r < 0) return;
      auto it = t.merges.find(pair_key(sym[l].id, sym[r].id));
      if (it == t.merges.end()) return;
      queue.push({l, r, sym[l].id, sym[r].id, it->second.rank, it->second.result});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& left = sym[b.left];
      Symbol& right = sym[b.right];
      if (left.len == 0 || right.len == 0 || left.id != b.left_id || right.id != b.right_id) {
        continue;  // stale: one side has changed since this pair was queued
      }
      left.id = b.result;
      left.len += right.len;
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) sym[right.next].prev = b.left;
      try_add(left.prev, b.left);
      try_add(b.left, left.next);
    }

    for (int32_t i = 0; i != -1 && !sym.empty(); i = sym[i].next) {
      if (sym[i].id < t.n_vocab()) {
        out.push_back(sym[i].id);
        continue;
      }
      // A symbol that is no token (malformed vocabulary): its single-byte tokens where they exist.
      for (char c : word.substr(sym[i].start, sym[i].len)) {
        const int32_t id = t.byte_token[static_cast<uint8_t>(c)];
        if (id >= 0) out.push_back(id);
      }
    }
  }
}

}  // namespace pacer::loader
