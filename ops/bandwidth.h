#pragma once
// Memory read-bandwidth probe: the roofline decode is measured against (a GEMV streams every
// weight byte once, so tok/s <= read bandwidth / weight bytes). Used by bench/, `pacer bench` and
// `pacer report`.
#include <cstddef>
#include <cstdint>

namespace pacer::ops {

// Streams a `bytes`-long buffer (allocated and written once, 64-byte aligned) with `threads`
// threads, each reading its contiguous slice as four concurrent sequential streams (as a GEMV
// reads several weight rows at once; one stream alone under-reads a core's bandwidth by ~30%)
// with the widest loads this CPU runs (AVX-512, AVX2 or scalar), sum-reducing so the loads
// cannot be elided. Runs `reps` timed passes after one
// warm-up pass and returns the best pass in GB/s (1e9 bytes/s). Pick bytes far larger than the
// last-level cache (e.g. 1 GiB) for a DRAM figure. Throws std::invalid_argument for threads < 1,
// reps < 1 or bytes < 64 * threads; std::bad_alloc if the buffer cannot be allocated. On a
// machine shared with other work the figure is low (a pass is many scheduler time slices).
double measure_read_bandwidth_gbs(int threads, size_t bytes, int reps);

// The per-ISA reduce loops (bandwidth_avx2.cpp, bandwidth_avx512.cpp): sum of the 64-bit words of
// [p, p + bytes) read as four concurrent streams; bytes a multiple of 64, p 64-byte aligned.
uint64_t sum_words_avx2(const std::byte* p, size_t bytes);
uint64_t sum_words_avx512(const std::byte* p, size_t bytes);

}  // namespace pacer::ops
