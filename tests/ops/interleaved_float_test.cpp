// The F16 / BF16 x16 layout (ops/interleaved.h): the repack against the layout's description, the
// scalar reference against the row-major reference dot, the AVX-512 and AVX2 GEMVs against a
// scalar fmaf loop in the order they document (bit for bit), the GEMMs against the GEMV and an
// exact double dot, the two tiers against each other (bit for bit), and matmul() over an
// InterleavedMatrix on every Isa.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/bf16.h"
#include "ops/f16.h"
#include "ops/f32.h"
#include "ops/fp16.h"
#include "ops/interleaved.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

struct Case {
  int64_t rows, cols;
};
// Rows around the group of 16 and cols around the GEMV's 8-column step (tails of 1..7 columns),
// up to a real row length; 100, 200, 300 and 263 rows (7, 13, 19 and 17 groups) for the far-apart
// stream order of the GEMV (4 streams from 4 groups) and the few-token GEMM (2 streams from 2),
// with the groups left over after the streams (7 and 13 groups: one worker's share on many
// threads).
const Case kCases[] = {{1, 1},    {15, 7},   {16, 8},   {17, 13},   {40, 64},   {33, 200},
                       {100, 64}, {200, 40}, {300, 72}, {263, 136}, {48, 2051}, {20, 5632}};

float row_major_ref(WeightType t, int64_t n, const std::byte* row, const std::byte* act) {
  return t == WeightType::F16 ? dot_f16_f32_ref(n, row, act) : dot_bf16_f32_ref(n, row, act);
}

// The exact dot of row r with x (the weights as the kernels see them, products and sums in
// double) and sum |w x|, for error bounds.
struct Exact {
  double value, abs_sum;
};
// With bf16_x, the activations rounded to bf16 first (the vdpbf16ps prefill).
Exact exact_dot(const testing::OwnedMatrix& w, int64_t r, const float* x, bool bf16_x = false) {
  Exact e{0, 0};
  for (int64_t c = 0; c < w.view.cols; ++c) {
    const float xc = bf16_x ? bf16_to_fp32(fp32_to_bf16(x[c])) : x[c];
    const double p = double(w.dequantized[r * w.view.cols + c]) * xc;
    e.value += p;
    e.abs_sum += std::fabs(p);
  }
  return e;
}
// What the GEMV documents: column c into partial sum c % 4 with one fused multiply-add each, in
// column order, then (p0 + p1) + (p2 + p3), all in float.
float four_partial_sums(const testing::OwnedMatrix& w, int64_t r, const float* x) {
  float p[4] = {0, 0, 0, 0};
  for (int64_t c = 0; c < w.view.cols; ++c) {
    p[c % 4] = std::fma(w.dequantized[r * w.view.cols + c], x[c], p[c % 4]);
  }
  return (p[0] + p[1]) + (p[2] + p[3]);
}
// A bound for the prefill GEMM (from 16 tokens): chunks of 128 summed in order, then the chunk
// sums.
double prefill_bound(const Exact& e, int64_t n) {
  return double(std::min<int64_t>(n, 128) + n / 128 + 4) * kUnitRoundoff * e.abs_sum + 1e-30;
}
// The vdpbf16ps GEMM: exact products, two partial sums of n / 2 rounded additions each.
double bf16_dot_bound(const Exact& e, int64_t n) {
  return double(n / 2 + 4) * kUnitRoundoff * e.abs_sum + 1e-30;
}
// Whether the prefill GEMMs of `type` on `isa` round activations to bf16 (KernelSet's choice).
bool bf16_dot(WeightType type, Isa isa, int64_t tokens) {
  return type == WeightType::BF16 && isa == Isa::Avx512 && bf16_dot_prefill() && tokens >= 8;
}

// One tier's F16 / BF16 kernels.
struct FloatTier {
  Isa isa;
  X16GemvFn gemv;
  X16GemmFn gemm, gemm_few;
  X16GemmPreparedFn gemm_prepared;
  GemmPrepareFn prepare;
};
FloatTier float_tier(Isa isa, WeightType t) {
  const bool f16 = t == WeightType::F16;
  if (isa == Isa::Avx512) {
    return {isa,
            f16 ? gemv_f16x16_f32_avx512 : gemv_bf16x16_f32_avx512,
            f16 ? gemm_f16x16_f32_avx512 : gemm_bf16x16_f32_avx512,
            f16 ? gemm_few_f16x16_f32_avx512 : gemm_few_bf16x16_f32_avx512,
            f16 ? gemm_prepared_f16x16_f32_avx512 : gemm_prepared_bf16x16_f32_avx512,
            gemm_prepare_f32_avx512};
  }
  return {isa,
          f16 ? gemv_f16x16_f32_avx2 : gemv_bf16x16_f32_avx2,
          f16 ? gemm_f16x16_f32_avx2 : gemm_bf16x16_f32_avx2,
          f16 ? gemm_few_f16x16_f32_avx2 : gemm_few_bf16x16_f32_avx2,
          f16 ? gemm_prepared_f16x16_f32_avx2 : gemm_prepared_bf16x16_f32_avx2,
          gemm_prepare_f32_avx2};
}
// The tiers with F16 / BF16 kernels this machine runs.
std::vector<Isa> float_tiers() {
  std::vector<Isa> tiers;
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (isa_supported(isa)) tiers.push_back(isa);
  }
  return tiers;
}
X16GemvFn reference_gemv(WeightType t) {
  return t == WeightType::F16 ? gemv_f16x16_f32_ref : gemv_bf16x16_f32_ref;
}

class InterleavedFloat : public ::testing::TestWithParam<WeightType> {};

// The layout, as interleaved.h describes it: F16 column c of row i at 32c + 2i; BF16 column
// pairs of 64 bytes, row i's elements 2p and 2p + 1 in dword i (low, high half). Every other byte
// (padding rows, BF16's padding column) is zero.
TEST_P(InterleavedFloat, RepackPutsEveryElementWhereTheLayoutSays) {
  const WeightType type = GetParam();
  const bool f16 = type == WeightType::F16;
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 7);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = (c.rows + 15) / 16;
    const int64_t group_bytes = f16 ? 32 * c.cols : 64 * ((c.cols + 1) / 2);
    ASSERT_EQ(m.storage_bytes(), groups * group_bytes);
    ASSERT_EQ(m.view().layout, WeightLayout::Interleaved16);
    std::vector<std::byte> want(static_cast<size_t>(groups * group_bytes), std::byte{0});
    for (int64_t r = 0; r < c.rows; ++r) {
      const int64_t g = r / 16, i = r % 16;
      for (int64_t col = 0; col < c.cols; ++col) {
        const int64_t at =
            g * group_bytes + (f16 ? 32 * col + 2 * i : 64 * (col / 2) + 4 * i + 2 * (col % 2));
        std::memcpy(&want[static_cast<size_t>(at)], w.view.row(r) + 2 * col, 2);
      }
    }
    for (size_t b = 0; b < want.size(); ++b) {
      ASSERT_EQ(m.view().data[b], want[b]) << c.rows << "x" << c.cols << " byte " << b;
    }
  }
}

TEST_P(InterleavedFloat, ScalarReferenceEqualsTheRowMajorReferenceBitForBit) {
  const WeightType type = GetParam();
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 11);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(c.cols), 12);
    const auto* act = reinterpret_cast<const std::byte*>(x.data());
    const int64_t groups = x16_groups(c.rows);
    std::vector<float> y(static_cast<size_t>(groups * 16), NAN);
    reference_gemv(type)(c.cols, m.view().data, groups, act, y.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      ASSERT_EQ(y[r], row_major_ref(type, c.cols, w.view.row(r), act)) << "row " << r;
    }
    for (int64_t r = c.rows; r < groups * 16; ++r) EXPECT_EQ(y[r], 0.0f) << "padding row " << r;
  }
}

TEST_P(InterleavedFloat, GemvSumsInItsDocumentedOrderBitForBit) {
  if (float_tiers().empty()) GTEST_SKIP() << "no AVX2 here";
  const WeightType type = GetParam();
  for (const Isa isa : float_tiers()) {
    const FloatTier tier = float_tier(isa, type);
    for (const Case c : kCases) {
      const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 21);
      const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(c.cols), 22);
      const int64_t groups = x16_groups(c.rows);
      std::vector<float> y(static_cast<size_t>(groups * 16), NAN);
      tier.gemv(c.cols, m.view().data, groups, reinterpret_cast<const std::byte*>(x.data()),
                y.data());
      for (int64_t r = 0; r < c.rows; ++r) {
        ASSERT_EQ(y[r], four_partial_sums(w, r, x.data()))
            << isa_name(isa) << " " << c.rows << "x" << c.cols << " row " << r;
        const Exact e = exact_dot(w, r, x.data());
        ASSERT_NEAR(y[r], e.value, double(c.cols / 4 + 3) * kUnitRoundoff * e.abs_sum + 1e-30);
      }
      for (int64_t r = c.rows; r < groups * 16; ++r) {
        EXPECT_EQ(y[r], 0.0f) << isa_name(isa) << " padding row " << r;
      }
    }
  }
}

// Below 16 tokens the GEMM is the GEMV per token, bit for bit (the scalar fmaf loop in the GEMV's
// order, whatever the token tiling: 4, 3, 2, 1 per pass); from 16 on (rows in lanes, with its own
// transposed activations or matmul()'s shared copy) within float reassociation of the exact dot.
TEST_P(InterleavedFloat, GemmsMatchTheGemvAndTheExactDot) {
  if (float_tiers().empty()) GTEST_SKIP() << "no AVX2 here";
  const WeightType type = GetParam();
  for (const Isa isa : float_tiers()) {
    const FloatTier tier = float_tier(isa, type);
    for (const Case c : kCases) {
      if (c.cols > 2051) continue;  // the GEMV test covers the longest rows
      const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 31);
      const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
      const int64_t groups = x16_groups(c.rows), padded = groups * 16;
      for (int64_t tokens : {2, 3, 4, 5, 7, 8, 11, 15, 16, 19, 64, 70, 131}) {
        if (tokens > 70 && c.cols > 200) continue;  // 3 blocks of 64: the short rows suffice
        const std::vector<float> x =
            testing::normal_floats(static_cast<size_t>(tokens * c.cols), 32);
        const auto* act = reinterpret_cast<const std::byte*>(x.data());
        const int64_t act_stride = c.cols * 4;
        std::vector<float> y(static_cast<size_t>(tokens * padded), NAN);
        tier.gemm(c.cols, m.view().data, groups, act, act_stride, tokens, y.data(), padded);
        const int64_t bytes = tier.prepare(c.cols, act, act_stride, tokens, nullptr, 0, 1);
        std::vector<float> xt(static_cast<size_t>(bytes / 4 + 16));
        float* xt_aligned = xt.data() + (16 - reinterpret_cast<uintptr_t>(xt.data()) % 64 / 4) % 16;
        if (bytes > 0) {
          tier.prepare(c.cols, act, act_stride, tokens, reinterpret_cast<std::byte*>(xt_aligned), 0,
                       1);
        }
        std::vector<float> yf(static_cast<size_t>(tokens * padded), NAN);
        if (tokens < kX16FewTokensMax) {  // the entry matmul() takes below kX16FewTokensMax
          tier.gemm_few(c.cols, m.view().data, groups, act, act_stride, tokens, yf.data(), padded);
        }
        std::vector<float> yp(static_cast<size_t>(tokens * padded), NAN);
        tier.gemm_prepared(c.cols, m.view().data, groups, act, act_stride,
                           bytes > 0 ? reinterpret_cast<const std::byte*>(xt_aligned) : nullptr,
                           tokens, yp.data(), padded);
        for (int64_t t = 0; t < tokens; ++t) {
          const float* xr = x.data() + t * c.cols;
          for (int64_t r = 0; r < padded; ++r) {
            const float got = y[t * padded + r];
            const std::string where = std::string(isa_name(isa)) + " " + std::to_string(c.rows) +
                                      "x" + std::to_string(c.cols) + " " + std::to_string(tokens) +
                                      " tokens, t " + std::to_string(t) + " r " + std::to_string(r);
            ASSERT_EQ(got, yp[t * padded + r]) << "prepared: " << where;
            if (tokens < kX16FewTokensMax) {
              ASSERT_EQ(got, yf[t * padded + r]) << "gemm_few: " << where;
            }
            if (r >= c.rows) {
              ASSERT_EQ(got, 0.0f) << "padding row: " << where;
            } else if (tokens < 16) {
              ASSERT_EQ(got, four_partial_sums(w, r, xr)) << where;
            } else {
              const Exact e = exact_dot(w, r, xr);
              ASSERT_NEAR(got, e.value, prefill_bound(e, c.cols)) << where;
            }
          }
        }
      }
    }
  }
}

// The AVX2 kernels take the AVX-512 ones' steps per (row, token): a machine gives the same bits
// on either tier, GEMV and GEMMs (the lanes GEMM too: chunks of 128 columns, then their sums).
TEST_P(InterleavedFloat, Avx2AndAvx512KernelsAgreeBitForBit) {
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 here";
  const WeightType type = GetParam();
  const FloatTier a = float_tier(Isa::Avx2, type), b = float_tier(Isa::Avx512, type);
  for (const Case c : {Case{100, 300}, Case{263, 2051}, Case{20, 5632}}) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 41);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16;
    for (int64_t tokens : {1, 6, 16, 70}) {
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * c.cols), 42);
      const auto* act = reinterpret_cast<const std::byte*>(x.data());
      std::vector<float> ya(static_cast<size_t>(tokens * padded), NAN), yb = ya;
      if (tokens == 1) {
        a.gemv(c.cols, m.view().data, groups, act, ya.data());
        b.gemv(c.cols, m.view().data, groups, act, yb.data());
      } else {
        a.gemm(c.cols, m.view().data, groups, act, c.cols * 4, tokens, ya.data(), padded);
        b.gemm(c.cols, m.view().data, groups, act, c.cols * 4, tokens, yb.data(), padded);
      }
      for (size_t i = 0; i < ya.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(ya[i]), std::bit_cast<uint32_t>(yb[i]))
            << c.rows << "x" << c.cols << " " << tokens << " tokens, output " << i;
      }
    }
  }
}

// matmul() and matmul_rows() over the repacked view, GEMV and GEMMs, fused outputs and ranges
// that cut groups, on every Isa (below AVX2 the view runs the scalar reference).
TEST_P(InterleavedFloat, MatmulOverTheRepackedViewMatchesTheExactDot) {
  const WeightType type = GetParam();
  const int64_t cols = 72;
  const testing::OwnedMatrix a = testing::make_matrix(type, 40, cols, 51);
  const testing::OwnedMatrix b = testing::make_matrix(type, 24, cols, 52);
  const InterleavedMatrix ma = InterleavedMatrix::repack(a.view);
  const InterleavedMatrix mb = InterleavedMatrix::repack(b.view);
  for (Isa isa : supported_isas()) {
    const KernelSet ks = KernelSet::for_isa(isa);
    for (int64_t tokens : {1, 5, 12}) {
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), 53);
      auto check = [&](const testing::OwnedMatrix& w, const std::vector<float>& y, int64_t lo,
                       int64_t hi, const std::string& what) {
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < w.view.rows; ++r) {
            const float got = y[t * w.view.rows + r];
            if (r < lo || r >= hi) {
              ASSERT_EQ(got, -7.0f) << what << ": row " << r << " outside the range was written";
              continue;
            }
            const bool rounded = bf16_dot(type, isa, tokens);
            const Exact e = exact_dot(w, r, x.data() + t * cols, rounded);
            ASSERT_NEAR(got, e.value, rounded ? bf16_dot_bound(e, cols) : prefill_bound(e, cols))
                << what << " " << isa_name(isa) << " tokens " << tokens << " t " << t << " r " << r;
          }
        }
      };
      std::vector<float> ya(static_cast<size_t>(tokens * 40), -7.0f), yb(tokens * 24, -7.0f);
      PackedActivations scratch;
      const MatmulOutput outs[] = {{ma.view(), ya}, {mb.view(), yb}};
      matmul(outs, x, tokens, scratch, SerialParallel(3), ks);
      check(a, ya, 0, 40, "fused a");
      check(b, yb, 0, 24, "fused b");
      for (auto [lo, hi] : {std::pair<int64_t, int64_t>{5, 37}, {3, 9}, {16, 32}, {33, 40}}) {
        std::vector<float> y(static_cast<size_t>(tokens * 40), -7.0f);
        matmul_rows(ma.view(), scratch, y, lo, hi, ks);
        check(a, y, lo, hi, "range");
      }
    }
  }
}

TEST_P(InterleavedFloat, RepackPaysOnAvx2AndAvx512WithoutVnni) {
  const testing::OwnedMatrix w = testing::make_matrix(GetParam(), 16, 64, 1);
  EXPECT_EQ(InterleavedMatrix::pays(w.view, Isa::Avx512), isa_supported(Isa::Avx512));
  EXPECT_EQ(InterleavedMatrix::pays(w.view, Isa::Avx2), isa_supported(Isa::Avx2));
  EXPECT_FALSE(InterleavedMatrix::pays(w.view, Isa::Scalar));
  const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
  EXPECT_FALSE(InterleavedMatrix::pays(m.view(), Isa::Avx512));  // already interleaved
  EXPECT_THROW(InterleavedMatrix::repack(m.view()), MatmulError);
}

// The vdpbf16ps GEMM rounds the activations to bf16 (nearest even) from 8 tokens on and sums the
// exact products in fp32; the prepared and self-prepared entries agree bit for bit, and below 8
// tokens it is the exact fp32 path.
// The transposed activations of the lanes GEMMs (f32.h's gemm_prepare_f32_avx512 and _avx2),
// element by element against the layout its comment gives: blocks of up to 64 tokens at float
// offset 64 * b * n, each n rows of tv = ceil(tokens / 16) vectors of 16 tokens, padding tokens
// zero; rows with a stride past their n floats, n and token counts off the multiples of 16.
TEST(FloatPrepare, TransposesEveryActivationWhereTheLayoutSays) {
  if (float_tiers().empty()) GTEST_SKIP() << "no AVX2 here";
  for (const Isa isa : float_tiers()) {
    const GemmPrepareFn prepare = float_tier(isa, WeightType::F16).prepare;
    for (const int64_t n : {16, 33, 2048, 5633}) {
      for (const int64_t nt : {7, 8, 16, 17, 64, 70, 131}) {
        const int64_t stride_floats = (n + 15) / 16 * 16 + 16;  // bytes a multiple of 64
        const std::vector<float> x =
            testing::normal_floats(static_cast<size_t>(nt * stride_floats), 5);
        const auto* act = reinterpret_cast<const std::byte*>(x.data());
        const int64_t bytes = prepare(n, act, stride_floats * 4, nt, nullptr, 0, 1);
        if (nt < 8) {
          EXPECT_EQ(bytes, 0) << "below 8 tokens the GEMM reads the rows as they are";
          continue;
        }
        ASSERT_EQ(bytes, (nt + 63) / 64 * 64 * n * 4);
        std::vector<float> buf(static_cast<size_t>(bytes / 4 + 16), NAN);
        float* xt = buf.data() + (16 - reinterpret_cast<uintptr_t>(buf.data()) % 64 / 4) % 16;
        ASSERT_EQ(prepare(n, act, stride_floats * 4, nt, reinterpret_cast<std::byte*>(xt), 0, 1),
                  bytes);
        for (const int64_t parts : {2, 3, 5, 64, 400}) {  // column shares, in reverse order
          std::vector<float> shares(buf.size(), NAN);
          float* st =
              shares.data() + (16 - reinterpret_cast<uintptr_t>(shares.data()) % 64 / 4) % 16;
          for (int64_t p = parts - 1; p >= 0; --p) {
            prepare(n, act, stride_floats * 4, nt, reinterpret_cast<std::byte*>(st), p, parts);
          }
          ASSERT_EQ(std::memcmp(st, xt, static_cast<size_t>(bytes)), 0)
              << isa_name(isa) << " n " << n << " nt " << nt << " in " << parts << " shares";
        }
        for (int64_t t0 = 0; t0 < nt; t0 += 64) {
          const int64_t tokens = std::min<int64_t>(64, nt - t0), tv = (tokens + 15) / 16;
          for (int64_t k = 0; k < n; ++k) {
            for (int64_t lane = 0; lane < tv * 16; ++lane) {
              const float want = lane < tokens ? x[(t0 + lane) * stride_floats + k] : 0.0f;
              ASSERT_EQ(xt[t0 * n + k * tv * 16 + lane], want)
                  << isa_name(isa) << " n " << n << " nt " << nt << " block " << t0 / 64 << " k "
                  << k << " lane " << lane;
            }
          }
        }
      }
    }
  }
}

// The vdpbf16ps GEMM's activations (gemm_prepare_bf16_pairs_avx512bf16) against fp32_to_bf16
// (fp16.h, ggml's rounding) element by element: ties both ways, NaN, infinities, denormals (kept,
// as the scalar conversion keeps them), the largest finite values (rounding up to infinity), odd
// n, padding pairs zero; and written as shares of tokens, the same bytes.
TEST(InterleavedBf16Dot, PreparedPairsAreTheScalarRounding) {
  if (!detect_cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX512_BF16 here";
  const std::vector<float> special = {
      1.0f + 0x1p-8f,  // a tie, even below: 1.0
      1.0f + 0x3p-8f,  // a tie, odd below: rounds up
      1.0f + 0x1p-9f,
      -0.0f,
      0x1p-140f,
      -0x1.fffp-127f,  // denormals
      std::numeric_limits<float>::max(),
      -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(),
      -std::numeric_limits<float>::signaling_NaN(),
      std::bit_cast<float>(0x7f800001u),  // a NaN whose top 16 bits read as infinity
      std::bit_cast<float>(0x3f80ffffu),
      std::bit_cast<float>(0x3f818000u)};
  for (const int64_t n : {1, 15, 16, 33, 2048, 2049}) {
    for (const int64_t nt : {8, 9, 64}) {
      std::vector<float> x = testing::normal_floats(static_cast<size_t>(nt * n), 71);
      for (size_t i = 0; i < x.size(); i += 7) x[i] = special[i / 7 % special.size()];
      const auto* act = reinterpret_cast<const std::byte*>(x.data());
      const int64_t bytes = gemm_prepare_bf16_pairs_avx512bf16(n, act, n * 4, nt, nullptr, 0, 1);
      const int64_t stride = bytes / 4 / nt;  // uint32 pairs per token
      ASSERT_EQ(stride % 16, 0);
      ASSERT_GE(2 * stride, n);
      std::vector<uint16_t> got(static_cast<size_t>(bytes / 2), 0xabcd);
      gemm_prepare_bf16_pairs_avx512bf16(n, act, n * 4, nt,
                                         reinterpret_cast<std::byte*>(got.data()), 0, 1);
      for (int64_t t = 0; t < nt; ++t) {
        for (int64_t c = 0; c < 2 * stride; ++c) {
          const uint16_t want = c < n ? fp32_to_bf16(x[t * n + c]) : uint16_t{0};
          ASSERT_EQ(got[t * 2 * stride + c], want)
              << "n " << n << " nt " << nt << " token " << t << " col " << c << " x "
              << (c < n ? x[t * n + c] : 0.0f);
        }
      }
      for (const int64_t parts : {2, 3, 64, 100}) {
        std::vector<uint16_t> shares(got.size(), 0xabcd);
        for (int64_t p = parts - 1; p >= 0; --p) {
          gemm_prepare_bf16_pairs_avx512bf16(n, act, n * 4, nt,
                                             reinterpret_cast<std::byte*>(shares.data()), p, parts);
        }
        ASSERT_EQ(shares, got) << "n " << n << " nt " << nt << " in " << parts << " shares";
      }
    }
  }
}

TEST(InterleavedBf16Dot, RoundsActivationsToBf16FromEightTokens) {
  if (!detect_cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX512_BF16 here";
  // Hand-computed: 16 rows of four 1.0s against x = 1 + 2^-10 (between two bf16 values, nearer
  // 1.0): 4 with rounding, 4 + 2^-8 without.
  {
    const testing::OwnedMatrix ones = [] {
      testing::OwnedMatrix m = testing::make_matrix(WeightType::BF16, 16, 4, 1);
      for (int64_t r = 0; r < 16; ++r) {
        for (int64_t c = 0; c < 4; ++c) {
          const bf16_t one = fp32_to_bf16(1.0f);
          std::memcpy(m.bytes.data() + (r * 4 + c) * 2, &one, 2);
        }
      }
      return m;
    }();
    const InterleavedMatrix m = InterleavedMatrix::repack(ones.view);
    for (int64_t tokens : {7, 8}) {
      const std::vector<float> x(static_cast<size_t>(4 * tokens), 1.0f + 0x1p-10f);
      std::vector<float> y(static_cast<size_t>(16 * tokens), NAN);
      gemm_bf16x16_bf16_avx512bf16(4, m.view().data, 1,
                                   reinterpret_cast<const std::byte*>(x.data()), 16, tokens,
                                   y.data(), 16);
      for (float v : y) ASSERT_EQ(v, tokens >= 8 ? 4.0f : 4.0f + 0x1p-8f) << tokens << " tokens";
    }
  }
  for (const Case c : kCases) {
    if (c.cols > 2051) continue;
    const testing::OwnedMatrix w = testing::make_matrix(WeightType::BF16, c.rows, c.cols, 61);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16;
    for (int64_t tokens : {8, 13, 64}) {
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * c.cols), 62);
      const auto* act = reinterpret_cast<const std::byte*>(x.data());
      std::vector<float> y(static_cast<size_t>(tokens * padded), NAN), yp = y;
      gemm_bf16x16_bf16_avx512bf16(c.cols, m.view().data, groups, act, c.cols * 4, tokens, y.data(),
                                   padded);
      const int64_t bytes =
          gemm_prepare_bf16_pairs_avx512bf16(c.cols, act, c.cols * 4, tokens, nullptr, 0, 1);
      std::vector<uint32_t> xb(static_cast<size_t>(bytes / 4));
      gemm_prepare_bf16_pairs_avx512bf16(c.cols, act, c.cols * 4, tokens,
                                         reinterpret_cast<std::byte*>(xb.data()), 0, 1);
      gemm_prepared_bf16x16_bf16_avx512bf16(c.cols, m.view().data, groups, act, c.cols * 4,
                                            reinterpret_cast<const std::byte*>(xb.data()), tokens,
                                            yp.data(), padded);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < padded; ++r) {
          const float got = y[t * padded + r];
          ASSERT_EQ(got, yp[t * padded + r]) << "prepared, row " << r;
          if (r >= c.rows) {
            ASSERT_EQ(got, 0.0f) << "padding row " << r;
            continue;
          }
          const Exact e = exact_dot(w, r, x.data() + t * c.cols, true);
          ASSERT_NEAR(got, e.value, bf16_dot_bound(e, c.cols))
              << c.rows << "x" << c.cols << " " << tokens << " tokens, t " << t << " r " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, InterleavedFloat,
                         ::testing::Values(WeightType::F16, WeightType::BF16),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace pacer::ops
