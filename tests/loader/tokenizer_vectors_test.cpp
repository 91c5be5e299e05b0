// Tokenizer vectors: texts with the token ids llama.cpp's own tokenizer gives for them, encoded as
// llama.cpp's test-tokenizer-0 does (add_special = false, parse_special = false).
//
// SynthVocabVectors (always runs): tests/data/tokenizer/texts.inp on the vocabularies of pacer's
// synthetic presets (SentencePiece, GPT-2/Qwen2 BPE, SentencePiece + Phi-3 controls). The ids in
// tests/data/tokenizer/<preset>.out are facts obtained once from llama.cpp's llama-tokenize on the
// very file `pacer gguf synth --arch <preset>` writes (scripts/tokenizer-vectors-from-llamacpp.sh;
// llama.cpp of 2025-02-20, c392e50). If a synthetic vocabulary changes, rerun that script.
//
// LlamaVocabVectors (optional): llama.cpp's own models/ggml-vocab-*.gguf with their .inp/.out
// (ids from the Hugging Face tokenizers), read from $PACER_LLAMA_VOCAB_DIR; those files are not
// pacer's to ship, so without the variable the test says so and skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "loader/gguf_file.h"
#include "loader/synth.h"
#include "loader/tokenizer.h"

namespace pacer::loader {
namespace {

namespace fs = std::filesystem;

fs::path vocab_dir() {
  const char* env = std::getenv("PACER_LLAMA_VOCAB_DIR");
  return env && *env ? fs::path(env) : fs::path();
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

// Every vector encodes to exactly its ids; prints the tally.
void expect_vectors(const std::string& name, const Tokenizer& tok,
                    const std::vector<Vector>& vectors) {
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

class SynthVocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(SynthVocabVectors, MatchLlamaCppExactly) {
  const std::string preset = GetParam();
  const fs::path data = fs::path(PACER_TEST_DATA) / "tokenizer";
  const fs::path model = fs::temp_directory_path() /
                         ("pacer-vectors-" + std::to_string(::getpid()) + "-" + preset + ".gguf");
  SynthSpec spec = synth_preset(preset);  // the preset as `pacer gguf synth` writes it
  spec.type = ops::WeightType::F32;
  write_synthetic_model(spec, model);
  const GgufFile f = GgufFile::open(model);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  fs::remove(model);
  SCOPED_TRACE("if the synthetic vocabulary changed on purpose, regenerate " +
               (data / (preset + ".out")).string() +
               " with scripts/tokenizer-vectors-from-llamacpp.sh");
  expect_vectors(preset, tok, read_vectors(data / "texts.inp", data / (preset + ".out")));
}

INSTANTIATE_TEST_SUITE_P(Presets, SynthVocabVectors,
                         ::testing::Values("tiny", "tiny-qwen2", "tiny-phi3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

class LlamaVocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaVocabVectors, MatchExactly) {
  const std::string name = GetParam();
  if (vocab_dir().empty()) {
    GTEST_SKIP() << "PACER_LLAMA_VOCAB_DIR is not set (llama.cpp's models/ folder; optional: "
                    "SynthVocabVectors covers the tokenizers with vectors shipped in tests/data)";
  }
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
  expect_vectors(name, tok, read_vectors(inp, out));
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
