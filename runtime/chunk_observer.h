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
  // Called now and then on an idle worker's thread while it spins for the next job (not while it
  // sleeps, and never on the calling thread): per-step work the observer would otherwise do at
  // the start of that worker's first chunk, inside an op's window. Must return at once when
  // there is nothing to do.
  virtual void on_idle(int /*worker*/) noexcept {}
};

}  // namespace pacer::runtime
