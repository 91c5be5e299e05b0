// The read-bandwidth probe: a positive, finite figure for a small buffer, and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "ops/bandwidth.h"

namespace pacer::ops {
namespace {

TEST(Bandwidth, SmallBufferGivesAPlausibleFigure) {
  for (int threads : {1, 2}) {
    const double gbs = measure_read_bandwidth_gbs(threads, 8u << 20, 2);
    EXPECT_TRUE(std::isfinite(gbs));
    EXPECT_GT(gbs, 0.1) << threads;      // even a loaded VM streams 8 MiB faster than this
    EXPECT_LT(gbs, 10000.0) << threads;  // 10 TB/s: no CPU reads this fast
  }
}

TEST(Bandwidth, RejectsBadArguments) {
  EXPECT_THROW(measure_read_bandwidth_gbs(0, 1 << 20, 1), std::invalid_argument);
  EXPECT_THROW(measure_read_bandwidth_gbs(1, 1 << 20, 0), std::invalid_argument);
  EXPECT_THROW(measure_read_bandwidth_gbs(4, 128, 1), std::invalid_argument);
}

}  // namespace
}  // namespace pacer::ops
