#include "ops/parallel.h"

#include <tbb/partitioner.h>

#include "ops/tbb_for.h"

namespace pacer::ops {

void SerialParallel::run_chunks(int64_t n, int64_t align, const ChunkFn& body) const {
  for (int c = 0; c < chunks_; ++c) {
    auto [b, e] = static_chunk(n, align, chunks_, c);
    if (b < e) body(c, b, e);
  }
}

void TbbParallel::run_chunks(int64_t n, int64_t align, const ChunkFn& body) const {
  if (workers_ <= 1) {
    if (n > 0) body(0, 0, n);
    return;
  }
  tbb_for_each_range(
      tbb::blocked_range<int>(0, workers_, 1),
      [&](const tbb::blocked_range<int>& r) {
        for (int c = r.begin(); c < r.end(); ++c) {
          auto [b, e] = static_chunk(n, align, workers_, c);
          if (b < e) body(c, b, e);
        }
      },
      tbb::static_partitioner());
}

}  // namespace pacer::ops
