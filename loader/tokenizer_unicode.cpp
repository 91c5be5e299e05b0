#include "loader/tokenizer_unicode.h"

#include <algorithm>
#include <array>

namespace pacer::loader::unicode {

namespace {

// ASCII is most of what tokenizers see: answer it from a 128-entry table built once from the
// generated runs (constant initialisation, no mutable state).
struct AsciiCategories {
  std::array<Category, 128> cat{};
  AsciiCategories() {
    size_t r = 0;
    for (uint32_t c = 0; c < 128; ++c) {
      while (r + 1 < kCategoryRunCount && kCategoryRuns[r + 1].first <= c) ++r;
      cat[c] = kCategoryRuns[r].category;
    }
  }
};

const AsciiCategories& ascii_categories() {
  static const AsciiCategories table;
  return table;
}

bool is_continuation(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

}  // namespace

Decoded decode_utf8(std::string_view s, size_t pos) noexcept {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {b0, 1};
  const size_t avail = s.size() - pos;
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[pos + k]); };
  if (b0 >= 0xC2 && b0 <= 0xDF) {  // 0xC0/0xC1 would be overlong
    if (avail >= 2 && is_continuation(byte(1))) {
      return {(uint32_t(b0 & 0x1F) << 6) | (byte(1) & 0x3F), 2};
    }
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (avail >= 3 && is_continuation(byte(1)) && is_continuation(byte(2))) {
      const uint32_t c =
          (uint32_t(b0 & 0x0F) << 12) | (uint32_t(byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
      if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) return {c, 3};
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (avail >= 4 && is_continuation(byte(1)) && is_continuation(byte(2)) &&
        is_continuation(byte(3))) {
      const uint32_t c = (uint32_t(b0 & 0x07) << 18) | (uint32_t(byte(1) & 0x3F) << 12) |
                         (uint32_t(byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
      if (c >= 0x10000 && c <= 0x10FFFF) return {c, 4};
    }
  }
  return {kInvalid, 1};
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt < 0x80) {
    out += static_cast<char>(cpt);
  } else if (cpt < 0x800) {
    out += static_cast<char>(0xC0 | (cpt >> 6));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  } else if (cpt < 0x10000) {
    out += static_cast<char>(0xE0 | (cpt >> 12));
    out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cpt >> 18));
    out += static_cast<char>(0x80 | ((cpt >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  }
}

Category category(uint32_t cpt) noexcept {
  if (cpt < 128) return ascii_categories().cat[cpt];
  if (cpt > 0x10FFFF) return Category::C;
  const CategoryRun* end = kCategoryRuns + kCategoryRunCount;
  // Last run whose first code point is <= cpt.
  const CategoryRun* it = std::upper_bound(
      kCategoryRuns, end, cpt, [](uint32_t c, const CategoryRun& r) { return c < r.first; });
  return (it - 1)->category;
}

bool is_whitespace(uint32_t cpt) noexcept {
  if (cpt < 0x80) return cpt == 0x20 || (cpt >= 0x09 && cpt <= 0x0D);
  switch (cpt) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cpt >= 0x2000 && cpt <= 0x200A;
  }
}

}  // namespace pacer::loader::unicode
