// Elementwise kernels: every Isa's table against double-precision math computed here, the public
// entry points against their _ref, RoPE against hand-computed rotations and its invariants, and the
// embedding lookup against rows written another way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <stdexcept>
#include <vector>

#include "ops/elementwise.h"
#include "ops/elementwise_kernels.h"
#include "ops/fp16.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"

namespace pacer::ops {
namespace {

// Lengths around every SIMD width (8, 16) and their unrolled multiples, plus one large.
const std::vector<int64_t> kLengths = {1,  2,  3,  7,  8,  9,   15,  16,   17,  31,
                                       32, 33, 63, 64, 65, 100, 257, 1000, 5632};

// Activations: exp-based kernels hold ~2 ulp (own exp, one division); the allowance for |g * u|
// covers the float reference's 1 + tanh(z) near z = -inf, whose error is absolute (~ulp(1)).
constexpr double kActRelTol = 4e-6;
constexpr double kActAbsTolPerGU = 2.5e-7;
// Sums of n squares / exponentials in float: relative error grows ~ sqrt(n) * 2^-24.
constexpr double kSumRelTol = 2e-5;

std::vector<float> random_floats(int64_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

double silu_d(double x) {
  return x / (1.0 + std::exp(-x));
}
double gelu_d(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

class ElementwiseIsa : public ::testing::TestWithParam<Isa> {
 protected:
  const ElementwiseKernels& k() const { return elementwise_kernels(GetParam()); }
};

TEST_P(ElementwiseIsa, SwigluMatchesDoubleMath) {
  for (int64_t n : kLengths) {
    const auto g = random_floats(n, 4.0f, 1 + n), u = random_floats(n, 1.0f, 2 + n);
    std::vector<float> out(n);
    k().swiglu(g.data(), u.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = silu_d(g[i]) * u[i];
      ASSERT_NEAR(out[i], want,
                  kActRelTol * std::abs(want) + kActAbsTolPerGU * std::abs(g[i] * u[i]))
          << "n=" << n << " i=" << i << " g=" << g[i];
    }
  }
}

TEST_P(ElementwiseIsa, GegluMatchesDoubleMath) {
  for (int64_t n : kLengths) {
    const auto g = random_floats(n, 3.0f, 3 + n), u = random_floats(n, 1.0f, 4 + n);
    std::vector<float> out(n);
    k().geglu(g.data(), u.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = gelu_d(g[i]) * u[i];
      ASSERT_NEAR(out[i], want,
                  kActRelTol * std::abs(want) + kActAbsTolPerGU * std::abs(g[i] * u[i]))
          << "n=" << n << " i=" << i << " g=" << g[i];
    }
  }
}

TEST_P(ElementwiseIsa, ActivationsSaturateAtExtremes) {
  // Far outside the exp range: silu(x) -> x for large x, -> -0 for very negative x; same for gelu.
  const std::vector<float> g = {-1e30f, -500.0f, -90.0f, -20.0f, 0.0f, 20.0f, 90.0f, 500.0f, 1e30f};
  const std::vector<float> u(g.size(), 1.0f);
  std::vector<float> s(g.size()), e(g.size());
  const int64_t n = static_cast<int64_t>(g.size());
  k().swiglu(g.data(), u.data(), s.data(), n);
  k().geglu(g.data(), u.data(), e.data(), n);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_FALSE(std::isnan(s[i])) << g[i];
    EXPECT_FALSE(std::isnan(e[i])) << g[i];
    if (g[i] >= 20.0f) {
      EXPECT_NEAR(s[i], g[i], 1e-6 * g[i]) << g[i];
      EXPECT_FLOAT_EQ(e[i], g[i]) << g[i];
    }
    if (g[i] <= -90.0f) {
      EXPECT_NEAR(s[i], 0.0f, 1e-30f) << g[i];
      EXPECT_NEAR(e[i], 0.0f, 1e-30f) << g[i];
    }
  }
  EXPECT_EQ(s[4], 0.0f);
  EXPECT_EQ(e[4], 0.0f);
}

TEST_P(ElementwiseIsa, RmsnormMatchesDoubleMath) {
  for (int64_t n : kLengths) {
    const auto x = random_floats(n, 2.0f, 5 + n), w = random_floats(n, 1.0f, 6 + n);
    std::vector<float> out(n);
    k().rmsnorm(x.data(), w.data(), 1e-6f, out.data(), n);
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t i = 0; i < n; ++i) {
      const double want = x[i] * inv * w[i];
      ASSERT_NEAR(out[i], want, kSumRelTol * std::abs(want) + 1e-30) << "n=" << n << " i=" << i;
    }
  }
}

TEST_P(ElementwiseIsa, RmsnormInPlaceAndEpsDominated) {
  // All-zero input: the result is 0 (eps keeps the denominator finite), not NaN.
  std::vector<float> zeros(37, 0.0f), w(37, 1.0f);
  k().rmsnorm(zeros.data(), w.data(), 1e-5f, zeros.data(), 37);
  for (float v : zeros) EXPECT_EQ(v, 0.0f);
  // out aliasing x gives what a separate buffer gives.
  auto x = random_floats(100, 1.0f, 7);
  const auto w2 = random_floats(100, 1.0f, 8);
  std::vector<float> sep(100);
  k().rmsnorm(x.data(), w2.data(), 1e-5f, sep.data(), 100);
  k().rmsnorm(x.data(), w2.data(), 1e-5f, x.data(), 100);
  EXPECT_EQ(x, sep);
}

TEST_P(ElementwiseIsa, SoftmaxMatchesDoubleMath) {
  for (int64_t n : kLengths) {
    auto x = random_floats(n, 5.0f, 9 + n);
    const auto orig = x;
    k().softmax(x.data(), n);
    double mx = -INFINITY, sum = 0;
    for (float v : orig) mx = std::max<double>(mx, v);
    for (float v : orig) sum += std::exp(v - mx);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(orig[i] - mx) / sum;
      ASSERT_NEAR(x[i], want, kSumRelTol * want + 1e-12) << "n=" << n << " i=" << i;
      total += x[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << n;
  }
}

TEST_P(ElementwiseIsa, SoftmaxIsStableForHugeLogitsAndKeepsMinusInf) {
  std::vector<float> x = {1e30f, 1e30f, -INFINITY, 1e30f - 1e24f, 0.0f};
  k().softmax(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_FLOAT_EQ(x[1], 0.5f);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_EQ(x[4], 0.0f);
}

// Softmax weights are 0 where e^x would be a subnormal float (x < -87.3; ops/exp_range.h says why:
// a subnormal result can cost a microcode assist per instruction), on every tier, and keep their
// accuracy just above.
TEST_P(ElementwiseIsa, SoftmaxWeightsBelowTheNormalRangeAreZero) {
  // Offsets from the max: e^-87.2 = 1.35e-38 is normal; e^-87.4 = 1.10e-38, e^-95 = 5.5e-42 and
  // e^-103 = 1.5e-45 are subnormal; e^-110 underflows to 0 anyway.
  const std::vector<float> offsets = {0.0f, -87.2f, -87.4f, -95.0f, -103.0f, -110.0f, -1.0f};
  std::vector<float> x(33);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3.0f + offsets[i % offsets.size()];
  const auto orig = x;
  k().softmax(x.data(), static_cast<int64_t>(x.size()));
  double sum = 0;
  for (float v : orig) sum += std::exp(static_cast<double>(v) - 3.0);
  for (size_t i = 0; i < x.size(); ++i) {
    const double off = orig[i] - 3.0, want = std::exp(off) / sum;
    if (off >= -87.3) {
      ASSERT_NEAR(x[i], want, kSumRelTol * want + 1e-44) << i << " offset " << off;
    } else {
      ASSERT_EQ(x[i], 0.0f) << i << " offset " << off;
    }
  }
  EXPECT_GT(x[1], 0.0f);  // -87.2: kept (then divided by the sum, ~6.8)
}

TEST_P(ElementwiseIsa, AddAndScaleAreExact) {
  for (int64_t n : kLengths) {
    const auto a = random_floats(n, 1.0f, 10 + n), b = random_floats(n, 1.0f, 11 + n);
    std::vector<float> out(n);
    k().add(a.data(), b.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]);
    k().scale(out.data(), 0.125f, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], (a[i] + b[i]) * 0.125f);
  }
}

TEST_P(ElementwiseIsa, KernelsDoNotWritePastTheEnd) {
  // A tail handled with full-width stores would clobber the guard elements.
  for (int64_t n : {1, 5, 13, 17, 30}) {
    auto x = random_floats(n + 16, 1.0f, 12);
    const auto w = random_floats(n + 16, 1.0f, 13);
    auto buf = random_floats(n + 16, 1.0f, 14);
    const std::vector<float> guard(buf.begin() + n, buf.end());
    k().rmsnorm(x.data(), w.data(), 1e-5f, buf.data(), n);
    k().swiglu(x.data(), w.data(), buf.data(), n);
    k().geglu(x.data(), w.data(), buf.data(), n);
    k().add(x.data(), w.data(), buf.data(), n);
    k().scale(buf.data(), 3.0f, n);
    k().softmax(buf.data(), n);
    EXPECT_EQ(std::vector<float>(buf.begin() + n, buf.end()), guard) << n;
  }
}

std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

INSTANTIATE_TEST_SUITE_P(Isas, ElementwiseIsa, ::testing::ValuesIn(supported_isas()), IsaParamName);

// The public entry points run the elementwise table of the KernelSet they are given.
TEST_P(ElementwiseIsa, PublicEntryPointsMatchReferences) {
  const KernelSet ks = KernelSet::for_isa(GetParam());
  const auto x = random_floats(2048, 1.5f, 20), w = random_floats(2048, 1.0f, 21);
  std::vector<float> a(2048), b(2048);
  rmsnorm(x, w, 1e-6f, a, ks);
  rmsnorm_ref(x, w, 1e-6f, b);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], kSumRelTol * std::abs(b[i]));
  swiglu(x, w, a, ks);
  for (size_t i = 0; i < a.size(); ++i) {
    const double want = silu_d(x[i]) * w[i];
    ASSERT_NEAR(a[i], want, kActRelTol * std::abs(want) + kActAbsTolPerGU * std::abs(x[i] * w[i]));
  }
  add(x, w, a, ks);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], x[i] + w[i]);
}

TEST(Elementwise, MismatchedSpansThrow) {
  const KernelSet ks = KernelSet::for_isa(detect_isa());
  std::vector<float> a(8), b(7);
  EXPECT_THROW(rmsnorm(a, b, 1e-5f, a, ks), std::invalid_argument);
  EXPECT_THROW(swiglu(a, b, a, ks), std::invalid_argument);
  EXPECT_THROW(geglu(a, a, b, ks), std::invalid_argument);
  EXPECT_THROW(add(a, b, a, ks), std::invalid_argument);
}

// ---- RoPE

// Rotates (a, b) by theta in double: the expectation for one pair.
std::pair<double, double> rotate(double a, double b, double theta) {
  return {a * std::cos(theta) - b * std::sin(theta), a * std::sin(theta) + b * std::cos(theta)};
}

TEST(Rope, NormalLayoutRotatesAdjacentPairsByHandComputedAngles) {
  // head_dim 4, base 10000: theta_0 = pos, theta_1 = pos * 10000^(-2/4) = pos / 100.
  RopeParams p{.head_dim = 4,
               .n_rot = 4,
               .base = 10000.0f,
               .freq_scale = 1.0f,
               .layout = RopeLayout::Normal};
  for (auto fn : {&rope, &rope_ref}) {
    std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
    fn(x, 1, 3, p);
    const auto [a0, b0] = rotate(1, 2, 3.0);
    const auto [a1, b1] = rotate(3, 4, 0.03);
    EXPECT_NEAR(x[0], a0, 1e-6);
    EXPECT_NEAR(x[1], b0, 1e-6);
    EXPECT_NEAR(x[2], a1, 1e-6);
    EXPECT_NEAR(x[3], b1, 1e-6);
    // cos(3) = -0.9899925, sin(3) = 0.1411200: (1, 2) -> (-1.2722325, -1.8388650)
    EXPECT_NEAR(x[0], -1.2722325f, 1e-6);
    EXPECT_NEAR(x[1], -1.8388650f, 1e-6);
  }
}

TEST(Rope, NeoxLayoutRotatesHalvesAndFreqScaleScalesPosition) {
  // Pairs are (x0, x2) and (x1, x3); freq_scale 0.5 at pos 6 is pos 3 unscaled.
  RopeParams p{
      .head_dim = 4, .n_rot = 4, .base = 10000.0f, .freq_scale = 0.5f, .layout = RopeLayout::Neox};
  for (auto fn : {&rope, &rope_ref}) {
    std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f, /*second head*/ 0.5f, 0.0f, 0.0f, 1.0f};
    fn(x, 2, 6, p);
    const auto [a0, b0] = rotate(1, 3, 3.0);
    const auto [a1, b1] = rotate(2, 4, 0.03);
    EXPECT_NEAR(x[0], a0, 1e-6);
    EXPECT_NEAR(x[2], b0, 1e-6);
    EXPECT_NEAR(x[1], a1, 1e-6);
    EXPECT_NEAR(x[3], b1, 1e-6);
    const auto [c0, d0] = rotate(0.5, 0, 3.0);
    const auto [c1, d1] = rotate(0, 1, 0.03);
    EXPECT_NEAR(x[4], c0, 1e-6);
    EXPECT_NEAR(x[6], d0, 1e-6);
    EXPECT_NEAR(x[5], c1, 1e-6);
    EXPECT_NEAR(x[7], d1, 1e-6);
  }
}

TEST(Rope, PartialRotationLeavesTrailingDimsAndPositionZeroIsIdentity) {
  for (RopeLayout layout : {RopeLayout::Normal, RopeLayout::Neox}) {
    RopeParams p{.head_dim = 16, .n_rot = 8, .base = 500.0f, .layout = layout};
    const auto orig = random_floats(3 * 16, 1.0f, 30);
    auto x = orig;
    rope(x, 3, 0, p);
    EXPECT_EQ(x, orig);
    rope(x, 3, 77, p);
    for (int h = 0; h < 3; ++h) {
      for (int d = 8; d < 16; ++d) EXPECT_EQ(x[h * 16 + d], orig[h * 16 + d]);
      for (int d = 0; d < 8; ++d) EXPECT_NE(x[h * 16 + d], orig[h * 16 + d]);
    }
  }
}

TEST(Rope, MatchesReferenceAndPreservesPairNorms) {
  for (RopeLayout layout : {RopeLayout::Normal, RopeLayout::Neox}) {
    for (int dim : {64, 128, 256}) {
      RopeParams p{.head_dim = dim, .n_rot = dim, .base = 1000000.0f, .layout = layout};
      for (int64_t pos : {1, 17, 4095, 131071}) {
        const auto orig = random_floats(4 * dim, 1.0f, static_cast<uint32_t>(dim + pos));
        auto a = orig, b = orig;
        rope(a, 4, pos, p);
        rope_ref(b, 4, pos, p);
        for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << i;
        for (int h = 0; h < 4; ++h) {
          for (int i = 0; i < dim / 2; ++i) {
            const int i0 = h * dim + (layout == RopeLayout::Normal ? 2 * i : i);
            const int i1 = h * dim + (layout == RopeLayout::Normal ? 2 * i + 1 : i + dim / 2);
            const double before = std::hypot(orig[i0], orig[i1]);
            ASSERT_NEAR(std::hypot(a[i0], a[i1]), before, 1e-6 * (1 + before));
          }
        }
      }
    }
  }
}

// The runtime computes a position's angles once (rope_angles) and rotates every layer's q and k by
// them (rope_rotate): the same floats as rope() for both layouts, partial rotation, frequency
// factors and mscale. rope_ref is the independent check of the values themselves (above).
TEST(Rope, AnglesThenRotateIsRopeBitForBit) {
  const std::vector<float> factors = random_floats(32, 1.0f, 50);
  std::vector<float> divisors(factors.size());
  for (size_t i = 0; i < factors.size(); ++i) divisors[i] = 1.0f + std::fabs(factors[i]);
  for (RopeLayout layout : {RopeLayout::Normal, RopeLayout::Neox}) {
    for (const float* ff :
         {static_cast<const float*>(nullptr), static_cast<const float*>(divisors.data())}) {
      RopeParams p{.head_dim = 64,
                   .n_rot = ff ? 64 : 48,
                   .base = 500000.0f,
                   .freq_scale = 0.25f,
                   .layout = layout,
                   .freq_factors = ff,
                   .mscale = ff ? 1.1f : 1.0f};
      for (int64_t pos : {0, 5, 4097, 100000}) {
        const auto orig = random_floats(5 * 64, 1.0f, static_cast<uint32_t>(pos + 3));
        auto a = orig, b = orig;
        rope(a, 5, pos, p);
        std::vector<float> cos_t(static_cast<size_t>(p.n_rot / 2)), sin_t(cos_t.size());
        rope_angles(pos, p, cos_t.data(), sin_t.data());
        rope_rotate(b, 5, p, cos_t.data(), sin_t.data());
        EXPECT_EQ(a, b) << "pos " << pos;
      }
    }
  }
  RopeParams bad{.head_dim = 64, .n_rot = 63};
  float c[32], s[32];
  EXPECT_THROW(rope_angles(1, bad, c, s), std::invalid_argument);
}

TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  // The property attention relies on: <R(m) q, R(n) k> = <R(m - n) q, k>.
  for (RopeLayout layout : {RopeLayout::Normal, RopeLayout::Neox}) {
    RopeParams p{.head_dim = 64, .n_rot = 64, .base = 10000.0f, .layout = layout};
    const auto q = random_floats(64, 1.0f, 40), k = random_floats(64, 1.0f, 41);
    auto dot_at = [&](int64_t m, int64_t n) {
      auto qr = q, kr = k;
      rope(qr, 1, m, p);
      rope(kr, 1, n, p);
      double s = 0;
      for (int i = 0; i < 64; ++i) s += static_cast<double>(qr[i]) * kr[i];
      return s;
    };
    EXPECT_NEAR(dot_at(10, 7), dot_at(3, 0), 1e-4);
    EXPECT_NEAR(dot_at(1000, 997), dot_at(3, 0), 1e-3);
  }
}

TEST(Rope, NeoxEqualsNormalOnInterleavedHalves) {
  // Neox pairs (i, i + d/2) are Normal's pairs (2i, 2i + 1) after interleaving the halves.
  const int dim = 32;
  const auto x = random_floats(dim, 1.0f, 50);
  std::vector<float> inter(dim);
  for (int i = 0; i < dim / 2; ++i) {
    inter[2 * i] = x[i];
    inter[2 * i + 1] = x[i + dim / 2];
  }
  auto neox = x;
  rope(neox, 1, 321, {.head_dim = dim, .n_rot = dim, .layout = RopeLayout::Neox});
  rope(inter, 1, 321, {.head_dim = dim, .n_rot = dim, .layout = RopeLayout::Normal});
  for (int i = 0; i < dim / 2; ++i) {
    EXPECT_EQ(neox[i], inter[2 * i]);
    EXPECT_EQ(neox[i + dim / 2], inter[2 * i + 1]);
  }
}

TEST(Rope, BadShapesThrow) {
  std::vector<float> x(64);
  EXPECT_THROW(rope(x, 2, 0, {.head_dim = 32, .n_rot = 33}), std::invalid_argument);
  EXPECT_THROW(rope(x, 2, 0, {.head_dim = 32, .n_rot = 64}), std::invalid_argument);
  EXPECT_THROW(rope(x, 3, 0, {.head_dim = 32, .n_rot = 32}), std::invalid_argument);
}

// ---- Embedding lookup

TEST(Embedding, F32AndF16RowsComeBackExactly) {
  const int64_t rows = 5, cols = 48;
  const auto values = random_floats(rows * cols, 1.0f, 60);
  std::vector<std::byte> f16(rows * cols * 2);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const fp16_t h = fp32_to_fp16(values[i]);
    std::memcpy(f16.data() + 2 * i, &h, 2);
  }
  WeightMatrix t32{WeightType::F32, reinterpret_cast<const std::byte*>(values.data()), rows, cols};
  WeightMatrix t16{WeightType::F16, f16.data(), rows, cols};
  std::vector<float> out(cols);
  embedding_row(t32, 3, out);
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(out[c], values[3 * cols + c]);
  embedding_row(t16, 4, out);
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(out[c], fp16_to_fp32(fp32_to_fp16(values[4 * cols + c])));
  }
}

TEST(Embedding, Q8_0RowIsScaleTimesQuants) {
  // Q8_0 block: fp16 scale d, then 32 int8 quants; value = d * q.
  const int64_t rows = 3, cols = 64;
  std::vector<std::byte> data(rows * (cols / 32) * 34);
  std::vector<float> want(rows * cols);
  for (int64_t b = 0; b < rows * cols / 32; ++b) {
    const float d = 0.25f * static_cast<float>(b + 1);
    const fp16_t dh = fp32_to_fp16(d);
    std::memcpy(data.data() + b * 34, &dh, 2);
    for (int i = 0; i < 32; ++i) {
      const int8_t q = static_cast<int8_t>((b * 37 + i * 11) % 255 - 127);
      std::memcpy(data.data() + b * 34 + 2 + i, &q, 1);
      want[b * 32 + i] = d * q;
    }
  }
  WeightMatrix t{WeightType::Q8_0, data.data(), rows, cols};
  std::vector<float> out(cols);
  for (int64_t r = 0; r < rows; ++r) {
    embedding_row(t, r, out);
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(out[c], want[r * cols + c]) << r << "," << c;
  }
}

TEST(Embedding, OutOfRangeTokenAndWrongWidthThrow) {
  std::vector<float> values(4 * 8);
  WeightMatrix t{WeightType::F32, reinterpret_cast<const std::byte*>(values.data()), 4, 8};
  std::vector<float> out(8), narrow(7);
  EXPECT_THROW(embedding_row(t, 4, out), std::out_of_range);
  EXPECT_THROW(embedding_row(t, -1, out), std::out_of_range);
  EXPECT_THROW(embedding_row(t, 0, narrow), std::invalid_argument);
}

}  // namespace
}  // namespace pacer::ops
