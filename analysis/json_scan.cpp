#include "analysis/json_scan.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace pacer::analysis::detail {
namespace {

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

void JsonScanner::expect_failed(char c) const {
  if (i_ >= s_.size()) fail(i_, fmt::format("expected '{}' but the line ended", c));
  fail(i_, fmt::format("expected '{}' but found '{}'", c, s_[i_]));
}

void JsonScanner::expect_end() {
  skip_ws();
  if (i_ != s_.size()) fail(i_, "unexpected characters after the JSON object");
}

std::string_view JsonScanner::read_string_slow(size_t start, std::string& scratch) {
  if (i_ >= s_.size()) fail(start - 1, "unterminated string");
  if (s_[i_] != '\\') fail(i_, "control character inside a string");
  decode_escapes(start, scratch);
  return scratch;
}

void JsonScanner::decode_escapes(size_t start, std::string& out) {
  out.assign(s_.data() + start, i_ - start);
  while (i_ < s_.size()) {
    char c = s_[i_];
    if (c == '"') {
      ++i_;
      return;
    }
    if (static_cast<unsigned char>(c) < 0x20) fail(i_, "control character inside a string");
    if (c != '\\') {
      out.push_back(c);
      ++i_;
      continue;
    }
    if (i_ + 1 >= s_.size()) break;
    const char e = s_[i_ + 1];
    i_ += 2;
    switch (e) {
      case '"':
        out.push_back('"');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '/':
        out.push_back('/');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        auto read_hex4 = [&](size_t at) -> uint32_t {
          if (at + 4 > s_.size()) fail(at, "truncated \\u escape");
          uint32_t v = 0;
          for (size_t k = 0; k < 4; ++k) {
            const int h = hex_value(s_[at + k]);
            if (h < 0) fail(at + k, "bad hex digit in \\u escape");
            v = v * 16 + static_cast<uint32_t>(h);
          }
          return v;
        };
        uint32_t cp = read_hex4(i_);
        i_ += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          // A high surrogate must be followed by a low one: together one code point.
          if (i_ + 6 <= s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
            const uint32_t lo = read_hex4(i_ + 2);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              i_ += 6;
            } else {
              cp = 0xFFFD;
            }
          } else {
            cp = 0xFFFD;
          }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          cp = 0xFFFD;  // lone low surrogate
        }
        append_utf8(out, cp);
        break;
      }
      default:
        fail(i_ - 1, fmt::format("invalid escape '\\{}'", e));
    }
  }
  fail(i_, "unterminated string");
}

size_t JsonScanner::scan_number(bool& is_integral) {
  size_t j = i_;
  const size_t n = s_.size();
  is_integral = true;
  if (j < n && s_[j] == '-') ++j;
  if (j >= n || !is_digit(s_[j])) fail(i_, "expected a number");
  if (s_[j] == '0') {
    ++j;
  } else {
    while (j < n && is_digit(s_[j])) ++j;
  }
  if (j < n && s_[j] == '.') {
    is_integral = false;
    ++j;
    if (j >= n || !is_digit(s_[j])) fail(j, "expected a digit after '.'");
    while (j < n && is_digit(s_[j])) ++j;
  }
  if (j < n && (s_[j] == 'e' || s_[j] == 'E')) {
    is_integral = false;
    ++j;
    if (j < n && (s_[j] == '+' || s_[j] == '-')) ++j;
    if (j >= n || !is_digit(s_[j])) fail(j, "expected a digit in the exponent");
    while (j < n && is_digit(s_[j])) ++j;
  }
  return j;
}

double JsonScanner::number() {
  bool integral = false;
  return number(integral);
}

double JsonScanner::number(bool& integral) {
  if (const char c = peek(); c != '-' && !is_digit(c)) fail(i_, "expected a number");
  integral = false;
  const size_t end = scan_number(integral);
  double v = 0;
  const auto res = std::from_chars(s_.data() + i_, s_.data() + end, v);
  if (res.ec == std::errc::result_out_of_range) fail(i_, "number out of range");
  if (res.ec != std::errc() || res.ptr != s_.data() + end) fail(i_, "malformed number");
  i_ = end;
  return v;
}

int64_t JsonScanner::integer_slow() {
  if (const char c = peek(); c != '-' && !is_digit(c)) fail(i_, "expected an integer");
  bool integral = false;
  const size_t start = i_;
  const size_t end = scan_number(integral);
  if (integral) {
    int64_t v = 0;
    const auto res = std::from_chars(s_.data() + start, s_.data() + end, v);
    if (res.ec != std::errc() || res.ptr != s_.data() + end) fail(start, "integer out of range");
    i_ = end;
    return v;
  }
  const double d = number();
  if (!(std::fabs(d) < 9.2e18) || d != std::trunc(d)) fail(start, "expected an integer");
  return static_cast<int64_t>(d);
}

bool JsonScanner::boolean() {
  peek();
  if (s_.compare(i_, 4, "true") == 0) {
    i_ += 4;
    return true;
  }
  if (s_.compare(i_, 5, "false") == 0) {
    i_ += 5;
    return false;
  }
  fail(i_, "expected true or false");
}

bool JsonScanner::null() {
  if (peek() == 'n' && s_.compare(i_, 4, "null") == 0) {
    i_ += 4;
    return true;
  }
  return false;
}

void JsonScanner::skip_value(int depth) {
  // Logs are flat; a deep nest is damage, not data (and would overflow the stack).
  if (depth > 64) fail(i_, "nesting too deep");
  switch (peek()) {
    case '{':
      object([&](std::string_view) { skip_value(depth + 1); });
      return;
    case '[':
      array([&] { skip_value(depth + 1); });
      return;
    case '"':
      read_string(value_scratch_);
      return;
    case 't':
    case 'f':
      boolean();
      return;
    case 'n':
      if (!null()) fail(i_, "expected null");
      return;
    case '\0':
      fail(i_, "expected a value but the line ended");
    default: {
      bool integral = false;
      i_ = scan_number(integral);
    }
  }
}

}  // namespace pacer::analysis::detail
