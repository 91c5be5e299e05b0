#pragma once
// The probes' threads (the bandwidth probe, the FMA probe): passes that start and end at one
// barrier, so that a pass's time is its slowest thread's, as for an op whose work is split the
// same way between the workers.
#include <pthread.h>
#include <sched.h>

#include <barrier>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

namespace pacer::ops {

// Pins the calling thread to one CPU, best effort: a probe that cannot pin still measures.
inline void pin_calling_thread_to(int cpu) noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// `threads` threads, thread t pinned to cpus[t % size] when given (the calling thread is thread
// 0). setup(t) runs on each before the first barrier (the bandwidth probe's first touch);
// work(t, pass) is thread t's share of a pass; after(pass, seconds) runs once per pass on one
// thread while the others wait at the barrier (so it may change what later passes do) and returns
// whether another pass follows. It must not throw (a barrier's completion step).
template <class Setup, class Work, class After>
void run_timed_passes(int threads, const std::vector<int>& cpus, Setup setup, Work work,
                      After after) {
  using Clock = std::chrono::steady_clock;
  size_t phase = 0;  // barrier completions: 0 = all set up, then one per pass
  bool more = true;  // written in the completion step, read by every thread after it
  Clock::time_point start;
  auto on_phase = [&]() noexcept {
    const Clock::time_point now = Clock::now();
    if (phase >= 1) more = after(phase - 1, std::chrono::duration<double>(now - start).count());
    ++phase;
    start = Clock::now();
  };
  std::barrier sync(threads, on_phase);
  auto worker = [&](int t) {
    if (!cpus.empty()) pin_calling_thread_to(cpus[static_cast<size_t>(t) % cpus.size()]);
    setup(t);
    sync.arrive_and_wait();
    for (size_t pass = 0; more; ++pass) {
      work(t, pass);
      sync.arrive_and_wait();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace pacer::ops
