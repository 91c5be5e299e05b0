#include "reference_forward.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ops/matmul.h"  // dequantize_row only: the weights' fp32 values

namespace pacer::testref {
namespace {

// x rounded to the nearest f16 (round-to-nearest-even, as every f16 store does), back as a float.
// The compiler's _Float16 where it has one (GCC 12), else the same rounding by hand (clang 14,
// the fuzz build's compiler, has no _Float16 on x86): 11 significant bits, or the subnormals'
// fixed quantum of 2^-24, and past 65504 infinity.
float round_to_f16(float x) {
#if defined(__FLT16_MAX__)
  return static_cast<float>(static_cast<_Float16>(x));
#else
  if (!std::isfinite(x) || x == 0.0f) return x;
  int e = 0;
  std::frexp(x, &e);                    // |x| = m * 2^e, m in [0.5, 1)
  const int q = std::max(e - 11, -24);  // the f16 quantum at this magnitude
  const float r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);  // ties to even
  return std::fabs(r) > 65504.0f ? std::copysign(INFINITY, x) : r;
#endif
}

std::vector<float> dequantized(const loader::GgufFile& f, const std::string& name) {
  const loader::GgufTensor& t = f.require_tensor(name);
  std::vector<float> out(static_cast<size_t>(t.elements()));
  ops::dequantize_row(t.type, t.data.data(), out.data(), t.elements());
  return out;
}

std::vector<float> optional_tensor(const loader::GgufFile& f, const std::string& name) {
  return f.tensor(name) ? dequantized(f, name) : std::vector<float>{};
}

std::string blk(int64_t il, const char* suffix) {
  return "blk." + std::to_string(il) + "." + suffix;
}

// x / sqrt(mean(x^2) + eps) * w over x[off, off + n).
void rmsnorm(std::vector<float>& x, int64_t off, int64_t n, const std::vector<float>& w,
             float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[size_t(off + i)]) * x[size_t(off + i)];
  const double inv = 1.0 / std::sqrt(ss / double(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    x[size_t(off + i)] = static_cast<float>(x[size_t(off + i)] * inv * w[size_t(i)]);
  }
}

// Rotates each head of x by angle pos * scale * base^(-2i/d) for pair i: the pairs are
// (2i, 2i + 1) (llama) or (i, i + d/2) (neox: qwen2, gemma3).
// llama3 divides pair i's angle by divisors[i] (rope_freqs.weight).
void rope(std::vector<float>& x, int64_t n_heads, int64_t d, int64_t pos, float base, float scale,
          bool neox, const std::vector<float>& divisors) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = x.data() + h * d;
    for (int64_t i = 0; i < d / 2; ++i) {
      double theta = double(pos) * scale * std::pow(double(base), -2.0 * i / double(d));
      if (!divisors.empty()) theta /= divisors[size_t(i)];
      const double cs = std::cos(theta), sn = std::sin(theta);
      float& a = neox ? head[i] : head[2 * i];
      float& b = neox ? head[i + d / 2] : head[2 * i + 1];
      const double x0 = a, x1 = b;
      a = static_cast<float>(x0 * cs - x1 * sn);
      b = static_cast<float>(x0 * sn + x1 * cs);
    }
  }
}

}  // namespace

// y = W x for W (rows, cols) row-major, accumulated in double.
std::vector<float> ReferenceModel::Matrix::operator*(const std::vector<float>& x) const {
  std::vector<float> y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += double(w[size_t(r * cols + c)]) * x[size_t(c)];
    y[size_t(r)] = static_cast<float>(acc);
  }
  return y;
}

ReferenceModel::Matrix ReferenceModel::Matrix::rows_range(int64_t r0, int64_t n) const {
  Matrix m;
  m.cols = cols;
  m.rows = n;
  m.w.assign(w.begin() + r0 * cols, w.begin() + (r0 + n) * cols);
  return m;
}

ReferenceModel::Matrix ReferenceModel::matrix(const loader::GgufFile& f,
                                              const std::string& name) const {
  const loader::GgufTensor& t = f.require_tensor(name);
  Matrix m;
  m.w = dequantized(f, name);
  m.cols = t.ne[0];
  m.rows = t.elements() / t.ne[0];
  return m;
}

ReferenceModel::ReferenceModel(const loader::GgufFile& f, RefOptions opts) : opts_(opts) {
  c_.arch = std::string(f.get_string("general.architecture"));
  const std::string a = c_.arch + ".";
  c_.gemma = c_.arch == "gemma3";
  c_.neox = c_.arch != "llama";  // qwen2, qwen3, gemma3, phi3 rotate the two halves
  c_.n_layers = f.get_int(a + "block_count");
  c_.n_embd = f.get_int(a + "embedding_length");
  c_.n_heads = f.get_int(a + "attention.head_count");
  c_.n_kv_heads = f.find_int(a + "attention.head_count_kv").value_or(c_.n_heads);
  c_.head_dim = f.find_int(a + "attention.key_length").value_or(c_.n_embd / c_.n_heads);
  c_.n_ff = f.get_int(a + "feed_forward_length");
  c_.eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));
  c_.rope_base = static_cast<float>(f.find_float(a + "rope.freq_base").value_or(10000.0));
  if (auto factor = f.find_float(a + "rope.scaling.factor"); factor && *factor > 0) {
    c_.rope_freq_scale = static_cast<float>(1.0 / *factor);
  }
  c_.attn_scale = static_cast<float>(
      f.find_float(a + "attention.scale").value_or(1.0 / std::sqrt(double(c_.head_dim))));
  c_.logit_softcap = static_cast<float>(f.find_float(a + "final_logit_softcapping").value_or(0));
  if (c_.gemma) {
    c_.window = f.get_int(a + "attention.sliding_window");
    c_.window_pattern = f.find_int(a + "attention.sliding_window_pattern").value_or(6);
    c_.rope_base_local = static_cast<float>(
        f.find_float(a + "rope.freq_base_swa")
            .value_or(f.find_float(a + "rope.local.freq_base").value_or(10000.0)));
  }

  c_.rope_divisors = optional_tensor(f, "rope_freqs.weight");
  token_embd_ = dequantized(f, "token_embd.weight");
  c_.n_vocab = static_cast<int64_t>(token_embd_.size()) / c_.n_embd;
  output_norm_ = dequantized(f, "output_norm.weight");
  output_ = matrix(f, f.tensor("output.weight") ? "output.weight" : "token_embd.weight");
  for (int64_t il = 0; il < c_.n_layers; ++il) {
    Layer L;
    L.attn_norm = dequantized(f, blk(il, "attn_norm.weight"));
    if (f.tensor(blk(il, "attn_qkv.weight"))) {
      // phi3: one (q_dim + 2 kv_dim, n_embd) matrix, rows q then k then v.
      const Matrix qkv = matrix(f, blk(il, "attn_qkv.weight"));
      const int64_t qd = c_.n_heads * c_.head_dim, kvd = c_.n_kv_heads * c_.head_dim;
      L.wq = qkv.rows_range(0, qd);
      L.wk = qkv.rows_range(qd, kvd);
      L.wv = qkv.rows_range(qd + kvd, kvd);
    } else {
      L.wq = matrix(f, blk(il, "attn_q.weight"));
      L.wk = matrix(f, blk(il, "attn_k.weight"));
      L.wv = matrix(f, blk(il, "attn_v.weight"));
    }
    L.bq = optional_tensor(f, blk(il, "attn_q.bias"));
    L.bk = optional_tensor(f, blk(il, "attn_k.bias"));
    L.bv = optional_tensor(f, blk(il, "attn_v.bias"));
    L.q_norm = optional_tensor(f, blk(il, "attn_q_norm.weight"));
    L.k_norm = optional_tensor(f, blk(il, "attn_k_norm.weight"));
    L.wo = matrix(f, blk(il, "attn_output.weight"));
    L.post_attn_norm = optional_tensor(f, blk(il, "post_attention_norm.weight"));
    L.ffn_norm = dequantized(f, blk(il, "ffn_norm.weight"));
    if (f.tensor(blk(il, "ffn_gate.weight"))) {
      L.w_gate = matrix(f, blk(il, "ffn_gate.weight"));
      L.w_up = matrix(f, blk(il, "ffn_up.weight"));
    } else {
      // phi3: ffn_up holds gate (first n_ff rows) and up (the rest).
      const Matrix gu = matrix(f, blk(il, "ffn_up.weight"));
      L.w_gate = gu.rows_range(0, c_.n_ff);
      L.w_up = gu.rows_range(c_.n_ff, c_.n_ff);
    }
    L.w_down = matrix(f, blk(il, "ffn_down.weight"));
    L.post_ffn_norm = optional_tensor(f, blk(il, "post_ffw_norm.weight"));
    layers_.push_back(std::move(L));
  }
  k_cache_.resize(static_cast<size_t>(c_.n_layers));
  v_cache_.resize(static_cast<size_t>(c_.n_layers));
}

std::vector<float> ReferenceModel::prefill(std::span<const int32_t> tokens) {
  std::vector<float> logits;
  for (size_t i = 0; i < tokens.size(); ++i) logits = step(tokens[i], static_cast<int64_t>(i));
  return logits;
}

std::vector<float> ReferenceModel::step(int32_t token, int64_t pos) {
  const int64_t dim = c_.n_embd, hd = c_.head_dim, nh = c_.n_heads, nkv = c_.n_kv_heads;
  const int64_t q_dim = nh * hd, kv_dim = nkv * hd, ff = c_.n_ff;
  if (token < 0 || token >= c_.n_vocab) throw std::out_of_range("reference: bad token");

  std::vector<float> x(token_embd_.begin() + token * dim, token_embd_.begin() + (token + 1) * dim);
  if (c_.gemma) {
    for (float& e : x) e *= std::sqrt(static_cast<float>(dim));
  }

  for (int64_t il = 0; il < c_.n_layers; ++il) {
    const Layer& L = layers_[size_t(il)];
    const bool swa = c_.swa_layer(il);

    // Attention block.
    std::vector<float> xb = x;
    rmsnorm(xb, 0, dim, L.attn_norm, c_.eps);
    std::vector<float> q = L.wq * xb;
    std::vector<float> k = L.wk * xb;
    std::vector<float> v = L.wv * xb;
    if (!L.bq.empty()) {
      for (int64_t i = 0; i < q_dim; ++i) q[size_t(i)] += L.bq[size_t(i)];
      for (int64_t i = 0; i < kv_dim; ++i) k[size_t(i)] += L.bk[size_t(i)];
      for (int64_t i = 0; i < kv_dim; ++i) v[size_t(i)] += L.bv[size_t(i)];
    }
    if (!L.q_norm.empty()) {
      for (int64_t h = 0; h < nh; ++h) rmsnorm(q, h * hd, hd, L.q_norm, c_.eps);
      for (int64_t h = 0; h < nkv; ++h) rmsnorm(k, h * hd, hd, L.k_norm, c_.eps);
    }
    const float base = swa ? c_.rope_base_local : c_.rope_base;
    const float fscale = swa ? 1.0f : c_.rope_freq_scale;
    const std::vector<float> none;
    const std::vector<float>& div = swa ? none : c_.rope_divisors;
    rope(q, nh, hd, pos, base, fscale, c_.neox, div);
    rope(k, nkv, hd, pos, base, fscale, c_.neox, div);
    std::vector<float>& kc = k_cache_[size_t(il)];
    std::vector<float>& vc = v_cache_[size_t(il)];
    kc.resize(size_t((pos + 1) * kv_dim));
    vc.resize(size_t((pos + 1) * kv_dim));
    for (int64_t i = 0; i < kv_dim; ++i) {
      kc[size_t(pos * kv_dim + i)] = opts_.f16_kv ? round_to_f16(k[size_t(i)]) : k[size_t(i)];
      vc[size_t(pos * kv_dim + i)] = opts_.f16_kv ? round_to_f16(v[size_t(i)]) : v[size_t(i)];
    }

    std::vector<float> att(size_t(q_dim), 0.0f);
    const int64_t lo = swa ? std::max<int64_t>(0, pos - c_.window + 1) : 0;
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t kvh = h / (nh / nkv);
      std::vector<double> s;
      for (int64_t p = lo; p <= pos; ++p) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) {
          dot += double(q[size_t(h * hd + d)]) * kc[size_t(p * kv_dim + kvh * hd + d)];
        }
        s.push_back(dot * c_.attn_scale);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t p = lo; p <= pos; ++p) {
          acc += s[size_t(p - lo)] / sum * vc[size_t(p * kv_dim + kvh * hd + d)];
        }
        att[size_t(h * hd + d)] = static_cast<float>(acc);
      }
    }
    std::vector<float> proj = L.wo * att;
    if (!L.post_attn_norm.empty()) rmsnorm(proj, 0, dim, L.post_attn_norm, c_.eps);
    for (int64_t i = 0; i < dim; ++i) x[size_t(i)] += proj[size_t(i)];

    // Feed-forward block.
    xb = x;
    rmsnorm(xb, 0, dim, L.ffn_norm, c_.eps);
    const std::vector<float> g = L.w_gate * xb;
    const std::vector<float> u = L.w_up * xb;
    std::vector<float> h(static_cast<size_t>(ff));
    for (int64_t i = 0; i < ff; ++i) {
      const double gi = g[size_t(i)];
      const double act =
          c_.gemma
              ? 0.5 * gi * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (gi + 0.044715 * gi * gi * gi)))
              : gi / (1.0 + std::exp(-gi));
      h[size_t(i)] = static_cast<float>(act * u[size_t(i)]);
    }
    std::vector<float> down = L.w_down * h;
    if (!L.post_ffn_norm.empty()) rmsnorm(down, 0, dim, L.post_ffn_norm, c_.eps);
    for (int64_t i = 0; i < dim; ++i) x[size_t(i)] += down[size_t(i)];
  }

  rmsnorm(x, 0, dim, output_norm_, c_.eps);
  std::vector<float> logits = output_ * x;
  if (c_.logit_softcap > 0) {
    for (float& l : logits) l = c_.logit_softcap * std::tanh(l / c_.logit_softcap);
  }
  return logits;
}

}  // namespace pacer::testref
