#include "loader/tokenizer_pretok.h"

#include <array>
#include <cstdint>
#include <utility>

#include "loader/tokenizer_unicode.h"

namespace pacer::loader {

namespace {

// The text as code points with the classes the patterns test, precomputed once per call.
struct Units {
  enum : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4, kPunct = 8 };
  std::vector<uint32_t> offset;  // byte offset of each unit; offset[n] = text size
  std::vector<uint32_t> cpt;     // unicode::kInvalid for an invalid byte
  std::vector<uint8_t> cls;

  explicit Units(std::string_view text) {
    offset.reserve(text.size() + 1);
    cpt.reserve(text.size());
    cls.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const unicode::Decoded d = unicode::decode_utf8(text, pos);
      offset.push_back(static_cast<uint32_t>(pos));
      cpt.push_back(d.cpt);
      uint8_t c = 0;
      if (d.cpt != unicode::kInvalid) {
        switch (unicode::category(d.cpt)) {
          case unicode::Category::L:
            c = kLetter;
            break;
          case unicode::Category::N:
            c = kNumber;
            break;
          case unicode::Category::P:
            c = kPunct;
            break;
          default:
            break;
        }
        if (unicode::is_whitespace(d.cpt)) c |= kSpace;
      }
      cls.push_back(c);
      pos += d.len;
    }
    offset.push_back(static_cast<uint32_t>(text.size()));
  }
  size_t size() const { return cpt.size(); }
  bool letter(size_t k) const { return cls[k] & kLetter; }
  bool number(size_t k) const { return cls[k] & kNumber; }
  bool space(size_t k) const { return cls[k] & kSpace; }
  bool punct(size_t k) const { return cls[k] & kPunct; }
  // [^\s\p{L}\p{N}]
  bool other(size_t k) const { return (cls[k] & (kLetter | kNumber | kSpace)) == 0; }
  bool newline(size_t k) const { return cpt[k] == '\r' || cpt[k] == '\n'; }
};

// A pattern returns how many units it matches at `pos` (0: no match there); `end` bounds the
// piece being split, and look-aheads treat it as the end of the text (as llama.cpp does).
using Pattern = size_t (*)(const Units& u, size_t pos, size_t end);

size_t run_while(const Units& u, size_t pos, size_t end, bool (Units::*pred)(size_t) const) {
  size_t q = pos;
  while (q < end && (u.*pred)(q)) ++q;
  return q;
}

char ascii_lower(uint32_t c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : static_cast<char>(c);
}

// 's 't 're 've 'm 'll 'd, case-sensitive (gpt2) or ASCII-case-insensitive (llama3/qwen2).
size_t match_contraction(const Units& u, size_t pos, size_t end, bool any_case) {
  if (u.cpt[pos] != '\'' || pos + 1 >= end) return 0;
  auto ch = [&](size_t k) -> char {
    if (u.cpt[k] >= 0x80) return 0;
    return any_case ? ascii_lower(u.cpt[k]) : static_cast<char>(u.cpt[k]);
  };
  const char c1 = ch(pos + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= end) return 0;
  const char c2 = ch(pos + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// \s+(?!\S): the whole whitespace run when it ends the piece, else all of it but the last
// character (which then leads the next match); nothing for a single space before \S.
size_t match_trailing_space_run(const Units& u, size_t pos, size_t end) {
  const size_t r = run_while(u, pos, end, &Units::space);
  if (r == end) return r - pos;
  return r - pos >= 2 ? r - pos - 1 : 0;
}

size_t match_gpt2(const Units& u, size_t pos, size_t end) {
  if (size_t n = match_contraction(u, pos, end, /*any_case=*/false)) return n;
  // ' ?\p{L}+' | ' ?\p{N}+' | ' ?[^\s\p{L}\p{N}]+'
  const size_t p = (u.cpt[pos] == ' ' && pos + 1 < end) ? pos + 1 : pos;
  if (u.letter(p)) return run_while(u, p, end, &Units::letter) - pos;
  if (u.number(p)) return run_while(u, p, end, &Units::number) - pos;
  if (u.other(p)) return run_while(u, p, end, &Units::other) - pos;
  if (u.space(pos)) return match_trailing_space_run(u, pos, end);
  return 0;
}

template <size_t kMaxDigits>
size_t match_llama3_family(const Units& u, size_t pos, size_t end) {
  if (size_t n = match_contraction(u, pos, end, /*any_case=*/true)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (u.letter(pos)) return run_while(u, pos, end, &Units::letter) - pos;
  if (!u.number(pos) && !u.newline(pos) && pos + 1 < end && u.letter(pos + 1)) {
    return run_while(u, pos + 1, end, &Units::letter) - pos;
  }
  // \p{N}{1,kMaxDigits}
  if (u.number(pos)) {
    size_t q = pos;
    while (q < end && q - pos < kMaxDigits && u.number(q)) ++q;
    return q - pos;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const size_t p = (u.cpt[pos] == ' ' && pos + 1 < end && u.other(pos + 1)) ? pos + 1 : pos;
  if (u.other(p)) {
    const size_t q = run_while(u, p, end, &Units::other);
    return run_while(u, q, end, &Units::newline) - pos;
  }
  if (!u.space(pos)) return 0;
  // \s*[\r\n]+ : up to and including the last newline of the whitespace run
  const size_t r = run_while(u, pos, end, &Units::space);
  for (size_t k = r; k > pos; --k) {
    if (u.newline(k - 1)) return k - pos;
  }
  // \s+(?!\S) | \s+
  if (size_t n = match_trailing_space_run(u, pos, end)) return n;
  return r - pos;
}

size_t match_one_number(const Units& u, size_t pos, size_t /*end*/) {
  return u.number(pos);
}

size_t match_number_run(const Units& u, size_t pos, size_t end) {
  return run_while(u, pos, end, &Units::number) - pos;
}

size_t match_three_ascii_digits(const Units& u, size_t pos, size_t end) {
  if (pos + 3 > end) return 0;
  for (size_t k = pos; k < pos + 3; ++k) {
    if (u.cpt[k] < '0' || u.cpt[k] > '9') return 0;
  }
  return 3;
}

bool is_ascii_of(uint32_t c, std::string_view set) {
  return c < 0x80 && set.find(static_cast<char>(c)) != std::string_view::npos;
}

// [\p{P}\$\+<=>\^~\|`]+ (falcon) and [\p{P}\$\+<=>\^~\|]+ (default)
template <bool kWithBacktick>
size_t match_punct_run(const Units& u, size_t pos, size_t end) {
  constexpr std::string_view kExtra = kWithBacktick ? "$+<=>^~|`" : "$+<=>^~|";
  size_t q = pos;
  while (q < end && (u.punct(q) || is_ascii_of(u.cpt[q], kExtra))) ++q;
  return q - pos;
}

struct PatternList {
  std::array<Pattern, 4> items{};
  size_t count = 0;
};

PatternList patterns_of(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::Gpt2:
      return {{match_gpt2}, 1};
    case PreTokenizer::Llama3:
      return {{match_llama3_family<3>}, 1};
    case PreTokenizer::Qwen2:
      return {{match_llama3_family<1>}, 1};
    case PreTokenizer::Starcoder:
      return {{match_one_number, match_gpt2}, 2};
    case PreTokenizer::Falcon:
      return {{match_punct_run<true>, match_gpt2, match_three_ascii_digits}, 3};
    case PreTokenizer::Default:
      return {{match_punct_run<false>, match_gpt2, match_number_run, match_three_ascii_digits}, 4};
  }
  return {};
}

struct NameEntry {
  std::string_view name;
  PreTokenizer kind;
};
constexpr NameEntry kNames[] = {
    {"gpt-2", PreTokenizer::Gpt2},
    {"mpt", PreTokenizer::Gpt2},
    {"olmo", PreTokenizer::Gpt2},
    {"phi-2", PreTokenizer::Gpt2},
    {"roberta-bpe", PreTokenizer::Gpt2},
    {"jina-es", PreTokenizer::Gpt2},
    {"jina-de", PreTokenizer::Gpt2},
    {"jina-v1-en", PreTokenizer::Gpt2},
    {"jina-v2-es", PreTokenizer::Gpt2},
    {"jina-v2-de", PreTokenizer::Gpt2},
    {"jina-v2-code", PreTokenizer::Gpt2},
    {"gigachat", PreTokenizer::Gpt2},
    {"jais", PreTokenizer::Gpt2},
    {"llama3", PreTokenizer::Llama3},
    {"llama-v3", PreTokenizer::Llama3},
    {"llama-bpe", PreTokenizer::Llama3},
    {"falcon3", PreTokenizer::Llama3},
    {"dbrx", PreTokenizer::Llama3},
    {"smaug-bpe", PreTokenizer::Llama3},
    {"qwen2", PreTokenizer::Qwen2},
    {"deepseek-r1-qwen", PreTokenizer::Qwen2},
    {"stablelm2", PreTokenizer::Qwen2},
    {"megrez", PreTokenizer::Qwen2},
    {"starcoder", PreTokenizer::Starcoder},
    {"refact", PreTokenizer::Starcoder},
    {"smollm", PreTokenizer::Starcoder},
    {"codeshell", PreTokenizer::Starcoder},
    {"command-r", PreTokenizer::Starcoder},
    {"falcon", PreTokenizer::Falcon},
    {"default", PreTokenizer::Default},
};

}  // namespace

std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name) noexcept {
  for (const NameEntry& e : kNames) {
    if (e.name == name) return e.kind;
  }
  return std::nullopt;
}

std::string_view supported_pre_tokenizer_names() noexcept {
  return "gpt-2, mpt, olmo, phi-2, roberta-bpe, jina-*, gigachat, jais, llama3, llama-v3, "
         "llama-bpe, falcon3, dbrx, smaug-bpe, qwen2, deepseek-r1-qwen, stablelm2, megrez, "
         "starcoder, refact, smollm, codeshell, command-r, falcon, default";
}

std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text) {
  const Units u(text);
  std::vector<std::pair<size_t, size_t>> pieces;  // unit ranges
  if (u.size() > 0) pieces.emplace_back(0, u.size());
  const PatternList pats = patterns_of(kind);
  std::vector<std::pair<size_t, size_t>> next;
  for (size_t ip = 0; ip < pats.count; ++ip) {
    next.clear();
    for (const auto& [b, e] : pieces) {
      size_t gap = b;
      for (size_t pos = b; pos < e;) {
        const size_t n = pats.items[ip](u, pos, e);
        if (n == 0) {
          ++pos;
          continue;
        }
        if (gap < pos) next.emplace_back(gap, pos);
        next.emplace_back(pos, pos + n);
        pos += n;
        gap = pos;
      }
      if (gap < e) next.emplace_back(gap, e);
    }
    pieces.swap(next);
  }
  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (const auto& [b, e] : pieces) {
    out.push_back(text.substr(u.offset[b], u.offset[e] - u.offset[b]));
  }
  return out;
}

}  // namespace pacer::loader
