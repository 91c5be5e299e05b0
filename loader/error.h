#pragma once
// The one error type the loader throws: which file, which field, which byte offset. The CLI
// catches it once and prints what() as a single line.
#include <cstdint>
#include <stdexcept>
#include <string>

namespace pacer::loader {

class LoadError : public std::runtime_error {
 public:
  // offset < 0: no meaningful byte offset (e.g. a metadata consistency check).
  LoadError(std::string file, std::string field, int64_t offset, const std::string& what);
  const std::string& file() const noexcept { return file_; }
  const std::string& field() const noexcept { return field_; }
  int64_t offset() const noexcept { return offset_; }

 private:
  std::string file_, field_;
  int64_t offset_;
};

}  // namespace pacer::loader
