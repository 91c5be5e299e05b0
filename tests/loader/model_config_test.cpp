// ModelConfig::from_gguf and Weights::bind on synthetic tiny models of each architecture, plus
// the LoadErrors for missing and inconsistent tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/model_config.h"
#include "loader/synth.h"
#include "loader/weights.h"

namespace pacer::loader {
namespace {

using ops::WeightType;

// Holds the bytes a GgufFile views.
struct MemModel {
  std::vector<std::byte> bytes;
  GgufFile file;
  explicit MemModel(std::vector<std::byte> b)
      : bytes(std::move(b)), file(GgufFile::parse(bytes, "model.gguf")) {}
};

std::unique_ptr<MemModel> make_model(const SynthSpec& spec) {
  GgufWriter w;
  add_synthetic_model(w, spec);
  return std::make_unique<MemModel>(w.to_bytes());
}

TEST(ModelConfig, TinyLlama) {
  const SynthSpec spec = synth_preset("tiny");
  auto m = make_model(spec);
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.name, spec.name);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_embd, 128);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.n_ff, 320);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_ctx_train, 512);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_base, 10000.0f);
  EXPECT_EQ(c.rope_layout, ops::RopeLayout::Normal);
  EXPECT_EQ(c.rope_scaling, RopeScaling::None);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm || c.post_norms || c.embed_scale || c.geglu);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(32.0f));
  EXPECT_FALSE(c.is_swa_layer(0));
  // Parameters by hand: embd + output (2 * 512 * 128), output_norm 128, per layer 2 norms (256),
  // q,o 128*128 each, k,v 64*128 each, 3 ffn 128*320 each.
  const int64_t per_layer = 256 + 2 * 128 * 128 + 2 * 64 * 128 + 3 * 128 * 320;
  EXPECT_EQ(c.n_params, 2 * 512 * 128 + 128 + 2 * per_layer);
}

ModelConfig shape_of(const SynthSpec& s) {
  ModelConfig c;
  c.arch = s.arch;
  c.n_layers = s.n_layers;
  c.n_embd = s.n_embd;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.n_vocab = s.n_vocab;
  return c;
}

TEST(ModelConfig, SizeClassIsLlamaCppsForTheRealShapes) {
  // What llama-bench (c392e50) printed in model_type for llama-quantize files of the presets:
  // "llama 1B" for TinyLlama and Llama-3.2-1B, and "qwen2 1B" for Qwen2.5-0.5B, whose 896-wide
  // 24 layers miss llama.cpp's 0.5B class (1024 wide: Qwen1.5-0.5B); llama.cpp's load_hparams
  // tables for the other presets' layer counts.
  EXPECT_EQ(llama_size_class(shape_of(synth_preset("tinyllama-1.1b"))), "1B");
  EXPECT_EQ(llama_size_class(shape_of(synth_preset("llama3.2-1b"))), "1B");
  EXPECT_EQ(llama_size_class(shape_of(synth_preset("qwen2.5-0.5b"))), "1B");
  EXPECT_EQ(llama_size_class(shape_of(synth_preset("qwen3-0.6b"))), "0.6B");
  EXPECT_EQ(llama_size_class(shape_of(synth_preset("gemma3-1b"))), "1B");
  EXPECT_EQ(llama_size_class(shape_of(synth_preset("phi3-mini"))), "3B");
  // The tiny test preset (2 layers) has no class: "?B", as llama.cpp's LLM_TYPE_UNKNOWN.
  EXPECT_EQ(llama_size_class(shape_of(synth_preset("tiny"))), "?B");
}

TEST(ModelConfig, SizeClassSplitsSharedLayerCountsAsLlamaCppDoes) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.n_layers = 32;
  c.n_vocab = 32000;  // Llama 2 7B, Mistral 7B
  EXPECT_EQ(llama_size_class(c), "7B");
  c.n_vocab = 128256;  // Llama 3 8B
  EXPECT_EQ(llama_size_class(c), "8B");
  c.n_vocab = 49152;  // granite 3B
  EXPECT_EQ(llama_size_class(c), "3B");
  c.n_layers = 80;
  c.n_heads = c.n_kv_heads = 64;  // Llama 1 65B: no GQA
  EXPECT_EQ(llama_size_class(c), "65B");
  c.n_kv_heads = 8;  // Llama 2/3 70B
  EXPECT_EQ(llama_size_class(c), "70B");
  c.n_layers = 33;
  EXPECT_EQ(llama_size_class(c), "?B");

  c.arch = Arch::Qwen2;
  c.n_layers = 24;
  c.n_embd = 1024;  // Qwen1.5-0.5B
  EXPECT_EQ(llama_size_class(c), "0.5B");
  c.n_layers = 28;
  c.n_embd = 1536;  // Qwen2.5-1.5B
  EXPECT_EQ(llama_size_class(c), "1.5B");
  c.n_embd = 3584;  // Qwen2.5-7B
  EXPECT_EQ(llama_size_class(c), "7B");
  c.n_layers = 40;
  c.n_heads = 20;  // Qwen1.5-4B
  EXPECT_EQ(llama_size_class(c), "4B");
  c.n_heads = 40;
  EXPECT_EQ(llama_size_class(c), "13B");

  c.arch = Arch::Qwen3;
  c.n_layers = 36;
  c.n_embd = 2560;  // Qwen3-4B
  EXPECT_EQ(llama_size_class(c), "4B");
  c.n_embd = 4096;  // Qwen3-8B
  EXPECT_EQ(llama_size_class(c), "8B");

  c.arch = Arch::Gemma3;
  c.n_layers = 62;
  EXPECT_EQ(llama_size_class(c), "27B");
  c.arch = Arch::Phi3;
  c.n_layers = 40;  // Phi-3-medium
  EXPECT_EQ(llama_size_class(c), "14B");
}

// to_json is the one rendering of a config (event-log header, `pacer gguf --json`): every field
// it promises, with the tiny preset's values.
TEST(ModelConfig, ToJsonCarriesTheShape) {
  const SynthSpec spec = synth_preset("tiny-gemma3");
  auto m = make_model(spec);
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  const nlohmann::json j = c;
  EXPECT_EQ(j.at("arch"), "gemma3");
  EXPECT_EQ(j.at("name"), spec.name);
  EXPECT_EQ(j.at("params"), c.n_params);
  EXPECT_EQ(j.at("n_layers"), spec.n_layers);
  EXPECT_EQ(j.at("n_embd"), spec.n_embd);
  EXPECT_EQ(j.at("n_heads"), spec.n_heads);
  EXPECT_EQ(j.at("n_kv_heads"), spec.n_kv_heads);
  EXPECT_EQ(j.at("head_dim"), spec.head_size());
  EXPECT_EQ(j.at("n_ff"), spec.n_ff);
  EXPECT_EQ(j.at("n_vocab"), spec.n_vocab);
  EXPECT_EQ(j.at("n_ctx_train"), spec.n_ctx);
  EXPECT_FLOAT_EQ(j.at("rope_base").get<float>(), spec.rope_base);
  EXPECT_FLOAT_EQ(j.at("norm_eps").get<float>(), spec.norm_eps);
  EXPECT_EQ(j.at("tied_embeddings"), spec.tied_embeddings);
  EXPECT_EQ(j.at("sliding_window"), spec.sliding_window);
  EXPECT_GT(spec.sliding_window, 0);  // the preset exercises a non-default value
  EXPECT_EQ(j.size(), 15u);
}

TEST(ModelConfig, TinyQwen2HasBiasesNeoxAndTiedEmbeddings) {
  auto m = make_model(synth_preset("tiny-qwen2"));
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  EXPECT_EQ(c.arch, Arch::Qwen2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.rope_layout, ops::RopeLayout::Neox);
  EXPECT_FLOAT_EQ(c.rope_base, 1e6f);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.n_vocab, 1000);
  const Weights w = Weights::bind(m->file, c);
  EXPECT_EQ(w.output.data, w.token_embd.data);
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.layers[1].bq.size(), 128u);
  EXPECT_EQ(w.layers[1].bk.size(), 64u);
  EXPECT_EQ(w.layers[1].bv.size(), 64u);
  EXPECT_TRUE(w.layers[0].q_norm.empty());
}

TEST(ModelConfig, TinyGemma3SlidingWindowAndLocalRope) {
  auto m = make_model(synth_preset("tiny-gemma3"));
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  EXPECT_EQ(c.arch, Arch::Gemma3);
  EXPECT_EQ(c.head_dim, 64);  // key_length, not n_embd / n_heads = 32
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.sliding_window_pattern, 2);
  EXPECT_FLOAT_EQ(c.rope_base, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_base_local, 10000.0f);
  EXPECT_TRUE(c.is_swa_layer(0));
  EXPECT_FALSE(c.is_swa_layer(1));
  EXPECT_TRUE(c.is_swa_layer(2));
  EXPECT_FALSE(c.is_swa_layer(3));
  EXPECT_TRUE(c.qk_norm && c.post_norms && c.embed_scale && c.geglu && c.tied_embeddings);
  EXPECT_EQ(c.rope_layout, ops::RopeLayout::Neox);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 8.0f);
  const Weights w = Weights::bind(m->file, c);
  EXPECT_EQ(w.layers[3].q_norm.size(), 64u);
  EXPECT_EQ(w.layers[3].post_ffn_norm.size(), 128u);
  EXPECT_EQ(w.layers[0].wq.rows, 256);
  EXPECT_EQ(w.layers[0].wq.cols, 128);
  EXPECT_EQ(w.layers[0].wo.rows, 128);
  EXPECT_EQ(w.layers[0].wo.cols, 256);
}

TEST(ModelConfig, Gemma3PatternDefaultsToSix) {
  SynthSpec s = synth_preset("tiny-gemma3");
  s.sliding_window_pattern = 0;  // key not written: llama.cpp's hardcoded 6 applies
  s.n_layers = 7;
  auto m = make_model(s);
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  EXPECT_EQ(c.sliding_window_pattern, 6);
  for (int il = 0; il < 7; ++il) EXPECT_EQ(c.is_swa_layer(il), il != 5) << il;
}

TEST(Weights, BindsViewsIntoTheFileAndCountsMatmulBytes) {
  SynthSpec s = synth_preset("tiny");
  s.type = WeightType::Q8_0;
  auto m = make_model(s);
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  const Weights w = Weights::bind(m->file, c);
  const std::byte* lo = m->bytes.data();
  const std::byte* hi = lo + m->bytes.size();
  EXPECT_GE(w.layers[1].w_down.data, lo);
  EXPECT_LT(w.layers[1].w_down.data, hi);
  EXPECT_EQ(w.layers[1].w_down.data, m->file.require_tensor("blk.1.ffn_down.weight").data.data());
  EXPECT_EQ(w.layers[1].w_down.rows, 128);
  EXPECT_EQ(w.layers[1].w_down.cols, 320);
  EXPECT_EQ(w.main_type, WeightType::Q8_0);
  EXPECT_EQ(w.output_norm.size(), 128u);
  // Norm values are the generator's 1 +- 0.05.
  for (float x : w.layers[0].attn_norm) EXPECT_NEAR(x, 1.0f, 0.0501f);
  // Q8_0: 34 bytes per 32 elements. Per layer 2*128*128 + 2*64*128 + 3*128*320 elements, plus
  // the 512 x 128 output.
  const int64_t elems = 2 * (2 * 128 * 128 + 2 * 64 * 128 + 3 * 128 * 320) + 512 * 128;
  EXPECT_EQ(w.matmul_bytes, elems / 32 * 34);
}

// Rewrites a model with one tensor replaced (or dropped when `ne` is empty).
std::unique_ptr<MemModel> with_tensor_changed(const MemModel& m, std::string_view name,
                                              WeightType type, std::vector<int64_t> ne) {
  GgufWriter w;
  w.copy_metadata(m.file);
  for (const GgufTensor& t : m.file.tensors()) {
    if (t.name != name) {
      w.add_tensor_view(t.name, t.type, t.ne, t.data);
    } else if (!ne.empty()) {
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      w.add_tensor(
          t.name, type, ne,
          std::vector<std::byte>(static_cast<size_t>(ops::row_bytes(type, ne[0]) * (n / ne[0]))));
    }
  }
  return std::make_unique<MemModel>(w.to_bytes());
}

void expect_load_error(const MemModel& m, const std::string& field_part, bool bind = false) {
  try {
    const ModelConfig c = ModelConfig::from_gguf(m.file);
    if (bind) Weights::bind(m.file, c);
    FAIL() << "no error";
  } catch (const LoadError& e) {
    EXPECT_NE(e.field().find(field_part), std::string::npos) << e.what();
    EXPECT_EQ(e.file(), "model.gguf");
  }
}

TEST(ModelConfig, MissingOrMisshapenTensorsNameTheTensor) {
  auto m = make_model(synth_preset("tiny-qwen2"));
  expect_load_error(*with_tensor_changed(*m, "blk.1.ffn_up.weight", WeightType::F16, {}),
                    "blk.1.ffn_up.weight");
  expect_load_error(*with_tensor_changed(*m, "blk.0.attn_k.bias", WeightType::F32, {}),
                    "blk.0.attn_k.bias");
  expect_load_error(*with_tensor_changed(*m, "blk.0.attn_k.weight", WeightType::F16, {128, 128}),
                    "blk.0.attn_k.weight");
  expect_load_error(*with_tensor_changed(*m, "output_norm.weight", WeightType::F32, {64}),
                    "output_norm.weight");
  // Right shape, wrong type for a norm: only Weights::bind knows norms must be F32.
  expect_load_error(*with_tensor_changed(*m, "blk.1.attn_norm.weight", WeightType::F16, {128}),
                    "blk.1.attn_norm.weight", true);
}

TEST(ModelConfig, BadMetadataNamesTheKey) {
  auto m = make_model(synth_preset("tiny"));
  auto with_kv = [&](std::string_view key, GgufMetaValue v) {
    GgufWriter w;
    w.copy_metadata(m->file);
    w.set(key, std::move(v));
    for (const GgufTensor& t : m->file.tensors()) w.add_tensor_view(t.name, t.type, t.ne, t.data);
    return std::make_unique<MemModel>(w.to_bytes());
  };
  expect_load_error(*with_kv("general.architecture", GgufMetaValue::string("gpt2")),
                    "general.architecture");
  expect_load_error(*with_kv("llama.attention.head_count_kv", GgufMetaValue::u32(3)),
                    "llama.attention.head_count_kv");
  expect_load_error(*with_kv("llama.block_count", GgufMetaValue::u32(0)), "llama.block_count");
  expect_load_error(*with_kv("llama.block_count", GgufMetaValue::u32(3)), "blk.2.attn_norm.weight");
  expect_load_error(*with_kv("llama.embedding_length", GgufMetaValue::string("x")),
                    "llama.embedding_length");
  expect_load_error(*with_kv("llama.rope.scaling.type", GgufMetaValue::string("dynamic")),
                    "llama.rope.scaling.type");
  expect_load_error(*with_kv("llama.rope.dimension_count", GgufMetaValue::u32(16)),
                    "llama.rope.dimension_count");
  expect_load_error(*with_kv("general.file_type", GgufMetaValue::string("Q4_K_M")),
                    "general.file_type");
  EXPECT_EQ(
      ModelConfig::from_gguf(with_kv("general.file_type", GgufMetaValue::u32(15))->file).file_type,
      15);
  // Linear scaling is read, with factor as written.
  auto scaled = with_kv("llama.rope.scaling.factor", GgufMetaValue::f32(4.0f));
  const ModelConfig c = ModelConfig::from_gguf(scaled->file);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Linear);
  EXPECT_FLOAT_EQ(c.rope_scale, 4.0f);
  // Per-layer arrays with equal entries are accepted.
  auto arr = with_kv("llama.attention.head_count",
                     GgufMetaValue::array<int32_t>(std::vector<int32_t>{4, 4}));
  EXPECT_EQ(ModelConfig::from_gguf(arr->file).n_heads, 4);
  expect_load_error(*with_kv("llama.attention.head_count",
                             GgufMetaValue::array<int32_t>(std::vector<int32_t>{4, 8})),
                    "llama.attention.head_count");
}

TEST(ModelConfig, TinyQwen3NormalisesQkPerHeadWithoutBiases) {
  auto m = make_model(synth_preset("tiny-qwen3"));
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  EXPECT_EQ(c.arch, Arch::Qwen3);
  EXPECT_EQ(arch_name(c.arch), "qwen3");
  EXPECT_EQ(c.rope_layout, ops::RopeLayout::Neox);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias || c.post_norms || c.geglu || c.embed_scale);
  EXPECT_EQ(c.head_dim, 64);  // attention.key_length, not n_embd / n_heads = 32
  const Weights w = Weights::bind(m->file, c);
  EXPECT_EQ(w.layers[0].q_norm.size(), 64u);
  EXPECT_EQ(w.layers[1].wq.rows, 4 * 64);
}

TEST(Weights, Phi3FusedTensorsAreBoundAsRowRangesOfTheFile) {
  SynthSpec s = synth_preset("tiny-phi3");
  s.type = WeightType::Q8_0;
  auto m = make_model(s);
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  EXPECT_EQ(c.arch, Arch::Phi3);
  EXPECT_TRUE(c.fused_qkv && c.fused_gate_up);
  EXPECT_EQ(c.sliding_window, 0);  // llama.cpp disables phi3's window
  const Weights w = Weights::bind(m->file, c);
  const LayerWeights& l = w.layers[1];
  const std::byte* qkv = m->file.require_tensor("blk.1.attn_qkv.weight").data.data();
  const int64_t row = 128 / 32 * 34;  // Q8_0 bytes of a 128-wide row
  EXPECT_EQ(l.wq.data, qkv);
  EXPECT_EQ(l.wk.data, qkv + 128 * row);          // after q_dim = 4 heads x 32 rows
  EXPECT_EQ(l.wv.data, qkv + (128 + 128) * row);  // kv_dim = 4 kv heads x 32
  EXPECT_EQ(l.wq.rows, 128);
  EXPECT_EQ(l.wk.rows, 128);
  const std::byte* up = m->file.require_tensor("blk.1.ffn_up.weight").data.data();
  EXPECT_EQ(l.w_gate.data, up);
  EXPECT_EQ(l.w_up.data, up + 256 * row);  // gate is the first n_ff = 256 rows
  EXPECT_EQ(l.w_up.rows, 256);
  // Every byte of the fused tensors is streamed once per token, as with split ones.
  const int64_t per_layer =
      (128 + 2 * 128) * row + 128 * row + 2 * 256 * row + 128 * (256 / 32 * 34);  // qkv o gu d
  EXPECT_EQ(w.matmul_bytes, 2 * per_layer + 512 * row);
}

TEST(Weights, Llama3RopeFreqsAreTheConvertersFactors) {
  auto m = make_model(synth_preset("tiny-llama3"));
  const ModelConfig c = ModelConfig::from_gguf(m->file);
  ASSERT_TRUE(c.rope_freqs);
  const Weights w = Weights::bind(m->file, c);
  ASSERT_EQ(w.rope_freqs.size(), 16u);
  EXPECT_EQ(w.rope_factors(c, 512), w.rope_freqs.data());
  // head_dim 32, base 5e5, factor 8, original context 64: wavelength 2 pi 5e5^(2i/32) is below
  // 64/4 for i = 0, 1 (divisor 1), above 64 from i = 3 (divisor 8), and between for i = 2.
  EXPECT_FLOAT_EQ(w.rope_freqs[0], 1.0f);
  EXPECT_FLOAT_EQ(w.rope_freqs[1], 1.0f);
  const double wavelen = 2 * M_PI * std::pow(5e5, 4.0 / 32);
  const double smooth = (64 / wavelen - 1) / 3;
  EXPECT_NEAR(w.rope_freqs[2], 1 / ((1 - smooth) / 8 + smooth), 1e-5);
  for (size_t i = 3; i < 16; ++i) EXPECT_FLOAT_EQ(w.rope_freqs[i], 8.0f) << i;
  // A zero factor would make every angle infinite: refused, naming the tensor.
  expect_load_error(*with_tensor_changed(*m, "rope_freqs.weight", WeightType::F32, {16}),
                    "rope_freqs.weight", true);
}

TEST(Weights, ATensorTheArchitectureDoesNotUseIsAnError) {
  auto m = make_model(synth_preset("tiny"));
  GgufWriter w;
  w.copy_metadata(m->file);
  for (const GgufTensor& t : m->file.tensors()) w.add_tensor_view(t.name, t.type, t.ne, t.data);
  // llama.cpp loads an attn_output bias for llama files; pacer has no such add, so it refuses.
  w.add_tensor("blk.1.attn_output.bias", WeightType::F32, {128},
               std::vector<std::byte>(128 * sizeof(float)));
  const MemModel extra(w.to_bytes());
  expect_load_error(extra, "blk.1.attn_output.bias", true);
}

TEST(TensorNames, Blk) {
  EXPECT_EQ(tensor_names::blk(3, "attn_q.weight"), "blk.3.attn_q.weight");
  EXPECT_EQ(tensor_names::blk(25, "post_ffw_norm.weight"), "blk.25.post_ffw_norm.weight");
}

}  // namespace
}  // namespace pacer::loader
