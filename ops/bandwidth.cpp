// The read-bandwidth probe: threads stream disjoint slices of one large buffer between two
// barriers; the pass time is the slowest thread's, as for a GEMV whose rows are split the same way.
#include "ops/bandwidth.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ops/isa.h"

namespace pacer::ops {
namespace {

using SumFn = uint64_t (*)(const std::byte*, size_t);

uint64_t sum_words_scalar(const std::byte* p, size_t bytes) {
  uint64_t s = 0;
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    s += w;
  }
  return s;
}

SumFn best_sum_fn() {
  switch (detect_isa()) {
    case Isa::Avx512:
      return sum_words_avx512;
    case Isa::Avx2:
      return sum_words_avx2;
    case Isa::Scalar:
      break;
  }
  return sum_words_scalar;
}

struct FreeDeleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

}  // namespace

double measure_read_bandwidth_gbs(int threads, size_t bytes, int reps) {
  if (threads < 1 || reps < 1 || bytes < 64u * static_cast<size_t>(threads)) {
    throw std::invalid_argument(
        "measure_read_bandwidth_gbs: need threads >= 1, reps >= 1 and "
        "bytes >= 64*threads (got threads=" +
        std::to_string(threads) + ", bytes=" + std::to_string(bytes) +
        ", reps=" + std::to_string(reps) + ")");
  }
  const size_t slice = bytes / static_cast<size_t>(threads) / 64 * 64;
  const size_t total = slice * static_cast<size_t>(threads);
  std::unique_ptr<std::byte, FreeDeleter> buf(
      static_cast<std::byte*>(std::aligned_alloc(64, total)));
  if (!buf) throw std::bad_alloc();
  const SumFn sum = best_sum_fn();

  using Clock = std::chrono::steady_clock;
  std::vector<double> pass_seconds;
  Clock::time_point start;
  // Completion step of the barrier: runs once per phase on one thread.
  auto on_phase = [&, phase = 0]() mutable noexcept {
    const Clock::time_point now = Clock::now();
    if (phase >= 2) pass_seconds.push_back(std::chrono::duration<double>(now - start).count());
    start = Clock::now();
    ++phase;
  };
  std::barrier sync(threads, on_phase);
  std::vector<uint64_t> sink(static_cast<size_t>(threads));
  auto worker = [&](int t) {
    std::byte* mine = buf.get() + slice * static_cast<size_t>(t);
    std::memset(mine, t + 1, slice);      // first touch by the reader: pages are mapped and local
    sync.arrive_and_wait();               // phase 0: written
    for (int r = 0; r < reps + 1; ++r) {  // pass 0 warms up (TLB, frequency) and is not kept
      sink[static_cast<size_t>(t)] += sum(mine, slice);
      sync.arrive_and_wait();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (std::thread& th : pool) th.join();
  const double best = *std::min_element(pass_seconds.begin(), pass_seconds.end());
  return static_cast<double>(total) / best / 1e9;
}

}  // namespace pacer::ops
