// SentencePiece-style tokenization (GGUF model "llama"), llama.cpp's algorithm: start from one
// symbol per UTF-8 character, repeatedly merge the adjacent pair whose concatenation is the
// token with the highest score (ties: leftmost), and emit each final symbol as its token or, when
// it is none (a character missing from the vocabulary), as <0xXX> byte tokens.
#include <algorithm>
#include <queue>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/tokenizer_internal.h"
#include "loader/tokenizer_unicode.h"

namespace pacer::loader {

namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t start;  // byte offset in the escaped text
  uint32_t len;    // 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  uint32_t len;  // bytes of the pair when it was queued (stale entries no longer match)
};

// std::priority_queue pops the "largest": highest score, then the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

std::string hex_byte(char c) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const auto b = static_cast<uint8_t>(c);
  return {kHex[b >> 4], kHex[b & 15]};
}

}  // namespace

void spm_encode_fragment(const Tokenizer::Impl& t, std::string_view text,
                         std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    // One symbol per valid UTF-8 sequence; an invalid byte is a symbol of its own. (llama.cpp
    // trusts the lead byte, so an invalid lead swallows the next bytes, e.g. the "▁" of an
    // escaped space, and decoding then returns U+2581 instead of the space: pacer stays lossless.
    // Valid text splits identically.)
    const size_t len = unicode::decode_utf8(text, off).len;
    const auto index = static_cast<int32_t>(sym.size());
    sym.push_back({index - 1, off + len == text.size() ? -1 : index + 1, static_cast<uint32_t>(off),
                   static_cast<uint32_t>(len)});
    off += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const int32_t id = t.lookup(text.substr(sym[l].start, len));
    if (id < 0) return;
    queue.push({l, r, t.score[id], len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = sym[b.left];
    Symbol& right = sym[b.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.len) continue;  // stale
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = sym[i].next) {
    const std::string_view s = text.substr(sym[i].start, sym[i].len);
    const int32_t id = t.lookup(s);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Merged symbols are always tokens, so this is a single character the vocabulary lacks:
    // its bytes as byte tokens, else one unknown token (SentencePiece without byte fallback).
    bool all_bytes = true;
    for (char c : s) all_bytes = all_bytes && t.byte_token[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : s) out.push_back(t.byte_token[static_cast<uint8_t>(c)]);
    } else if (t.unk >= 0) {
      out.push_back(t.unk);
    } else {
      throw std::runtime_error(t.source + ": cannot encode byte 0x" + hex_byte(s[0]) +
                               ": the vocabulary has no byte token and no unknown token");
    }
  }
}

}  // namespace pacer::loader
