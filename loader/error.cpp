#include "loader/error.h"

#include <utility>

namespace pacer::loader {

namespace {
// The message is printed as one line by the CLI, and keys or tensor names come from untrusted
// files: control bytes (newlines included) are escaped, very long messages shortened.
std::string one_line(const std::string& m) {
  constexpr size_t kMax = 600;
  std::string out;
  out.reserve(m.size());
  for (unsigned char c : m) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
    if (out.size() > kMax) {
      out += "...";
      break;
    }
  }
  return out;
}

std::string format_message(const std::string& file, const std::string& field, int64_t offset,
                           const std::string& what) {
  std::string m = file;
  if (!field.empty()) m += ": " + field;
  if (offset >= 0) m += " at offset " + std::to_string(offset);
  m += ": " + what;
  return one_line(m);
}
}  // namespace

LoadError::LoadError(std::string file, std::string field, int64_t offset, const std::string& what)
    : std::runtime_error(format_message(file, field, offset, what)),
      file_(std::move(file)),
      field_(std::move(field)),
      offset_(offset) {}

}  // namespace pacer::loader
