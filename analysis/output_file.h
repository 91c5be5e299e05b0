#pragma once
// Files pacer writes are written whole or not at all: a temporary beside the target, renamed over
// it once complete and flushed; on any error (disk full, bad input found late, an exception) the
// temporary is removed and the target is untouched. A target that exists and is not a regular
// file (a device such as /dev/null, a FIFO) is written in place, never replaced. Event logs are
// the exception by design: they are appended line by line so a killed run keeps its steps.
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace pacer::analysis {

class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path);  // std::runtime_error: cannot create
  ~OutputFile();                                           // removes an uncommitted temporary
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  std::ostream& stream() noexcept { return out_; }
  // Flushes, checks every write succeeded and renames into place; throws std::runtime_error with
  // the reason (strerror) otherwise.
  void commit();

 private:
  std::filesystem::path path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

// The whole of `text` to `path` through an OutputFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);
// `text` to stdout; a failed or short write (full disk, closed pipe) throws with the reason.
void write_stdout(std::string_view text);

}  // namespace pacer::analysis
