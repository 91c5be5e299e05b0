#pragma once
// tbb::parallel_for for pacer's load-time loops (repack, quantize, page-in), and the hand-over
// annotations ThreadSanitizer needs around libtbb.
//
// libtbb is not built with TSan, so TSan cannot see the synchronisation inside it: that TBB's
// workers start a task after the enqueuing thread built it, or that a caller resumes after the
// last task ended. tsan_handoff_release/acquire state such edges where pacer hands its own
// objects across (runtime/executor.cpp); outside TSan builds they are nothing. One process-wide
// sync address: it over-orders (any hand-over is ordered after every earlier one), which TSan
// accepts and which hides no race inside the work itself.
//
// tbb::parallel_for's partitioner keeps std::atomic members in objects one thread constructs and
// another uses, handed over inside libtbb: no annotation at the call site reaches them, and no
// suppression can name them without also hiding pacer's own atomics. So under TSan these loops
// run on the calling thread. Their bodies write disjoint rows; the decode path's threads (the
// executor's) stay fully visible to TSan.
#include <utility>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace pacer::ops {

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline char tsan_handoff_address;
inline void tsan_handoff_release() noexcept {
  __tsan_release(&tsan_handoff_address);
}
inline void tsan_handoff_acquire() noexcept {
  __tsan_acquire(&tsan_handoff_address);
}
#else
inline void tsan_handoff_release() noexcept {}
inline void tsan_handoff_acquire() noexcept {}
#endif

// tbb::parallel_for(first, last, body): body(i) for every i in [first, last).
template <class Index, class Body>
void tbb_for_each_index(Index first, Index last, const Body& body) {
#if defined(__SANITIZE_THREAD__)
  for (Index i = first; i < last; ++i) body(i);
#else
  tbb::parallel_for(first, last, body);
#endif
}

// tbb::parallel_for(range, body, partitioner...): body(subrange) over the pieces of `range`.
template <class Range, class Body, class... Partitioner>
void tbb_for_each_range(const Range& range, const Body& body, Partitioner&&... partitioner) {
#if defined(__SANITIZE_THREAD__)
  if (!range.empty()) body(range);
  ((void)partitioner, ...);
#else
  tbb::parallel_for(range, body, std::forward<Partitioner>(partitioner)...);
#endif
}

}  // namespace pacer::ops
