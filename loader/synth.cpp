#include "loader/synth.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/quantize.h"
#include "ops/tbb_for.h"
#include "ops/weight_matrix.h"

namespace pacer::loader {

namespace synth {

uint64_t splitmix64(uint64_t x) noexcept {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_hash(std::string_view name) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {
constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;

uint64_t tensor_key(uint64_t seed, std::string_view name) noexcept {
  return splitmix64(splitmix64(seed) ^ name_hash(name));
}

// Element k of the splitmix64 stream seeded with `key`, as a float in [-1, 1): the top 24 bits
// make an exactly representable fraction.
float unit_from_key(uint64_t key, uint64_t k) noexcept {
  const uint64_t bits = splitmix64(key + k * kGamma);
  return static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

float scale_init(Init init, int64_t fan_in, float unit) noexcept {
  switch (init) {
    case Init::Matmul:
      return unit * std::sqrt(3.0f / static_cast<float>(fan_in));
    case Init::Norm:
      return 1.0f + 0.05f * unit;
    case Init::Bias:
      return 0.02f * unit;
  }
  return unit;
}
}  // namespace

std::vector<float> llama3_rope_factors(int64_t head_dim, float base, float factor,
                                       int64_t orig_ctx) {
  constexpr double kLowFreqFactor = 1.0, kHighFreqFactor = 4.0;  // Llama 3.1/3.2 config values
  const double low_wavelen = static_cast<double>(orig_ctx) / kLowFreqFactor;
  const double high_wavelen = static_cast<double>(orig_ctx) / kHighFreqFactor;
  std::vector<float> f(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * i / head_dim);
    const double wavelen = 2.0 * M_PI / freq;
    double div = 1.0;
    if (wavelen > low_wavelen) {
      div = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (static_cast<double>(orig_ctx) / wavelen - kLowFreqFactor) /
                            (kHighFreqFactor - kLowFreqFactor);
      div = 1.0 / ((1 - smooth) / factor + smooth);
    }
    f[static_cast<size_t>(i)] = static_cast<float>(div);
  }
  return f;
}

float unit_value(uint64_t seed, std::string_view tensor_name, uint64_t k) noexcept {
  return unit_from_key(tensor_key(seed, tensor_name), k);
}

float init_value(Init init, int64_t fan_in, uint64_t seed, std::string_view tensor_name,
                 uint64_t k) noexcept {
  return scale_init(init, fan_in, unit_value(seed, tensor_name, k));
}

}  // namespace synth

namespace {

SynthSpec tiny_base(std::string name, Arch arch) {
  SynthSpec s;
  s.name = std::move(name);
  s.arch = arch;
  s.n_embd = 128;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.n_ff = 320;
  s.n_vocab = 512;
  s.n_ctx = 512;
  return s;
}

}  // namespace

SynthSpec synth_preset(std::string_view preset) {
  SynthSpec s;
  if (preset == "tinyllama-1.1b") {
    s.name = "TinyLlama-1.1B (synthetic)";
    s.arch = Arch::Llama;
    s.n_embd = 2048, s.n_layers = 22, s.n_heads = 32, s.n_kv_heads = 4, s.n_ff = 5632;
    s.n_vocab = 32000, s.n_ctx = 2048, s.rope_base = 10000.0f, s.norm_eps = 1e-5f;
    s.tied_embeddings = false, s.vocab = VocabKind::SentencePiece;
  } else if (preset == "llama3.2-1b") {
    s.name = "Llama-3.2-1B (synthetic)";
    s.arch = Arch::Llama;
    s.n_embd = 2048, s.n_layers = 16, s.n_heads = 32, s.n_kv_heads = 8, s.head_dim = 64;
    s.n_ff = 8192, s.n_vocab = 128256, s.n_ctx = 131072, s.rope_base = 500000.0f;
    s.norm_eps = 1e-5f, s.tied_embeddings = true, s.vocab = VocabKind::Gpt2Qwen2;
    s.rope_freqs = true, s.rope_scaling_factor = 32.0f, s.rope_orig_ctx = 8192;
  } else if (preset == "qwen3-0.6b") {
    s.name = "Qwen3-0.6B (synthetic)";
    s.arch = Arch::Qwen3;
    s.n_embd = 1024, s.n_layers = 28, s.n_heads = 16, s.n_kv_heads = 8, s.head_dim = 128;
    s.n_ff = 3072, s.n_vocab = 151936, s.n_ctx = 40960, s.rope_base = 1000000.0f;
    s.norm_eps = 1e-6f, s.tied_embeddings = true, s.vocab = VocabKind::Gpt2Qwen2;
  } else if (preset == "phi3-mini") {
    s.name = "Phi-3-mini-4k (synthetic)";
    s.arch = Arch::Phi3;
    s.n_embd = 3072, s.n_layers = 32, s.n_heads = 32, s.n_kv_heads = 32, s.n_ff = 8192;
    s.n_vocab = 32064, s.n_ctx = 4096, s.rope_base = 10000.0f, s.norm_eps = 1e-5f;
    s.tied_embeddings = false, s.vocab = VocabKind::SentencePiecePhi3;
  } else if (preset == "qwen2.5-0.5b") {
    s.name = "Qwen2.5-0.5B (synthetic)";
    s.arch = Arch::Qwen2;
    s.n_embd = 896, s.n_layers = 24, s.n_heads = 14, s.n_kv_heads = 2, s.n_ff = 4864;
    s.n_vocab = 151936, s.n_ctx = 32768, s.rope_base = 1000000.0f, s.norm_eps = 1e-6f;
    s.tied_embeddings = true, s.qkv_bias = true, s.vocab = VocabKind::Gpt2Qwen2;
  } else if (preset == "gemma3-1b") {
    s.name = "Gemma-3-1B (synthetic)";
    s.arch = Arch::Gemma3;
    s.n_embd = 1152, s.n_layers = 26, s.n_heads = 4, s.n_kv_heads = 1, s.head_dim = 256;
    s.n_ff = 6912, s.n_vocab = 262144, s.n_ctx = 32768, s.rope_base = 1000000.0f;
    s.rope_base_local = 10000.0f, s.sliding_window = 512, s.norm_eps = 1e-6f;
    s.tied_embeddings = true, s.vocab = VocabKind::SentencePiece;
  } else if (preset == "tiny") {
    s = tiny_base("tiny llama (synthetic)", Arch::Llama);
  } else if (preset == "tiny-llama3") {
    // Original context 64, so the RoPE factors span all three regimes over 32 pairs.
    s = tiny_base("tiny llama3 (synthetic)", Arch::Llama);
    s.rope_base = 500000.0f, s.rope_freqs = true, s.rope_scaling_factor = 8.0f;
    s.rope_orig_ctx = 64, s.tied_embeddings = true, s.vocab = VocabKind::Gpt2Qwen2;
  } else if (preset == "tiny-qwen3") {
    s = tiny_base("tiny qwen3 (synthetic)", Arch::Qwen3);
    s.head_dim = 64, s.n_ff = 384, s.n_vocab = 1000, s.n_ctx = 1024, s.rope_base = 1000000.0f;
    s.norm_eps = 1e-6f, s.tied_embeddings = true, s.vocab = VocabKind::Gpt2Qwen2;
  } else if (preset == "tiny-phi3") {
    s = tiny_base("tiny phi3 (synthetic)", Arch::Phi3);
    s.n_kv_heads = 4, s.n_ff = 256, s.vocab = VocabKind::SentencePiecePhi3;
  } else if (preset == "tiny-qwen2") {
    s = tiny_base("tiny qwen2 (synthetic)", Arch::Qwen2);
    s.n_ff = 384, s.n_vocab = 1000, s.n_ctx = 1024, s.rope_base = 1000000.0f, s.norm_eps = 1e-6f;
    s.tied_embeddings = true, s.qkv_bias = true, s.vocab = VocabKind::Gpt2Qwen2;
  } else if (preset == "tiny-gemma3") {
    // 4 layers with pattern 2: layers 0 and 2 use the window of 8 and the local RoPE base,
    // 1 and 3 are global. head_dim 64 != n_embd / n_heads, as in gemma3-1b.
    s = tiny_base("tiny gemma3 (synthetic)", Arch::Gemma3);
    s.n_layers = 4, s.head_dim = 64, s.n_ff = 384, s.n_vocab = 640, s.n_ctx = 1024;
    s.rope_base = 1000000.0f, s.rope_base_local = 10000.0f, s.sliding_window = 8;
    s.sliding_window_pattern = 2, s.norm_eps = 1e-6f, s.tied_embeddings = true;
  } else {
    throw std::invalid_argument(fmt::format("unknown synthetic model '{}' (presets: {})", preset,
                                            fmt::join(synth_preset_names(), ", ")));
  }
  return s;
}

std::vector<std::string_view> synth_preset_names() {
  return {"tinyllama-1.1b", "llama3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b",
          "gemma3-1b",      "phi3-mini",   "tiny",         "tiny-llama3",
          "tiny-qwen2",     "tiny-qwen3",  "tiny-gemma3",  "tiny-phi3"};
}

namespace {

// Adds tensor `name` whose elements are synth::init_value(init, ne[0], seed, name, k), encoded as
// `type`, produced row by row at write time.
void add_generated(GgufWriter& w, const std::string& name, ops::WeightType type,
                   std::vector<int64_t> ne, synth::Init init, uint64_t seed) {
  const int64_t cols = ne[0];
  const int64_t row_bytes = ops::row_bytes(type, cols);
  const uint64_t key = synth::tensor_key(seed, name);
  w.add_tensor(name, type, std::move(ne), [=](int64_t r0, int64_t r1, std::span<std::byte> dst) {
    ops::tbb_for_each_range(
        tbb::blocked_range<int64_t>(r0, r1, 16), [&](const tbb::blocked_range<int64_t>& rr) {
          std::vector<float> row(static_cast<size_t>(cols));
          for (int64_t r = rr.begin(); r < rr.end(); ++r) {
            const uint64_t base = static_cast<uint64_t>(r) * static_cast<uint64_t>(cols);
            for (int64_t c = 0; c < cols; ++c) {
              row[static_cast<size_t>(c)] = synth::scale_init(
                  init, cols, synth::unit_from_key(key, base + static_cast<uint64_t>(c)));
            }
            ops::quantize_row(type, row.data(), dst.data() + (r - r0) * row_bytes, cols);
          }
        });
  });
}

void check_spec(const SynthSpec& s) {
  auto positive = [](int64_t v, const char* what) {
    if (v <= 0 || v > (int64_t{1} << 31)) {
      throw std::invalid_argument(fmt::format("synthetic model: {} must be in [1, 2^31]", what));
    }
  };
  positive(s.n_embd, "n_embd");
  positive(s.n_layers, "n_layers");
  positive(s.n_heads, "n_heads");
  positive(s.n_kv_heads, "n_kv_heads");
  positive(s.n_ff, "n_ff");
  positive(s.n_vocab, "n_vocab");
  positive(s.n_ctx, "n_ctx");
  if (s.n_heads % s.n_kv_heads != 0) {
    throw std::invalid_argument("synthetic model: n_heads must be a multiple of n_kv_heads");
  }
  if (s.head_dim <= 0 && s.n_embd % s.n_heads != 0) {
    throw std::invalid_argument("synthetic model: n_embd must be a multiple of n_heads");
  }
  if (s.head_size() % 2 != 0) throw std::invalid_argument("synthetic model: head_dim must be even");
  if (s.type == ops::WeightType::Q8_K) {
    throw std::invalid_argument("synthetic model: q8_K is an activation type, not a weight type");
  }
  const int64_t block = ops::type_info(s.type).block_elems;
  for (int64_t cols : {s.n_embd, s.n_heads * s.head_size(), s.n_ff}) {
    if (cols % block != 0) {
      throw std::invalid_argument(
          fmt::format("synthetic model: row length {} is not a multiple of {}'s block size {}",
                      cols, ops::type_name(s.type), block));
    }
  }
  if (s.arch == Arch::Gemma3 && s.sliding_window <= 0) {
    throw std::invalid_argument("synthetic model: gemma3 needs a sliding window > 0");
  }
}

}  // namespace

void add_synthetic_model(GgufWriter& w, const SynthSpec& spec_in, const GgufFile* vocab_from) {
  SynthSpec s = spec_in;
  if (s.arch == Arch::Qwen2) s.qkv_bias = true;
  if (vocab_from) {
    const GgufValue* tokens = vocab_from->find("tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GgufValueType::ARRAY || tokens->count == 0) {
      throw std::invalid_argument(fmt::format(
          "{}: no tokenizer.ggml.tokens to copy a vocabulary from", vocab_from->path().string()));
    }
    s.n_vocab = static_cast<int64_t>(tokens->count);
  }
  check_spec(s);

  const std::string arch(arch_name(s.arch));
  auto key = [&](std::string_view suffix) { return fmt::format("{}.{}", arch, suffix); };
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  const int64_t head_dim = s.head_size();

  // Metadata with the value types llama.cpp's converter writes (its loader checks them).
  w.set_string("general.architecture", arch);
  w.set_string("general.name", s.name);
  w.set_u32("general.file_type", llama_file_type(s.type));
  if (ops::type_info(s.type).block_elems > 1) w.set_u32("general.quantization_version", 2);
  w.set_u32(key("context_length"), u32(s.n_ctx));
  w.set_u32(key("embedding_length"), u32(s.n_embd));
  w.set_u32(key("block_count"), u32(s.n_layers));
  w.set_u32(key("feed_forward_length"), u32(s.n_ff));
  w.set_u32(key("attention.head_count"), u32(s.n_heads));
  w.set_u32(key("attention.head_count_kv"), u32(s.n_kv_heads));
  w.set_f32(key("rope.freq_base"), s.rope_base);
  w.set_f32(key("attention.layer_norm_rms_epsilon"), s.norm_eps);
  if (s.head_dim > 0) {
    w.set_u32(key("attention.key_length"), u32(head_dim));
    w.set_u32(key("attention.value_length"), u32(head_dim));
  }
  if (s.arch == Arch::Llama || s.arch == Arch::Phi3) {
    w.set_u32(key("rope.dimension_count"), u32(head_dim));
  }
  if (s.arch == Arch::Phi3) {
    // As llama.cpp's converter writes Phi-3-mini-4k (the window llama.cpp then disables).
    w.set_u32(key("attention.sliding_window"), 2047);
    w.set_u32(key("rope.scaling.original_context_length"), u32(s.n_ctx));
  }
  if (s.arch == Arch::Gemma3) {
    w.set_u32(key("attention.sliding_window"), u32(s.sliding_window));
    w.set_f32(key("rope.freq_base_swa"), s.rope_base_local);
    if (s.sliding_window_pattern > 0) {
      w.set_u32(key("attention.sliding_window_pattern"), u32(s.sliding_window_pattern));
    }
  }
  if (vocab_from) {
    copy_vocab(w, *vocab_from);
  } else {
    write_synthetic_vocab(w, s.vocab, s.n_vocab, s.seed);
  }

  add_synthetic_tensors(w, s);
}

void add_synthetic_tensors(GgufWriter& w, const SynthSpec& spec) {
  SynthSpec s = spec;
  if (s.arch == Arch::Qwen2) s.qkv_bias = true;
  check_spec(s);
  const int64_t head_dim = s.head_size();
  // Tensors, in the order llama.cpp's converter emits them.
  namespace tn = tensor_names;
  using synth::Init;
  const ops::WeightType f32 = ops::WeightType::F32;
  const int64_t q_dim = s.n_heads * head_dim;
  const int64_t kv_dim = s.n_kv_heads * head_dim;
  add_generated(w, std::string(tn::kTokenEmbd), s.type, {s.n_embd, s.n_vocab}, Init::Matmul,
                s.seed);
  if (s.rope_freqs) {
    const std::vector<float> f =
        synth::llama3_rope_factors(head_dim, s.rope_base, s.rope_scaling_factor, s.rope_orig_ctx);
    std::vector<std::byte> bytes(f.size() * sizeof(float));
    std::memcpy(bytes.data(), f.data(), bytes.size());
    w.add_tensor(std::string(tn::kRopeFreqs), f32, {head_dim / 2}, std::move(bytes));
  }
  const bool phi3 = s.arch == Arch::Phi3;
  const bool qk_norm = s.arch == Arch::Gemma3 || s.arch == Arch::Qwen3;
  for (int64_t il = 0; il < s.n_layers; ++il) {
    auto blk = [&](std::string_view suffix) { return tn::blk(il, suffix); };
    add_generated(w, blk("attn_norm.weight"), f32, {s.n_embd}, Init::Norm, s.seed);
    if (phi3) {
      add_generated(w, blk("attn_qkv.weight"), s.type, {s.n_embd, q_dim + 2 * kv_dim}, Init::Matmul,
                    s.seed);
    } else {
      add_generated(w, blk("attn_q.weight"), s.type, {s.n_embd, q_dim}, Init::Matmul, s.seed);
      add_generated(w, blk("attn_k.weight"), s.type, {s.n_embd, kv_dim}, Init::Matmul, s.seed);
      add_generated(w, blk("attn_v.weight"), s.type, {s.n_embd, kv_dim}, Init::Matmul, s.seed);
    }
    if (s.qkv_bias) {
      add_generated(w, blk("attn_q.bias"), f32, {q_dim}, Init::Bias, s.seed);
      add_generated(w, blk("attn_k.bias"), f32, {kv_dim}, Init::Bias, s.seed);
      add_generated(w, blk("attn_v.bias"), f32, {kv_dim}, Init::Bias, s.seed);
    }
    if (qk_norm) {
      add_generated(w, blk("attn_q_norm.weight"), f32, {head_dim}, Init::Norm, s.seed);
      add_generated(w, blk("attn_k_norm.weight"), f32, {head_dim}, Init::Norm, s.seed);
    }
    add_generated(w, blk("attn_output.weight"), s.type, {q_dim, s.n_embd}, Init::Matmul, s.seed);
    if (s.arch == Arch::Gemma3) {
      add_generated(w, blk("post_attention_norm.weight"), f32, {s.n_embd}, Init::Norm, s.seed);
    }
    add_generated(w, blk("ffn_norm.weight"), f32, {s.n_embd}, Init::Norm, s.seed);
    if (phi3) {
      add_generated(w, blk("ffn_up.weight"), s.type, {s.n_embd, 2 * s.n_ff}, Init::Matmul, s.seed);
    } else {
      add_generated(w, blk("ffn_gate.weight"), s.type, {s.n_embd, s.n_ff}, Init::Matmul, s.seed);
      add_generated(w, blk("ffn_up.weight"), s.type, {s.n_embd, s.n_ff}, Init::Matmul, s.seed);
    }
    add_generated(w, blk("ffn_down.weight"), s.type, {s.n_ff, s.n_embd}, Init::Matmul, s.seed);
    if (s.arch == Arch::Gemma3) {
      add_generated(w, blk("post_ffw_norm.weight"), f32, {s.n_embd}, Init::Norm, s.seed);
    }
  }
  add_generated(w, std::string(tn::kOutputNorm), f32, {s.n_embd}, Init::Norm, s.seed);
  if (!s.tied_embeddings) {
    add_generated(w, std::string(tn::kOutput), s.type, {s.n_embd, s.n_vocab}, Init::Matmul, s.seed);
  }
}

void write_synthetic_model(const SynthSpec& spec, const std::filesystem::path& path,
                           const GgufFile* vocab_from) {
  GgufWriter w;
  add_synthetic_model(w, spec, vocab_from);
  w.write(path);
}

}  // namespace pacer::loader
