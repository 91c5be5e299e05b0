#include "loader/error.h"

#include <utility>

namespace pacer::loader {

namespace {
std::string format_message(const std::string& file, const std::string& field, int64_t offset,
                           const std::string& what) {
  std::string m = file;
  if (!field.empty()) m += ": " + field;
  if (offset >= 0) m += " at offset " + std::to_string(offset);
  m += ": " + what;
  return m;
}
}  // namespace

LoadError::LoadError(std::string file, std::string field, int64_t offset, const std::string& what)
    : std::runtime_error(format_message(file, field, offset, what)),
      file_(std::move(file)),
      field_(std::move(field)),
      offset_(offset) {}

}  // namespace pacer::loader
