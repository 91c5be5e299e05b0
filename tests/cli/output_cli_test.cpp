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

TEST_F(OutputCli, AnOutputNamingAnInputIsAUsageErrorAndTheInputStays) {
  const std::string model_bytes = cli_test::slurp(model_), log_bytes = cli_test::slurp(log_);
  const std::string text = (dir_ / "text.txt").string();
  std::ofstream(text) << "hello world, a short text to score\n";
  for (const std::string& cmd :
       {" run -m " + model_ + " -p hi -n 2 --events-out " + model_,  // would truncate the map
        " report " + log_ + " -o " + log_, " trace " + log_ + " -o " + log_,
        " compare " + log_ + " " + log_ + " -o " + log_,
        " perplexity -m " + model_ + " -f " + text + " -c 16 -o " + text,
        " perplexity -m " + model_ + " -f " + text + " -c 16 --kl-divergence-base " + model_,
        " gguf quantize " + model_ + " " + model_ + " --type q4_0"}) {
    const auto r = run_command(pacer() + cmd);
    EXPECT_EQ(r.rc, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find("writing there would destroy it"), std::string::npos) << cmd << r.err;
  }
  EXPECT_EQ(cli_test::slurp(model_), model_bytes);
  EXPECT_EQ(cli_test::slurp(log_), log_bytes);
  EXPECT_EQ(cli_test::slurp(text), "hello world, a short text to score\n");
}

TEST_F(OutputCli, ARunThatFailsBeforeRecordingKeepsTheOldLog) {
  const std::string log_bytes = cli_test::slurp(log_);
  // The prompt does not fit a context of 1: the session fails before the first event is written.
  auto r =
      run_command(pacer() + " run -m " + model_ + " -p 'hello there' -c 1 --events-out " + log_);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_EQ(cli_test::slurp(log_), log_bytes);
  const std::filesystem::path fresh = dir_ / "fresh.jsonl";  // and leaves no empty new file
  r = run_command(pacer() + " run -m " + model_ + " -p 'hello there' -c 1 --events-out " +
                  fresh.string());
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(fresh));
  // A run that records replaces the old log whole.
  r = run_command(pacer() + " run -m " + model_ + " -p hi -n 1 --events-out " + log_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(cli_test::slurp(log_), log_bytes);
  EXPECT_NE(cli_test::slurp(log_).find("\"type\":\"header\""), std::string::npos);
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
