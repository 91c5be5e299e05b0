#include "runtime/executor.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#include <tbb/task_scheduler_observer.h>

#include "ops/tbb_for.h"

namespace pacer::runtime {
namespace {

// ThreadSanitizer sees our atomics but not the synchronisation inside libtbb (not built with
// TSan): the hand-over of the executor to TBB's worker threads (enqueue -> worker entry), the
// pinning observer's callbacks, and back (group.wait, observe(false)) would otherwise read as
// races on every field the constructor wrote. ops::tsan_handoff_release/acquire state those
// edges (ops/tbb_for.h); outside TSan builds they are nothing.
using ops::tsan_handoff_acquire;
using ops::tsan_handoff_release;

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

// PACER_WORK_STEALING: "0" turns stealing off for every job, "1" on; unset (or anything else),
// on except for the streaming jobs of an AMD CPU before Zen 5 (default_work_stealing).
const char* work_stealing_env() noexcept {
  return std::getenv("PACER_WORK_STEALING");
}

// PACER_IDLE_PREFETCH=0 turns the idle workers' prefetch of the next matmul off.
bool idle_prefetch_from_env() noexcept {
  const char* env = std::getenv("PACER_IDLE_PREFETCH");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

// What a worker may prefetch ahead of one job: a quarter of its L2 (the kernel's streams, the
// activations and the next lines it prefetches itself need the rest), 256 KiB when unknown.
int64_t idle_prefetch_budget(const Topology& topo) noexcept {
  for (const CacheLevel& c : topo.caches) {
    if (c.level == 2 && c.type != "instruction" && c.size_bytes > 0) {
      return std::clamp<int64_t>(c.size_bytes / 4, 64 << 10, 1 << 20);
    }
  }
  return 256 << 10;
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

// What is left of one static share (chunk) of the current job, in grains (runs of `align`
// elements) from the share's start: one 64-bit word, so a claim is one CAS.
//   bits 40-63: the job's generation (mod 2^24), so a thread holding a stale generation can
//               never claim (or read the job of) a newer one;
//   bits 20-39: front, the first grain nobody claimed (the owner takes pieces from here);
//   bits  0-19: back, one past the last grain nobody claimed (others steal from here).
// Own cache line, since every thread may CAS it.
struct alignas(64) ShareClaim {
  std::atomic<uint64_t> word{0};
};

constexpr int kPosBits = 20;
constexpr uint64_t kPosMask = (uint64_t{1} << kPosBits) - 1;
constexpr uint64_t kGenMask = (uint64_t{1} << 24) - 1;
constexpr int64_t kMaxGrains = static_cast<int64_t>(kPosMask);

constexpr uint64_t pack_claim(uint32_t gen, int64_t front, int64_t back) {
  return (uint64_t{gen} & kGenMask) << (2 * kPosBits) | static_cast<uint64_t>(front) << kPosBits |
         static_cast<uint64_t>(back);
}
constexpr uint32_t claim_gen(uint64_t w) {
  return static_cast<uint32_t>(w >> (2 * kPosBits));
}
constexpr int64_t claim_front(uint64_t w) {
  return static_cast<int64_t>((w >> kPosBits) & kPosMask);
}
constexpr int64_t claim_back(uint64_t w) {
  return static_cast<int64_t>(w & kPosMask);
}

// The owner of a share takes half of what is left of it (at least kOwnerMinGrains): long pieces
// first, so its kernels keep their streams long (each GEMV call starts its streams afresh),
// shorter ones towards the end, so a worker done early finds something left to take. A thief
// takes half of what is left, from the back. Owner pieces of a quarter (at least 4 grains) ran
// decode 0.93-0.96x of halves of at least 16 (TinyLlama Q4_K_M, 2 threads, dev VM) while an x16
// GEMV call of under 16 groups was one stream. Halves down to 4 grains instead of 16 only add
// one or two short pieces at a share's end, and let a worker done early take the last of a 64-
// grain share (2048 rows on 2 workers) instead of waiting for its owner. Zen 5 dev VM, 2 workers
// (session 34): a replay of a TinyLlama Q4_0 step's GEMVs with the prefetch hints, the two
// minimums alternating step by step, ran 0.4-1.0 % faster with 4 in 5 of 6 runs of 200 steps
// (the sixth level); ffn_down, whose second worker was the late one, read 2-11 % faster in 4 of
// 4 alternating bench rows. The caller's share of a job the others prefetched (prefetch_next)
// took its pieces down to 4 grains already; that is now every owner's rule.
constexpr int64_t kOwnerMinGrains = 4;
// How long an idle worker spins before it sleeps, unless ExecutorSettings says otherwise; a
// longer spin (a recording session's) yields its CPU between looks after this long, so that a
// thread sharing that CPU (pin none on a busy machine) is not held up by it.
constexpr int kDefaultSpinUs = 100;
// Owner pieces of a compute-bound job (run_chunks_balanced: the prefill GEMMs), whose kernels
// start no streams: two grains, so a piece still fills the GEMMs' multi-group register tiles.
constexpr int64_t kBalancedOwnerMinGrains = 2;
constexpr int64_t owner_take(int64_t left, int64_t min_grains = kOwnerMinGrains) {
  return std::min(left, std::max(min_grains, (left + 1) / 2));
}
constexpr int64_t thief_take(int64_t left) {
  return (left + 1) / 2;
}

// One per worker slot, written only by the thread running that slot.
struct alignas(64) SlotStats {
  std::atomic<int> first_cpu{-1};
  std::atomic<int> last_cpu{-1};
  std::atomic<int64_t> chunks{0};
  std::atomic<int64_t> off_target{0};
  std::atomic<int> pin_errno{0};  // nonzero: pinning this slot's thread failed
  std::atomic<int64_t> sleeps{0};  // waits that outlasted the spin and went to the futex
  std::atomic<bool> in_idle_call{false};  // inside ChunkObserver::on_idle (set_observer waits)
};

}  // namespace

struct Executor::Impl {
  // Pins each TBB worker once, when it enters the arena, to the CPU of its slot; restores the
  // mask it came with when it leaves (only at executor shutdown: workers stay in their loops).
  class PinningObserver final : public tbb::task_scheduler_observer {
   public:
    PinningObserver(tbb::task_arena& arena, Impl& impl)
        : tbb::task_scheduler_observer(arena), impl_(impl) {
      tsan_handoff_release();  // TBB may call the observer from its threads from here on
      observe(true);
    }
    ~PinningObserver() override {
      observe(false);  // returns once no callback runs (TBB waits for them)
      tsan_handoff_acquire();
    }
    void on_scheduler_entry(bool is_worker) noexcept override {
      tsan_handoff_acquire();
      if (!is_worker || impl_.cpus.empty()) return;  // slot 0 is pinned by the executor itself
      const int slot = tbb::this_task_arena::current_thread_index();
      if (slot <= 0 || slot >= impl_.workers) return;
      const int rc = set_thread_affinity({impl_.cpus[static_cast<size_t>(slot)]});
      impl_.stats[slot].pin_errno.store(rc, std::memory_order_relaxed);
    }
    void on_scheduler_exit(bool is_worker) noexcept override {
      tsan_handoff_acquire();
      if (is_worker && !impl_.cpus.empty()) set_thread_affinity(impl_.caller_mask);
      tsan_handoff_release();  // the destructor's observe(false) waits for this callback
    }

   private:
    Impl& impl_;
  };

  struct Job {
    int64_t grain = 1;  // elements per grain (the shares are share_begin/share_end)
    const ops::ChunkFn* body = nullptr;
    ChunkObserver* observer = nullptr;
  };

  Impl(const Topology& topo_in, ExecutorSettings s)
      : topo(topo_in),
        pin(std::move(s.pin)),
        workers(resolve_threads(topo, pin, s.threads)),
        cpus(assign_cpus(topo, pin, workers)),
        spin_ns(int64_t{s.spin_us < 0 ? kDefaultSpinUs : s.spin_us} * 1000),
        steal(s.work_stealing < 0
                  ? default_work_stealing(ops::detect_cpu_features(), work_stealing_env())
                  : s.work_stealing != 0),
        steal_balanced(s.work_stealing_balanced < 0
                           ? default_work_stealing_balanced(work_stealing_env())
                           : s.work_stealing_balanced != 0),
        prefetch_budget(
            workers > 1 && (s.idle_prefetch < 0 ? idle_prefetch_from_env() : s.idle_prefetch != 0)
                ? idle_prefetch_budget(topo)
                : 0),
        claims(new ShareClaim[static_cast<size_t>(workers)]),
        share_begin(new int64_t[static_cast<size_t>(workers)]),
        share_end(new int64_t[static_cast<size_t>(workers)]),
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
      // The acquire comes before the lambda reads its capture.
      auto task = group.defer([this] {
        tsan_handoff_acquire();
        worker_loop();
      });
      tsan_handoff_release();  // after the task (and its capture) is built, before TBB runs it
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
      tsan_handoff_acquire();
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

  int64_t share_grains(int c) const noexcept {
    const int64_t len = share_end[c] - share_begin[c];
    return len > 0 ? (len + job.grain - 1) / job.grain : 0;
  }

  // Runs grains [gb, ge) of share c of the current job (the caller holds their claim).
  void run_piece(int c, int64_t gb, int64_t ge) noexcept {
    if (failed.load(std::memory_order_relaxed)) return;  // a piece threw: drain the rest
    const int64_t begin = share_begin[c];
    const int64_t b = begin + gb * job.grain;
    const int64_t e = std::min(share_end[c], begin + ge * job.grain);
    try {
      (*job.body)(c, b, e);
    } catch (...) {
      if (!failed.exchange(true, std::memory_order_acq_rel)) error = std::current_exception();
    }
  }

  // Claims grains [gb, ge) of share c of generation g (g24: its low 24 bits): from the front for
  // its owner, from the back for anyone else. False when nothing of it is left (or the word is
  // another generation's: this thread is stale). The job's fields may be read only after a
  // claim succeeded: until the claimer gives its grains back through `remaining`, the job
  // cannot end.
  bool claim_piece(int c, bool owner, uint32_t g24, int64_t& gb, int64_t& ge,
                   int64_t owner_min = -1) noexcept {
    std::atomic<uint64_t>& word = claims[c].word;
    uint64_t cur = word.load(std::memory_order_acquire);
    for (;;) {
      if (claim_gen(cur) != g24) return false;
      const int64_t f = claim_front(cur), b = claim_back(cur);
      if (f >= b) return false;
      // The job's own minimum, written before its claim words were released (a newer job's
      // value can only meet a word of the newer generation: the CAS below fails otherwise).
      if (owner && owner_min < 0) owner_min = job_owner_min.load(std::memory_order_relaxed);
      // Without stealing, whoever claims a share takes all of it, as its owner would.
      const bool stealing = job_steal.load(std::memory_order_relaxed);  // as job_owner_min
      const uint64_t next = !stealing ? pack_claim(g24, b, b)
                            : owner   ? pack_claim(g24, f + owner_take(b - f, owner_min), b)
                                      : pack_claim(g24, f, b - thief_take(b - f));
      if (word.compare_exchange_weak(cur, next, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
        gb = owner || !stealing ? f : claim_back(next);
        ge = owner || !stealing ? claim_front(next) : b;
        return true;
      }
    }
  }

  // Runs pieces of generation g until none is left: its own share front to back, then what is
  // left of the others from their backs. One observer bracket around all the pieces this thread
  // ran, then one decrement of `remaining` by their grains.
  // owner_min < 0: the job's (job_owner_min).
  void run_claimable(int slot, uint32_t g, int64_t owner_min = -1) noexcept {
    const uint32_t g24 = static_cast<uint32_t>(g & kGenMask);
    int64_t grains = 0;
    ChunkObserver* obs = nullptr;
    auto run = [&](int c, int64_t gb, int64_t ge) {
      if (grains == 0) {  // this thread's first piece of the job
        note_cpu(slot);
        obs = job.observer;
        if (obs) obs->on_chunk_begin(slot);
      }
      run_piece(c, gb, ge);
      grains += ge - gb;
    };
    int64_t gb = 0, ge = 0;
    while (claim_piece(slot, true, g24, gb, ge, owner_min)) run(slot, gb, ge);
    // A share once empty stays empty: one pass over the others drains them all. Skipped when
    // the grains still outstanding are this thread's own (every other piece has run): the last
    // worker to finish then goes straight to the decrement the caller waits for, instead of
    // first reading every other share's claim line, each last written by another core.
    const bool others_left = grains == 0 || remaining.load(std::memory_order_acquire) > grains;
    for (int k = 1; others_left && k < workers; ++k) {
      const int c = slot + k < workers ? slot + k : slot + k - workers;
      while (claim_piece(c, false, g24, gb, ge)) run(c, gb, ge);
    }
    if (grains == 0) return;
    if (obs) obs->on_chunk_end(slot);
    // After the last decrement the caller may return and free the body: touch nothing after.
    remaining.fetch_sub(grains, std::memory_order_acq_rel);
  }

  // The plan prefetch_next() published last, as a seqlock over atomic words (one writer, the
  // caller; readers retry on the next look if it was being rewritten).
  static constexpr size_t kPlanWords = (sizeof(ops::PrefetchPlan) + 7) / 8;
  void publish_plan(const ops::PrefetchPlan& plan) noexcept {
    uint64_t words[kPlanWords] = {};
    std::memcpy(words, &plan, sizeof plan);
    const uint64_t s = plan_seq.load(std::memory_order_relaxed);
    plan_seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    for (size_t i = 0; i < kPlanWords; ++i)
      plan_words[i].store(words[i], std::memory_order_relaxed);
    plan_seq.store(s + 2, std::memory_order_release);
  }
  bool read_plan(uint64_t seq, ops::PrefetchPlan& plan) const noexcept {
    if (seq & 1) return false;
    uint64_t words[kPlanWords];
    for (size_t i = 0; i < kPlanWords; ++i)
      words[i] = plan_words[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (plan_seq.load(std::memory_order_relaxed) != seq) return false;
    std::memcpy(&plan, words, sizeof plan);
    return true;
  }

  // A worker's progress through the latest plan (kept across jobs: an op between two matmuls,
  // attention say, interrupts it and it resumes after).
  struct IdlePrefetch {
    uint64_t seq = 0;  // plan_seq of the plan `walk` covers (0: none yet)
    bool active = false;
    ops::ChunkPrefetcher walk;
  };

  // Spins for spin_ns, then sleeps on the generation futex, until the generation moves on.
  // While spinning, prefetches this slot's share of the latest plan, 8 lines between looks.
  uint32_t wait_for_job(uint32_t seen, int slot, IdlePrefetch& pf) noexcept {
    const auto spin_from = Clock::now();
    const auto spin_until = spin_from + std::chrono::nanoseconds(spin_ns);
    const auto polite_from = spin_from + std::chrono::microseconds(kDefaultSpinUs);
    for (int i = 0;; ++i) {
      const uint32_t g = generation.load(std::memory_order_acquire);
      if (g != seen) return g;
      if (prefetch_budget > 0) {
        // A plan is copied out only when a new one was published, not on every look.
        if (const uint64_t s = plan_seq.load(std::memory_order_acquire); s != pf.seq) {
          ops::PrefetchPlan plan;
          if (read_plan(s, plan)) {
            pf.seq = s;
            pf.walk = ops::ChunkPrefetcher(plan, workers, slot, prefetch_budget);
            pf.active = true;
          }
        }
        if (pf.active) {
          pf.active = pf.walk.step(8);
          continue;
        }
      }
      if ((i & 63) == 63) {
        const auto now = Clock::now();
        if (now >= spin_until) break;
        if (now >= polite_from) sched_yield();
        // Nothing shared is written unless an observer is set. The slot's flag is raised before
        // the pointer is read again: set_observer waits out a call that may hold the old one.
        if (idle_observer.load(std::memory_order_relaxed) != nullptr) {
          std::atomic<bool>& in_call = stats[slot].in_idle_call;
          in_call.store(true, std::memory_order_seq_cst);
          if (ChunkObserver* o = idle_observer.load(std::memory_order_seq_cst)) o->on_idle(slot);
          in_call.store(false, std::memory_order_release);
        }
      }
      _mm_pause();
    }
    SlotStats& st = stats[slot];
    st.sleeps.store(st.sleeps.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
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
    const int slot = tbb::this_task_arena::current_thread_index();
    if (slot <= 0 || slot >= workers) {  // not one of our slots: leave the work to others
      tsan_handoff_release();
      return;
    }
    joined.fetch_add(1, std::memory_order_acq_rel);
    uint32_t seen = generation.load(std::memory_order_acquire);
    IdlePrefetch pf;
    while (!stop.load(std::memory_order_acquire)) {
      run_claimable(slot, seen);  // a job already in flight when we joined, if any
      seen = wait_for_job(seen, slot, pf);
    }
    tsan_handoff_release();  // the destructor's group.wait() returns after this
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

  void dispatch(int64_t n, int64_t align, const ops::ChunkFn& body, bool balanced) {
    // A grain is `align` elements, or a multiple of it when a share would not fit the claim
    // word's 20 bits (over a million grains); the shares themselves stay static_chunk's.
    const int64_t units = (n + align - 1) / align;
    const int64_t per_share = (units + workers - 1) / workers;
    const int64_t grain = align * ((per_share + kMaxGrains - 1) / kMaxGrains);
    job = Job{grain, &body, observer};
    job_owner_min.store(balanced ? kBalancedOwnerMinGrains : kOwnerMinGrains,
                        std::memory_order_relaxed);
    job_steal.store(balanced ? steal_balanced : steal, std::memory_order_relaxed);
    const uint32_t g = generation.load(std::memory_order_relaxed) + 1;
    int64_t total = 0;
    for (int c = 0; c < workers; ++c) {
      std::tie(share_begin[c], share_end[c]) = ops::static_chunk(n, align, workers, c);
      total += share_grains(c);
    }
    remaining.store(total, std::memory_order_relaxed);
    for (int c = 0; c < workers; ++c) {  // release: a claim of g sees the job and remaining
      claims[c].word.store(pack_claim(g, 0, share_grains(c)), std::memory_order_release);
    }
    generation.store(g, std::memory_order_seq_cst);  // publishes job and remaining
    if (sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&generation);
    run_claimable(0, g, balanced ? kBalancedOwnerMinGrains : kOwnerMinGrains);
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
  // Pieces of a share may run on other workers (ExecutorSettings::work_stealing): in the
  // streaming jobs (run_chunks: the decode GEMVs) and in the compute-bound ones (the GEMMs).
  bool steal;
  bool steal_balanced;
  int64_t prefetch_budget;  // bytes a worker prefetches per plan; 0: idle prefetch off
  std::unique_ptr<ShareClaim[]> claims;
  std::unique_ptr<int64_t[]> share_begin, share_end;  // the current job's shares, set with `job`
  std::unique_ptr<SlotStats[]> stats;
  ChunkObserver* observer = nullptr;
  // The same observer for the idle workers' on_idle calls, which read it between jobs.
  std::atomic<ChunkObserver*> idle_observer{nullptr};

  Job job;  // written by the caller only while no chunk of the previous job can be claimed
  // The current job's least owner piece, in grains: atomic, since a worker that lost the race
  // for the job's last grains may read it while the next job is being set up.
  std::atomic<int64_t> job_owner_min{kOwnerMinGrains};
  std::atomic<bool> job_steal{true};  // the current job's steal or steal_balanced, likewise
  alignas(64) std::atomic<uint32_t> generation{0};
  alignas(64) std::atomic<int64_t> remaining{0};
  alignas(64) std::atomic<int> sleepers{0};
  alignas(64) std::atomic<uint64_t> plan_seq{0};
  std::atomic<uint64_t> plan_words[kPlanWords] = {};
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

bool default_work_stealing(const ops::CpuFeatures& cpu, const char* env) noexcept {
  if (env && std::strcmp(env, "0") == 0) return false;
  if (env && std::strcmp(env, "1") == 0) return true;
  return !(cpu.amd && cpu.family < ops::kAmdZen5Family);
}

bool default_work_stealing_balanced(const char* env) noexcept {
  return env == nullptr || std::strcmp(env, "0") != 0;
}

int Executor::workers() const noexcept {
  return impl_->workers;
}

void Executor::prefetch_next(const ops::PrefetchPlan& plan) const {
  Impl& im = *impl_;
  if (im.prefetch_budget == 0 || plan.total_units <= 0) return;
  im.publish_plan(plan);
}

bool Executor::idle_prefetch() const noexcept {
  return impl_->prefetch_budget > 0;
}

int Executor::spin_us() const noexcept {
  return static_cast<int>(impl_->spin_ns / 1000);
}

bool Executor::work_stealing() const noexcept {
  return impl_->steal;
}

bool Executor::work_stealing_balanced() const noexcept {
  return impl_->steal_balanced;
}

void Executor::run_chunks(int64_t n, int64_t align, const ops::ChunkFn& body) const {
  run(n, align, body, false);
}

void Executor::run_chunks_balanced(int64_t n, int64_t align, const ops::ChunkFn& body) const {
  run(n, align, body, true);
}

void Executor::run(int64_t n, int64_t align, const ops::ChunkFn& body, bool balanced) const {
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
  im.dispatch(n, align, body, balanced);
  if (im.failed.load(std::memory_order_acquire)) {
    std::exception_ptr e = std::exchange(im.error, nullptr);
    im.failed.store(false, std::memory_order_release);
    std::rethrow_exception(e);
  }
}

void Executor::set_observer(ChunkObserver* observer) noexcept {
  Impl& im = *impl_;
  im.observer = observer;
  // A worker that raised its flag after this store reads the new pointer; wait for those that
  // may still hold the old one, so the old observer may be destroyed once this returns.
  im.idle_observer.store(observer, std::memory_order_seq_cst);
  for (int slot = 1; slot < im.workers; ++slot) {
    while (im.stats[slot].in_idle_call.load(std::memory_order_seq_cst)) _mm_pause();
  }
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
         st.chunks.load(std::memory_order_relaxed), st.off_target.load(std::memory_order_relaxed),
         st.sleeps.load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace pacer::runtime
