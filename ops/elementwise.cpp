#include "ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/elementwise_kernels.h"
#include "ops/exp_range.h"
#include "ops/kernel_set.h"

namespace pacer::ops {
namespace {

// ---- Scalar kernels: plain C++ straight from the math (the table every SIMD table is tested
// against). Sums run in double so the reference is the more accurate side of any comparison.

void rmsnorm_scalar(const float* x, const float* w, float eps, float* out, int64_t n) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * inv_rms * w[i]);
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

// ggml's GELU (tanh approximation): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

void swiglu_scalar(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(g[i]) * u[i];
}

void geglu_scalar(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(g[i]) * u[i];
}

void softmax_scalar(float* x, int64_t n) {
  if (n == 0) return;
  const float max = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = exp_flushed(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void add_scalar(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void scale_scalar(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

constexpr ElementwiseKernels kScalarKernels{rmsnorm_scalar, swiglu_scalar, geglu_scalar,
                                            softmax_scalar, add_scalar,    scale_scalar};

void check_same_size(const char* op, size_t a, size_t b) {
  if (a != b) {
    throw std::invalid_argument(std::string("ops::") + op + ": span sizes differ (" +
                                std::to_string(a) + " vs " + std::to_string(b) + ")");
  }
}

void check_rope(std::span<float> x, int n_heads, const RopeParams& p) {
  if (p.head_dim <= 0 || p.n_rot <= 0 || p.n_rot > p.head_dim || p.n_rot % 2 != 0 || n_heads < 0 ||
      x.size() != static_cast<size_t>(n_heads) * p.head_dim) {
    throw std::invalid_argument("ops::rope: bad shape (head_dim " + std::to_string(p.head_dim) +
                                ", n_rot " + std::to_string(p.n_rot) + ", n_heads " +
                                std::to_string(n_heads) + ", x.size() " + std::to_string(x.size()) +
                                "); n_rot must be even and <= head_dim");
  }
}

// theta_i = pos * freq_scale * base^(-2i/n_rot), in double: at positions ~1e5 a float theta
// would already be off by ~1e-2 rad.
double rope_theta(int64_t pos, int i, const RopeParams& p) {
  const double theta = static_cast<double>(pos) * p.freq_scale *
                       std::pow(static_cast<double>(p.base), -2.0 * i / p.n_rot);
  return p.freq_factors ? theta / p.freq_factors[i] : theta;
}

// The two elements pair i of a head rotates together, per layout.
std::pair<int, int> rope_pair(int i, const RopeParams& p) {
  return p.layout == RopeLayout::Normal ? std::pair{2 * i, 2 * i + 1}
                                        : std::pair{i, i + p.n_rot / 2};
}

}  // namespace

const ElementwiseKernels& elementwise_kernels(Isa isa) noexcept {
  switch (isa) {
    case Isa::Avx512:
      return elementwise_kernels_avx512();
    case Isa::Avx2:
      return elementwise_kernels_avx2();
    case Isa::Scalar:
      break;
  }
  return kScalarKernels;
}

void rmsnorm(std::span<const float> x, std::span<const float> w, float eps, std::span<float> out,
             const KernelSet& kernels) {
  check_same_size("rmsnorm", x.size(), w.size());
  check_same_size("rmsnorm", x.size(), out.size());
  if (x.empty()) return;
  kernels.elementwise().rmsnorm(x.data(), w.data(), eps, out.data(),
                                static_cast<int64_t>(x.size()));
}

void rmsnorm_ref(std::span<const float> x, std::span<const float> w, float eps,
                 std::span<float> out) {
  check_same_size("rmsnorm_ref", x.size(), w.size());
  check_same_size("rmsnorm_ref", x.size(), out.size());
  if (x.empty()) return;
  rmsnorm_scalar(x.data(), w.data(), eps, out.data(), static_cast<int64_t>(x.size()));
}

void rope_ref(std::span<float> x, int n_heads, int64_t pos, const RopeParams& p) {
  check_rope(x, n_heads, p);
  for (int h = 0; h < n_heads; ++h) {
    float* head = x.data() + static_cast<size_t>(h) * p.head_dim;
    for (int i = 0; i < p.n_rot / 2; ++i) {
      const double theta = rope_theta(pos, i, p);
      const auto [a, b] = rope_pair(i, p);
      const double x0 = head[a], x1 = head[b];
      const double c = std::cos(theta) * p.mscale, sn = std::sin(theta) * p.mscale;
      head[a] = static_cast<float>(x0 * c - x1 * sn);
      head[b] = static_cast<float>(x0 * sn + x1 * c);
    }
  }
}

namespace {

// cos_t[i - i0], sin_t[i - i0] for pairs [i0, i1).
void rope_angles_range(int64_t pos, const RopeParams& p, int i0, int i1, float* cos_t,
                       float* sin_t) {
  for (int i = i0; i < i1; ++i) {
    const double theta = rope_theta(pos, i, p);
    cos_t[i - i0] = static_cast<float>(std::cos(theta) * p.mscale);
    sin_t[i - i0] = static_cast<float>(std::sin(theta) * p.mscale);
  }
}

// Pairs [i0, i1) of every head rotated by cos_t[i - i0], sin_t[i - i0].
void rope_rotate_range(std::span<float> x, int n_heads, const RopeParams& p, int i0, int i1,
                       const float* cos_t, const float* sin_t) {
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x.data() + static_cast<size_t>(h) * p.head_dim;
    if (p.layout == RopeLayout::Neox) {
      float* lo = head;
      float* hi = head + half;
      for (int i = i0; i < i1; ++i) {
        const float c = cos_t[i - i0], s = sin_t[i - i0];
        const float x0 = lo[i], x1 = hi[i];
        lo[i] = x0 * c - x1 * s;
        hi[i] = x0 * s + x1 * c;
      }
    } else {
      for (int i = i0; i < i1; ++i) {
        const float c = cos_t[i - i0], s = sin_t[i - i0];
        const float x0 = head[2 * i], x1 = head[2 * i + 1];
        head[2 * i] = x0 * c - x1 * s;
        head[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace

// Same math as rope_ref, but cos/sin are computed once per pair for all heads (the trig is the
// cost; the rotation is a few flops). Pairs go in blocks through a stack table, so any n_rot works
// without allocating.
void rope(std::span<float> x, int n_heads, int64_t pos, const RopeParams& p) {
  check_rope(x, n_heads, p);
  constexpr int kBlock = 256;
  float cos_t[kBlock], sin_t[kBlock];
  const int half = p.n_rot / 2;
  for (int i0 = 0; i0 < half; i0 += kBlock) {
    const int i1 = std::min(half, i0 + kBlock);
    rope_angles_range(pos, p, i0, i1, cos_t, sin_t);
    rope_rotate_range(x, n_heads, p, i0, i1, cos_t, sin_t);
  }
}

void rope_angles(int64_t pos, const RopeParams& p, float* cos_t, float* sin_t) {
  check_rope(std::span<float>(), 0, p);
  rope_angles_range(pos, p, 0, p.n_rot / 2, cos_t, sin_t);
}

void rope_rotate(std::span<float> x, int n_heads, const RopeParams& p, const float* cos_t,
                 const float* sin_t) {
  check_rope(x, n_heads, p);
  rope_rotate_range(x, n_heads, p, 0, p.n_rot / 2, cos_t, sin_t);
}

void swiglu(std::span<const float> gate, std::span<const float> up, std::span<float> out,
            const KernelSet& kernels) {
  check_same_size("swiglu", gate.size(), up.size());
  check_same_size("swiglu", gate.size(), out.size());
  kernels.elementwise().swiglu(gate.data(), up.data(), out.data(),
                               static_cast<int64_t>(out.size()));
}

void geglu(std::span<const float> gate, std::span<const float> up, std::span<float> out,
           const KernelSet& kernels) {
  check_same_size("geglu", gate.size(), up.size());
  check_same_size("geglu", gate.size(), out.size());
  kernels.elementwise().geglu(gate.data(), up.data(), out.data(), static_cast<int64_t>(out.size()));
}

void softmax(std::span<float> x, const KernelSet& kernels) {
  kernels.elementwise().softmax(x.data(), static_cast<int64_t>(x.size()));
}

void add(std::span<const float> a, std::span<const float> b, std::span<float> out,
         const KernelSet& kernels) {
  check_same_size("add", a.size(), b.size());
  check_same_size("add", a.size(), out.size());
  kernels.elementwise().add(a.data(), b.data(), out.data(), static_cast<int64_t>(out.size()));
}

void scale(std::span<float> x, float s, const KernelSet& kernels) {
  kernels.elementwise().scale(x.data(), s, static_cast<int64_t>(x.size()));
}

void embedding_row(const WeightMatrix& table, int64_t token, std::span<float> out) {
  if (token < 0 || token >= table.rows) {
    throw std::out_of_range("ops::embedding_row: token id " + std::to_string(token) +
                            " outside the table's " + std::to_string(table.rows) + " rows");
  }
  if (out.size() != static_cast<size_t>(table.cols)) {
    throw std::invalid_argument("ops::embedding_row: out has " + std::to_string(out.size()) +
                                " elements, the table's rows have " + std::to_string(table.cols));
  }
  check_matrix(table);
  dequantize_row(table.type, table.row(token), out.data(), table.cols);
}

}  // namespace pacer::ops
