// The decode roofline shared by pacer bench and the report: hand-computed ceilings.
#include "eventlog/roofline.h"

#include <gtest/gtest.h>

namespace pacer::eventlog {
namespace {

TEST(DecodeRoofline, AttentionTakesTheSlowerOfItsBytesAndItsFlops) {
  // 10 GB/s, 1e9 weight bytes (0.1 s), 1e8 KV bytes (0.01 s), 2e9 flops at 10 GFLOP/s (0.2 s):
  // the flops bind, 0.1 + 0.2 s a token.
  EXPECT_NEAR(decode_ceiling_tok_s(10, 1'000'000'000, 100'000'000, 2'000'000'000, 10), 1 / 0.3,
              1e-12);
  // At 1000 GFLOP/s the flops take 0.002 s: the bytes bind, 0.1 + 0.01 s.
  EXPECT_NEAR(decode_ceiling_tok_s(10, 1'000'000'000, 100'000'000, 2'000'000'000, 1000), 1 / 0.11,
              1e-12);
  // No FMA rate measured: bandwidth alone.
  EXPECT_NEAR(decode_ceiling_tok_s(10, 1'000'000'000, 100'000'000, 2'000'000'000, 0), 1 / 0.11,
              1e-12);
  EXPECT_EQ(decode_ceiling_tok_s(0, 1'000'000'000, 0, 0, 10), 0.0);
}

}  // namespace
}  // namespace pacer::eventlog
