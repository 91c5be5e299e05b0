// llama-quantize's K-quant mixes: per-tensor types worked out by hand from its rules
// (use_more_bits, output and tied embedding Q6_K, fused QKV one step up, row-length fallbacks),
// then a whole file through quantize_gguf. (Checked once against llama-quantize itself on
// Qwen2.5-0.5B and Llama-3.2-1B shapes: every tensor's type equal; see docs/fidelity.md.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/quantize.h"
#include "loader/synth.h"

namespace pacer::loader {
namespace {

using ops::WeightType;

QuantTarget mix(const char* name) {
  const auto t = QuantTarget::parse(name);
  EXPECT_TRUE(t.has_value()) << name;
  return *t;
}

TEST(QuantizeMix, ParsesMixesAndPureTypes) {
  EXPECT_EQ(mix("q4_k_m").mix, QuantMix::Q4_K_M);
  EXPECT_EQ(mix("Q5_K_M").type, WeightType::Q5_K);
  EXPECT_EQ(mix("q6_k").mix, QuantMix::Q6_K);
  EXPECT_EQ(mix("q5_0").mix, QuantMix::Pure);
  EXPECT_EQ(mix("q5_0").type, WeightType::Q5_0);
  EXPECT_FALSE(QuantTarget::parse("f16").has_value());
  EXPECT_FALSE(QuantTarget::parse("q8_k").has_value());
  EXPECT_FALSE(QuantTarget::parse("q4_k_x").has_value());
  EXPECT_EQ(mix("q4_k_m").file_type(), 15u);
  EXPECT_EQ(mix("q5_k_m").file_type(), 17u);
  EXPECT_EQ(mix("q6_k").file_type(), 18u);
}

TEST(QuantizeMix, UseMoreBitsLayersGetQ6K) {
  // 16 layers: n/8 = 2, 7n/8 = 14; more bits for 0, 1, 14, 15 and (i - 2) % 3 == 2: 4, 7, 10, 13.
  const std::vector<int64_t> ne = {2048, 512};
  std::string picked;
  for (int il = 0; il < 16; ++il) {
    const WeightType v = mix_tensor_type(
        mix("q4_k_m"), "blk." + std::to_string(il) + ".attn_v.weight", ne, 16, false);
    const WeightType d = mix_tensor_type(
        mix("q5_k_m"), "blk." + std::to_string(il) + ".ffn_down.weight", ne, 16, false);
    EXPECT_EQ(v == WeightType::Q6_K, d == WeightType::Q6_K) << il;
    if (v == WeightType::Q6_K) picked += std::to_string(il) + ",";
    if (v != WeightType::Q6_K) {
      EXPECT_EQ(v, WeightType::Q4_K);
    }
    if (d != WeightType::Q6_K) {
      EXPECT_EQ(d, WeightType::Q5_K);
    }
  }
  EXPECT_EQ(picked, "0,1,4,7,10,13,14,15,");
  // Other matmuls keep the base type; attn_k is not attn_v.
  EXPECT_EQ(mix_tensor_type(mix("q4_k_m"), "blk.0.attn_k.weight", ne, 16, false), WeightType::Q4_K);
  EXPECT_EQ(mix_tensor_type(mix("q4_k_m"), "blk.0.ffn_gate.weight", ne, 16, false),
            WeightType::Q4_K);
  // q6_k has no per-layer rules.
  EXPECT_EQ(mix_tensor_type(mix("q6_k"), "blk.0.attn_v.weight", ne, 16, false), WeightType::Q6_K);
}

TEST(QuantizeMix, OutputTiedEmbeddingAndFusedQkv) {
  const std::vector<int64_t> ne = {2048, 32000}, odd = {896, 151936};
  EXPECT_EQ(mix_tensor_type(mix("q4_k_m"), "output.weight", ne, 22, false), WeightType::Q6_K);
  EXPECT_EQ(mix_tensor_type(mix("q4_k_m"), "output.weight", odd, 24, false), WeightType::Q8_0);
  // Untied: the embedding is an ordinary tensor; tied: it is the output.
  EXPECT_EQ(mix_tensor_type(mix("q4_k_m"), "token_embd.weight", ne, 22, false), WeightType::Q4_K);
  EXPECT_EQ(mix_tensor_type(mix("q4_k_m"), "token_embd.weight", ne, 22, true), WeightType::Q6_K);
  EXPECT_EQ(mix_tensor_type(mix("q4_k_m"), "blk.3.attn_qkv.weight", ne, 32, false),
            WeightType::Q5_K);
  EXPECT_EQ(mix_tensor_type(mix("q5_k_m"), "blk.3.attn_qkv.weight", ne, 32, false),
            WeightType::Q6_K);
  // Pure: one type for everything.
  EXPECT_EQ(mix_tensor_type(mix("q5_1"), "output.weight", ne, 22, false), WeightType::Q5_1);
}

TEST(QuantizeMix, RowFallbacksAsLlamaQuantize) {
  EXPECT_EQ(row_fallback(WeightType::Q4_K, 896), WeightType::Q5_0);
  EXPECT_EQ(row_fallback(WeightType::Q5_K, 896), WeightType::Q5_1);
  EXPECT_EQ(row_fallback(WeightType::Q6_K, 4896), WeightType::Q8_0);
  EXPECT_EQ(row_fallback(WeightType::Q3_K, 896), WeightType::Q4_0);
  EXPECT_EQ(row_fallback(WeightType::Q4_K, 2048), WeightType::Q4_K);  // fits: no fallback
  EXPECT_EQ(row_fallback(WeightType::Q4_K, 48), WeightType::F16);     // not even 32 fits
}

TEST(QuantizeMix, WholeFileGetsEachTensorsType) {
  // 8 layers of 256-wide rows (no fallback) except ffn_down, whose 320-wide rows fall back.
  SynthSpec s = synth_preset("tiny");
  s.n_embd = 256, s.n_layers = 8, s.n_heads = 4, s.n_kv_heads = 2, s.n_ff = 320;
  s.type = WeightType::F16;
  const auto dir =
      std::filesystem::temp_directory_path() / ("pacer-mix-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  write_synthetic_model(s, dir / "f16.gguf");
  const GgufFile in = GgufFile::open(dir / "f16.gguf");
  const QuantizeStats st = quantize_gguf(in, dir / "q4km.gguf", mix("q4_k_m"));
  const GgufFile out = GgufFile::open(dir / "q4km.gguf");
  std::map<std::string, WeightType> type;
  for (const GgufTensor& t : out.tensors()) type[std::string(t.name)] = t.type;
  // 8 layers: n/8 = 1, 7n/8 = 7: more bits for 0, 7 and (i - 1) % 3 == 2: 3, 6.
  for (int il = 0; il < 8; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const bool more = il == 0 || il == 3 || il == 6 || il == 7;
    EXPECT_EQ(type[b + "attn_v.weight"], more ? WeightType::Q6_K : WeightType::Q4_K) << il;
    // ffn_down rows are 320 wide: Q6_K -> Q8_0, Q4_K -> Q5_0.
    EXPECT_EQ(type[b + "ffn_down.weight"], more ? WeightType::Q8_0 : WeightType::Q5_0) << il;
    EXPECT_EQ(type[b + "attn_q.weight"], WeightType::Q4_K);
    EXPECT_EQ(type[b + "attn_norm.weight"], WeightType::F32);
  }
  EXPECT_EQ(type["output.weight"], WeightType::Q6_K);
  EXPECT_EQ(type["token_embd.weight"], WeightType::Q4_K);
  EXPECT_EQ(st.fallbacks, 8);
  EXPECT_EQ(out.get_int("general.file_type"), 15);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pacer::loader
