// Synthetic models: real shapes for the presets (parameter counts of the published models),
// deterministic weights recomputed here from the generator's definition, and sane scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/model_config.h"
#include "loader/synth.h"
#include "ops/fp16.h"
#include "ops/quantize.h"
#include "ops/weight_matrix.h"

namespace pacer::loader {
namespace {

using ops::WeightType;

// The generator's definition, written out again: splitmix64 (Steele et al.), FNV-1a 64, a key
// per (seed, tensor name), element k = stream element k+1, top 24 bits -> [-1, 1).
uint64_t ref_splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t ref_fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
double ref_unit(uint64_t seed, std::string_view name, uint64_t k) {
  const uint64_t key = ref_splitmix64(ref_splitmix64(seed) ^ ref_fnv1a(name));
  const uint64_t bits = ref_splitmix64(key + k * 0x9e3779b97f4a7c15ull);
  return static_cast<double>(bits >> 40) / 8388608.0 - 1.0;
}

int64_t param_count(const GgufWriter& w) {
  int64_t n = 0;
  for (const auto& t : w.tensor_infos()) {
    int64_t e = 1;
    for (int64_t d : t.ne) e *= d;
    n += e;
  }
  return n;
}

TEST(Synth, PresetsHaveThePublishedParameterCountsAndShapes) {
  // Hugging Face model cards / safetensors totals (tied embeddings counted once). Tensors only:
  // the streamed fills never run, and the large vocabularies are not built.
  GgufWriter tl, qw, g;
  add_synthetic_tensors(tl, synth_preset("tinyllama-1.1b"));
  add_synthetic_tensors(qw, synth_preset("qwen2.5-0.5b"));
  add_synthetic_tensors(g, synth_preset("gemma3-1b"));
  EXPECT_EQ(param_count(tl), 1100048384);
  EXPECT_EQ(param_count(qw), 494032768);
  EXPECT_EQ(param_count(g), 999885952);
  bool saw_q = false;
  for (const auto& t : g.tensor_infos()) {
    if (t.name == "blk.0.attn_q.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{1152, 1024}));
      saw_q = true;
    }
    if (t.name == "blk.25.attn_k_norm.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{256}));
    }
    EXPECT_NE(t.name, "output.weight");  // tied
  }
  EXPECT_TRUE(saw_q);
  EXPECT_EQ(g.tensor_infos().size(), 1u + 26 * 13 + 1);
  // TinyLlama F16 tensor data: 2.2 GB, as the real F16 GGUF.
  EXPECT_NEAR(static_cast<double>(tl.file_size()), 2.2e9, 0.01e9);
  // The full model adds metadata and the vocabulary, not tensors.
  SynthSpec tiny = synth_preset("tiny");
  GgufWriter full, bare;
  add_synthetic_model(full, tiny);
  add_synthetic_tensors(bare, tiny);
  EXPECT_EQ(param_count(full), param_count(bare));
  EXPECT_GT(full.n_kv(), 10u);
  EXPECT_EQ(bare.n_kv(), 0u);
  EXPECT_THROW(synth_preset("llama-7b"), std::invalid_argument);
  EXPECT_EQ(synth_preset_names().size(), 12u);
}

TEST(Synth, NewArchitecturePresetsHaveThePublishedParameterCounts) {
  // Hugging Face safetensors totals; llama.cpp's converter adds only rope_freqs.weight
  // (head_dim / 2 = 32 floats) to Llama 3.2.
  GgufWriter l3, q3, phi;
  add_synthetic_tensors(l3, synth_preset("llama3.2-1b"));
  add_synthetic_tensors(q3, synth_preset("qwen3-0.6b"));
  add_synthetic_tensors(phi, synth_preset("phi3-mini"));
  EXPECT_EQ(param_count(l3), 1235814400 + 32);
  EXPECT_EQ(param_count(q3), 596049920);
  EXPECT_EQ(param_count(phi), 3821079552);
  bool fused = false;
  for (const auto& t : phi.tensor_infos()) {
    if (t.name == "blk.0.attn_qkv.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{3072, 9216}));
      fused = true;
    }
    if (t.name == "blk.0.ffn_up.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{3072, 16384}));
    }
    EXPECT_NE(t.name, "blk.0.ffn_gate.weight");
  }
  EXPECT_TRUE(fused);
}

struct Mem {
  std::vector<std::byte> bytes;
  GgufFile file;
  explicit Mem(const SynthSpec& s) : bytes(make(s)), file(GgufFile::parse(bytes, "synth")) {}
  static std::vector<std::byte> make(const SynthSpec& s) {
    GgufWriter w;
    add_synthetic_model(w, s);
    return w.to_bytes();
  }
  std::vector<float> floats(std::string_view name) const {
    const GgufTensor& t = file.require_tensor(name);
    std::vector<float> out(static_cast<size_t>(t.elements()));
    ops::dequantize_row(t.type, t.data.data(), out.data(), t.elements());
    return out;
  }
};

TEST(Synth, WeightsAreTheDefinedFunctionOfSeedNameAndIndex) {
  SynthSpec s = synth_preset("tiny");
  s.type = WeightType::F32;
  s.seed = 42;
  const Mem m(s);
  const auto q = m.floats("blk.1.attn_q.weight");  // fan-in 128
  for (uint64_t k : {0ull, 1ull, 777ull, 128ull * 128 - 1}) {
    const double want = ref_unit(42, "blk.1.attn_q.weight", k) * std::sqrt(3.0 / 128.0);
    EXPECT_NEAR(q[k], want, 1e-6) << k;
  }
  const auto norm = m.floats("blk.0.ffn_norm.weight");
  EXPECT_NEAR(norm[5], 1.0 + 0.05 * ref_unit(42, "blk.0.ffn_norm.weight", 5), 1e-6);
  const auto down = m.floats("blk.0.ffn_down.weight");  // fan-in n_ff = 320
  EXPECT_NEAR(down[1000], ref_unit(42, "blk.0.ffn_down.weight", 1000) * std::sqrt(3.0 / 320.0),
              1e-6);
}

TEST(Synth, ScaleKeepsActivationsSane) {
  SynthSpec s = synth_preset("tiny-qwen2");
  s.type = WeightType::F32;
  const Mem m(s);
  const auto up = m.floats("blk.0.ffn_up.weight");
  double sum = 0, sq = 0;
  for (float x : up) sum += x, sq += double(x) * x;
  const double n = static_cast<double>(up.size());
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.003);
  EXPECT_NEAR(sd, 1.0 / std::sqrt(128.0), 0.02 / std::sqrt(128.0) * 5);
  for (float b : m.floats("blk.1.attn_v.bias")) EXPECT_LE(std::fabs(b), 0.02f);
}

TEST(Synth, SameSeedSameBytesOtherSeedOtherWeights) {
  SynthSpec s = synth_preset("tiny-gemma3");
  s.type = WeightType::Q4_0;
  const auto a = Mem::make(s);
  const auto b = Mem::make(s);
  EXPECT_TRUE(a == b);
  s.seed = 1;
  const Mem c(s);
  const GgufFile fa = GgufFile::parse(a, "a");
  const auto& ta = fa.require_tensor("blk.0.attn_v.weight");
  const auto& tc = c.file.require_tensor("blk.0.attn_v.weight");
  ASSERT_EQ(ta.bytes, tc.bytes);
  EXPECT_NE(std::memcmp(ta.data.data(), tc.data.data(), ta.bytes), 0);
}

TEST(Synth, StoredTypesAreTheSameWeightsRounded) {
  SynthSpec s = synth_preset("tiny");
  s.type = WeightType::F32;
  const Mem ref(s);
  const auto want = ref.floats("blk.0.attn_output.weight");
  const float amax = 1.7321f / std::sqrt(128.0f);  // sqrt(3 / fan_in)
  struct Case {
    WeightType type;
    float tol;  // absolute, from the type's rounding
  };
  for (Case c : {Case{WeightType::F16, amax / 1024}, Case{WeightType::BF16, amax / 128},
                 Case{WeightType::Q8_0, amax / 127}, Case{WeightType::Q4_0, amax / 7}}) {
    SCOPED_TRACE(std::string(ops::type_name(c.type)));
    s.type = c.type;
    const Mem m(s);
    EXPECT_EQ(m.file.require_tensor("blk.0.attn_output.weight").type, c.type);
    EXPECT_EQ(m.file.require_tensor("token_embd.weight").type, c.type);
    EXPECT_EQ(m.file.require_tensor("blk.0.attn_norm.weight").type, WeightType::F32);
    const auto got = m.floats("blk.0.attn_output.weight");
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LE(worst, c.tol);
    EXPECT_GT(worst, 0.0f);
    const ModelConfig cfg = ModelConfig::from_gguf(m.file);
    EXPECT_EQ(m.file.get_int("general.file_type"), c.type == WeightType::F16    ? 1
                                                   : c.type == WeightType::BF16 ? 32
                                                   : c.type == WeightType::Q8_0 ? 7
                                                                                : 2);
    EXPECT_EQ(cfg.n_layers, 2);
  }
}

TEST(Synth, RejectsInconsistentSpecs) {
  SynthSpec s = synth_preset("tiny");
  s.n_kv_heads = 3;
  EXPECT_THROW(Mem::make(s), std::invalid_argument);
  s = synth_preset("tiny");
  s.n_ff = 300;  // not a multiple of 32
  s.type = WeightType::Q8_0;
  EXPECT_THROW(Mem::make(s), std::invalid_argument);
  s.type = WeightType::F16;
  EXPECT_NO_THROW(Mem::make(s));
  s.type = WeightType::Q6_K;
  EXPECT_THROW(Mem::make(s), std::invalid_argument);
}

TEST(Synth, CustomSpecAndVocabFromAnotherFile) {
  const Mem donor(synth_preset("tiny-qwen2"));
  SynthSpec s;
  s.arch = Arch::Qwen2;
  s.n_embd = 64, s.n_layers = 1, s.n_heads = 2, s.n_kv_heads = 1, s.n_ff = 96;
  s.type = WeightType::BF16;
  GgufWriter w;
  add_synthetic_model(w, s, &donor.file);
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "custom");
  const ModelConfig c = ModelConfig::from_gguf(f);
  EXPECT_EQ(c.n_vocab, 1000);  // from the donor's token list
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->array_string(7),
            donor.file.find("tokenizer.ggml.tokens")->array_string(7));
}

}  // namespace
}  // namespace pacer::loader
