// `pacer gguf` end to end: every file of the malformed corpus fails with exit code 1 and exactly
// one stderr line naming the file, the field and the byte offset; synth -> inspect -> quantize on
// the tiny model agrees with the library.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "tests/loader/malformed_corpus.h"

namespace pacer {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class GgufCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pacer_gguf_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RunResult pacer(const std::string& args) {
    const auto out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string cmd = shell_quote(PACER_BINARY) + " " + args + " >" +
                            shell_quote(out.string()) + " 2>" + shell_quote(err.string());
    const int status = std::system(cmd.c_str());
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  std::filesystem::path dir_;
};

TEST_F(GgufCli, EveryMalformedFileFailsWithOneLineNamingFileFieldAndOffset) {
  const auto corpus_dir = std::filesystem::path(PACER_TEST_DATA) / "malformed";
  const auto corpus = loader::testing::malformed_corpus();
  ASSERT_GE(corpus.size(), 13u);
  for (const auto& c : corpus) {
    SCOPED_TRACE(c.name);
    const std::string path = (corpus_dir / (c.name + ".gguf")).string();
    ASSERT_TRUE(std::filesystem::exists(path));
    const RunResult r = pacer("gguf inspect " + shell_quote(path));
    EXPECT_EQ(r.exit_code, 1);
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.back(), '\n');
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // exactly one line
    EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
    // The field as printed (control bytes escaped) and the offset.
    std::string field = c.field;
    if (const size_t nl = field.find('\n'); nl != std::string::npos) field.replace(nl, 1, "\\x0a");
    EXPECT_NE(r.err.find(field), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("at offset " + std::to_string(c.offset)), std::string::npos) << r.err;
  }
}

TEST_F(GgufCli, SynthInspectQuantizeEndToEnd) {
  const std::string f32 = (dir_ / "tiny-f32.gguf").string();
  RunResult r = pacer("gguf synth --arch tiny --type f32 --seed 3 -o " + shell_quote(f32));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote"), std::string::npos);

  const loader::GgufFile file = loader::GgufFile::open(f32);
  const loader::ModelConfig cfg = loader::ModelConfig::from_gguf(file);

  r = pacer("gguf inspect " + shell_quote(f32));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("blk.1.ffn_down.weight"), std::string::npos);
  EXPECT_NE(r.out.find(std::to_string(cfg.n_params)), std::string::npos);
  EXPECT_NE(r.out.find("more]"), std::string::npos);  // the 512-token array is summarised

  r = pacer("gguf inspect --json " + shell_quote(f32));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n_params"].get<int64_t>(), cfg.n_params);
  EXPECT_EQ(j["tensors"].size(), file.tensors().size());
  EXPECT_EQ(j["model"]["arch"], "llama");
  EXPECT_EQ(j["model"]["n_layers"].get<int64_t>(), 2);
  EXPECT_EQ(j["file_size"].get<uint64_t>(), file.file_size());
  for (const auto& t : j["tensors"]) {
    const loader::GgufTensor& ft = file.require_tensor(t["name"].get<std::string>());
    EXPECT_EQ(t["offset"].get<uint64_t>(), ft.file_offset);
    EXPECT_EQ(t["bytes"].get<uint64_t>(), ft.bytes);
  }
  for (const auto& kv : j["metadata"]) {
    if (kv["key"] == "tokenizer.ggml.tokens") {
      EXPECT_EQ(kv["value"]["count"].get<int64_t>(), 512);
      EXPECT_EQ(kv["value"]["head"].size(), 8u);
    }
  }

  const std::string q4 = (dir_ / "tiny-q4_0.gguf").string();
  r = pacer("gguf quantize " + shell_quote(f32) + " " + shell_quote(q4) + " --type q4_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = pacer("gguf inspect --json " + shell_quote(q4));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto jq = nlohmann::json::parse(r.out);
  EXPECT_EQ(jq["model"]["main_type"], "q4_0");
  EXPECT_EQ(jq["n_params"].get<int64_t>(), cfg.n_params);
  for (const auto& kv : jq["metadata"]) {
    if (kv["key"] == "general.file_type") {
      EXPECT_EQ(kv["value"].get<int>(), 2);
    }
  }
  // The text listing names the file type as llama.cpp does (LLAMA_FTYPE_MOSTLY_Q4_0 = 2).
  r = pacer("gguf inspect " + shell_quote(q4));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 (Q4_0)"), std::string::npos) << r.out;
  // And the model as llama_model_desc does: no size class for 2 layers ("?B"), then the type.
  EXPECT_NE(r.out.find("llama.cpp describes it as: llama ?B Q4_0\n"), std::string::npos) << r.out;
  EXPECT_EQ(jq["model"]["llama_desc"], "llama ?B Q4_0");

  // Usage errors are one line too.
  r = pacer("gguf quantize " + shell_quote(f32) + " " + shell_quote(q4) + " --type q7_k");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  r = pacer("gguf synth --arch llama-70b -o " + shell_quote((dir_ / "x.gguf").string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tinyllama-1.1b"), std::string::npos) << r.err;
}

TEST_F(GgufCli, SynthWithVocabFromAnotherFile) {
  const std::string donor = (dir_ / "donor.gguf").string();
  const std::string out = (dir_ / "out.gguf").string();
  ASSERT_EQ(pacer("gguf synth --arch tiny-qwen2 --type q8_0 -o " + shell_quote(donor)).exit_code,
            0);
  const RunResult r = pacer("gguf synth --arch tiny --type f16 --vocab-from " + shell_quote(donor) +
                            " -o " + shell_quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const loader::GgufFile f = loader::GgufFile::open(out);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(loader::ModelConfig::from_gguf(f).n_vocab, 1000);
}

}  // namespace
}  // namespace pacer
