#include "runtime/thread_registry.h"

#include <algorithm>

#include "eventlog/schema.h"

namespace pacer::runtime {

namespace counter_key = eventlog::counter_key;

ThreadRegistry::ThreadRegistry(const RecorderOptions& opts, double tsc_mhz) : opts_(opts) {
  fkeys_.tsc_mhz = tsc_mhz;
  keys_.reserve(kMaxCounterKeys);
}

ThreadState* ThreadRegistry::attach(int worker) noexcept {
  try {
    std::lock_guard<std::mutex> lock(attach_mu_);
    const int n = n_threads_.load(std::memory_order_relaxed);
    if (n >= kMaxThreads) return nullptr;
    auto ts = std::make_unique<ThreadState>();
    ts->thread = pthread_self();
    ts->tid = hwcounters::current_tid();
    ts->worker = worker;
    if (opts_.counter_factory) {
      ts->set = hwcounters::CounterSet(opts_.counter_factory(worker));
    } else {
      hwcounters::CounterSpec spec;
      spec.extra_events = opts_.extra_events;
      spec.hardware = opts_.hardware_counters;
      spec.schedstat = opts_.sched_per_op;
      ts->set = hwcounters::CounterSet::open_for_calling_thread(spec);
    }
    map_keys(*ts);
    ts->sched_reader = std::make_unique<hwcounters::ThreadSchedReader>(ts->tid);
    ts->sched_begin = ts->sched_reader->read();
    ts->cpu_begin_ns = hwcounters::thread_cpu_ns(ts->thread);
    ThreadState* raw = ts.get();
    owned_.push_back(std::move(ts));
    thread_ids_[static_cast<size_t>(n)] = raw->thread;
    states_[static_cast<size_t>(n)] = raw;
    n_threads_.store(n + 1, std::memory_order_release);
    return raw;
  } catch (...) {
    return nullptr;  // out of memory or a source's constructor threw: this thread goes unrecorded
  }
}

int ThreadRegistry::key_index(const std::string& key) {
  for (size_t k = 0; k < keys_.size(); ++k) {
    if (keys_[k] == key) return static_cast<int>(k);
  }
  if (keys_.size() >= static_cast<size_t>(kMaxCounterKeys)) return kDropKey;
  keys_.push_back(key);
  const int k = static_cast<int>(keys_.size() - 1);
  if (key == counter_key::kCycles) fkeys_.cycles = k;
  if (key == counter_key::kRefCycles) fkeys_.ref_cycles = k;
  if (key == counter_key::kTaskClockNs) fkeys_.task_clock = k;
  return k;
}

void ThreadRegistry::map_keys(ThreadState& ts) {
  auto& sources = ts.set.sources();
  ts.n_sources = std::min<int>(static_cast<int>(sources.size()), kMaxSources);
  bool cycles = false, ref = false, task_clock = false;
  for (int i = 0; i < ts.n_sources; ++i) {
    const auto& src_keys = sources[static_cast<size_t>(i)]->keys();
    ts.n_events[static_cast<size_t>(i)] =
        std::min<int>(static_cast<int>(src_keys.size()), hwcounters::kMaxEventsPerSource);
    if (src_keys.size() == 1 && src_keys[0] == counter_key::kRunqNs) {
      ts.runq_src = i;
      continue;
    }
    for (int j = 0; j < ts.n_events[static_cast<size_t>(i)]; ++j) {
      const std::string& key = src_keys[static_cast<size_t>(j)];
      const auto target = static_cast<int8_t>(key_index(key));
      if (key == counter_key::kTaskClockNs) ts.task_clock_key = target;
      if (key == counter_key::kContextSwitches) ts.cs_src = i, ts.cs_idx = j;
      ts.key_of[static_cast<size_t>(i)][static_cast<size_t>(j)] = target;
      cycles = cycles || key == counter_key::kCycles;
      ref = ref || key == counter_key::kRefCycles;
      task_clock = task_clock || key == counter_key::kTaskClockNs;
    }
  }
  ts.freq_from_counters = cycles && (ref || task_clock);
}

}  // namespace pacer::runtime
