#pragma once
// The recorder's hot path: the threads that bracket ops and chunks, each with its own counter
// sources (opened on that thread), and the bracket reads themselves. Everything here runs per op
// per worker, so it does not allocate or lock once a thread is attached: lookup() scans a short
// array of published threads, the reads fill fixed-size Readings, and deltas go straight into
// the op's preallocated WorkerSlice. A thread attaches once, under a mutex, at its first bracket.
#include <pthread.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "hwcounters/counter_set.h"
#include "hwcounters/sched.h"
#include "runtime/event_log.h"
#include "runtime/recorder.h"

namespace pacer::runtime {

inline constexpr int kMaxSources = 6;    // counter sources per thread
inline constexpr int kMaxThreads = 256;  // threads one recorder brackets
inline constexpr int kMaxDepth = 4;      // nested serial ops
inline constexpr int8_t kDropKey = -1;   // event the key table had no room for

using Readings = std::array<hwcounters::Reading, kMaxSources>;

// Everything one thread needs to bracket its chunks: its own counter sources (opened on it), the
// map from their events to the recorder's key table, and its begin readings.
struct ThreadState {
  pthread_t thread{};
  int tid = 0;
  int worker = 0;  // slot it last ran as
  int last_cpu = -1;
  hwcounters::CounterSet set;
  int n_sources = 0;
  std::array<int, kMaxSources> n_events{};
  std::array<std::array<int8_t, hwcounters::kMaxEventsPerSource>, kMaxSources> key_of{};
  int task_clock_key = -1;
  bool freq_from_counters = false;
  // Run-queue delay: the schedstat source is read only when the thread was switched out since its
  // last read (its perf context_switches count moved): run_delay can only grow across a switch.
  // That keeps the per-op /proc read off the hot path unless the scheduler intervened.
  int runq_src = -1;             // source holding "runq_ns" (not read by read_sources)
  int cs_src = -1, cs_idx = -1;  // where context_switches lives, if counted
  bool runq_valid = false;
  uint64_t runq_last = 0, runq_last_cs = 0;
  int64_t runq_reads = 0;
  // The last end-of-bracket reading (chunk or serial op) and when it was taken: a bracket that
  // begins within opts.reuse_reading_ns of it reuses it instead of reading the counters again.
  Readings last_end;
  uint32_t last_end_ok = 0;
  int64_t last_end_ns = INT64_MIN / 2;
  // Chunk bracket.
  Readings chunk_begin, chunk_end;
  uint32_t chunk_ok = 0;
  int64_t chunk_runq = -1;
  int64_t chunk_t0 = 0;
  int chunk_cpu = -1;
  // Serial-op brackets, one per nesting depth.
  std::array<Readings, kMaxDepth> serial_begin;
  std::array<uint32_t, kMaxDepth> serial_ok{};
  std::array<bool, kMaxDepth> serial_taken{};
  std::array<int, kMaxDepth> serial_cpu{};
  std::array<int64_t, kMaxDepth> serial_runq{};
  // Per step.
  std::atomic<int64_t> freq_step{-1};  // step_serial of step_mhz (written by this thread)
  float step_mhz = NAN;
  int64_t calibrate_ns = 0;
  std::unique_ptr<hwcounters::ThreadSchedReader> sched_reader;
  hwcounters::ThreadSched sched_begin;
  int64_t cpu_begin_ns = -1;  // exact thread CPU time at the step's start
};

// The attached threads and the counter key table they map their events into (index =
// WorkerSlice::counters index). Entries [0, size()) are immutable once published; the key table
// grows only while a thread attaches.
class ThreadRegistry {
 public:
  ThreadRegistry(const RecorderOptions& opts, double tsc_mhz);
  ThreadRegistry(const ThreadRegistry&) = delete;
  ThreadRegistry& operator=(const ThreadRegistry&) = delete;

  // The calling thread's state, attached on first use as executor slot `worker` (nullptr: it
  // could not be attached and goes unrecorded). Hot path.
  ThreadState* lookup(int worker) noexcept {
    if (ThreadState* ts = find_current()) {
      ts->worker = worker;
      return ts;
    }
    return attach(worker);
  }

  // The calling thread's state if it is attached, else nullptr (attaches nothing).
  ThreadState* find_current() const noexcept {
    const pthread_t self = pthread_self();
    const int n = n_threads_.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
      if (pthread_equal(thread_ids_[static_cast<size_t>(i)], self)) {
        return states_[static_cast<size_t>(i)];
      }
    }
    return nullptr;
  }

  // Attaches the calling thread (opens its counter sources); nullptr when full or on failure.
  ThreadState* attach(int worker) noexcept;

  // The threads attached so far, in attach order (the first is the recorder's constructing thread).
  std::span<ThreadState* const> threads() const noexcept {
    return {states_.data(), static_cast<size_t>(n_threads_.load(std::memory_order_acquire))};
  }
  int size() const noexcept { return n_threads_.load(std::memory_order_acquire); }
  const std::vector<std::string>& keys() const noexcept { return keys_; }
  const FrequencyKeys& frequency_keys() const noexcept { return fkeys_; }

 private:
  int key_index(const std::string& key);
  void map_keys(ThreadState& ts);

  const RecorderOptions& opts_;
  std::vector<std::string> keys_;
  FrequencyKeys fkeys_;
  std::mutex attach_mu_;
  std::vector<std::unique_ptr<ThreadState>> owned_;
  std::array<pthread_t, kMaxThreads> thread_ids_{};
  std::array<ThreadState*, kMaxThreads> states_{};
  std::atomic<int> n_threads_{0};
};

// Bracket reads on the calling thread's own sources (hot path).

inline uint32_t read_sources(ThreadState& ts, Readings& r) noexcept {
  uint32_t ok = 0;
  auto& sources = ts.set.sources();
  for (int i = 0; i < ts.n_sources; ++i) {
    if (i == ts.runq_src) continue;
    if (sources[static_cast<size_t>(i)]->read(r[static_cast<size_t>(i)])) ok |= 1u << i;
  }
  return ok;
}

// Begin-of-bracket reading: the previous end reading when it is fresh (back-to-back ops on
// one thread: the recorder's own bookkeeping in between, under reuse_reading_ns, goes to the
// later op), else a new one. Halves the counter reads (syscalls for software events) of the
// serial ops on the calling thread.
inline uint32_t begin_reading(ThreadState& ts, Readings& r, int64_t now,
                              int64_t window_ns) noexcept {
  if (now - ts.last_end_ns < window_ns) {
    r = ts.last_end;
    return ts.last_end_ok;
  }
  return read_sources(ts, r);
}
inline void note_end_reading(ThreadState& ts, const Readings& r, uint32_t ok,
                             int64_t now) noexcept {
  ts.last_end = r;
  ts.last_end_ok = ok;
  ts.last_end_ns = now;
}

// The thread's cumulative run-queue delay now (-1: not measured), given readings just taken.
inline int64_t runq_now(ThreadState& ts, const Readings& r, uint32_t ok) noexcept {
  if (ts.runq_src < 0) return -1;
  const bool have_cs = ts.cs_src >= 0 && (ok >> ts.cs_src & 1u);
  const uint64_t cs =
      have_cs ? r[static_cast<size_t>(ts.cs_src)].values[static_cast<size_t>(ts.cs_idx)] : 0;
  if (have_cs && ts.runq_valid && cs == ts.runq_last_cs) return static_cast<int64_t>(ts.runq_last);
  hwcounters::Reading rq;
  ++ts.runq_reads;
  if (!ts.set.sources()[static_cast<size_t>(ts.runq_src)]->read(rq)) return -1;
  ts.runq_last = rq.values[0];
  ts.runq_last_cs = cs;
  ts.runq_valid = have_cs;
  return static_cast<int64_t>(ts.runq_last);
}

inline void add_runq(int64_t begin, int64_t end, WorkerSlice& s) noexcept {
  if (begin < 0 || end < begin) return;
  s.runq_ns = (s.runq_ns < 0 ? 0 : s.runq_ns) + (end - begin);
}

// Adds the deltas between two readings of the thread's sources to a slice.
inline void accumulate(const ThreadState& ts, const Readings& a, uint32_t ok_a, const Readings& b,
                       uint32_t ok_b, WorkerSlice& s) noexcept {
  const uint32_t ok = ok_a & ok_b;
  for (int i = 0; i < ts.n_sources; ++i) {
    if (!(ok >> i & 1u) || i == ts.runq_src) continue;
    const hwcounters::Reading& ra = a[static_cast<size_t>(i)];
    const hwcounters::Reading& rb = b[static_cast<size_t>(i)];
    const float mux = static_cast<float>(hwcounters::mux_ratio(ra, rb));
    if (mux < s.mux) s.mux = mux;
    for (int j = 0; j < ts.n_events[static_cast<size_t>(i)]; ++j) {
      const int8_t k = ts.key_of[static_cast<size_t>(i)][static_cast<size_t>(j)];
      const uint64_t d = hwcounters::scaled_delta(ra, rb, j);
      if (k >= 0) {
        s.counters[static_cast<size_t>(k)] += d;
        s.present |= 1u << k;
        if (k == ts.task_clock_key) {
          s.oncpu_ns = (s.oncpu_ns < 0 ? 0 : s.oncpu_ns) + static_cast<int64_t>(d);
        }
      }
    }
  }
}

}  // namespace pacer::runtime
