// llama.cpp's tokenizer test vectors (models/ggml-vocab-*.gguf with .inp/.out, the expected ids
// produced by the Hugging Face tokenizers): every vector must match exactly, encoded as
// llama.cpp's test-tokenizer-0 does (add_special = false, parse_special = false). The files are
// read from $PACER_LLAMA_VOCAB_DIR, else /work/llama.cpp/models; they are not part of pacer, so
// the test is skipped (with the reason) where they are absent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/tokenizer.h"

namespace pacer::loader {
namespace {

namespace fs = std::filesystem;

fs::path vocab_dir() {
  if (const char* env = std::getenv("PACER_LLAMA_VOCAB_DIR"); env && *env) return env;
  return "/work/llama.cpp/models";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
};

// .inp: the texts separated by "\n__ggml_vocab_test__\n"; .out: one line of ids per text.
std::vector<Vector> read_vectors(const fs::path& inp, const fs::path& out) {
  const std::string raw = slurp(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(raw.substr(pos));
      break;
    }
    texts.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<Vector> vectors;
  std::istringstream lines(slurp(out));
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    Vector v;
    v.text = i < texts.size() ? texts[i] : std::string();
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) v.ids.push_back(id);
    vectors.push_back(std::move(v));
  }
  EXPECT_EQ(vectors.size(), texts.size()) << inp;
  return vectors;
}

class LlamaVocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaVocabVectors, MatchExactly) {
  const std::string name = GetParam();
  const fs::path base = vocab_dir() / ("ggml-vocab-" + name + ".gguf");
  const fs::path inp = base.string() + ".inp", out = base.string() + ".out";
  if (!fs::exists(inp) || !fs::exists(out)) {
    GTEST_SKIP() << "llama.cpp test vectors not found: " << inp
                 << " (set PACER_LLAMA_VOCAB_DIR to llama.cpp's models/ folder)";
  }
  if (!fs::exists(base)) {
    // llama.cpp ships only the .inp/.out of some vocabularies (qwen2, llama-bpe): the .gguf is
    // generated from the Hugging Face model, which this machine does not have.
    GTEST_SKIP() << base << " is not available (llama.cpp ships only its .inp/.out)";
  }
  const GgufFile f = GgufFile::open(base);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const std::vector<Vector> vectors = read_vectors(inp, out);
  size_t passed = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(vectors[i].text, false, false);
    if (got == vectors[i].ids) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " vector " << i << " '" << vectors[i].text << "': got "
                    << ::testing::PrintToString(got) << ", expected "
                    << ::testing::PrintToString(vectors[i].ids);
    }
  }
  std::printf("[ vectors  ] %s: %zu/%zu vectors match\n", name.c_str(), passed, vectors.size());
  EXPECT_GT(vectors.size(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, LlamaVocabVectors,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "mpt", "starcoder",
                                           "refact", "falcon", "qwen2", "llama-bpe"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = (c == '-') ? '_' : c;
                           return s;
                         });

}  // namespace
}  // namespace pacer::loader
