// Outputs are written whole or not at all, never replace a device, and say why a write failed:
// trace on a bad log leaves nothing, report into a full device or a full stdout exits 1 with the
// reason and leaves the device node in place.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_test_util.h"

namespace pacer {
namespace {

using cli_test::run_command;

class OutputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pacer-out-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    model_ = (dir_ / "tiny.gguf").string();
    ASSERT_EQ(run_command(pacer() + " gguf synth --arch tiny --type q8_0 -o " + model_).rc, 0);
    log_ = (dir_ / "run.jsonl").string();
    ASSERT_EQ(run_command(pacer() + " run -m " + model_ + " -p hi -n 2 --events-out " + log_).rc,
              0);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static std::string pacer() { return PACER_BINARY; }
  std::filesystem::path dir_;
  std::string model_, log_;
};

TEST_F(OutputCli, TraceOfABadLogLeavesNoFile) {
  const std::string bad = (dir_ / "bad.jsonl").string(), out = (dir_ / "trace.json").string();
  std::ofstream(bad) << "not json at all\n";  // no header: refused after the output opened
  const auto r = run_command(pacer() + " trace " + bad + " -o " + out);
  EXPECT_EQ(r.rc, 1) << r.err;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find("trace.json"), std::string::npos) << name;  // no file, no temporary
    ++files;
  }
  EXPECT_EQ(files, 3u);  // tiny.gguf, run.jsonl, bad.jsonl
}

TEST_F(OutputCli, ReportIntoAFullDeviceFailsWithTheReasonAndKeepsTheNode) {
  const std::filesystem::path full = dir_ / "full";
  if (::mknod(full.c_str(), S_IFCHR | 0666, ::makedev(1, 7)) != 0) {
    GTEST_SKIP() << "mknod needs root: " << std::strerror(errno);
  }
  auto r = run_command(pacer() + " report " + log_ + " -o " + full.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_character_file(full));
  // stdout into the full device: also exit 1 with the reason (not a silent truncation).
  r = run_command("sh -c '" + pacer() + " report " + log_ + " > " + full.string() + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("writing to stdout failed: No space left on device"), std::string::npos)
      << r.err;
}

// Every command's stdout is checked at exit: a full device is exit 1 with the reason.
TEST_F(OutputCli, AnyCommandWritingIntoAFullStdoutFails) {
  const std::filesystem::path full = dir_ / "full";
  if (::mknod(full.c_str(), S_IFCHR | 0666, ::makedev(1, 7)) != 0) {
    GTEST_SKIP() << "mknod needs root: " << std::strerror(errno);
  }
  for (const std::string& cmd :
       {std::string("topo"), "gguf inspect " + model_, "tokenize -m " + model_ + " hello"}) {
    const auto r = run_command("sh -c '" + pacer() + " " + cmd + " > " + full.string() + "'");
    EXPECT_EQ(r.rc, 1) << cmd;
    EXPECT_NE(r.err.find("writing to stdout failed: No space left on device"), std::string::npos)
        << cmd << ": " << r.err;
  }
}

TEST_F(OutputCli, ReportToAFileReplacesItWhole) {
  const std::string out = (dir_ / "report.txt").string();
  std::ofstream(out) << "old contents that must be replaced entirely";
  const auto r = run_command(pacer() + " report " + log_ + " -o " + out);
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream in(out);
  std::string first;
  std::getline(in, first);
  EXPECT_NE(first.find("pacer report"), std::string::npos) << first;
}

}  // namespace
}  // namespace pacer
