#pragma once
// Memory read-bandwidth probe: the roofline decode is measured against (a GEMV streams every
// weight byte once, so tok/s <= read bandwidth / weight bytes). Used by bench/, `pacer bench` and
// `pacer report`.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pacer::ops {

// The machine's read bandwidth for `threads` threads, found rather than assumed: a buffer of
// `bytes` (allocated once, 2 MiB-aligned with transparent huge pages requested, each thread's
// slice first touched by its reader) is streamed by every variant of the read loop -- load width
// (AVX-512 / AVX2 / scalar, those this CPU runs), concurrent sequential streams per thread (1-16,
// as a GEMV reads several weight rows at once), lines read from one stream before the next (1, or
// a burst of 16 or 32 as the interleaved GEMVs read their runs; the 256-bit loads in bursts too
// on an AVX-512 CPU), software prefetch distance (0
// or 1024 B, then 256, 512, 2048 and 4096 B at the stream count and load width of the best
// prefetching loop) and the page touch 8 KiB ahead (1, 2 and 4 streams prefetching 1024 B, then
// as the refinement's base) -- and the best pass of the best variant is the figure. A decode that
// beats it means the probe failed, not that the decode is above the limit. Threads are pinned to
// `cpus` (thread t to cpus[t % size]) when given, so the figure is for the placement a run uses.
// Pick bytes far larger than the last-level cache (e.g. 1 GiB). On a shared machine the figure is
// low (a pass spans many time slices).
struct BandwidthOptions {
  int threads = 1;
  size_t bytes = size_t{1} << 30;
  int reps = 3;             // timed passes per variant, after one warm-up pass
  std::vector<int> cpus{};  // pin the probe's threads (empty: no pinning)
  bool search = true;       // false: only the default variant (AVX-512/AVX2, 4 streams in bursts of
                            // 16 lines, no prefetch)
  // Non-empty: only the read loop of this name (a BandwidthTrial::variant of an earlier probe on
  // this machine), to measure again what a search found best; overrides `search`. Throws
  // std::invalid_argument for a name this CPU has no loop for.
  std::string variant{};
  // Each thread reads its slice this many times per timed pass (>= 1): a working set small
  // enough to stay cached needs passes long enough to time (measure_cache_reach).
  int reads_per_pass = 1;
};
struct BandwidthTrial {
  std::string variant;  // e.g. "avx512 x8 streams, prefetch 1024 B"
  double gbs = 0;       // its best pass
};
struct BandwidthProbe {
  double gbs = 0;       // the best trial's figure (1e9 bytes/s)
  std::string variant;  // the best trial's read loop (BandwidthOptions::variant measures it again)
  std::string method;   // how it was obtained (best variant, pages, threads, pinning)
  std::vector<BandwidthTrial> trials;  // every variant, in the order run
  bool huge_pages = false;             // the kernel grants transparent huge pages to the buffer
};
// Throws std::invalid_argument for threads < 1, reps < 1 or bytes < 64 KiB * threads;
// std::bad_alloc if the buffer cannot be allocated.
BandwidthProbe probe_read_bandwidth(const BandwidthOptions& opts);

// How large a working set the probe's threads keep in cache between passes, measured rather than
// taken from cpuid: a hypervisor reports whatever caches it likes (an Oxide "Turin-like" guest
// says 508 MiB of L3 per vCPU, yet re-reads of 128 MiB run at DRAM speed there), and a
// multi-socket or multi-CCD machine's cache is split between threads. Working sets from
// min_bytes doubling up to max_bytes are re-read (probe_read_bandwidth pinned to `cpus`: after
// the first touch and a warm-up pass, the best of 3 passes of at least 256 MiB each) by the read
// loop that re-reads min_bytes fastest (a search at that size); the reach is the largest size
// read at >= factor x dram_gbs (the streaming figure of the same threads). Sizes are not cut
// short at the first slow one: a pass disturbed by the host reads low, never high.
struct CacheReachOptions {
  int threads = 1;
  std::vector<int> cpus{};
  double dram_gbs = 0;  // the streaming bandwidth of the same threads (probe_read_bandwidth)
  size_t min_bytes = size_t{4} << 20;
  size_t max_bytes = size_t{512} << 20;
  double factor = 1.25;
};
struct CacheReach {
  size_t bytes = 0;                   // 0: even min_bytes read at DRAM speed
  bool at_max = false;                // max_bytes still read faster: the reach may be larger
  std::vector<BandwidthTrial> sizes;  // each size re-read ("64 MiB") and its GB/s, in order
  std::string variant;                // the read loop used (the fastest at min_bytes)
};
// The rule alone: the largest of `sizes` (bytes, GB/s) read at >= factor x dram_gbs (0: none).
size_t cache_reach_of(const std::vector<std::pair<size_t, double>>& sizes, double dram_gbs,
                      double factor);
// Throws std::invalid_argument for min_bytes > max_bytes or a bad thread count (as the probe).
CacheReach measure_cache_reach(const CacheReachOptions& opts);

// probe_read_bandwidth(...).gbs, unpinned.
double measure_read_bandwidth_gbs(int threads, size_t bytes, int reps);

// The per-ISA read loops (bandwidth_avx2.cpp, bandwidth_avx512.cpp): sum of the 64-bit words of
// [p, p + bytes) read as `streams` (1, 2, 4, 8 or 16) concurrent sequential streams, `burst` (>= 1)
// 64-byte lines of one stream before the next, each prefetching `prefetch` bytes ahead (0: none)
// and, with `page_touch` > 0, the first line of each 4 KiB page as the point `page_touch` bytes
// ahead reaches it (the 16-row GEMVs' page touch, ops/isa.h X16GemvPlan); bytes a multiple of 64,
// p 64-byte aligned.
uint64_t sum_words_avx2(const std::byte* p, size_t bytes, int streams, size_t burst,
                        size_t prefetch, size_t page_touch);
uint64_t sum_words_avx512(const std::byte* p, size_t bytes, int streams, size_t burst,
                          size_t prefetch, size_t page_touch);

}  // namespace pacer::ops
