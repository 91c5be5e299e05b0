#include "analysis/output_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace pacer::analysis {

OutputFile::OutputFile(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st)) {
    throw std::runtime_error(fmt::format("{}: is a directory", path.string()));
  }
  const bool in_place = std::filesystem::exists(st) && !std::filesystem::is_regular_file(st);
  if (!in_place) tmp_ = path.string() + fmt::format(".tmp.{}", ::getpid());
  const std::filesystem::path open_path = in_place ? path : tmp_;
  out_.open(open_path, std::ios::binary | std::ios::trunc);
  if (!out_) {
    throw std::runtime_error(
        fmt::format("{}: cannot open for writing: {}", path.string(), std::strerror(errno)));
  }
}

OutputFile::~OutputFile() {
  if (committed_ || tmp_.empty()) return;
  out_.close();
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
}

void OutputFile::commit() {
  out_.flush();
  const bool ok = static_cast<bool>(out_);
  const int err = errno;
  out_.close();
  if (!ok || !out_) {
    throw std::runtime_error(
        fmt::format("{}: write failed: {}", path_.string(), std::strerror(err ? err : EIO)));
  }
  if (!tmp_.empty()) {
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) {
      throw std::runtime_error(fmt::format("{}: cannot rename the finished file into place: {}",
                                           path_.string(), ec.message()));
    }
  }
  committed_ = true;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  OutputFile f(path);
  f.stream().write(text.data(), static_cast<std::streamsize>(text.size()));
  f.commit();
}

void write_stdout(std::string_view text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    throw std::runtime_error(
        fmt::format("writing to stdout failed: {}", std::strerror(errno ? errno : EIO)));
  }
}

}  // namespace pacer::analysis
