// The K-quant prefill GEMMs called directly, both AVX-512 variants (plain and VNNI), against the
// same variant's dot_rows: equal bit for bit for every token and row, over token counts on both
// sides of the 4-token groups and row counts that are no multiple of anything.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kquant2_test_util.h"
#include "kquant_test_util.h"
#include "ops/iq4_xs.h"
#include "ops/isa.h"
#include "ops/q2_k.h"
#include "ops/q3_k.h"
#include "ops/q4_k.h"
#include "ops/q5_k.h"
#include "ops/q6_k.h"
#include "ops/type_traits.h"

namespace pacer::ops {
namespace {

struct Variant {
  const char* name;
  WeightType type;
  bool vnni;
  GemmFn gemm;
  DotRowsFn dot_rows;
};

std::vector<Variant> variants() {
  return {
      {"q4_K", WeightType::Q4_K, false, gemm_q4_K_q8_K_avx512, dot_rows_q4_K_q8_K_avx512},
      {"q4_K vnni", WeightType::Q4_K, true, gemm_q4_K_q8_K_avx512vnni,
       dot_rows_q4_K_q8_K_avx512vnni},
      {"q5_K", WeightType::Q5_K, false, gemm_q5_K_q8_K_avx512, dot_rows_q5_K_q8_K_avx512},
      {"q5_K vnni", WeightType::Q5_K, true, gemm_q5_K_q8_K_avx512vnni,
       dot_rows_q5_K_q8_K_avx512vnni},
      {"q6_K", WeightType::Q6_K, false, gemm_q6_K_q8_K_avx512, dot_rows_q6_K_q8_K_avx512},
      {"q6_K vnni", WeightType::Q6_K, true, gemm_q6_K_q8_K_avx512vnni,
       dot_rows_q6_K_q8_K_avx512vnni},
      {"q3_K", WeightType::Q3_K, false, gemm_q3_K_q8_K_avx512, dot_rows_q3_K_q8_K_avx512},
      {"q2_K", WeightType::Q2_K, false, gemm_q2_K_q8_K_avx512, dot_rows_q2_K_q8_K_avx512},
      {"iq4_xs", WeightType::IQ4_XS, false, gemm_iq4_xs_q8_K_avx512, dot_rows_iq4_xs_q8_K_avx512}};
}

std::vector<std::byte> random_rows(WeightType t, int64_t rows, int64_t n, uint32_t seed) {
  std::vector<std::byte> out;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t s = seed + static_cast<uint32_t>(r);
    const std::vector<std::byte> row = t == WeightType::Q4_K ? testing::random_q4_K_row(n, s)
                                       : t == WeightType::Q6_K
                                           ? testing::random_q6_K_row(n, s)
                                           : testing::random_kquant2_row(t, n, s);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

TEST(KQuantGemm, EveryVariantEqualsItsDotRowsBitForBit) {
  const CpuFeatures cpu = detect_cpu_features();
  if (!cpu.avx512) GTEST_SKIP() << "no AVX-512 on this CPU: the GEMMs are AVX-512 kernels";
  const int64_t rows = 7;
  for (const Variant& v : variants()) {
    if (v.vnni && !cpu.avx512_vnni) continue;  // the plain variant covers this CPU
    for (int64_t n : {256, 2048}) {
      const std::vector<std::byte> w = random_rows(v.type, rows, n, 11);
      const int64_t stride = row_bytes(v.type, n), act_stride = row_bytes(WeightType::Q8_K, n);
      for (int64_t tokens : {1, 3, 4, 8, 13}) {
        std::vector<std::byte> act;
        std::mt19937 rng(static_cast<uint32_t>(tokens));
        std::normal_distribution<float> dist(0.0f, 1.0f);
        for (int64_t t = 0; t < tokens; ++t) {
          std::vector<float> x(static_cast<size_t>(n));
          for (float& e : x) e = dist(rng);
          const std::vector<std::byte> q = testing::pack_q8_K(x);
          act.insert(act.end(), q.begin(), q.end());
        }
        std::vector<float> gemm(static_cast<size_t>(tokens * rows), -1.0f);
        v.gemm(n, w.data(), stride, rows, act.data(), act_stride, tokens, gemm.data(), rows);
        for (int64_t t = 0; t < tokens; ++t) {
          std::vector<float> gemv(static_cast<size_t>(rows));
          v.dot_rows(n, w.data(), stride, rows, act.data() + t * act_stride, gemv.data());
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(gemm[static_cast<size_t>(t * rows + r)], gemv[static_cast<size_t>(r)])
                << v.name << " n " << n << " tokens " << tokens << " token " << t << " row " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace pacer::ops
