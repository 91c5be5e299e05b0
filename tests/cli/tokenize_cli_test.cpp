// `pacer tokenize` end to end: the binary on vocab-only GGUF files written here with GgufWriter
// (no tensors), its ids checked against the library's Tokenizer and against ids derived by hand.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/synth_vocab.h"
#include "loader/tokenizer.h"

namespace pacer {
namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Result run_pacer(const std::string& args, const fs::path& dir) {
  const fs::path err_file = dir / "stderr.txt";
  const std::string cmd = std::string(PACER_BINARY) + " " + args + " 2>" + err_file.string();
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pacer_tokenize_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A SentencePiece vocabulary small enough to derive ids by hand:
  // 0 <unk> 1 <s> 2 </s> 3..258 <0xXX>, 259 "▁", 260 "▁hi", 261 "h", 262 "i", 263 "!",
  // 264 "▁h"; "▁hi" scores highest, then "▁h".
  fs::path write_hand_vocab() {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0, 0, 0};
    std::vector<int32_t> types = {2, 3, 3};
    const char* hex = "0123456789ABCDEF";
    for (unsigned b = 0; b < 256; ++b) {
      tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
      scores.push_back(0);
      types.push_back(6);
    }
    const std::pair<const char*, float> pieces[] = {
        {"\xE2\x96\x81", -5}, {"\xE2\x96\x81hi", -1}, {"h", -5}, {"i", -5}, {"!", -5},
        {"\xE2\x96\x81h", -2}};
    for (const auto& [t, score] : pieces) {
      tokens.push_back(t);
      scores.push_back(score);
      types.push_back(1);
    }
    loader::GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
    w.set_array("tokenizer.ggml.scores", scores);
    w.set_array("tokenizer.ggml.token_type", types);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    const fs::path path = dir_ / "hand-vocab.gguf";
    w.write(path);
    return path;
  }

  fs::path write_qwen2_vocab() {
    loader::GgufWriter w;
    w.set_string("general.architecture", "qwen2");
    loader::write_synthetic_vocab(w, loader::VocabKind::Gpt2Qwen2, 2000, 7);
    const fs::path path = dir_ / "qwen2-vocab.gguf";
    w.write(path);
    return path;
  }

  fs::path dir_;
};

TEST_F(TokenizeCli, PrintsIdsAndPiecesDerivedByHand) {
  const fs::path vocab = write_hand_vocab();
  // "hi!" -> "▁hi!": only "▁h" is a pair -> [▁h i !]; then "▁hi" -> [▁hi !] = [260, 263],
  // after BOS 1.
  const Result r = run_pacer("tokenize -m " + vocab.string() + " 'hi!'", dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "      1 -> '<s>'\n    260 -> ' hi'\n    263 -> '!'\n");
  EXPECT_NE(r.err.find("3 tokens, 3 bytes"), std::string::npos) << r.err;

  const Result ids = run_pacer("tokenize --ids --no-bos -m " + vocab.string() + " 'hi!'", dir_);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(ids.out, "[260, 263]\n");
  // A character with no piece: its UTF-8 bytes as byte tokens (é = C3 A9 -> 3+0xC3, 3+0xA9).
  const Result bytes = run_pacer("tokenize --ids --no-bos -m " + vocab.string() + " é", dir_);
  EXPECT_EQ(bytes.out, "[259, 198, 172]\n");
}

TEST_F(TokenizeCli, JsonMatchesTheLibraryOnAVocabOnlyFile) {
  const fs::path vocab = write_qwen2_vocab();
  const std::string text =
      "<|im_start|>user\nThe quick brown fox, 42 times. \xE4\xB8\xAD\xE6\x96\x87\xF0\x9F\x98\x80"
      "<|im_end|>";
  const fs::path text_file = dir_ / "prompt.txt";
  std::ofstream(text_file, std::ios::binary) << text;

  const Result r = run_pacer(
      "tokenize --json --parse-special -m " + vocab.string() + " -f " + text_file.string(), dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);

  const loader::GgufFile f = loader::GgufFile::open(vocab);
  const loader::Tokenizer tok = loader::Tokenizer::from_gguf(f);
  const std::vector<int32_t> expected = tok.encode(text, true, true);
  EXPECT_EQ(j.at("ids").get<std::vector<int32_t>>(), expected);
  EXPECT_EQ(j.at("tokenizer"), "gpt2");
  EXPECT_EQ(j.at("pre"), "qwen2");
  EXPECT_EQ(j.at("n_vocab"), 2000);
  EXPECT_EQ(j.at("n_bytes"), text.size());
  EXPECT_EQ(expected.front(), tok.n_vocab() - 2);  // <|im_start|> as one token
  // The per-token bytes concatenate back to the text (special tokens render as their text).
  std::string joined;
  for (const auto& t : j.at("tokens")) {
    for (int b : t.at("bytes")) joined += static_cast<char>(b);
  }
  EXPECT_EQ(joined, text);

  // Without --parse-special the markers are ordinary text: more tokens, same bytes.
  const Result plain =
      run_pacer("tokenize --json -m " + vocab.string() + " -f " + text_file.string(), dir_);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto plain_ids = nlohmann::json::parse(plain.out).at("ids").get<std::vector<int32_t>>();
  EXPECT_EQ(plain_ids, tok.encode(text, true, false));
  EXPECT_GT(plain_ids.size(), expected.size());
}

TEST_F(TokenizeCli, ErrorsAreOneLineWithExitCode1) {
  const Result missing = run_pacer("tokenize -m " + (dir_ / "absent.gguf").string() + " hi", dir_);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_NE(missing.err.find("absent.gguf"), std::string::npos) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;

  // A GGUF without a vocabulary names the key.
  loader::GgufWriter w;
  w.set_string("general.architecture", "llama");
  const fs::path no_vocab = dir_ / "no-vocab.gguf";
  w.write(no_vocab);
  const Result r = run_pacer("tokenize -m " + no_vocab.string() + " hi", dir_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.ggml.model"), std::string::npos) << r.err;

  const Result no_text = run_pacer("tokenize -m " + write_hand_vocab().string() + " -f " +
                                       shell_quote((dir_ / "nope.txt").string()),
                                   dir_);
  EXPECT_EQ(no_text.exit_code, 1);
  EXPECT_NE(no_text.err.find("nope.txt"), std::string::npos) << no_text.err;
}

}  // namespace
}  // namespace pacer
