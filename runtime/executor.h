#pragma once
// The pinned executor every parallel op runs on: one tbb::task_arena with `threads` slots whose
// worker threads are pinned by a task_scheduler_observer (slot i -> CPU i of the pin policy); the
// calling thread is slot 0 and is pinned too (restored on destruction).
//
// A token runs ~300 parallel regions, so a region must cost about a microsecond, not the tens of
// microseconds of waking sleeping threads. The worker threads therefore stay inside the arena for
// the executor's lifetime, each running a dispatch loop: run_chunks() publishes a job (a new
// generation number), every worker first claims pieces of the share whose index equals its slot,
// then helps with what is left of the others, and the caller does the same. Nothing ever waits for
// a particular thread - only for chunks someone has claimed and is running - so a worker TBB never
// started, or one descheduled by the OS, costs speed, never a deadlock. Idle workers spin for
// `spin_us`, then sleep on a futex.
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/isa.h"
#include "ops/parallel.h"
#include "runtime/chunk_observer.h"
#include "runtime/topology.h"

namespace pacer::runtime {

// Arena settings: -1 means "auto", chained setters in the style of tbb::task_arena::constraints.
struct ExecutorSettings {
  int threads = -1;  // -1: PinPolicy::List -> its length, else one per allowed physical core
  PinSpec pin;       // default: none
  // -1: 100 us of spinning before an idle worker sleeps; 0: sleep at once. Past 100 us a spinning
  // worker yields its CPU between looks at the job word.
  int spin_us = -1;
  // 1: a worker done with its share takes pieces of the others' (see run_chunks); 0: every
  // share runs whole on one worker; -1: default_work_stealing(). For run_chunks (the decode
  // GEMVs); work_stealing_balanced likewise for run_chunks_balanced (the prefill GEMMs), -1:
  // default_work_stealing_balanced().
  int work_stealing = -1;
  int work_stealing_balanced = -1;
  // 1: a worker waiting for the next job prefetches its share of the bytes prefetch_next()
  // named into its L2; 0: hints are ignored; -1: on unless PACER_IDLE_PREFETCH=0.
  int idle_prefetch = -1;

  ExecutorSettings& set_threads(int t) {
    threads = t;
    return *this;
  }
  ExecutorSettings& set_pin(PinSpec p) {
    pin = std::move(p);
    return *this;
  }
  ExecutorSettings& set_spin_us(int us) {
    spin_us = us;
    return *this;
  }
  ExecutorSettings& set_work_stealing(bool on) {  // both kinds of job
    work_stealing = work_stealing_balanced = on ? 1 : 0;
    return *this;
  }
  ExecutorSettings& set_work_stealing_balanced(bool on) {
    work_stealing_balanced = on ? 1 : 0;
    return *this;
  }
  ExecutorSettings& set_idle_prefetch(bool on) {
    idle_prefetch = on ? 1 : 0;
    return *this;
  }
};

// Whether run_chunks' jobs (the streaming ones: decode GEMVs) steal by default on `cpu`, with
// PACER_WORK_STEALING's value `env` (nullptr: unset): "0" no, "1" yes, else yes except on AMD
// before Zen 5. There an owner's pieces cost more than they balance: each piece is a GEMV call
// whose streams start afresh from DRAM, and two Zen 4 cores of a guest pull about the same. One
// Zen 4 core pair (2-vCPU guest, the host's 70 GB/s state), TinyLlama decode at 2 threads, whole
// shares against halving pieces, alternating rows: Q4_0 median 1.08x over 15 rounds (0.94-1.20,
// 14 above 1; 106-110 against 94-101 tok/s), Q4_K_M median 1.06x over 9 (0.59-1.27, 8 above 1);
// the pieces of a 2048-row matmul ran 3-9 % slower there in session 41's harness. Zen
// 5 (sessions 14, 34) and Sapphire Rapids at 8-16 threads (session 15) measured stealing as a gain:
// they keep it.
bool default_work_stealing(const ops::CpuFeatures& cpu, const char* env) noexcept;
// The same for run_chunks_balanced's compute-bound jobs, whose pieces start no streams: yes
// unless `env` is "0".
bool default_work_stealing_balanced(const char* env) noexcept;

// Where one worker slot ran: the CPU it was pinned to and the CPUs it was seen on.
struct WorkerPlacement {
  int worker = 0;
  int pinned_cpu = -1;     // -1: not pinned
  int first_cpu = -1;      // CPU at the start of its first chunk (-1: ran no chunk)
  int last_cpu = -1;       // CPU at the start of its latest chunk
  int64_t chunks = 0;      // chunks it ran
  int64_t off_target = 0;  // chunks that started on a CPU other than pinned_cpu
  int64_t sleeps = 0;      // waits for a job that outlasted spin_us and slept on the futex
};

class Executor final : public ops::Parallel {
 public:
  // Detects this machine's topology. Throws TopologyError for impossible pin requests.
  explicit Executor(ExecutorSettings settings = {});
  Executor(const Topology& topo, ExecutorSettings settings);
  ~Executor() override;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  int workers() const noexcept override;
  // Cuts [0, n) into workers() static shares (ops::static_chunk), share c belonging to slot c.
  // Without work stealing each share runs whole, body(c, begin, end) once, on whichever worker
  // claims it (its owner unless that one is late). With it, the owner runs its share in pieces
  // from the front (half of what is left each time, at least 4 x align elements) and a worker
  // done with its own takes half of what is left of another share from the back, so a slow
  // worker (a noisy host, an SMT sibling, a slower core) is helped instead of waited for. Pieces
  // are multiples of align from the share's start; body(c, b, e) may then run several times per
  // share, on different threads at once. Runs inline on the caller when there is one worker or
  // only one non-empty share. Call from one thread at a time (a nested or concurrent call runs
  // serially on its caller). Rethrows the first exception a piece threw, after every piece has
  // finished (pieces claimed after it are skipped). The observer brackets all the pieces one
  // thread runs in one call once.
  void run_chunks(int64_t n, int64_t align, const ops::ChunkFn& body) const override;
  // The same for compute-bound bodies (ops::Parallel::run_chunks_balanced): with work stealing,
  // owner pieces of half of what is left down to 2 grains instead of 4, so shares of a few
  // grains (a 2048-row GEMM on 16 workers: 8 each) leave something for a worker done early.
  void run_chunks_balanced(int64_t n, int64_t align, const ops::ChunkFn& body) const override;
  // Publishes the bytes the next run_chunks(plan.total_units, plan.align) will read: every worker
  // slot but the caller's, while it waits, prefetches its share of them into its L2 (up to a
  // quarter of the L2, a few lines at a time between looks at the job word, so a job still starts
  // at once); they start that job with their share's head in L2 and, done first, take the back
  // of the caller's share, which it could not prefetch while it ran the serial ops in between.
  // Call from the thread that calls run_chunks. No-op without workers or with idle_prefetch off.
  void prefetch_next(const ops::PrefetchPlan& plan) const override;
  bool idle_prefetch() const noexcept;
  // Whether run_chunks' jobs steal (the event log's run.work_stealing); and run_chunks_balanced's.
  bool work_stealing() const noexcept;
  bool work_stealing_balanced() const noexcept;
  // How long an idle worker spins before it sleeps (ExecutorSettings::spin_us, resolved).
  int spin_us() const noexcept;

  // Called around every chunk on the thread that runs it, and now and then on idle workers
  // (ChunkObserver::on_idle; nullptr: none). Set between runs; returns once no worker is still in
  // a call to the previous observer.
  void set_observer(ChunkObserver* observer) noexcept;

  const PinSpec& pin() const noexcept;
  const Topology& topology() const noexcept;
  // Pinned CPU per slot; empty for PinPolicy::None.
  const std::vector<int>& cpus() const noexcept;
  // Worker threads that entered their dispatch loop (workers() - 1 when TBB gave them all).
  int joined_workers() const noexcept;
  std::vector<WorkerPlacement> placements() const;

 private:
  void run(int64_t n, int64_t align, const ops::ChunkFn& body, bool balanced) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pacer::runtime
