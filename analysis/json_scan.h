#pragma once
// A pull scanner over one JSON text (one event-log line), used for the hot record types so a
// million op lines do not build a million DOMs. It validates what it reads (RFC 8259 grammar,
// string escapes, numbers) and throws ScanError with the byte offset on the first problem.
// Internal to analysis/: event_log.cpp is its user.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pacer::analysis::detail {

class ScanError : public std::runtime_error {
 public:
  ScanError(size_t offset, const std::string& what) : std::runtime_error(what), offset_(offset) {}
  size_t offset() const noexcept { return offset_; }  // byte offset within the scanned text

 private:
  size_t offset_;
};

class JsonScanner {
 public:
  explicit JsonScanner(std::string_view text) : s_(text) {}

  size_t pos() const noexcept { return i_; }
  void reset() noexcept { i_ = 0; }

  void skip_ws() noexcept {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  // The next non-space character, or '\0' at the end.
  char peek() noexcept {
    skip_ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) expect_failed(c);
    ++i_;
  }
  // Throws unless only whitespace remains.
  void expect_end();

  // Iterates an object: `on_member(key)` is called with the key and must consume its value
  // (with one of the value readers or skip_value()). The key view is valid during the call.
  template <class F>
  void object(F&& on_member) {
    expect('{');
    if (peek() == '}') {
      ++i_;
      return;
    }
    for (;;) {
      std::string_view key = read_string(key_scratch_);
      expect(':');
      on_member(key);
      char c = peek();
      ++i_;
      if (c == '}') return;
      if (c != ',') fail(i_ - 1, "expected ',' or '}' in object");
    }
  }
  // Iterates an array: `on_element()` must consume one value.
  template <class F>
  void array(F&& on_element) {
    expect('[');
    if (peek() == ']') {
      ++i_;
      return;
    }
    for (;;) {
      on_element();
      char c = peek();
      ++i_;
      if (c == ']') return;
      if (c != ',') fail(i_ - 1, "expected ',' or ']' in array");
    }
  }

  // A string value; escapes are decoded. The view is valid until the next string read.
  std::string_view string() { return read_string(value_scratch_); }
  double number();
  // Same, and says whether the text was an integer (no fraction, no exponent).
  double number(bool& integral);
  // An integral number (1e3 and 12.0 are accepted; 1.5 is not).
  int64_t integer() {
    // Fast path: up to 18 plain digits, the shape of every *_ns value.
    skip_ws();
    size_t j = i_;
    const bool negative = j < s_.size() && s_[j] == '-';
    if (negative) ++j;
    const size_t first = j;
    uint64_t v = 0;
    while (j < s_.size() && j - first < 18 && static_cast<unsigned>(s_[j] - '0') < 10u) {
      v = v * 10 + static_cast<unsigned>(s_[j] - '0');
      ++j;
    }
    const bool ends_cleanly =
        j == s_.size() || s_[j] == ',' || s_[j] == '}' || s_[j] == ']' || s_[j] == ' ';
    if (j > first && ends_cleanly && (s_[first] != '0' || j - first == 1)) {
      i_ = j;
      return negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    }
    return integer_slow();
  }
  bool boolean();
  // Consumes `null` and returns true if the next value is null; otherwise consumes nothing.
  bool null();
  // Consumes any value, validating it.
  void skip_value(int depth = 0);

  [[noreturn]] void fail(size_t at, const std::string& what) const { throw ScanError(at, what); }

 private:
  std::string_view read_string(std::string& scratch) {
    expect('"');
    const size_t start = i_;
    // Fast path: no escapes, the view points into the line.
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '"') return s_.substr(start, i_++ - start);
      if (c == '\\' || static_cast<unsigned char>(c) < 0x20) break;
      ++i_;
    }
    return read_string_slow(start, scratch);
  }
  std::string_view read_string_slow(size_t start, std::string& scratch);
  [[noreturn]] void expect_failed(char c) const;
  int64_t integer_slow();
  void decode_escapes(size_t start, std::string& out);
  // Validates a number's grammar from i_; returns its end; sets is_integral.
  size_t scan_number(bool& is_integral);

  std::string_view s_;
  size_t i_ = 0;
  std::string key_scratch_, value_scratch_;
};

}  // namespace pacer::analysis::detail
