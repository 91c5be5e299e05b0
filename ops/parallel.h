#pragma once
// How kernels spread work over threads without knowing who the threads are. The runtime's pinned
// executor implements Parallel (and brackets each chunk with per-worker counter reads); ops ships
// a serial and a plain-TBB implementation for tests and benchmarks.
//
// Partitioning starts static: [0, n) is cut into workers() contiguous chunks (shares) whose inner
// boundaries are multiples of `align` (static_chunk below), and chunk c always covers the same
// range for the same (n, align, workers). With pinned workers, each core then streams the same
// weight rows every token (and, with --numa, from its own node). The runtime's executor may let a
// worker done with its own chunk take the unstarted tail of a slower one's (work stealing,
// runtime/executor.h), so body(c, b, e) can run for several sub-ranges of chunk c, on different
// threads at once: c names the range, not a thread.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

namespace pacer::ops {

// The range of chunk `c` of `chunks` over [0, n), inner boundaries rounded to multiples of align.
inline std::pair<int64_t, int64_t> static_chunk(int64_t n, int64_t align, int chunks, int c) {
  const int64_t units = (n + align - 1) / align;
  const int64_t base = units / chunks, extra = units % chunks;
  const int64_t ub = c * base + (c < extra ? c : extra);
  const int64_t ue = ub + base + (c < extra ? 1 : 0);
  const int64_t b = ub * align < n ? ub * align : n;
  const int64_t e = ue * align < n ? ue * align : n;
  return {b, e};
}

// A weighted partition lays matrices' rows end to end as blocks of a few rows, each block a
// number of units in proportion to the bytes it streams, and cuts the units with static_chunk:
// a chunk [b, e) runs the blocks that start in it. These are blocks [k0, k1) of a matrix whose
// block k covers units [first + k * units, first + (k + 1) * units), `blocks` blocks in all.
inline std::pair<int64_t, int64_t> blocks_starting_in(int64_t first, int64_t units, int64_t blocks,
                                                      int64_t b, int64_t e) {
  const auto ceil_div = [](int64_t a, int64_t d) { return a <= 0 ? int64_t{0} : (a + d - 1) / d; };
  if (units <= 0 || blocks <= 0) return {0, 0};
  const int64_t k0 = std::min(ceil_div(b - first, units), blocks);
  const int64_t k1 = std::min(ceil_div(e - first, units), blocks);
  return {k0, std::max(k0, k1)};
}

// body(chunk, begin, end): called for sub-ranges that together cover each non-empty chunk once
// (the whole chunk, or pieces starting at multiples of align from its start), possibly
// concurrently.
using ChunkFn = std::function<void(int, int64_t, int64_t)>;

// The weight bytes the next parallel matmul will read, row by row, so that workers waiting for it
// can bring their share into their own L2 first (Parallel::prefetch_next). Between two decode
// matmuls the caller runs norms, rope, residual adds alone while every other core waits and DRAM
// idles; a worker done early with one matmul waits the same way. The rows of up to kMaxSegments
// matrices (a fused matmul: Q,K,V or gate,up) are laid end to end as blocks of block_rows rows,
// block_units units each (blocks_starting_in above; matmul.h StreamPartition), in [0,
// total_units), partitioned as run_chunks(total_units, align) will: chunk c holds
// static_chunk(total_units, align, workers, c) and runs the blocks that start in it.
struct PrefetchSegment {
  const std::byte* data = nullptr;
  int64_t rows = 0;         // this matrix's rows
  int64_t group_rows = 1;   // rows stored together (16 in the interleaved layouts)
  int64_t group_bytes = 0;  // bytes of one group
  int streams = 1;          // a kernel call reads its groups as this many far-apart stretches
  int64_t block_rows = 1;   // rows of a block of the partition (the last one may be short)
  int64_t block_units = 1;  // units of each block; the segment's start where the last one's ends
};

struct PrefetchPlan {
  static constexpr int kMaxSegments = 4;
  int64_t total_units = 0;
  int64_t align = 1;
  int n_segments = 0;
  std::array<PrefetchSegment, kMaxSegments> segments{};
};

// Walks chunk c's bytes of a plan in the order its kernel calls read them (one call per
// segment; a call's groups from its `streams` stretches in turn, as x16_gemv_stream_groups does)
// and prefetches them into L2, a few lines per step(), until `budget_bytes` are asked for.
// No allocation: workers build one each time the plan changes.
class ChunkPrefetcher {
 public:
  ChunkPrefetcher() = default;
  ChunkPrefetcher(const PrefetchPlan& plan, int workers, int c, int64_t budget_bytes) noexcept;
  // Prefetches up to `lines` more 64-byte lines; false once nothing is left.
  bool step(int lines) noexcept;
  // The next line step() would prefetch (null when done); for tests, with advance().
  const std::byte* next_line() const noexcept;
  void advance() noexcept;

 private:
  struct Run {  // chunk c's groups [g0, g0 + n_groups) of one segment
    const std::byte* data = nullptr;
    int64_t group_bytes = 0, g0 = 0, n_groups = 0, per_stream = 0;
    int streams = 1;
  };
  const std::byte* group_start() const noexcept;
  uintptr_t line_address() const noexcept;

  std::array<Run, PrefetchPlan::kMaxSegments> runs_{};
  int n_runs_ = 0, run_ = 0;
  int64_t k_ = 0;       // position in the current run's group order
  int64_t offset_ = 0;  // from the line holding the current group's first byte
  int64_t budget_ = 0;  // bytes still to ask for
};

class Parallel {
 public:
  virtual ~Parallel() = default;
  virtual int workers() const noexcept = 0;
  // Runs body over the static_chunk partition of [0, n) (in pieces where the implementation
  // balances load); returns when every element has run.
  virtual void run_chunks(int64_t n, int64_t align, const ChunkFn& body) const = 0;
  // The same for a body whose cost is arithmetic, not a stream of bytes (the prefill GEMMs):
  // there a piece as short as a few `align` units costs nothing, so an implementation that
  // balances load may cut the shares finely. By default, run_chunks.
  virtual void run_chunks_balanced(int64_t n, int64_t align, const ChunkFn& body) const {
    run_chunks(n, align, body);
  }
  // A hint: the next run_chunks(plan.total_rows, plan.align) reads these bytes; workers idle
  // until then may prefetch their chunk's. Implementations without idle workers ignore it.
  virtual void prefetch_next(const PrefetchPlan& /*plan*/) const {}
};

// Everything on the calling thread, chunk by chunk (tests, tiny ops).
class SerialParallel final : public Parallel {
 public:
  explicit SerialParallel(int chunks = 1) : chunks_(chunks) {}
  int workers() const noexcept override { return chunks_; }
  void run_chunks(int64_t n, int64_t align, const ChunkFn& body) const override;

 private:
  int chunks_;
};

// tbb::parallel_for with a static partitioner in the calling thread's arena (benchmarks and tests;
// the runtime uses its pinned executor instead).
class TbbParallel final : public Parallel {
 public:
  explicit TbbParallel(int workers) : workers_(workers) {}
  int workers() const noexcept override { return workers_; }
  void run_chunks(int64_t n, int64_t align, const ChunkFn& body) const override;

 private:
  int workers_;
};

}  // namespace pacer::ops
