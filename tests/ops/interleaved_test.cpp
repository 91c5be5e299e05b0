// The x16 layouts (16-row interleaved Q4_0 and Q8_0, ops/interleaved.h): the repack, the scalar
// references, the AVX2 and AVX-512 VNNI GEMVs, the AVX2/VNNI/AMX GEMMs, and matmul() over an
// InterleavedMatrix, all held to the row-major reference dots (dot_q4_0_q8_0_ref,
// dot_q8_0_q8_0_ref) on the original rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/interleaved.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/q4_0.h"
#include "ops/q8_0.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

using testing::kUnitRoundoff;

struct Case {
  int64_t rows, cols;
};
// Rows around the group of 16 (one row, a partial group, exact groups, a partial last group)
// and cols with an odd block count (the last block alone, no zero block after it) and a large k.
// 64, 100 and 200 rows (4, 7 and 13 groups): as short as one worker's share on many threads,
// read as 2 or 4 short far-apart streams (gemv_streams.h) with leftover groups.
const Case kCases[] = {{1, 32},    {15, 96},  {16, 64},   {17, 96},       {40, 288}, {64, 896},
                       {100, 288}, {200, 96}, {33, 2048}, {48, 32 * 151}, {256, 128}};

// The row-major reference dot of row r with act, and its error bound for a kernel that
// reassociates: each block term d_w * d_x * isum is exact up to 2 roundings, and the block sum
// adds one per block.
struct Ref {
  float value;
  double bound;
};
float row_major_dot(const WeightMatrix& w, int64_t r, const std::byte* act) {
  return w.type == WeightType::Q4_0 ? dot_q4_0_q8_0_ref(w.cols, w.row(r), act)
                                    : dot_q8_0_q8_0_ref(w.cols, w.row(r), act);
}
Ref reference(const testing::OwnedMatrix& w, int64_t r, const std::byte* act) {
  const int64_t cols = w.view.cols;
  const ActQ8Row a = act_q8_row(act, cols);
  double abs_sum = 0;
  for (int64_t j = 0; j < cols; ++j) {
    abs_sum += std::fabs(double(w.dequantized[r * cols + j]) * a.d[j / 32] * a.q[j]);
  }
  return {row_major_dot(w.view, r, act), 2.0 * (cols / 32 + 4) * kUnitRoundoff * abs_sum};
}

class Interleaved : public ::testing::TestWithParam<WeightType> {};

TEST_P(Interleaved, RepackKeepsTheQuantsAndTheScalarReferenceMatchesBitForBit) {
  const WeightType type = GetParam();
  const bool q4 = type == WeightType::Q4_0;
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 31);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    EXPECT_EQ(m.view().layout, WeightLayout::Interleaved16);
    EXPECT_EQ(m.view().bytes(), w.view.bytes()) << "streamed bytes are the type's";
    EXPECT_EQ(m.storage_bytes(), x16_groups(c.rows) * x16_group_bytes(type, c.cols));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.view().data) % 64, 0u);
    // The layout, read straight from interleaved.h's description: d of block b of row r, and
    // the quant bytes (Q4_0: the byte holding elements e and e + 16; Q8_0: element e, + 128).
    const int64_t nb = c.cols / 32, pair_bytes = q4 ? 576 : 1088, qs_bytes = q4 ? 256 : 512;
    // Whole pairs, then an odd last block alone: its pair's 64 header bytes and its quants, so
    // the group holds no block the GEMV skips.
    EXPECT_EQ(x16_group_bytes(type, c.cols), nb / 2 * pair_bytes + nb % 2 * (64 + qs_bytes));
    for (int64_t r = 0; r < c.rows; ++r) {
      const std::byte* group = m.view().data + r / 16 * x16_group_bytes(type, c.cols);
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* pair = group + b / 2 * pair_bytes;
        const std::byte* qs = pair + 64 + qs_bytes * (b % 2);
        fp16_t d;
        std::memcpy(&d, pair + 32 * (b % 2) + 2 * (r % 16), 2);
        if (q4) {
          const auto& src = reinterpret_cast<const BlockQ4_0*>(w.view.row(r))[b];
          ASSERT_EQ(d, src.d) << "row " << r << " block " << b;
          for (int e = 0; e < 16; ++e) {
            const auto byte = static_cast<uint8_t>(qs[64 * (e / 4) + 4 * (r % 16) + e % 4]);
            ASSERT_EQ(byte, src.qs[e]) << "row " << r << " block " << b << " byte " << e;
          }
        } else {
          const auto& src = reinterpret_cast<const BlockQ8_0*>(w.view.row(r))[b];
          ASSERT_EQ(d, src.d) << "row " << r << " block " << b;
          for (int e = 0; e < 32; ++e) {
            const auto byte = static_cast<uint8_t>(qs[64 * (e / 4) + 4 * (r % 16) + e % 4]);
            ASSERT_EQ(byte, src.qs[e] + 128) << "row " << r << " block " << b << " quant " << e;
          }
        }
      }
    }
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(c.cols), 32);
    PackedActivations act;
    act.pack(type, x, c.cols, 1, KernelSet::for_isa(Isa::Scalar));
    std::vector<float> y(static_cast<size_t>(x16_groups(c.rows) * 16), NAN);
    (q4 ? gemv_q4_0x16_q8_0_ref : gemv_q8_0x16_q8_0_ref)(c.cols, m.view().data, x16_groups(c.rows),
                                                         act.token(0), y.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      // Same integer block dots and the same float operations in the same order.
      ASSERT_EQ(y[r], row_major_dot(w.view, r, act.token(0)))
          << c.rows << "x" << c.cols << " row " << r;
    }
    for (int64_t r = c.rows; r < x16_groups(c.rows) * 16; ++r) {
      EXPECT_EQ(y[r], 0.0f) << "padding row " << r;
    }
  }
}

TEST(InterleavedMatrix, RepackRejectsOtherTypesAndLayouts) {
  const testing::OwnedMatrix f32 = testing::make_matrix(WeightType::F32, 16, 64, 1);
  EXPECT_THROW(InterleavedMatrix::repack(f32.view), MatmulError);
  const testing::OwnedMatrix q2_k = testing::make_matrix(WeightType::Q2_K, 16, 256, 1);
  const testing::OwnedMatrix q4 = testing::make_matrix(WeightType::Q4_0, 16, 64, 1);
  const InterleavedMatrix m = InterleavedMatrix::repack(q4.view);
  EXPECT_THROW(InterleavedMatrix::repack(m.view()), MatmulError);
  EXPECT_FALSE(InterleavedMatrix::pays(f32.view, Isa::Avx512));
  // Q2_K: the VNNI kernels, else the AVX2 ones (not on AVX-512 without VNNI, below).
  EXPECT_EQ(InterleavedMatrix::pays(q2_k.view, Isa::Avx512),
            isa_supported(Isa::Avx512) && detect_cpu_features().avx512_vnni);
  EXPECT_EQ(InterleavedMatrix::pays(q2_k.view, Isa::Avx2), isa_supported(Isa::Avx2));
  EXPECT_EQ(InterleavedMatrix::pays(q4.view, Isa::Avx2), isa_supported(Isa::Avx2));
  EXPECT_FALSE(InterleavedMatrix::pays(q4.view, Isa::Scalar));
  const testing::OwnedMatrix q4_k = testing::make_matrix(WeightType::Q4_K, 16, 256, 1);
  const testing::OwnedMatrix f16 = testing::make_matrix(WeightType::F16, 16, 64, 1);
  const testing::OwnedMatrix q6_k = testing::make_matrix(WeightType::Q6_K, 16, 256, 1);
  EXPECT_EQ(InterleavedMatrix::pays(q4_k.view, Isa::Avx2), isa_supported(Isa::Avx2));
  EXPECT_EQ(InterleavedMatrix::pays(q6_k.view, Isa::Avx2), isa_supported(Isa::Avx2));
  EXPECT_EQ(InterleavedMatrix::pays(f16.view, Isa::Avx2), isa_supported(Isa::Avx2));
  EXPECT_FALSE(InterleavedMatrix::pays(m.view(), Isa::Avx512));
  EXPECT_EQ(InterleavedMatrix::pays(q4.view, Isa::Avx512), isa_supported(Isa::Avx512));
  EXPECT_EQ(InterleavedMatrix::pays(q4_k.view, Isa::Avx512),
            isa_supported(Isa::Avx512) && detect_cpu_features().avx512_vnni);
  // The rule for any CPU: with VNNI every x16 type repacks on AVX-512; without it (Skylake-SP)
  // only Q4_0 and the float types, whose kernels there beat the row-major ones.
  if (!isa_supported(Isa::Avx512)) return;
  CpuFeatures skx, vnni;
  skx.avx2 = skx.avx512 = vnni.avx2 = vnni.avx512 = vnni.avx512_vnni = true;
  const testing::OwnedMatrix q8 = testing::make_matrix(WeightType::Q8_0, 16, 64, 1);
  const testing::OwnedMatrix q5_k = testing::make_matrix(WeightType::Q5_K, 16, 256, 1);
  for (const WeightMatrix* w : {&q4.view, &q8.view, &q4_k.view, &q5_k.view, &q6_k.view}) {
    EXPECT_TRUE(InterleavedMatrix::pays(*w, Isa::Avx512, vnni)) << type_name(w->type);
    EXPECT_EQ(InterleavedMatrix::pays(*w, Isa::Avx512, skx), w->type == WeightType::Q4_0)
        << type_name(w->type);
    EXPECT_TRUE(InterleavedMatrix::pays(*w, Isa::Avx2, skx)) << type_name(w->type);
  }
  EXPECT_TRUE(InterleavedMatrix::pays(f16.view, Isa::Avx512, skx));
  EXPECT_TRUE(InterleavedMatrix::pays(q2_k.view, Isa::Avx512, vnni));
  EXPECT_FALSE(InterleavedMatrix::pays(q2_k.view, Isa::Avx512, skx));
  EXPECT_TRUE(InterleavedMatrix::pays(q2_k.view, Isa::Avx2, skx));
  // IQ4_XS and Q3_K: the VNNI kernels, else the AVX2 ones (on Skylake-SP too).
  for (WeightType t : {WeightType::IQ4_XS, WeightType::Q3_K}) {
    const testing::OwnedMatrix w = testing::make_matrix(t, 16, 256, 1);
    EXPECT_TRUE(InterleavedMatrix::pays(w.view, Isa::Avx512, vnni)) << type_name(t);
    EXPECT_TRUE(InterleavedMatrix::pays(w.view, Isa::Avx512, skx)) << type_name(t);
    EXPECT_TRUE(InterleavedMatrix::pays(w.view, Isa::Avx2, skx)) << type_name(t);
  }
}

TEST_P(Interleaved, VnniGemvAndGemmsMatchTheReferenceDot) {
  const WeightType type = GetParam();
  const bool q4 = type == WeightType::Q4_0;
  const CpuFeatures cpu = detect_cpu_features();
  if (!isa_supported(Isa::Avx512) || !cpu.avx512_vnni) GTEST_SKIP() << "no AVX-512 VNNI here";
  using Gemm = void (*)(int64_t, const std::byte*, int64_t, const std::byte*, int64_t, int64_t,
                        float*, int64_t);
  std::vector<std::pair<std::string, Gemm>> gemms = {
      {"vnni", q4 ? gemm_q4_0x16_q8_0_avx512vnni : gemm_q8_0x16_q8_0_avx512vnni}};
  if (cpu.amx_int8) gemms.push_back({"amx", q4 ? gemm_q4_0x16_q8_0_amx : gemm_q8_0x16_q8_0_amx});
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 41);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16, tokens = 19;
    const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * c.cols), 42);
    PackedActivations act;
    act.pack(type, x, c.cols, tokens, KernelSet::for_isa(Isa::Scalar));
    const int64_t act_stride = act.token(1) - act.token(0);
    std::vector<float> y(static_cast<size_t>(padded), NAN);
    (q4 ? gemv_q4_0x16_q8_0_avx512vnni : gemv_q8_0x16_q8_0_avx512vnni)(
        c.cols, m.view().data, groups, act.token(0), y.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      const Ref ref = reference(w, r, act.token(0));
      ASSERT_NEAR(y[r], ref.value, ref.bound) << "gemv " << c.rows << "x" << c.cols << " row " << r;
    }
    if (q4) {  // the lone worker's GEMV prefetches further and computes the same, bit for bit
      std::vector<float> lone(static_cast<size_t>(padded), NAN);
      gemv_q4_0x16_q8_0_avx512vnni_lone(c.cols, m.view().data, groups, act.token(0), lone.data());
      ASSERT_EQ(lone, y) << "lone gemv " << c.rows << "x" << c.cols;
    }
    for (const auto& [name, gemm] : gemms) {
      std::vector<float> yt(static_cast<size_t>(tokens * padded), NAN);
      gemm(c.cols, m.view().data, groups, act.token(0), act_stride, tokens, yt.data(), padded);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < c.rows; ++r) {
          const Ref ref = reference(w, r, act.token(t));
          ASSERT_NEAR(yt[t * padded + r], ref.value, ref.bound)
              << name << " " << c.rows << "x" << c.cols << " token " << t << " row " << r;
        }
      }
    }
  }
}

// The AVX2 GEMV within the reference dot's bound and, where VNNI runs, equal to the VNNI GEMV bit
// for bit (the same integer block dots and float steps); the AVX2 GEMM (4 tokens per pass, then
// 3, 2, 1) equal to the AVX2 GEMV per token bit for bit, for every token count up to 9 and 19.
TEST_P(Interleaved, Avx2GemvAndGemmMatchTheReferenceAndTheVnniGemvBitForBit) {
  const WeightType type = GetParam();
  const bool q4 = type == WeightType::Q4_0;
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  const bool vnni = isa_supported(Isa::Avx512) && detect_cpu_features().avx512_vnni;
  const auto gemv = q4 ? gemv_q4_0x16_q8_0_avx2 : gemv_q8_0x16_q8_0_avx2;
  const auto gemm = q4 ? gemm_q4_0x16_q8_0_avx2 : gemm_q8_0x16_q8_0_avx2;
  const KernelSet kernels = KernelSet::for_isa(Isa::Avx2);
  EXPECT_EQ(kernels.x16(type).gemv, gemv);
  EXPECT_EQ(kernels.x16(type).gemm, gemm);
  for (const Case c : kCases) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 45);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16, max_tokens = 19;
    const std::vector<float> x =
        testing::normal_floats(static_cast<size_t>(max_tokens * c.cols), 46);
    PackedActivations act;
    act.pack(type, x, c.cols, max_tokens, KernelSet::for_isa(Isa::Scalar));
    const int64_t act_stride = act.token(1) - act.token(0);
    std::vector<std::vector<float>> per_token;  // the AVX2 GEMV of each token
    for (int64_t t = 0; t < max_tokens; ++t) {
      std::vector<float>& y = per_token.emplace_back(static_cast<size_t>(padded), NAN);
      gemv(c.cols, m.view().data, groups, act.token(t), y.data());
      for (int64_t r = 0; r < c.rows; ++r) {
        const Ref ref = reference(w, r, act.token(t));
        ASSERT_NEAR(y[r], ref.value, ref.bound) << c.rows << "x" << c.cols << " t " << t;
      }
      for (int64_t r = c.rows; r < padded; ++r) ASSERT_EQ(y[r], 0.0f) << "padding row " << r;
      if (vnni) {
        std::vector<float> yv(static_cast<size_t>(padded), NAN);
        (q4 ? gemv_q4_0x16_q8_0_avx512vnni : gemv_q8_0x16_q8_0_avx512vnni)(
            c.cols, m.view().data, groups, act.token(t), yv.data());
        ASSERT_EQ(y, yv) << "AVX2 against VNNI, " << c.rows << "x" << c.cols << " t " << t;
      }
    }
    for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8, 9, 19}) {
      std::vector<float> yt(static_cast<size_t>(tokens * padded), NAN);
      gemm(c.cols, m.view().data, groups, act.token(0), act_stride, tokens, yt.data(), padded);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < padded; ++r) {
          ASSERT_EQ(yt[t * padded + r], per_token[t][r])
              << c.rows << "x" << c.cols << ", " << tokens << " tokens, t " << t << " r " << r;
        }
      }
    }
  }
}

// The AVX2 kernels' 16-bit steps at their limits: activations all +-127 against Q4_0 nibbles all
// 15 (8 vpmaddubsw pair sums of 3810 added in int16: 30480) or 0, and Q8_0 quants -128 and 127
// (|q| 128 into vpmaddubsw: pair sums of +-32512). Any saturation or wrap would be off by
// thousands; the scalar reference reads the same bytes.
TEST_P(Interleaved, Avx2KernelsHoldAtTheQuantExtremes) {
  const WeightType type = GetParam();
  const bool q4 = type == WeightType::Q4_0;
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  const int64_t rows = 32, cols = 128, nb = cols / 32, groups = 2;
  std::vector<std::byte> bytes(static_cast<size_t>(rows * row_bytes(type, cols)));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t i = r * nb + b;
      if (q4) {
        auto& blk = reinterpret_cast<BlockQ4_0*>(bytes.data())[i];
        blk.d = fp32_to_fp16(1.0f);
        std::memset(blk.qs, r % 2 == 0 ? 0xFF : 0x00, sizeof blk.qs);  // all +7 or all -8
      } else {
        auto& blk = reinterpret_cast<BlockQ8_0*>(bytes.data())[i];
        blk.d = fp32_to_fp16(1.0f);
        for (int e = 0; e < 32; ++e) {
          blk.qs[e] = static_cast<int8_t>((r + e / 4) % 3 == 0 ? 127 : -128);
        }
      }
    }
  }
  const InterleavedMatrix m =
      InterleavedMatrix::repack(WeightMatrix{type, bytes.data(), rows, cols});
  for (float sign : {1.0f, -1.0f}) {
    // +-1 everywhere (one block alternating), so every activation quant is +-127.
    std::vector<float> x(static_cast<size_t>(5 * cols), sign);
    for (int64_t j = 0; j < 32; ++j) x[static_cast<size_t>(cols + j)] = j % 2 ? sign : -sign;
    PackedActivations act;
    act.pack(type, x, cols, 5, KernelSet::for_isa(Isa::Scalar));
    std::vector<float> yt(static_cast<size_t>(5 * rows), NAN);
    (q4 ? gemm_q4_0x16_q8_0_avx2 : gemm_q8_0x16_q8_0_avx2)(
        cols, m.view().data, groups, act.token(0), act.token(1) - act.token(0), 5, yt.data(), rows);
    for (int64_t t = 0; t < 5; ++t) {
      std::vector<float> y(static_cast<size_t>(rows), NAN), ref(static_cast<size_t>(rows), NAN);
      (q4 ? gemv_q4_0x16_q8_0_avx2 : gemv_q8_0x16_q8_0_avx2)(cols, m.view().data, groups,
                                                             act.token(t), y.data());
      (q4 ? gemv_q4_0x16_q8_0_ref : gemv_q8_0x16_q8_0_ref)(cols, m.view().data, groups,
                                                           act.token(t), ref.data());
      for (int64_t r = 0; r < rows; ++r) {
        // Block terms up to 32 x 128 x 127 x d_x (~4096), a few roundings apart at most; one
        // saturated pair would be thousands of quant units (x d_x = 1/127) off.
        ASSERT_NEAR(y[r], ref[r], 1e-3 + 1e-5 * std::fabs(ref[r])) << "sign " << sign << " r " << r;
        ASSERT_EQ(yt[t * rows + r], y[r]) << "gemm, sign " << sign << " t " << t << " r " << r;
      }
    }
  }
}

// The few-token GEMM (2..15 tokens: passes of 4, 3, 2, 1 over the GEMV's far-apart streams) is
// the GEMV per token bit for bit, and within the reference dot's bound. 256 and 300 rows (16 and
// 19 groups) take the stream order with 2 and 4 streams, 300 with groups left over after it.
TEST_P(Interleaved, FewTokenGemmIsTheGemvPerTokenBitForBit) {
  const WeightType type = GetParam();
  const bool q4 = type == WeightType::Q4_0;
  const CpuFeatures cpu = detect_cpu_features();
  if (!isa_supported(Isa::Avx512) || !cpu.avx512_vnni) GTEST_SKIP() << "no AVX-512 VNNI here";
  const auto gemv = q4 ? gemv_q4_0x16_q8_0_avx512vnni : gemv_q8_0x16_q8_0_avx512vnni;
  const auto few = q4 ? gemm_few_q4_0x16_q8_0_avx512vnni : gemm_few_q8_0x16_q8_0_avx512vnni;
  const KernelSet kernels = KernelSet::for_isa(Isa::Avx512);
  EXPECT_EQ(kernels.x16(type).gemm_few, few);
  EXPECT_EQ(kernels.x16(type).few_tokens_max, kX16FewTokensMax);
  for (const Case c : {Case{17, 96}, Case{256, 128}, Case{300, 288}, Case{40, 32 * 151}}) {
    const testing::OwnedMatrix w = testing::make_matrix(type, c.rows, c.cols, 43);
    const InterleavedMatrix m = InterleavedMatrix::repack(w.view);
    const int64_t groups = x16_groups(c.rows), padded = groups * 16;
    // Past kX16FewTokensMax (matmul() never asks for it) the call runs in slices of 15.
    for (int64_t tokens : {2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 14, 15, 16, 33}) {
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * c.cols), 44);
      PackedActivations act;
      act.pack(type, x, c.cols, tokens, KernelSet::for_isa(Isa::Scalar));
      std::vector<float> yt(static_cast<size_t>(tokens * padded), NAN);
      few(c.cols, m.view().data, groups, act.token(0), act.token(1) - act.token(0), tokens,
          yt.data(), padded);
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

// matmul() and matmul_rows() over the repacked view: whole groups, groups cut by a worker's
// range (SerialParallel chunks and hand-picked ranges), fused outputs, GEMV and GEMM, on every
// Isa (AVX2: interleaved_avx2.cpp; scalar: the reference).
TEST_P(Interleaved, MatmulOverTheRepackedViewMatchesTheRowMajorMatrix) {
  const WeightType type = GetParam();
  for (Isa isa : supported_isas()) {
    for (int64_t tokens : {1, 5, 16}) {  // GEMV, the few-token GEMM, the prefill GEMM
      const testing::OwnedMatrix a = testing::make_matrix(type, 40, 96, 51);
      const testing::OwnedMatrix b = testing::make_matrix(type, 24, 96, 52);
      const InterleavedMatrix ma = InterleavedMatrix::repack(a.view);
      const InterleavedMatrix mb = InterleavedMatrix::repack(b.view);
      const std::vector<float> x = testing::normal_floats(static_cast<size_t>(tokens * 96), 53);
      std::vector<float> ya(static_cast<size_t>(tokens * 40), NAN), yb(tokens * 24, NAN);
      PackedActivations scratch;
      const MatmulOutput outs[] = {{ma.view(), ya}, {mb.view(), yb}};
      matmul(outs, x, tokens, scratch, SerialParallel(3), KernelSet::for_isa(isa));
      auto check = [&](const testing::OwnedMatrix& w, const std::vector<float>& y,
                       const std::string& what) {
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < w.view.rows; ++r) {
            const Ref ref = reference(w, r, scratch.token(t));
            ASSERT_NEAR(y[t * w.view.rows + r], ref.value, ref.bound)
                << what << " " << isa_name(isa) << " tokens " << tokens << " t " << t << " r " << r;
          }
        }
      };
      check(a, ya, "fused a");
      check(b, yb, "fused b");
      for (auto [lo, hi] :
           {std::pair<int64_t, int64_t>{5, 37}, {3, 9}, {16, 32}, {33, 40}, {0, 0}}) {
        std::vector<float> y(static_cast<size_t>(tokens * 40), -7.0f);
        matmul_rows(ma.view(), scratch, y, lo, hi, KernelSet::for_isa(isa));
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < 40; ++r) {
            if (r < lo || r >= hi) {
              ASSERT_EQ(y[t * 40 + r], -7.0f)
                  << "row " << r << " outside [" << lo << ", " << hi << ") was written";
            } else {
              const Ref ref = reference(a, r, scratch.token(t));
              ASSERT_NEAR(y[t * 40 + r], ref.value, ref.bound)
                  << "range [" << lo << ", " << hi << ") " << isa_name(isa) << " r " << r;
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Interleaved, ::testing::Values(WeightType::Q4_0, WeightType::Q8_0),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace pacer::ops
