// The x16 layouts of Q4_1, Q5_0, Q5_1 and IQ4_NL (ops/interleaved.h): the repack, the scalar
// references over the layout, the AVX-512 VNNI GEMV and its passes of up to 4 tokens (the
// few-token and the prefill GEMM), the AVX2 GEMV and GEMM (bit for bit VNNI's where both run), and
// matmul() over an InterleavedMatrix, all held to the
// row-major reference dots (dot_q4_1_q8_0_ref, dot_q5_0_q8_0_ref, dot_q5_1_q8_0_ref,
// dot_iq4_nl_q8_0_ref) on the
// original rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/interleaved.h"
#include "ops/iq4_nl.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/q4_1.h"
#include "ops/q5_0.h"
#include "ops/q5_1.h"
#include "ops/q8_0.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

struct Shape {
  int64_t rows, cols;
};
// A row, a partial group, exact groups, a partial last group, an odd block count (the last block
// alone after its pair's header), Qwen2.5-0.5B's 896 columns and a long row.
const Shape kShapes[] = {{1, 32},   {15, 96},  {16, 64},   {17, 96},
                         {40, 288}, {64, 896}, {100, 288}, {33, 32 * 151}};

bool vnni_here() {
  return isa_supported(Isa::Avx512) && detect_cpu_features().avx512_vnni;
}
bool avx2_here() {
  return isa_supported(Isa::Avx2);
}

// The row-major reference dot of row r, and the bound of a kernel that reassociates it: each
// block's terms exact up to 2-3 roundings, one more per block for the sum (the m term of Q5_1
// counted in the magnitude).
struct Ref {
  float value;
  double bound;
};
bool has_m(WeightType t) {
  return t == WeightType::Q4_1 || t == WeightType::Q5_1;
}
Ref reference(const testing::OwnedMatrix& w, int64_t r, const std::byte* act) {
  const int64_t cols = w.view.cols;
  const ActQ8Row a = act_q8_row(act, cols);
  double abs_sum = 0;
  for (int64_t j = 0; j < cols; ++j) {
    abs_sum += std::fabs(double(w.dequantized[r * cols + j]) * a.d[j / 32] * a.q[j]);
  }
  if (has_m(w.view.type)) {  // |m| * d_x * |sum_b(x)| per block; m follows d in both types
    const int64_t block_bytes = w.view.type == WeightType::Q5_1 ? 24 : 20;
    for (int64_t b = 0; b < cols / 32; ++b) {
      fp16_t m;
      std::memcpy(&m, w.view.row(r) + b * block_bytes + 2, 2);
      abs_sum += std::fabs(double(fp16_to_fp32(m)) * a.d[b] * a.sum[b]);
    }
  }
  const WeightType t = w.view.type;
  const float value = t == WeightType::Q4_1   ? dot_q4_1_q8_0_ref(cols, w.view.row(r), act)
                      : t == WeightType::Q5_0 ? dot_q5_0_q8_0_ref(cols, w.view.row(r), act)
                      : t == WeightType::Q5_1 ? dot_q5_1_q8_0_ref(cols, w.view.row(r), act)
                                              : dot_iq4_nl_q8_0_ref(cols, w.view.row(r), act);
  return {value, 3.0 * (cols / 32 + 4) * kUnitRoundoff * abs_sum};
}

PackedActivations pack(WeightType type, int64_t cols, int64_t tokens, uint32_t seed) {
  const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * cols), seed);
  PackedActivations act;
  act.pack(type, x, cols, tokens, KernelSet::for_isa(Isa::Scalar));
  return act;
}

// A type's block bytes, where its quants start in the block (after d, and Q5_1's m), whether it
// has fifth bits, and its kernels over the layout.
struct TypeKernels {
  int64_t block_bytes, quants_at;
  bool fifth_bits;
  X16GemvFn ref, vnni;
  X16GemmFn few;
  X16GemvFn avx2;
  X16GemmFn avx2_gemm;
};
TypeKernels kernels_of(WeightType t) {
  if (t == WeightType::Q4_1) {
    return {20,
            4,
            false,
            gemv_q4_1x16_q8_0_ref,
            gemv_q4_1x16_q8_0_avx512vnni,
            gemm_few_q4_1x16_q8_0_avx512vnni,
            gemv_q4_1x16_q8_0_avx2,
            gemm_q4_1x16_q8_0_avx2};
  }
  if (t == WeightType::Q5_0) {
    return {22,
            2,
            true,
            gemv_q5_0x16_q8_0_ref,
            gemv_q5_0x16_q8_0_avx512vnni,
            gemm_few_q5_0x16_q8_0_avx512vnni,
            gemv_q5_0x16_q8_0_avx2,
            gemm_q5_0x16_q8_0_avx2};
  }
  if (t == WeightType::Q5_1) {
    return {24,
            4,
            true,
            gemv_q5_1x16_q8_0_ref,
            gemv_q5_1x16_q8_0_avx512vnni,
            gemm_few_q5_1x16_q8_0_avx512vnni,
            gemv_q5_1x16_q8_0_avx2,
            gemm_q5_1x16_q8_0_avx2};
  }
  return {18,
          2,
          false,
          gemv_iq4_nlx16_q8_0_ref,
          gemv_iq4_nlx16_q8_0_avx512vnni,
          gemm_few_iq4_nlx16_q8_0_avx512vnni,
          gemv_iq4_nlx16_q8_0_avx2,
          gemm_iq4_nlx16_q8_0_avx2};
}

class InterleavedBlock32 : public ::testing::TestWithParam<WeightType> {};

// Every quant of every row comes back from the layout as interleaved.h describes it (d, m, the
// fifth bit and the nibble of each element), padding rows are zero, and the scalar reference over
// the layout gives the row-major reference dot.
TEST_P(InterleavedBlock32, RepackKeepsEveryQuantAndTheReferenceMatchesTheRowMajorDot) {
  const WeightType type = GetParam();
  const TypeKernels k = kernels_of(type);
  const bool with_m = has_m(type);
  EXPECT_EQ(x16_pair_bytes(type), 2 * 16 * k.block_bytes);
  for (const Shape c : kShapes) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 31);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), nb = c.cols / 32;
    ASSERT_EQ(m.storage_bytes(), groups * x16_group_bytes(type, c.cols));
    const int64_t header = with_m ? 128 : 64, fifth_bytes = k.fifth_bits ? 64 : 0;
    EXPECT_EQ(x16_group_bytes(type, c.cols),
              nb / 2 * 2 * 16 * k.block_bytes + nb % 2 * (header + fifth_bytes + 256));
    for (int64_t r = 0; r < groups * 16; ++r) {
      const std::byte* grp = m.view().data + r / 16 * x16_group_bytes(type, c.cols);
      const int64_t i = r % 16;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* pair = grp + b / 2 * x16_pair_bytes(type);
        const auto* blk =
            reinterpret_cast<const uint8_t*>(pair + header + (fifth_bytes + 256) * (b % 2));
        uint16_t d, mm = 0;
        std::memcpy(&d, pair + 32 * (b % 2) + 2 * i, 2);
        if (with_m) std::memcpy(&mm, pair + 64 + 32 * (b % 2) + 2 * i, 2);
        // The file's block: d first, Q4_1's and Q5_1's m next, then qh (Q5) and the 16 nibble
        // bytes.
        uint16_t want_d = 0, want_m = 0;
        uint32_t qh = 0;
        uint8_t qs[16] = {};
        if (r < c.rows) {
          const std::byte* src = w.view.row(r) + b * k.block_bytes;
          std::memcpy(&want_d, src, 2);
          if (with_m) std::memcpy(&want_m, src + 2, 2);
          if (k.fifth_bits) std::memcpy(&qh, src + k.quants_at, 4);
          std::memcpy(qs, src + k.quants_at + (k.fifth_bits ? 4 : 0), 16);
        }
        ASSERT_EQ(d, want_d) << "row " << r << " block " << b;
        ASSERT_EQ(mm, want_m) << "row " << r << " block " << b;
        for (int e = 0; e < 32; ++e) {
          // Element e: nibble j = e % 16 of qs (low for e < 16), fifth bit e of qh.
          const int j = e % 16, m4 = j / 4, byte = j % 4;
          const unsigned want = (e < 16 ? qs[j] & 0x0F : qs[j] >> 4) | (qh >> e & 1) << 4;
          const unsigned nib = blk[fifth_bytes + 64 * m4 + 4 * i + byte];
          const unsigned fifth = k.fifth_bits ? blk[4 * i + byte] >> (e < 16 ? m4 : 4 + m4) & 1 : 0;
          const unsigned got = (e < 16 ? nib & 0x0F : nib >> 4) | fifth << 4;
          ASSERT_EQ(got, want) << c.rows << "x" << c.cols << " row " << r << " block " << b
                               << " element " << e;
        }
      }
    }
    const PackedActivations act = pack(type, c.cols, 1, 32);
    std::vector<float> y(static_cast<size_t>(groups * 16), NAN);
    k.ref(c.cols, m.view().data, groups, act.token(0), y.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      const Ref ref = reference(w, r, act.token(0));
      ASSERT_NEAR(y[r], ref.value, ref.bound) << c.rows << "x" << c.cols << " row " << r;
    }
    for (int64_t r = c.rows; r < groups * 16; ++r) EXPECT_EQ(y[r], 0.0f) << "padding row " << r;
  }
}

// Quants at their extremes (every nibble 15 with every fifth bit set: q = 31, and all zero;
// IQ4_NL's table ends, 113 and -127) against activations of +-127, all of one sign (the AVX2
// kernels' int16 sums at their largest: Q5 4 x 2 x 31 x 127 = 31496, IQ4_NL 2 x 127 x 127 =
// 32258 a pair) and mixed: the unpack's shifts, masks and lookup, and the offsets (Q5_0 16,
// IQ4_NL 128), hold in the VNNI GEMV, the AVX2 GEMV and the AVX2 GEMM.
TEST_P(InterleavedBlock32, GemvsHoldAtTheQuantExtremes) {
  const WeightType type = GetParam();
  if (!avx2_here()) GTEST_SKIP() << "no AVX2 here";
  const TypeKernels k = kernels_of(type);
  const int64_t rows = 20, cols = 96, groups = x16_groups(rows), padded = groups * 16;
  testing::OwnedMatrix w = testing::make_matrix(type, rows, cols, 33);
  const int64_t rb = row_bytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {  // keep d (and m); quants all 31 (15) or all 0
      std::byte* blk = w.bytes.data() + r * rb + b * k.block_bytes;
      std::memset(blk + k.quants_at, (r + b) % 2 == 0 ? 0xFF : 0x00, k.block_bytes - k.quants_at);
    }
    dequantize_row(type, w.bytes.data() + r * rb, w.dequantized.data() + r * cols, cols);
  }
  const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
  for (int pattern = 0; pattern < 3; ++pattern) {
    std::vector<float> x(static_cast<size_t>(3 * cols));  // 3 tokens; each quantizes to +-127
    for (int64_t j = 0; j < 3 * cols; ++j) {
      x[j] = pattern == 0 ? 1.0f : pattern == 1 ? -1.0f : (j % 3 == 0 ? -1.0f : 1.0f);
    }
    PackedActivations act;
    act.pack(type, x, cols, 3, KernelSet::for_isa(Isa::Scalar));
    std::vector<float> yt(static_cast<size_t>(3 * padded), NAN);
    k.avx2_gemm(cols, m.view().data, groups, act.token(0), act.token(1) - act.token(0), 3,
                yt.data(), padded);
    for (int64_t t = 0; t < 3; ++t) {
      std::vector<float> y(static_cast<size_t>(padded), NAN);
      for (const X16GemvFn gemv : {vnni_here() ? k.vnni : nullptr, k.avx2}) {  // AVX2's last
        if (gemv == nullptr) continue;
        gemv(cols, m.view().data, groups, act.token(t), y.data());
        for (int64_t r = 0; r < rows; ++r) {
          const Ref ref = reference(w, r, act.token(t));
          ASSERT_NEAR(y[r], ref.value, ref.bound)
              << (gemv == k.vnni ? "VNNI" : "AVX2") << " pattern " << pattern << " row " << r;
        }
      }
      for (int64_t r = 0; r < padded; ++r) {  // y: the AVX2 GEMV's
        ASSERT_EQ(yt[t * padded + r], y[r]) << "AVX2 GEMM, pattern " << pattern << " r " << r;
      }
    }
  }
}

// The VNNI GEMV within the reference dot's bound; its passes of up to 4 tokens (the few-token
// GEMM and, past 15 tokens, the prefill GEMM) the GEMV per token bit for bit; the kernel set
// hands them out for this type.
TEST_P(InterleavedBlock32, VnniGemvAndItsTokenPassesMatchTheReference) {
  const WeightType type = GetParam();
  if (!vnni_here()) GTEST_SKIP() << "no AVX-512 VNNI here";
  const X16GemvFn gemv = kernels_of(type).vnni;
  const X16GemmFn few = kernels_of(type).few;
  const KernelSet kernels = KernelSet::for_isa(Isa::Avx512);
  EXPECT_EQ(kernels.x16(type).gemv, gemv);
  EXPECT_EQ(kernels.x16(type).gemm_few, few);
  EXPECT_EQ(kernels.x16(type).gemm, few);
  for (const Shape c : {Shape{17, 96}, Shape{64, 896}, Shape{300, 288}, Shape{40, 32 * 151}}) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 35);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16;
    for (int64_t tokens : {1, 2, 3, 5, 15, 16, 33}) {
      const PackedActivations act = pack(type, c.cols, tokens, 36);
      std::vector<float> yt(static_cast<size_t>(tokens * padded), NAN);
      const int64_t stride = tokens > 1 ? act.token(1) - act.token(0) : 0;
      few(c.cols, m.view().data, groups, act.token(0), stride, tokens, yt.data(), padded);
      for (int64_t t = 0; t < tokens; ++t) {
        std::vector<float> y(static_cast<size_t>(padded), NAN);
        gemv(c.cols, m.view().data, groups, act.token(t), y.data());
        for (int64_t r = 0; r < c.rows; ++r) {
          ASSERT_EQ(yt[t * padded + r], y[r])
              << c.rows << "x" << c.cols << " " << tokens << " tokens, t " << t << " r " << r;
          const Ref ref = reference(w, r, act.token(t));
          ASSERT_NEAR(y[r], ref.value, ref.bound) << c.rows << "x" << c.cols << " r " << r;
        }
      }
    }
  }
}

// The AVX2 GEMV within the reference dot's bound and, where VNNI runs, equal to the VNNI GEMV bit
// for bit (the same integer block dots and float steps); the AVX2 GEMM (4 tokens per pass, then
// 3, 2, 1) the AVX2 GEMV per token bit for bit; the AVX2 kernel set hands them out.
TEST_P(InterleavedBlock32, Avx2GemvAndGemmMatchTheReferenceAndTheVnniGemvBitForBit) {
  const WeightType type = GetParam();
  if (!avx2_here()) GTEST_SKIP() << "no AVX2 here";
  const TypeKernels k = kernels_of(type);
  const KernelSet kernels = KernelSet::for_isa(Isa::Avx2);
  EXPECT_EQ(kernels.x16(type).gemv, k.avx2);
  EXPECT_EQ(kernels.x16(type).gemm, k.avx2_gemm);
  for (const Shape c :
       {Shape{1, 32}, Shape{17, 96}, Shape{64, 896}, Shape{300, 288}, Shape{40, 32 * 151}}) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 41);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16, max_tokens = 19;
    const PackedActivations act = pack(type, c.cols, max_tokens, 42);
    std::vector<std::vector<float>> per_token;  // the AVX2 GEMV of each token
    for (int64_t t = 0; t < max_tokens; ++t) {
      std::vector<float>& y = per_token.emplace_back(static_cast<size_t>(padded), NAN);
      k.avx2(c.cols, m.view().data, groups, act.token(t), y.data());
      for (int64_t r = 0; r < c.rows; ++r) {
        const Ref ref = reference(w, r, act.token(t));
        ASSERT_NEAR(y[r], ref.value, ref.bound) << c.rows << "x" << c.cols << " t " << t;
      }
      for (int64_t r = c.rows; r < padded; ++r) ASSERT_EQ(y[r], 0.0f) << "padding row " << r;
      if (vnni_here()) {
        std::vector<float> yv(static_cast<size_t>(padded), NAN);
        k.vnni(c.cols, m.view().data, groups, act.token(t), yv.data());
        ASSERT_EQ(y, yv) << "AVX2 against VNNI, " << c.rows << "x" << c.cols << " t " << t;
      }
    }
    const int64_t stride = act.token(1) - act.token(0);
    for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8, 9, 19}) {
      std::vector<float> yt(static_cast<size_t>(tokens * padded), NAN);
      k.avx2_gemm(c.cols, m.view().data, groups, act.token(0), stride, tokens, yt.data(), padded);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < padded; ++r) {
          ASSERT_EQ(yt[t * padded + r], per_token[t][r])
              << c.rows << "x" << c.cols << ", " << tokens << " tokens, t " << t << " r " << r;
        }
      }
    }
  }
}

// matmul() and matmul_rows() over the repacked view on every Isa (the reference on Scalar): fused
// outputs, groups cut by a worker's range, GEMV, few-token and prefill GEMM.
TEST_P(InterleavedBlock32, MatmulOverTheRepackedViewMatchesTheRowMajorMatrix) {
  const WeightType type = GetParam();
  for (Isa isa : supported_isas()) {
    for (int64_t tokens : {1, 5, 16}) {
      const testing::OwnedMatrix a = testing::make_matrix(type, 40, 96, 37);
      const testing::OwnedMatrix b = testing::make_matrix(type, 24, 96, 38);
      const InterleavedMatrix ma = InterleavedMatrix::repack(a.view);
      const InterleavedMatrix mb = InterleavedMatrix::repack(b.view);
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * 96), 39);
      std::vector<float> ya(static_cast<size_t>(tokens * 40), NAN), yb(tokens * 24, NAN);
      PackedActivations scratch;
      const MatmulOutput outs[] = {{ma.view(), ya}, {mb.view(), yb}};
      matmul(outs, x, tokens, scratch, SerialParallel(3), KernelSet::for_isa(isa));
      for (const auto& [w, y] : {std::pair{&a, &ya}, std::pair{&b, &yb}}) {
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < w->view.rows; ++r) {
            const Ref ref = reference(*w, r, scratch.token(t));
            ASSERT_NEAR((*y)[t * w->view.rows + r], ref.value, ref.bound)
                << isa_name(isa) << " tokens " << tokens << " t " << t << " r " << r;
          }
        }
      }
      std::vector<float> y(static_cast<size_t>(tokens * 40), -7.0f);
      matmul_rows(ma.view(), scratch, y, 5, 37, KernelSet::for_isa(isa));
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < 40; ++r) {
          if (r < 5 || r >= 37) {
            ASSERT_EQ(y[t * 40 + r], -7.0f) << "row " << r << " outside [5, 37) was written";
          } else {
            const Ref ref = reference(a, r, scratch.token(t));
            ASSERT_NEAR(y[t * 40 + r], ref.value, ref.bound) << isa_name(isa) << " r " << r;
          }
        }
      }
    }
  }
}

// Repacked where the VNNI or the AVX2 kernels run: any CPU's rule, and this machine's. AVX-512
// without VNNI (Skylake-SP) runs the AVX2 ones too (they beat its row-major AVX-512 kernels).
TEST_P(InterleavedBlock32, RepacksWhereItsKernelsRun) {
  const WeightType type = GetParam();
  const testing::OwnedMatrix w = testing::make_matrix(type, 16, 64, 1);
  CpuFeatures skx, vnni;
  skx.avx2 = skx.avx512 = vnni.avx2 = vnni.avx512 = vnni.avx512_vnni = true;
  if (isa_supported(Isa::Avx512)) {
    EXPECT_TRUE(InterleavedMatrix::pays(w.view, Isa::Avx512, vnni));
    EXPECT_TRUE(InterleavedMatrix::pays(w.view, Isa::Avx512, skx));
  }
  if (isa_supported(Isa::Avx2)) {
    EXPECT_TRUE(InterleavedMatrix::pays(w.view, Isa::Avx2, vnni));
    EXPECT_TRUE(InterleavedMatrix::pays(w.view, Isa::Avx2, skx));
    EXPECT_TRUE(InterleavedMatrix::pays(w.view, Isa::Avx2));
  }
  EXPECT_FALSE(InterleavedMatrix::pays(w.view, Isa::Scalar, vnni));
  EXPECT_EQ(InterleavedMatrix::pays(w.view, Isa::Avx512), isa_supported(Isa::Avx512));
}

INSTANTIATE_TEST_SUITE_P(Types, InterleavedBlock32,
                         ::testing::Values(WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                                           WeightType::IQ4_NL),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace pacer::ops
