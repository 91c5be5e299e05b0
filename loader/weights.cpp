#include "loader/weights.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "loader/model_tensors.h"

namespace pacer::loader {

namespace {

class Binder {
 public:
  explicit Binder(const GgufFile& f) : f_(f) {}

  [[noreturn]] void fail(const GgufTensor& t, const std::string& what) const {
    throw LoadError(f_.path().string(), fmt::format("tensor '{}'", t.name),
                    static_cast<int64_t>(t.info_offset), what);
  }

  // A matrix of `rows` x `cols` (GGUF ne = [cols, rows]) of any supported weight type.
  const GgufTensor& use(std::string_view name) {
    const GgufTensor& t = f_.require_tensor(name);
    used_.emplace(t.name);
    return t;
  }

  ops::WeightMatrix matrix(std::string_view name, int64_t rows, int64_t cols) {
    const GgufTensor& t = use(name);
    const ops::WeightMatrix w = t.matrix();
    if (w.rows != rows || w.cols != cols) {
      fail(t,
           fmt::format("is {} x {}, expected {} x {} (rows x cols)", w.rows, w.cols, rows, cols));
    }
    matmul_bytes_by_type_[t.type] += w.bytes();
    return w;
  }

  // A vector of n floats: norms and biases are F32 in every llama.cpp-written file.
  std::span<const float> vec(std::string_view name, int64_t n) {
    const GgufTensor& t = use(name);
    if (t.type != ops::WeightType::F32) {
      fail(t,
           fmt::format("has type {}; norm weights and biases must be f32", ops::type_name(t.type)));
    }
    if (t.elements() != n) fail(t, fmt::format("has {} elements, expected {}", t.elements(), n));
    if (reinterpret_cast<uintptr_t>(t.data.data()) % alignof(float) != 0) {
      fail(t, "f32 data is not 4-byte aligned");
    }
    return {reinterpret_cast<const float*>(t.data.data()), static_cast<size_t>(n)};
  }

  // Frequency divisors: positive and finite (a zero would make every angle infinite).
  std::span<const float> factors(std::string_view name, int64_t n) {
    const std::span<const float> v = vec(name, n);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!(v[i] > 0 && std::isfinite(v[i]))) {
        fail(f_.require_tensor(name), fmt::format("element {} is {}; RoPE factors must be finite "
                                                  "and > 0",
                                                  i, v[i]));
      }
    }
    return v;
  }

  // Rows [r0, r0 + n) of a row-major matrix, as a matrix of its own (a view, no copy).
  static ops::WeightMatrix rows_of(const ops::WeightMatrix& m, int64_t r0, int64_t n) {
    ops::WeightMatrix w = m;
    w.data = m.row(r0);
    w.rows = n;
    return w;
  }

  // Every tensor of the file not bound so far is an error naming it.
  void check_all_used(const ModelConfig& c) const {
    for (const GgufTensor& t : f_.tensors()) {
      if (used_.count(t.name) == 0) {
        fail(t, fmt::format("is not used by pacer's {} forward pass; pacer refuses a file with a "
                            "tensor it would ignore (llama.cpp refuses unknown tensors too)",
                            arch_name(c.arch)));
      }
    }
  }

  void count_matmul(const ops::WeightMatrix& w) { matmul_bytes_ += w.bytes(); }
  int64_t matmul_bytes() const noexcept { return matmul_bytes_; }
  ops::WeightType main_type() const {
    ops::WeightType best = ops::WeightType::F32;
    int64_t best_bytes = -1;
    for (const auto& [type, bytes] : matmul_bytes_by_type_) {
      if (bytes > best_bytes) best = type, best_bytes = bytes;
    }
    return best;
  }

 private:
  const GgufFile& f_;
  int64_t matmul_bytes_ = 0;
  std::map<ops::WeightType, int64_t> matmul_bytes_by_type_;
  std::set<std::string, std::less<>> used_;
};

}  // namespace

Weights Weights::bind(const GgufFile& f, const ModelConfig& c) {
  Binder b(f);
  Weights w;
  const int64_t q_dim = c.n_heads * c.head_dim;
  const int64_t kv_dim = c.n_kv_heads * c.head_dim;
  w.layers.resize(static_cast<size_t>(c.n_layers));

  // The table ModelConfig::from_gguf checked the shapes with: each tensor into its field.
  for (const ModelTensor& t : model_tensors(c)) {
    LayerWeights* l = t.layer >= 0 ? &w.layers[static_cast<size_t>(t.layer)] : nullptr;
    if (t.kind == TensorKind::Vector || t.kind == TensorKind::Factors) {
      const std::span<const float> v =
          t.kind == TensorKind::Factors ? b.factors(t.name, t.ne[0]) : b.vec(t.name, t.ne[0]);
      // clang-format off
      switch (t.slot) {
        case TensorSlot::OutputNorm: w.output_norm = v; break;
        case TensorSlot::RopeFreqs: w.rope_freqs = v; break;
        case TensorSlot::RopeFactorsLong: w.rope_long = v; break;
        case TensorSlot::RopeFactorsShort: w.rope_short = v; break;
        case TensorSlot::AttnNorm: l->attn_norm = v; break;
        case TensorSlot::BiasQ: l->bq = v; break;
        case TensorSlot::BiasK: l->bk = v; break;
        case TensorSlot::BiasV: l->bv = v; break;
        case TensorSlot::QNorm: l->q_norm = v; break;
        case TensorSlot::KNorm: l->k_norm = v; break;
        case TensorSlot::PostAttnNorm: l->post_attn_norm = v; break;
        case TensorSlot::PostFfnNorm: l->post_ffn_norm = v; break;
        case TensorSlot::FfnNorm: l->ffn_norm = v; break;
        default:
          b.fail(f.require_tensor(t.name), "is not a vector slot");  // a table bug
      }
      // clang-format on
      continue;
    }
    if (t.slot == TensorSlot::TokenEmbd) {
      // The embedding table is read one row per token, not streamed: it is not a decode matmul
      // (unless tied, when the output projection below streams it).
      const GgufTensor& e = b.use(t.name);
      w.token_embd = e.matrix();
      if (w.token_embd.rows != c.n_vocab || w.token_embd.cols != c.n_embd) {
        b.fail(e, fmt::format("is {} x {}, expected {} x {}", w.token_embd.rows, w.token_embd.cols,
                              c.n_vocab, c.n_embd));
      }
      continue;
    }
    const ops::WeightMatrix m = b.matrix(t.name, t.ne[1], t.ne[0]);
    // clang-format off
    switch (t.slot) {
      case TensorSlot::Output: w.output = m; break;
      case TensorSlot::AttnQkv:  // phi3: [Wq; Wk; Wv] by rows, three views of the one tensor
        l->wq = Binder::rows_of(m, 0, q_dim);
        l->wk = Binder::rows_of(m, q_dim, kv_dim);
        l->wv = Binder::rows_of(m, q_dim + kv_dim, kv_dim);
        break;
      case TensorSlot::AttnQ: l->wq = m; break;
      case TensorSlot::AttnK: l->wk = m; break;
      case TensorSlot::AttnV: l->wv = m; break;
      case TensorSlot::AttnOutput: l->wo = m; break;
      case TensorSlot::FfnGateUp:
        // llama.cpp's SwiGLU of a fused up projection: silu(first half) * second half.
        l->w_gate = Binder::rows_of(m, 0, c.n_ff);
        l->w_up = Binder::rows_of(m, c.n_ff, c.n_ff);
        break;
      case TensorSlot::FfnGate: l->w_gate = m; break;
      case TensorSlot::FfnUp: l->w_up = m; break;
      case TensorSlot::FfnDown: l->w_down = m; break;
      default:
        b.fail(f.require_tensor(t.name), "is not a matrix slot");  // a table bug
    }
  }
  // clang-format on
  if (c.tied_embeddings) w.output = b.matrix(tensor_names::kTokenEmbd, c.n_vocab, c.n_embd);
  b.count_matmul(w.output);
  for (const LayerWeights& l : w.layers) {
    for (const ops::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      b.count_matmul(*m);
    }
  }
  b.check_all_used(c);
  w.matmul_bytes = b.matmul_bytes();
  w.main_type = b.main_type();
  return w;
}

const float* Weights::rope_factors(const ModelConfig& c, int64_t n_ctx) const noexcept {
  if (!rope_freqs.empty()) return rope_freqs.data();
  if (!rope_long.empty()) {
    return n_ctx > c.rope_orig_ctx ? rope_long.data() : rope_short.data();
  }
  return nullptr;
}

}  // namespace pacer::loader
