#include "loader/model_config.h"

#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "loader/gguf_file.h"
#include "loader/model_tensors.h"

namespace pacer::loader {

std::string_view arch_name(Arch a) noexcept {
  switch (a) {
    case Arch::Llama:
      return "llama";
    case Arch::Qwen2:
      return "qwen2";
    case Arch::Qwen3:
      return "qwen3";
    case Arch::Gemma3:
      return "gemma3";
    case Arch::Phi3:
      return "phi3";
  }
  return "?";
}

std::string llama_size_class(const ModelConfig& c) {
  // llama.cpp's load_hparams tables for these architectures (src/llama-model.cpp), by layers.
  const int64_t L = c.n_layers;
  switch (c.arch) {
    case Arch::Llama:
      switch (L) {
        case 16:  // Llama 3.2 1B
        case 22:  // TinyLlama
          return "1B";
        case 26:
        case 28:  // Llama 3.2 3B
          return "3B";
        case 30:
          return "256M";
        case 32:  // granite's vocabulary is 49152; Llama 2 7B's 32000, Llama 3 8B's 128256
          return c.n_vocab == 49152 ? "3B" : c.n_vocab < 40000 ? "7B" : "8B";
        case 36:
          return "8B";
        case 40:
          return "13B";
        case 48:
          return "34B";
        case 60:
          return "30B";
        case 80:
          return c.n_heads == c.n_kv_heads ? "65B" : "70B";
      }
      break;
    case Arch::Qwen2:
      switch (L) {
        case 24:
          return c.n_embd == 1024 ? "0.5B" : "1B";
        case 28:
          return c.n_embd == 1536 ? "1.5B" : "7B";
        case 32:
          return "7B";
        case 36:
          return "3B";
        case 40:
          return c.n_heads == 20 ? "4B" : "13B";
        case 48:
          return "14B";
        case 64:
          return "32B";
        case 80:
          return "70B";
      }
      break;
    case Arch::Qwen3:
      switch (L) {
        case 28:
          return c.n_embd == 1024 ? "0.6B" : "1.7B";
        case 36:
          return c.n_embd == 2560 ? "4B" : "8B";
        case 40:
          return "14B";
        case 64:
          return "32B";
      }
      break;
    case Arch::Gemma3:
      switch (L) {
        case 18:
          return "270M";
        case 26:
          return "1B";
        case 32:
          return "8B";
        case 34:
          return "4B";
        case 48:
          return "12B";
        case 62:
          return "27B";
      }
      break;
    case Arch::Phi3:
      switch (L) {
        case 24:
          return "1B";
        case 32:
          return "3B";
        case 40:
          return "14B";
      }
      break;
  }
  return "?B";
}

void to_json(nlohmann::json& j, const ModelConfig& c) {
  j = {{"arch", arch_name(c.arch)},
       {"name", c.name},
       {"params", c.n_params},
       {"n_layers", c.n_layers},
       {"n_embd", c.n_embd},
       {"n_heads", c.n_heads},
       {"n_kv_heads", c.n_kv_heads},
       {"head_dim", c.head_dim},
       {"n_ff", c.n_ff},
       {"n_vocab", c.n_vocab},
       {"n_ctx_train", c.n_ctx_train},
       {"rope_base", c.rope_base},
       {"norm_eps", c.norm_eps},
       {"tied_embeddings", c.tied_embeddings},
       {"sliding_window", c.sliding_window}};
}

namespace tensor_names {
std::string blk(int64_t il, std::string_view suffix) {
  return fmt::format("blk.{}.{}", il, suffix);
}
}  // namespace tensor_names

bool ModelConfig::is_swa_layer(int64_t il) const noexcept {
  // Gemma 3: with pattern N, layers il where (il + 1) % N == 0 attend globally, the rest use the
  // sliding window (llama.cpp: set_swa_pattern(6) -> swa when il % 6 < 5).
  if (sliding_window <= 0 || sliding_window_pattern <= 0) return false;
  return (il + 1) % sliding_window_pattern != 0;
}

namespace {

// Facts per architecture that the GGUF metadata does not carry.
struct ArchTraits {
  Arch arch;
  ops::RopeLayout rope_layout;
  bool requires_qkv_bias;
  bool gemma_blocks;  // q/k norms, post norms, GeGLU, embedding scale, sliding window
  bool qk_norm;       // per-head RMSNorm of q and k before RoPE (gemma3, qwen3)
  bool fused;         // phi3: fused attn_qkv and gate/up tensors
};

// Sources: llama.cpp's per-architecture graph builders (src/models/*.cpp): llama rotates
// adjacent pairs, the others the two halves of each head (NEOX); qwen3 normalises q and k per head
// before RoPE and has no biases; phi3 fuses QKV and gate/up and disables its sliding window.
std::optional<ArchTraits> arch_traits(std::string_view name) {
  using L = ops::RopeLayout;
  if (name == "llama") return ArchTraits{Arch::Llama, L::Normal, false, false, false, false};
  if (name == "qwen2") return ArchTraits{Arch::Qwen2, L::Neox, true, false, false, false};
  if (name == "qwen3") return ArchTraits{Arch::Qwen3, L::Neox, false, false, true, false};
  if (name == "gemma3") return ArchTraits{Arch::Gemma3, L::Neox, false, true, true, false};
  if (name == "phi3") return ArchTraits{Arch::Phi3, L::Neox, false, false, false, true};
  return std::nullopt;
}

class Reader {
 public:
  Reader(const GgufFile& f, std::string_view arch) : f_(f), arch_(arch) {}
  std::string key(std::string_view suffix) const { return fmt::format("{}.{}", arch_, suffix); }

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    int64_t offset = -1;
    for (const auto& kv : f_.metadata()) {
      if (kv.key == field) offset = static_cast<int64_t>(kv.offset);
    }
    throw LoadError(f_.path().string(), field, offset, what);
  }

  // A positive integer key; per-layer arrays (llama.cpp's get_key_or_arr) are accepted when every
  // element agrees, since pacer runs uniform layers only.
  std::optional<int64_t> find_positive(std::string_view suffix) const {
    const std::string k = key(suffix);
    const GgufValue* v = f_.find(k);
    if (!v) return std::nullopt;
    int64_t x = 0;
    if (v->type == GgufValueType::ARRAY) {
      if (v->count == 0) fail(k, "empty per-layer array");
      for (uint64_t i = 0; i < v->count; ++i) {
        const auto e = v->array_number(i);
        if (!e || *e != std::trunc(*e) || std::fabs(*e) > 4.0e9) {
          fail(k, "per-layer array of non-integers or out-of-range values");
        }
        if (i == 0) x = static_cast<int64_t>(*e);
        if (static_cast<int64_t>(*e) != x) {
          fail(k,
               fmt::format("differs between layers ({} vs {}); pacer needs uniform layers", x, *e));
        }
      }
    } else {
      x = f_.get_int(k);
    }
    // 2^31: far above any real hyper-parameter, and small enough that products of two stay exact.
    if (x <= 0 || x > (int64_t{1} << 31)) fail(k, fmt::format("value {} out of range", x));
    return x;
  }
  int64_t positive(std::string_view suffix) const {
    auto v = find_positive(suffix);
    if (!v) fail(key(suffix), "missing key");
    return *v;
  }
  std::optional<double> find_float(std::string_view suffix) const {
    return f_.find_float(key(suffix));
  }

 private:
  const GgufFile& f_;
  std::string_view arch_;
};

// Trailing dimensions of 1 do not change a tensor's shape (ggml pads ne with 1s).
std::vector<int64_t> trimmed(const std::vector<int64_t>& ne) {
  std::vector<int64_t> t = ne;
  while (t.size() > 1 && t.back() == 1) t.pop_back();
  return t;
}

std::string shape_str(const std::vector<int64_t>& ne) {
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

void expect_shape(const GgufFile& f, std::string_view name, std::vector<int64_t> want) {
  const GgufTensor& t = f.require_tensor(name);
  if (trimmed(t.ne) != trimmed(want)) {
    throw LoadError(f.path().string(), fmt::format("tensor '{}'", name),
                    static_cast<int64_t>(t.info_offset),
                    fmt::format("shape {} does not match the model config's {}", shape_str(t.ne),
                                shape_str(want)));
  }
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  const std::string_view arch = f.get_string("general.architecture");
  const auto traits = arch_traits(arch);
  if (!traits) {
    const GgufKv* kv = nullptr;
    for (const auto& k : f.metadata()) {
      if (k.key == "general.architecture") kv = &k;
    }
    throw LoadError(
        f.path().string(), "general.architecture", kv ? static_cast<int64_t>(kv->offset) : -1,
        fmt::format("unsupported architecture '{}' (pacer runs llama, qwen2, qwen3, gemma3, phi3)",
                    arch));
  }
  const Reader r(f, arch);
  ModelConfig c;
  c.arch = traits->arch;
  c.name = std::string(f.find_string("general.name").value_or(""));
  c.file_type = f.find_int("general.file_type").value_or(-1);
  c.n_layers = r.positive("block_count");
  c.n_embd = r.positive("embedding_length");
  c.n_heads = r.positive("attention.head_count");
  c.n_kv_heads = r.find_positive("attention.head_count_kv").value_or(c.n_heads);
  c.n_ff = r.positive("feed_forward_length");
  c.n_ctx_train = r.positive("context_length");
  if (c.n_heads % c.n_kv_heads != 0) {
    r.fail(
        r.key("attention.head_count_kv"),
        fmt::format("{} query heads are not a multiple of {} kv heads", c.n_heads, c.n_kv_heads));
  }
  if (auto hd = r.find_positive("attention.key_length")) {
    c.head_dim = *hd;
  } else {
    if (c.n_embd % c.n_heads != 0) {
      r.fail(r.key("attention.head_count"),
             fmt::format("embedding_length {} is not a multiple of head_count {} and no "
                         "attention.key_length is given",
                         c.n_embd, c.n_heads));
    }
    c.head_dim = c.n_embd / c.n_heads;
  }
  if (auto vd = r.find_positive("attention.value_length"); vd && *vd != c.head_dim) {
    r.fail(r.key("attention.value_length"),
           fmt::format("{} differs from key_length {}; pacer needs equal head sizes", *vd,
                       c.head_dim));
  }
  if (c.head_dim % 2 != 0) r.fail(r.key("attention.key_length"), "head size must be even (RoPE)");
  if (auto n_rot = r.find_positive("rope.dimension_count"); n_rot && *n_rot != c.head_dim) {
    r.fail(r.key("rope.dimension_count"),
           fmt::format("partial rotary ({} of {} dims) is not supported", *n_rot, c.head_dim));
  }

  const auto eps = r.find_float("attention.layer_norm_rms_epsilon");
  if (!eps) r.fail(r.key("attention.layer_norm_rms_epsilon"), "missing key");
  if (!(*eps > 0 && *eps < 1)) {
    r.fail(r.key("attention.layer_norm_rms_epsilon"), fmt::format("value {} out of (0, 1)", *eps));
  }
  c.norm_eps = static_cast<float>(*eps);
  c.rope_base = static_cast<float>(r.find_float("rope.freq_base").value_or(10000.0));
  if (!(c.rope_base > 1.0f) || !std::isfinite(c.rope_base)) {
    r.fail(r.key("rope.freq_base"), fmt::format("value {} must be > 1", c.rope_base));
  }
  c.rope_layout = traits->rope_layout;

  // RoPE scaling: llama.cpp's default type is linear, with factor 0 or absent meaning none.
  const auto factor = r.find_float("rope.scaling.factor");
  if (factor && !(*factor >= 0 && std::isfinite(*factor))) {
    r.fail(r.key("rope.scaling.factor"), fmt::format("value {} must be >= 0", *factor));
  }
  c.rope_scale = (factor && *factor > 0) ? static_cast<float>(*factor) : 1.0f;
  const auto scaling = f.find_string(r.key("rope.scaling.type"));
  if (!scaling || *scaling == "linear") {
    c.rope_scaling = c.rope_scale != 1.0f ? RopeScaling::Linear : RopeScaling::None;
  } else if (*scaling == "none") {
    c.rope_scaling = RopeScaling::None;
    c.rope_scale = 1.0f;
  } else if (*scaling == "yarn") {
    c.rope_scaling = RopeScaling::Yarn;
  } else if (*scaling == "longrope") {
    // phi3 LongRoPE: the per-pair factors come from the rope_factors_* tensors (below).
    c.rope_scaling = c.rope_scale != 1.0f ? RopeScaling::Linear : RopeScaling::None;
  } else {
    r.fail(r.key("rope.scaling.type"), fmt::format("unsupported RoPE scaling '{}'", *scaling));
  }

  if (auto scale = r.find_float("attention.scale")) {
    if (!(*scale > 0 && std::isfinite(*scale))) {
      r.fail(r.key("attention.scale"), fmt::format("value {} must be > 0", *scale));
    }
    c.attn_scale = static_cast<float>(*scale);
  } else {
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  }
  if (auto cap = r.find_float("final_logit_softcapping")) {
    c.final_logit_softcap = static_cast<float>(*cap);
  }

  c.rope_base_local = c.rope_base;
  if (traits->gemma_blocks) {
    // Gemma 3 (source: upstream llama.cpp src/llama-model.cpp, case LLM_ARCH_GEMMA3, which
    // hardcodes set_swa_pattern(6) and rope_freq_base_train_swa = 10000; the local checkout
    // predates gemma3). Query scale 1/sqrt(head_dim) (query_pre_attn_scalar = head_dim for 1B).
    // pacer also reads an explicit pattern / local base when a file carries one (its synthetic
    // tiny-gemma3 does, to exercise both kinds of layer in few layers).
    c.sliding_window = r.positive("attention.sliding_window");
    c.sliding_window_pattern = r.find_positive("attention.sliding_window_pattern").value_or(6);
    c.rope_base_local = 10000.0f;
    for (const char* k : {"rope.freq_base_swa", "rope.local.freq_base"}) {
      if (auto b = r.find_float(k)) {
        if (!(*b > 1 && std::isfinite(*b)))
          r.fail(r.key(k), fmt::format("value {} must be > 1", *b));
        c.rope_base_local = static_cast<float>(*b);
      }
    }
    c.post_norms = true;
    c.embed_scale = true;
    c.geglu = true;
  }

  c.qk_norm = traits->qk_norm;
  // phi3 has a sliding_window key, but llama.cpp disables phi3's SWA (its converters do not
  // write the window pattern), so pacer computes what llama.cpp computes: full attention.

  // RoPE frequency factors: llama3's rope_freqs (one tensor for every layer), phi3's LongRoPE
  // pair (long past the original context, short within it).
  namespace tn = tensor_names;
  c.rope_freqs = f.tensor(tn::kRopeFreqs) != nullptr;
  c.rope_long_short =
      f.tensor(tn::kRopeFactorsLong) != nullptr || f.tensor(tn::kRopeFactorsShort) != nullptr;
  if (c.rope_freqs && c.rope_long_short) {
    r.fail("rope_freqs.weight", "a file with both rope_freqs and rope_factors_long/short");
  }
  c.rope_orig_ctx = r.find_positive("rope.scaling.original_context_length").value_or(c.n_ctx_train);
  if (auto af = r.find_float("rope.scaling.attn_factor")) {
    if (!(*af > 0 && std::isfinite(*af))) {
      r.fail(r.key("rope.scaling.attn_factor"), fmt::format("value {} must be > 0", *af));
    }
    c.rope_attn_factor = static_cast<float>(*af);
  }

  // token_embd first: its rows are the vocabulary, which the other shapes use.
  const GgufTensor& embd = f.require_tensor(tn::kTokenEmbd);
  if (trimmed(embd.ne).size() != 2 || embd.ne[0] != c.n_embd) {
    throw LoadError(
        f.path().string(), fmt::format("tensor '{}'", tn::kTokenEmbd),
        static_cast<int64_t>(embd.info_offset),
        fmt::format("shape {} is not [n_embd={}, n_vocab]", shape_str(embd.ne), c.n_embd));
  }
  c.n_vocab = embd.ne[1];
  if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
      tokens && tokens->type == GgufValueType::ARRAY &&
      tokens->count != static_cast<uint64_t>(c.n_vocab)) {
    r.fail("tokenizer.ggml.tokens",
           fmt::format("{} tokens but token_embd.weight has {} rows", tokens->count, c.n_vocab));
  }
  c.tied_embeddings = f.tensor(tn::kOutput) == nullptr;

  // Before the table lists n_layers layers' tensors: a block_count no file could hold.
  if (c.n_layers > static_cast<int64_t>(f.tensors().size())) {
    r.fail(r.key("block_count"), fmt::format("{} layers but the file holds only {} tensors",
                                             c.n_layers, f.tensors().size()));
  }
  c.qkv_bias = traits->requires_qkv_bias || f.tensor(tn::blk(0, "attn_q.bias")) != nullptr;
  // phi3 files carry fused tensors (llama.cpp also accepts split ones; so does pacer).
  c.fused_qkv = traits->fused && f.tensor(tn::blk(0, "attn_qkv.weight")) != nullptr;
  c.fused_gate_up = traits->fused;

  // Shapes of every tensor the forward pass uses (the table Weights::bind binds from).
  for (const ModelTensor& t : model_tensors(c)) expect_shape(f, t.name, t.ne);

  c.n_params = 0;
  for (const auto& t : f.tensors()) {
    if (__builtin_add_overflow(c.n_params, t.elements(), &c.n_params)) {
      throw LoadError(f.path().string(), fmt::format("tensor '{}'", t.name),
                      static_cast<int64_t>(t.info_offset), "parameter count overflows 64 bits");
    }
  }
  return c;
}

}  // namespace pacer::loader
