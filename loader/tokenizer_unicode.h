#pragma once
// The Unicode facts the tokenizers need and nothing more: UTF-8 decoding that never fails (an
// invalid byte becomes a one-byte unit, so nothing of the input is lost), the general-category
// class of a code point (for the pre-tokenizer patterns' \p{L}, \p{N}, \p{P}) and the
// White_Space property (their \s). Internal to the loader.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pacer::loader::unicode {

// First letter of the Unicode general category: Letter, Mark, Number, Punctuation, Symbol,
// Separator (Z), Other (C: controls, format, unassigned, private use, surrogates).
enum class Category : uint8_t { L, M, N, P, S, Z, C };

struct CategoryRun {
  uint32_t first;  // first code point of the run (the run ends where the next one starts)
  Category category;
};
extern const CategoryRun kCategoryRuns[];  // tokenizer_unicode_table.cpp (generated)
extern const size_t kCategoryRunCount;

// Returned for bytes that do not start a valid UTF-8 sequence (not a Unicode scalar value, so it
// can never be confused with a decoded character).
inline constexpr uint32_t kInvalid = 0xFFFFFFFFu;

struct Decoded {
  uint32_t cpt;  // kInvalid for an invalid byte
  uint32_t len;  // bytes consumed, 1..4
};
// Decodes the sequence starting at s[pos] (pos < s.size()). Overlong forms, surrogates, values
// above U+10FFFF and truncated sequences are invalid: one byte is consumed and kInvalid returned.
Decoded decode_utf8(std::string_view s, size_t pos) noexcept;
// Appends the UTF-8 encoding of a Unicode scalar value.
void append_utf8(std::string& out, uint32_t cpt);

Category category(uint32_t cpt) noexcept;   // kInvalid -> C
bool is_whitespace(uint32_t cpt) noexcept;  // Unicode White_Space
inline bool is_letter(uint32_t cpt) noexcept {
  return category(cpt) == Category::L;
}
inline bool is_number(uint32_t cpt) noexcept {
  return category(cpt) == Category::N;
}
inline bool is_punctuation(uint32_t cpt) noexcept {
  return category(cpt) == Category::P;
}

}  // namespace pacer::loader::unicode
