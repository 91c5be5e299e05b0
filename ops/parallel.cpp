#include "ops/parallel.h"

#include <algorithm>

#include <tbb/partitioner.h>

#include "ops/tbb_for.h"

namespace pacer::ops {

ChunkPrefetcher::ChunkPrefetcher(const PrefetchPlan& plan, int workers, int c,
                                 int64_t budget_bytes) noexcept
    : budget_(budget_bytes) {
  if (workers < 1 || c < 0 || c >= workers || plan.total_units <= 0) return;
  const auto [b, e] = static_chunk(plan.total_units, plan.align < 1 ? 1 : plan.align, workers, c);
  int64_t first = 0;
  for (int i = 0; i < plan.n_segments && i < PrefetchPlan::kMaxSegments; ++i) {
    const PrefetchSegment& sg = plan.segments[static_cast<size_t>(i)];
    const int64_t block_rows = std::max<int64_t>(sg.block_rows, 1);
    const int64_t blocks = (sg.rows + block_rows - 1) / block_rows;
    const auto [k0, k1] = blocks_starting_in(first, sg.block_units, blocks, b, e);
    first += blocks * sg.block_units;
    const int64_t rb = k0 * block_rows, re = std::min(k1 * block_rows, sg.rows);
    if (rb >= re || sg.data == nullptr || sg.group_bytes <= 0 || sg.group_rows <= 0) continue;
    Run& r = runs_[static_cast<size_t>(n_runs_++)];
    r.data = sg.data;
    r.group_bytes = sg.group_bytes;
    r.g0 = rb / sg.group_rows;
    r.n_groups = (re + sg.group_rows - 1) / sg.group_rows - r.g0;
    // As x16_gemv_stream_groups: S stretches of per_stream groups once there is one group per
    // stretch, then the groups left over one at a time.
    r.streams = sg.streams > 1 && r.n_groups >= sg.streams ? sg.streams : 1;
    r.per_stream = r.n_groups / r.streams;
  }
}

const std::byte* ChunkPrefetcher::group_start() const noexcept {
  const Run& r = runs_[static_cast<size_t>(run_)];
  const int64_t striped = r.streams * r.per_stream;
  const int64_t g = k_ < striped ? (k_ % r.streams) * r.per_stream + k_ / r.streams : k_;
  return r.data + (r.g0 + g) * r.group_bytes;
}

// Lines from the one holding the group's first byte (a row-major row need not start on a line:
// a Q8_0 block is 34 bytes) to the one holding its last.
// (Computed in integers: that line may begin before the matrix's first byte, outside its object.)
uintptr_t ChunkPrefetcher::line_address() const noexcept {
  return (reinterpret_cast<uintptr_t>(group_start()) & ~uintptr_t{63}) +
         static_cast<uintptr_t>(offset_);
}

const std::byte* ChunkPrefetcher::next_line() const noexcept {
  if (run_ >= n_runs_ || budget_ <= 0) return nullptr;
  return reinterpret_cast<const std::byte*>(line_address());
}

void ChunkPrefetcher::advance() noexcept {
  if (run_ >= n_runs_) return;
  budget_ -= 64;
  offset_ += 64;
  const Run& r = runs_[static_cast<size_t>(run_)];
  const uintptr_t group_end =
      reinterpret_cast<uintptr_t>(group_start()) + static_cast<uintptr_t>(r.group_bytes);
  if (line_address() < group_end) return;
  offset_ = 0;
  if (++k_ < r.n_groups) return;
  k_ = 0;
  ++run_;
}

bool ChunkPrefetcher::step(int lines) noexcept {
  for (int i = 0; i < lines; ++i) {
    const std::byte* p = next_line();
    if (p == nullptr) return false;
    // prefetcht1: into this core's L2, where the kernel reads it. A prefetch never faults, so a
    // plan outliving its weights (a model unloaded with the executor still up) costs nothing.
    __builtin_prefetch(p, 0, 2);
    advance();
  }
  return true;
}

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
