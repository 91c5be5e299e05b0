#pragma once
// Which bytes of a weight matrix a worker streams: the row partition ops::matmul uses and the
// bytes those rows occupy in either layout. The runtime places memory with it (runtime/numa.h:
// each worker's rows on its own NUMA node), so it must agree with matmul() exactly.
#include <cstdint>
#include <utility>

#include "ops/matmul.h"

namespace pacer::ops {

// Worker row ranges of a matmul start on multiples of this (matmul()'s run_chunks align): whole
// kernel row tiles (8 rows), whole 16-row interleaved groups, and workers rarely write the same
// 64-byte line of y.
inline constexpr int64_t kMatmulRowAlign = 16;

// Byte offsets [first, last) from w.data that hold rows [row_begin, row_end): row_bytes per row
// for RowMajor, whole 16-row groups for Interleaved16 (a range that ends inside a group, the
// matrix's last, includes the group's padding).
std::pair<int64_t, int64_t> row_byte_range(const WeightMatrix& w, int64_t row_begin,
                                           int64_t row_end);

}  // namespace pacer::ops
