// The act-Q8 activation quantizer: every ISA's version writes the same bytes as the reference,
// ties round away from zero like roundf, and the stored sums and scales are what the layout says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/q8_0.h"
#include "ops/type_traits.h"
#include "tests/ops/matmul_test_util.h"

namespace pacer::ops {
namespace {

std::vector<std::byte> quantize_act(QuantizeActFn fn, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<std::byte> out(static_cast<size_t>(act_q8_row_bytes(n)), std::byte{0});
  fn(x.data(), out.data(), n);
  return out;
}

TEST(QuantActQ8, ReferenceLayoutHoldsQuantsScalesAndSums) {
  // Block 0: amax 127 -> d = 1, q = roundf(x) with ties away from zero. Block 1: all zero.
  std::vector<float> x(64, 0.0f);
  const float vals[8] = {127, -2.5f, 2.5f, 0.5f, -0.5f, 0.49999997f, 1.5f, -126.5f};
  const int8_t want[8] = {127, -3, 3, 1, -1, 0, 2, -127};
  std::memcpy(x.data(), vals, sizeof vals);
  const std::vector<std::byte> act = quantize_act(quantize_act_q8_ref, x);
  const ActQ8Row row = act_q8_row(act.data(), 64);
  int32_t sum = 0;
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(row.q[j], want[j]) << "element " << j;
    sum += want[j];
  }
  EXPECT_EQ(row.d[0], 1.0f);
  EXPECT_EQ(row.sum[0], sum);
  EXPECT_EQ(row.d[1], 0.0f);
  EXPECT_EQ(row.sum[1], 0);
  for (int j = 32; j < 64; ++j) EXPECT_EQ(row.q[j], 0);
}

class QuantActIsa : public ::testing::TestWithParam<Isa> {};

TEST_P(QuantActIsa, SameBytesAsReference) {
  const QuantizeActFn fn = KernelSet::for_isa(GetParam()).matmul(WeightType::Q8_0).quantize_act;
  for (int64_t n : {32, 896, 2048, 14336}) {
    std::vector<float> x = testing::normal_floats(static_cast<size_t>(n), 3, 2.0f);
    // Exact ties: a block whose amax is 127 has id = 1, so k + 0.5 lands on a tie.
    x[0] = 127.0f;
    for (int j = 1; j < 32; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j % 7) - 3.5f;
    if (n > 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
    EXPECT_EQ(quantize_act(fn, x), quantize_act(quantize_act_q8_ref, x))
        << isa_name(GetParam()) << " n=" << n;
  }
}

TEST_P(QuantActIsa, RoundsLikeRoundfNearEveryHalf) {
  // amax 127 -> id = 1: each value is its own x*id; cover k + 0.5 and its float neighbours.
  std::vector<float> x;
  for (int k = -126; k < 126 && x.size() < 32 * 40; ++k) {
    const float half = static_cast<float>(k) + 0.5f;
    for (float v : {half, std::nextafter(half, -1000.0f), std::nextafter(half, 1000.0f)}) {
      if (x.size() % 32 == 0) x.push_back(127.0f);  // each block's amax
      x.push_back(v);
    }
  }
  while (x.size() % 32 != 0) x.push_back(0.0f);
  const std::vector<std::byte> act =
      quantize_act(KernelSet::for_isa(GetParam()).matmul(WeightType::Q8_0).quantize_act, x);
  const ActQ8Row row = act_q8_row(act.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(row.q[i], static_cast<int8_t>(std::round(x[i]))) << "x = " << x[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, QuantActIsa, ::testing::ValuesIn(supported_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace pacer::ops
