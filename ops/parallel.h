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

// body(chunk, begin, end): called for sub-ranges that together cover each non-empty chunk once
// (the whole chunk, or pieces starting at multiples of align from its start), possibly
// concurrently.
using ChunkFn = std::function<void(int, int64_t, int64_t)>;

class Parallel {
 public:
  virtual ~Parallel() = default;
  virtual int workers() const noexcept = 0;
  // Runs body over the static_chunk partition of [0, n) (in pieces where the implementation
  // balances load); returns when every element has run.
  virtual void run_chunks(int64_t n, int64_t align, const ChunkFn& body) const = 0;
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
