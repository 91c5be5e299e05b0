#include "runtime/executor.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#include <tbb/task_scheduler_observer.h>

namespace pacer::runtime {
namespace {

// ThreadSanitizer sees our atomics but not the synchronisation inside libtbb (not built with
// TSan): the hand-over of the executor to TBB's worker threads (enqueue -> worker entry) and
// back (group.wait) would otherwise read as races on every field the constructor wrote. These
// two calls state those happens-before edges; outside TSan builds they are nothing.
// One process-wide sync object: it over-orders (any hand-over orders after any earlier one),
// which TSan accepts, and needs no read of the object being handed over to find it.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline char tbb_handoff_tag;
inline void tbb_handoff_release() noexcept {
  __tsan_release(&tbb_handoff_tag);
}
inline void tbb_handoff_acquire() noexcept {
  __tsan_acquire(&tbb_handoff_tag);
}
#else
inline void tbb_handoff_release() noexcept {}
inline void tbb_handoff_acquire() noexcept {}
#endif

using Clock = std::chrono::steady_clock;

constexpr size_t kThreadLimit = 4096;  // TBB worker limit while an executor lives (see Impl)

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) noexcept {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) noexcept {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

// Sets the calling thread's affinity to `cpus`; returns 0 or an errno value.
int set_thread_affinity(const std::vector<int>& cpus) noexcept {
  if (cpus.empty()) return 0;
  int max_cpu = 0;
  for (int c : cpus) max_cpu = std::max(max_cpu, c);
  cpu_set_t* set = CPU_ALLOC(max_cpu + 1);
  if (!set) return ENOMEM;
  const size_t size = CPU_ALLOC_SIZE(max_cpu + 1);
  CPU_ZERO_S(size, set);
  for (int c : cpus) CPU_SET_S(c, size, set);
  const int rc = sched_setaffinity(0, size, set) == 0 ? 0 : errno;
  CPU_FREE(set);
  return rc;
}

std::vector<int> thread_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) out.push_back(i);
  }
  return out;
}

// One per chunk index: the generation of the last job whose chunk was claimed. Own cache line,
// since every thread may CAS it.
struct alignas(64) ChunkClaim {
  std::atomic<uint32_t> generation{0};
};

// One per worker slot, written only by the thread running that slot.
struct alignas(64) SlotStats {
  std::atomic<int> first_cpu{-1};
  std::atomic<int> last_cpu{-1};
  std::atomic<int64_t> chunks{0};
  std::atomic<int64_t> off_target{0};
  std::atomic<int> pin_errno{0};  // nonzero: pinning this slot's thread failed
};

}  // namespace

struct Executor::Impl {
  // Pins each TBB worker once, when it enters the arena, to the CPU of its slot; restores the
  // mask it came with when it leaves (only at executor shutdown: workers stay in their loops).
  class PinningObserver final : public tbb::task_scheduler_observer {
   public:
    PinningObserver(tbb::task_arena& arena, Impl& impl)
        : tbb::task_scheduler_observer(arena), impl_(impl) {
      tbb_handoff_release();  // TBB may call the observer from its threads from here on
      observe(true);
    }
    ~PinningObserver() override { observe(false); }
    void on_scheduler_entry(bool is_worker) noexcept override {
      tbb_handoff_acquire();
      if (!is_worker || impl_.cpus.empty()) return;  // slot 0 is pinned by the executor itself
      const int slot = tbb::this_task_arena::current_thread_index();
      if (slot <= 0 || slot >= impl_.workers) return;
      const int rc = set_thread_affinity({impl_.cpus[static_cast<size_t>(slot)]});
      impl_.stats[slot].pin_errno.store(rc, std::memory_order_relaxed);
    }
    void on_scheduler_exit(bool is_worker) noexcept override {
      tbb_handoff_acquire();
      if (!is_worker || impl_.cpus.empty()) return;
      set_thread_affinity(impl_.caller_mask);
    }

   private:
    Impl& impl_;
  };

  struct Job {
    int64_t n = 0, align = 1;
    const ops::ChunkFn* body = nullptr;
    ChunkObserver* observer = nullptr;
  };

  Impl(const Topology& topo_in, ExecutorSettings s)
      : topo(topo_in),
        pin(std::move(s.pin)),
        workers(resolve_threads(topo, pin, s.threads)),
        cpus(assign_cpus(topo, pin, workers)),
        spin_ns(int64_t{s.spin_us < 0 ? 100 : s.spin_us} * 1000),
        claims(new ChunkClaim[static_cast<size_t>(workers)]),
        stats(new SlotStats[static_cast<size_t>(workers)]),
        arena(workers, 1) {
    caller_mask = thread_affinity();
    if (workers > 1) {
      // TBB's default pool has one worker per CPU minus one, shared by every arena, and this
      // executor holds its workers for its whole life: lift the limit (the smallest active
      // global_control wins) so that more threads than CPUs (pin 'none' only) and several live
      // executors each get their own threads. TBB still creates threads only on demand.
      // Initialise the arena before pinning the caller: TBB sizes its pool from the
      // initialising thread's affinity mask.
      control.emplace(tbb::global_control::max_allowed_parallelism, kThreadLimit);
      arena.initialize();
    }
    if (!cpus.empty()) {
      if (int rc = set_thread_affinity({cpus[0]}); rc != 0) {
        throw TopologyError(
            fmt::format("cannot pin the calling thread to CPU {}: {}", cpus[0], std::strerror(rc)));
      }
      caller_pinned = true;
    }
    if (workers == 1) return;
    pinning = std::make_unique<PinningObserver>(arena, *this);
    for (int i = 1; i < workers; ++i) {
      auto task = group.defer([this] { worker_loop(); });
      tbb_handoff_release();  // after the task (and its capture) is built, before TBB runs it
      arena.enqueue(std::move(task));
    }
    // Wait (bounded) for the workers to arrive so pinning is done before the first op. If TBB
    // cannot supply them all, the executor still works: the caller claims their chunks.
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (joined.load(std::memory_order_acquire) < workers - 1 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  ~Impl() {
    if (workers > 1) {
      stop.store(true, std::memory_order_seq_cst);
      generation.fetch_add(1, std::memory_order_seq_cst);
      futex_wake_all(&generation);
      arena.execute([this] { group.wait(); });
      tbb_handoff_acquire();
      pinning.reset();
    }
    if (caller_pinned) set_thread_affinity(caller_mask);
  }

  // Notes where slot `slot` starts a chunk; called only on that slot's thread.
  void note_cpu(int slot) noexcept {
    SlotStats& st = stats[slot];
    const int cpu = sched_getcpu();
    if (st.first_cpu.load(std::memory_order_relaxed) < 0) {
      st.first_cpu.store(cpu, std::memory_order_relaxed);
    }
    st.last_cpu.store(cpu, std::memory_order_relaxed);
    st.chunks.store(st.chunks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (!cpus.empty() && cpu != cpus[static_cast<size_t>(slot)]) {
      st.off_target.store(st.off_target.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
    }
  }

  void run_one(int slot, int chunk, const Job& j) noexcept {
    auto [b, e] = ops::static_chunk(j.n, j.align, workers, chunk);
    if (b >= e) return;
    note_cpu(slot);
    if (j.observer) j.observer->on_chunk_begin(slot);
    try {
      (*j.body)(chunk, b, e);
    } catch (...) {
      if (!failed.exchange(true, std::memory_order_acq_rel)) error = std::current_exception();
    }
    if (j.observer) j.observer->on_chunk_end(slot);
  }

  // Claims and runs chunks of generation g: the chunk numbered like the slot first, then any
  // other still unclaimed. A claim succeeds only if the chunk's last claim was generation g - 1,
  // so a thread holding a stale generation can never claim (or read the job of) a newer one.
  void run_claimable(int slot, uint32_t g) noexcept {
    for (int k = 0; k < workers; ++k) {
      const int c = slot + k < workers ? slot + k : slot + k - workers;
      uint32_t expect = g - 1;
      std::atomic<uint32_t>& claim = claims[c].generation;
      if (claim.load(std::memory_order_relaxed) != expect) continue;
      if (!claim.compare_exchange_strong(expect, g, std::memory_order_acq_rel,
                                         std::memory_order_relaxed)) {
        continue;
      }
      run_one(slot, c, job);
      // After the last decrement the caller may return and free the body: touch nothing after.
      remaining.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  // Spins for spin_ns, then sleeps on the generation futex, until the generation moves on.
  uint32_t wait_for_job(uint32_t seen) noexcept {
    const auto spin_until = Clock::now() + std::chrono::nanoseconds(spin_ns);
    for (int i = 0;; ++i) {
      const uint32_t g = generation.load(std::memory_order_acquire);
      if (g != seen) return g;
      if ((i & 63) == 63 && Clock::now() >= spin_until) break;
      _mm_pause();
    }
    for (;;) {
      // Dekker with the publisher: either it sees sleepers > 0 and wakes us, or we see its
      // new generation here (and the futex re-checks the word atomically).
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (generation.load(std::memory_order_seq_cst) == seen) futex_wait(&generation, seen);
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
      const uint32_t g = generation.load(std::memory_order_acquire);
      if (g != seen) return g;
    }
  }

  void worker_loop() noexcept {
    tbb_handoff_acquire();
    const int slot = tbb::this_task_arena::current_thread_index();
    if (slot <= 0 || slot >= workers) {  // not one of our slots: leave the work to others
      tbb_handoff_release();
      return;
    }
    joined.fetch_add(1, std::memory_order_acq_rel);
    uint32_t seen = generation.load(std::memory_order_acquire);
    while (!stop.load(std::memory_order_acquire)) {
      run_claimable(slot, seen);  // a job already in flight when we joined, if any
      seen = wait_for_job(seen);
    }
    tbb_handoff_release();  // the destructor's group.wait() returns after this
  }

  void run_inline(int64_t n, int64_t align, const ops::ChunkFn& body, bool observe) const {
    for (int c = 0; c < workers; ++c) {
      auto [b, e] = ops::static_chunk(n, align, workers, c);
      if (b >= e) continue;
      if (observe && observer) observer->on_chunk_begin(0);
      struct End {  // closes the bracket even if the body throws
        ChunkObserver* o;
        ~End() {
          if (o) o->on_chunk_end(0);
        }
      } end{observe ? observer : nullptr};
      body(c, b, e);
    }
  }

  void dispatch(int64_t n, int64_t align, const ops::ChunkFn& body) {
    job = Job{n, align, &body, observer};
    remaining.store(workers, std::memory_order_relaxed);
    const uint32_t g = generation.load(std::memory_order_relaxed) + 1;
    generation.store(g, std::memory_order_seq_cst);  // publishes job and remaining
    if (sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&generation);
    run_claimable(0, g);
    // Wait for chunks others claimed and are running. Yield after a while so a worker that
    // shares our CPU (oversubscription) can finish.
    for (int i = 0; remaining.load(std::memory_order_acquire) != 0; ++i) {
      if (i < 20000) {
        _mm_pause();
      } else {
        sched_yield();
      }
    }
  }

  Topology topo;
  PinSpec pin;
  int workers;
  std::vector<int> cpus;
  int64_t spin_ns;
  std::vector<int> caller_mask;
  bool caller_pinned = false;
  std::unique_ptr<ChunkClaim[]> claims;
  std::unique_ptr<SlotStats[]> stats;
  ChunkObserver* observer = nullptr;

  Job job;  // written by the caller only while no chunk of the previous job can be claimed
  alignas(64) std::atomic<uint32_t> generation{0};
  alignas(64) std::atomic<int> remaining{0};
  alignas(64) std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> busy{false};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::atomic<int> joined{0};

  std::optional<tbb::global_control> control;
  tbb::task_arena arena;
  tbb::task_group group;
  std::unique_ptr<PinningObserver> pinning;
};

Executor::Executor(ExecutorSettings settings) : Executor(Topology::detect(), std::move(settings)) {}

Executor::Executor(const Topology& topo, ExecutorSettings settings)
    : impl_(std::make_unique<Impl>(topo, std::move(settings))) {
  for (int s = 1; s < impl_->workers; ++s) {
    if (int rc = impl_->stats[s].pin_errno.load(std::memory_order_relaxed); rc != 0) {
      const int cpu = impl_->cpus[static_cast<size_t>(s)];
      impl_.reset();
      throw TopologyError(
          fmt::format("cannot pin worker {} to CPU {}: {}", s, cpu, std::strerror(rc)));
    }
  }
}

Executor::~Executor() = default;

int Executor::workers() const noexcept {
  return impl_->workers;
}

void Executor::run_chunks(int64_t n, int64_t align, const ops::ChunkFn& body) const {
  Impl& im = *impl_;
  if (n <= 0) return;
  if (align < 1) align = 1;
  if (im.busy.exchange(true, std::memory_order_acquire)) {
    // Nested (a chunk body calling run_chunks) or concurrent use: serial on this thread, inside
    // the bracket the outer chunk already holds.
    im.run_inline(n, align, body, false);
    return;
  }
  struct Release {
    std::atomic<bool>& busy;
    ~Release() { busy.store(false, std::memory_order_release); }
  } release{im.busy};
  const int64_t units = (n + align - 1) / align;
  if (im.workers == 1 || units <= 1) {  // one non-empty chunk: no dispatch
    im.note_cpu(0);
    im.run_inline(n, align, body, true);
    return;
  }
  im.dispatch(n, align, body);
  if (im.failed.load(std::memory_order_acquire)) {
    std::exception_ptr e = std::exchange(im.error, nullptr);
    im.failed.store(false, std::memory_order_release);
    std::rethrow_exception(e);
  }
}

void Executor::set_observer(ChunkObserver* observer) noexcept {
  impl_->observer = observer;
}

const PinSpec& Executor::pin() const noexcept {
  return impl_->pin;
}

const Topology& Executor::topology() const noexcept {
  return impl_->topo;
}

const std::vector<int>& Executor::cpus() const noexcept {
  return impl_->cpus;
}

int Executor::joined_workers() const noexcept {
  return impl_->joined.load(std::memory_order_acquire);
}

std::vector<WorkerPlacement> Executor::placements() const {
  std::vector<WorkerPlacement> out;
  for (int s = 0; s < impl_->workers; ++s) {
    const SlotStats& st = impl_->stats[s];
    out.push_back(
        {s, impl_->cpus.empty() ? -1 : impl_->cpus[static_cast<size_t>(s)],
         st.first_cpu.load(std::memory_order_relaxed), st.last_cpu.load(std::memory_order_relaxed),
         st.chunks.load(std::memory_order_relaxed), st.off_target.load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace pacer::runtime
