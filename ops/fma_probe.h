#pragma once
// The machine's fp32 multiply-add rate: the compute side of the roofline. At depth, decode's
// attention over an F16 cache does 4 * head_dim flops per key and query head on 4 * head_dim
// bytes of K and V shared by the query heads of a KV head (GQA 8: 8 flops a byte), more than one
// core's FMA units keep up with at its read bandwidth (an AVX2 Zen 4 core: ~3 flops a byte), so a
// bandwidth-only ceiling there is one no kernel can reach. Used by `pacer bench`.
#include <cstdint>
#include <string>
#include <vector>

namespace pacer::ops {

// `threads` threads (thread t pinned to cpus[t % size] when given) run chains of independent
// multiply-adds in registers between two barriers -- every variant this CPU runs: vector width
// (AVX-512, AVX2 with FMA, scalar SSE multiply then add) and accumulators per thread (the
// latency x throughput of the FMA units needs 8 or more in flight) -- and the best pass of the
// best variant is the figure: flops (2 per lane and multiply-add) of all threads over the slowest
// thread's time. Threads that share a core (SMT) share its FMA units, as a run's workers do.
struct FmaProbeOptions {
  int threads = 1;
  std::vector<int> cpus{};  // pin the probe's threads (empty: no pinning)
  int reps = 5;             // timed passes per variant, after one warm-up pass
  // multiply-add instructions per thread and pass (~20 ms on a 3 GHz core issuing two a cycle)
  int64_t instructions = int64_t{1} << 27;
};
struct FmaTrial {
  std::string variant;  // e.g. "avx2 x12 accumulators"
  double gflops = 0;    // its best pass, all threads (1e9 flops/s)
};
struct FmaProbe {
  double gflops = 0;    // the best trial's figure, all threads
  std::string variant;  // the best trial's loop
  std::string method;   // how it was obtained
  std::vector<FmaTrial> trials;
};
// Throws std::invalid_argument for threads < 1, reps < 1 or instructions < 1024.
FmaProbe probe_fma_rate(const FmaProbeOptions& opts);

// The per-ISA chains (fma_probe_avx2.cpp, fma_probe_avx512.cpp): `accumulators` (8 or 12; the
// AVX-512 loop also 16 and 24) vectors each updated acc = acc * m + c `iterations` times, m and c
// chosen so the values stay near 1 (no overflow, no denormals); returns the sum of the lanes so the
// work is kept. Counts: iterations x accumulators multiply-adds of 8 (AVX2) or 16 (AVX-512) lanes.
float fma_chains_avx2(int64_t iterations, int accumulators);
float fma_chains_avx512(int64_t iterations, int accumulators);

}  // namespace pacer::ops
