#pragma once
// Pins the calling thread to one CPU, best effort (unpinned on failure): the probes (bandwidth,
// FMA) measure the placement a run's workers use, and a probe that cannot pin still measures.
#include <pthread.h>
#include <sched.h>

namespace pacer::ops {

inline void pin_calling_thread_to(int cpu) noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace pacer::ops
