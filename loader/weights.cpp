#include "loader/weights.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

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
  namespace tn = tensor_names;
  Binder b(f);
  Weights w;
  const int64_t q_dim = c.n_heads * c.head_dim;
  const int64_t kv_dim = c.n_kv_heads * c.head_dim;

  // The embedding table is read one row per token, not streamed: it is not a decode matmul
  // (unless tied, when the output projection below streams it).
  {
    const GgufTensor& t = b.use(tn::kTokenEmbd);
    w.token_embd = t.matrix();
    if (w.token_embd.rows != c.n_vocab || w.token_embd.cols != c.n_embd) {
      b.fail(t, fmt::format("is {} x {}, expected {} x {}", w.token_embd.rows, w.token_embd.cols,
                            c.n_vocab, c.n_embd));
    }
  }
  w.output_norm = b.vec(tn::kOutputNorm, c.n_embd);
  w.output = c.tied_embeddings ? b.matrix(tn::kTokenEmbd, c.n_vocab, c.n_embd)
                               : b.matrix(tn::kOutput, c.n_vocab, c.n_embd);
  b.count_matmul(w.output);
  if (c.rope_freqs) w.rope_freqs = b.factors(tn::kRopeFreqs, c.head_dim / 2);
  if (c.rope_long_short) {
    w.rope_long = b.factors(tn::kRopeFactorsLong, c.head_dim / 2);
    w.rope_short = b.factors(tn::kRopeFactorsShort, c.head_dim / 2);
  }

  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t il = 0; il < c.n_layers; ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = b.vec(tn::blk(il, "attn_norm.weight"), c.n_embd);
    if (c.fused_qkv) {
      const ops::WeightMatrix qkv =
          b.matrix(tn::blk(il, "attn_qkv.weight"), q_dim + 2 * kv_dim, c.n_embd);
      l.wq = Binder::rows_of(qkv, 0, q_dim);
      l.wk = Binder::rows_of(qkv, q_dim, kv_dim);
      l.wv = Binder::rows_of(qkv, q_dim + kv_dim, kv_dim);
    } else {
      l.wq = b.matrix(tn::blk(il, "attn_q.weight"), q_dim, c.n_embd);
      l.wk = b.matrix(tn::blk(il, "attn_k.weight"), kv_dim, c.n_embd);
      l.wv = b.matrix(tn::blk(il, "attn_v.weight"), kv_dim, c.n_embd);
    }
    l.wo = b.matrix(tn::blk(il, "attn_output.weight"), c.n_embd, q_dim);
    if (c.qkv_bias) {
      l.bq = b.vec(tn::blk(il, "attn_q.bias"), q_dim);
      l.bk = b.vec(tn::blk(il, "attn_k.bias"), kv_dim);
      l.bv = b.vec(tn::blk(il, "attn_v.bias"), kv_dim);
    }
    if (c.qk_norm) {
      l.q_norm = b.vec(tn::blk(il, "attn_q_norm.weight"), c.head_dim);
      l.k_norm = b.vec(tn::blk(il, "attn_k_norm.weight"), c.head_dim);
    }
    if (c.post_norms) {
      l.post_attn_norm = b.vec(tn::blk(il, "post_attention_norm.weight"), c.n_embd);
      l.post_ffn_norm = b.vec(tn::blk(il, "post_ffw_norm.weight"), c.n_embd);
    }
    l.ffn_norm = b.vec(tn::blk(il, "ffn_norm.weight"), c.n_embd);
    if (c.fused_gate_up) {
      // llama.cpp's SwiGLU of a fused up projection: silu(first half) * second half.
      const ops::WeightMatrix gate_up =
          b.matrix(tn::blk(il, "ffn_up.weight"), 2 * c.n_ff, c.n_embd);
      l.w_gate = Binder::rows_of(gate_up, 0, c.n_ff);
      l.w_up = Binder::rows_of(gate_up, c.n_ff, c.n_ff);
    } else {
      l.w_gate = b.matrix(tn::blk(il, "ffn_gate.weight"), c.n_ff, c.n_embd);
      l.w_up = b.matrix(tn::blk(il, "ffn_up.weight"), c.n_ff, c.n_embd);
    }
    l.w_down = b.matrix(tn::blk(il, "ffn_down.weight"), c.n_embd, c.n_ff);
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
