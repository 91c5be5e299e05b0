#pragma once
// The executor calls these around every chunk a worker runs, on that worker's thread, so a
// recorder can read the worker's own counters at the start and end of its slice of an op.
// Implementations must be cheap and must not throw.

namespace pacer::runtime {

class ChunkObserver {
 public:
  virtual ~ChunkObserver() = default;
  // worker: the executor slot (0 = the calling thread), stable for the executor's lifetime.
  virtual void on_chunk_begin(int worker) noexcept = 0;
  virtual void on_chunk_end(int worker) noexcept = 0;
};

}  // namespace pacer::runtime
