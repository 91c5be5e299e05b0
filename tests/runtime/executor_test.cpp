// The pinned executor: coverage of the static shares (whole, or in stolen pieces), observer
// brackets, exceptions, nesting, pinning that holds while work runs, and clear errors for
// impossible pin requests.
#include "runtime/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

namespace pacer::runtime {
namespace {

using ::testing::HasSubstr;

std::vector<int> thread_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  std::vector<int> out;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) out.push_back(i);
  }
  return out;
}

// Records, per chunk, which thread ran it with which worker slot, and checks that begin/end
// brackets pair up on the same thread.
class BracketObserver final : public ChunkObserver {
 public:
  void on_chunk_begin(int worker) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    open_[std::this_thread::get_id()] += 1;
    if (open_[std::this_thread::get_id()] != 1) nested = true;
    slots_of_thread[std::this_thread::get_id()].insert(worker);
    ++begins;
  }
  void on_chunk_end(int worker) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    open_[std::this_thread::get_id()] -= 1;
    if (open_[std::this_thread::get_id()] != 0) nested = true;
    ++ends;
  }
  std::map<std::thread::id, std::set<int>> slots_of_thread;
  int begins = 0, ends = 0;
  bool nested = false;

 private:
  std::mutex mu_;
  std::map<std::thread::id, int> open_;
};

// (threads, work stealing)
class ExecutorCoverage : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ExecutorCoverage, EveryIndexExactlyOnceInsideItsStaticChunk) {
  const auto [threads, steal] = GetParam();
  Executor ex(ExecutorSettings{}
                  .set_threads(threads)
                  .set_pin(PinSpec::parse("none"))
                  .set_work_stealing(steal));
  ASSERT_EQ(ex.workers(), threads);
  EXPECT_EQ(ex.work_stealing(), steal);
  for (int64_t n : {1, 2, 7, 31, 32, 33, 100, 1000, 4097})
    for (int64_t align : {1, 4, 32})
      for (bool balanced : {false, true}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::mutex mu;
        std::vector<std::tuple<int, int64_t, int64_t>> seen;
        const ops::ChunkFn body = [&](int c, int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          seen.emplace_back(c, b, e);
        };
        if (balanced) {
          ex.run_chunks_balanced(n, align, body);
        } else {
          ex.run_chunks(n, align, body);
        }
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
        for (auto [c, b, e] : seen) {
          const auto expect = ops::static_chunk(n, align, threads, c);
          SCOPED_TRACE(::testing::Message() << "n=" << n << " align=" << align << " chunk " << c
                                            << (balanced ? " balanced" : ""));
          EXPECT_LT(b, e);
          EXPECT_TRUE(b % align == 0);
          if (steal) {  // a piece of the chunk
            EXPECT_GE(b, expect.first);
            EXPECT_LE(e, expect.second);
          } else {  // the whole chunk in one call
            EXPECT_EQ(b, expect.first);
            EXPECT_EQ(e, expect.second);
          }
        }
      }
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndStealing, ExecutorCoverage,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()));

TEST(Executor, ManyConsecutiveRegionsAreCorrect) {
  // Back-to-back regions exercise the generation/claim protocol (stale workers, sleepers).
  for (int spin_us : {0, 100}) {
    Executor ex(ExecutorSettings{}.set_threads(3).set_spin_us(spin_us));
    int64_t total = 0;
    for (int iter = 0; iter < 3000; ++iter) {
      std::atomic<int64_t> sum{0};  // pieces of one chunk may run at once
      ex.run_chunks(300 + iter % 7, 1, [&](int, int64_t b, int64_t e) {
        int64_t part = 0;
        for (int64_t i = b; i < e; ++i) part += i;
        sum += part;
      });
      const int64_t n = 300 + iter % 7;
      ASSERT_EQ(sum.load(), n * (n - 1) / 2) << "iteration " << iter;
      total += n;
    }
    EXPECT_GT(total, 0);
  }
}

TEST(Executor, ObserverBracketsEachThreadsPiecesOnceOnItsThread) {
  BracketObserver obs;
  Executor ex(ExecutorSettings{}.set_threads(2));
  ex.set_observer(&obs);
  for (int i = 0; i < 200; ++i) {
    ex.run_chunks(64 * 16, 8, [](int, int64_t, int64_t) {});
  }
  ex.run_chunks(1, 1, [](int, int64_t, int64_t) {});  // one chunk: inline, still bracketed
  // One bracket per thread that ran pieces of a region: 1 or 2 per region here, however many
  // pieces it ran, plus the inline one.
  EXPECT_EQ(obs.begins, obs.ends);
  EXPECT_GE(obs.begins, 201);
  EXPECT_LE(obs.begins, 401);
  EXPECT_FALSE(obs.nested);
  // A thread always reports the same slot, and the calling thread is slot 0.
  for (const auto& [tid, slots] : obs.slots_of_thread) EXPECT_EQ(slots.size(), 1u);
  ASSERT_TRUE(obs.slots_of_thread.count(std::this_thread::get_id()));
  EXPECT_EQ(*obs.slots_of_thread[std::this_thread::get_id()].begin(), 0);
  ex.set_observer(nullptr);
}

TEST(Executor, StealingDefaultsFollowTheCpuAndTheEnvironment) {
  ops::CpuFeatures zen4, zen5, intel;
  zen4.amd = zen5.amd = true;
  zen4.family = 0x19;  // Zen 4 (and Zen 3): family 25
  zen5.family = 0x1a;
  intel.family = 6;
  // The decode GEMVs' jobs: off on AMD before Zen 5 only; PACER_WORK_STEALING=0/1 decides alone.
  EXPECT_FALSE(default_work_stealing(zen4, nullptr));
  EXPECT_TRUE(default_work_stealing(zen5, nullptr));
  EXPECT_TRUE(default_work_stealing(intel, nullptr));
  EXPECT_TRUE(default_work_stealing(zen4, "1"));
  EXPECT_FALSE(default_work_stealing(zen5, "0"));
  EXPECT_FALSE(default_work_stealing(intel, "0"));
  EXPECT_FALSE(default_work_stealing(zen4, "yes"));  // not "1": the CPU's default
  // The compute-bound GEMMs': on unless "0", on every CPU.
  EXPECT_TRUE(default_work_stealing_balanced(nullptr));
  EXPECT_TRUE(default_work_stealing_balanced("1"));
  EXPECT_FALSE(default_work_stealing_balanced("0"));
}

TEST(Executor, StreamingAndBalancedJobsStealByTheirOwnSettings) {
  // Decode jobs whole, prefill jobs in pieces (the default on a Zen 4): run_chunks runs each share
  // in one call, run_chunks_balanced the caller's share in several owner pieces.
  Executor ex(
      ExecutorSettings{}.set_threads(2).set_work_stealing(false).set_work_stealing_balanced(true));
  EXPECT_FALSE(ex.work_stealing());
  EXPECT_TRUE(ex.work_stealing_balanced());
  constexpr int64_t kN = 256;
  for (bool balanced : {false, true}) {
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> calls0;
    const ops::ChunkFn body = [&](int c, int64_t b, int64_t e) {
      if (c != 0) return;
      std::lock_guard<std::mutex> lock(mu);
      calls0.emplace_back(b, e);
    };
    if (balanced) {
      ex.run_chunks_balanced(kN, 1, body);
    } else {
      ex.run_chunks(kN, 1, body);
    }
    const auto share0 = ops::static_chunk(kN, 1, 2, 0);
    int64_t covered = 0;
    for (auto [b, e] : calls0) covered += e - b;
    EXPECT_EQ(covered, share0.second - share0.first) << "balanced " << balanced;
    if (balanced) {
      // Owner pieces of half of what is left: 64, 32, ... of its 128 (fewer calls only if the
      // other worker took some of them, which needs at least 2 pieces still).
      EXPECT_GE(calls0.size(), 2u);
    } else {
      ASSERT_EQ(calls0.size(), 1u);
      EXPECT_EQ(calls0[0], share0);
    }
  }
}

TEST(Executor, AWorkerDoneEarlyTakesTheTailOfASlowShare) {
  // Share 0 (the caller's) is slow, share 1 is instant: worker 1 finishes its share at once and
  // must take pieces of share 0 from its back while the caller sleeps in its first piece.
  constexpr int64_t kN = 512;
  for (bool steal : {true, false}) {
    Executor ex(ExecutorSettings{}.set_threads(2).set_work_stealing(steal));
    if (ex.joined_workers() < 1) GTEST_SKIP() << "TBB supplied no worker thread";
    const auto share0 = ops::static_chunk(kN, 1, 2, 0);
    bool stolen = false;
    for (int attempt = 0; attempt < 5 && !stolen; ++attempt) {
      std::mutex mu;
      std::vector<std::tuple<std::thread::id, int64_t, int64_t>> calls0;
      ex.run_chunks(kN, 1, [&](int c, int64_t b, int64_t e) {
        if (c != 0) return;
        {
          std::lock_guard<std::mutex> lock(mu);
          calls0.emplace_back(std::this_thread::get_id(), b, e);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      });
      int64_t covered = 0, stolen_end = 0;
      for (auto [tid, b, e] : calls0) {
        covered += e - b;
        if (tid != std::this_thread::get_id()) {
          stolen = true;
          stolen_end = std::max(stolen_end, e);
        }
      }
      EXPECT_EQ(covered, share0.second - share0.first);
      if (!steal) {
        // The exact static split: share 0 in one call.
        ASSERT_EQ(calls0.size(), 1u);
        EXPECT_EQ(std::get<1>(calls0[0]), share0.first);
        EXPECT_EQ(std::get<2>(calls0[0]), share0.second);
        stolen = true;  // nothing to wait for
      } else if (stolen) {
        EXPECT_EQ(stolen_end, share0.second);  // thieves take from the back
        EXPECT_GE(calls0.size(), 3u);          // owner pieces plus at least one stolen
      }
    }
    EXPECT_TRUE(stolen) << "in 5 tries, no piece of the slow share ran on the idle worker";
  }
}

// The caller's pieces of share 0 in one run_chunks(24, 1) on 2 workers (12 grains a share),
// while worker 1 is kept busy with share 1 so that nobody steals from share 0 meanwhile.
std::vector<std::pair<int64_t, int64_t>> callers_pieces(const Executor& ex, bool balanced = false) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> pieces;
  const auto caller = std::this_thread::get_id();
  const ops::ChunkFn body = [&](int c, int64_t b, int64_t e) {
    if (c == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (c != 0 || std::this_thread::get_id() != caller) return;
    std::lock_guard<std::mutex> lock(mu);
    pieces.emplace_back(b, e);
  };
  if (balanced) {
    ex.run_chunks_balanced(24, 1, body);
  } else {
    ex.run_chunks(24, 1, body);
  }
  std::sort(pieces.begin(), pieces.end());
  return pieces;
}

TEST(Executor, AnOwnerTakesItsShareInHalvesDownToFourGrains) {
  // run_chunks(24, 1) on 2 workers, 12 grains a share: the caller takes half of what is left, at
  // least 4 grains: 6, 4, 2. A prefetch hint for the job, or for another one, changes nothing.
  using Pieces = std::vector<std::pair<int64_t, int64_t>>;
  const Pieces want{{0, 6}, {6, 10}, {10, 12}};
  Executor ex(ExecutorSettings{}.set_threads(2).set_work_stealing(true).set_idle_prefetch(true));
  if (ex.joined_workers() < 1) GTEST_SKIP() << "TBB supplied no worker thread";
  ASSERT_TRUE(ex.idle_prefetch());
  alignas(64) static std::byte weights[25 * 64];
  ops::PrefetchPlan plan;
  plan.total_units = 24;
  plan.align = 1;
  plan.n_segments = 1;
  plan.segments[0] = {weights, 24, 1, 64, 1};
  EXPECT_EQ(callers_pieces(ex), want);
  ex.prefetch_next(plan);
  EXPECT_EQ(callers_pieces(ex), want);
  plan.total_units = 25;
  plan.segments[0].rows = 25;
  ex.prefetch_next(plan);
  EXPECT_EQ(callers_pieces(ex), want);

  // Without stealing an owner takes its whole share at once.
  Executor whole(ExecutorSettings{}.set_threads(2).set_work_stealing(false));
  if (whole.joined_workers() < 1) GTEST_SKIP() << "TBB supplied no worker thread";
  EXPECT_EQ(callers_pieces(whole), (Pieces{{0, 12}}));
}

TEST(Executor, AWorkerSleepsOnlyOnceItsSpinIsOver) {
  // Idle for 20 ms after a job: a worker that spins 100 us goes to the futex; one that spins 10 s
  // does not (placements().sleeps counts the waits that did). The count is read while the worker
  // is idle for long, before the job that wakes it: read right after a job, it could already
  // include the sleep that followed (the caller descheduled for over 100 us after that job).
  const auto idle_sleeps = [](int spin_us) {
    Executor ex(ExecutorSettings{}.set_threads(2).set_spin_us(spin_us));
    EXPECT_EQ(ex.spin_us(), spin_us);
    if (ex.joined_workers() < 1) return int64_t{-1};
    const ops::ChunkFn body = [](int, int64_t, int64_t) {};
    ex.run_chunks(64, 1, body);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int64_t before = ex.placements().at(1).sleeps;
    ex.run_chunks(64, 1, body);  // wakes a sleeping worker
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return ex.placements().at(1).sleeps - before;
  };
  const int64_t short_spin = idle_sleeps(100);
  if (short_spin < 0) GTEST_SKIP() << "TBB supplied no worker thread";
  EXPECT_GE(short_spin, 1);
  EXPECT_EQ(idle_sleeps(10'000'000), 0);
  EXPECT_EQ(Executor(ExecutorSettings{}.set_threads(1)).spin_us(), 100);  // the default
}

TEST(Executor, ABalancedJobCutsEveryOwnersShareFinely) {
  // run_chunks_balanced(24, 1) on 2 workers, 12 grains a share: each owner takes half of what is
  // left, at least 2 grains: 6, 3, 2, 1. The caller's share through its own minimum, worker 1's
  // through the job's. Share 0 sleeps so the caller cannot reach share 1 while worker 1 runs it;
  // plain run_chunks cuts each owner's 12 coarser: 6, 4, 2 (owner pieces of at least 4).
  using Pieces = std::vector<std::pair<int64_t, int64_t>>;
  Executor ex(ExecutorSettings{}.set_threads(2).set_work_stealing(true).set_idle_prefetch(false));
  if (ex.joined_workers() < 1) GTEST_SKIP() << "TBB supplied no worker thread";
  for (bool balanced : {true, false}) {
    const Pieces want =
        balanced ? Pieces{{0, 6}, {6, 9}, {9, 11}, {11, 12}} : Pieces{{0, 6}, {6, 10}, {10, 12}};
    EXPECT_EQ(callers_pieces(ex, balanced), want) << (balanced ? "balanced" : "plain");
    std::mutex mu;
    Pieces share1;
    const auto caller = std::this_thread::get_id();
    const ops::ChunkFn body = [&](int c, int64_t b, int64_t e) {
      if (c == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (c != 1 || std::this_thread::get_id() == caller) return;
      std::lock_guard<std::mutex> lock(mu);
      share1.emplace_back(b - 12, e - 12);
    };
    if (balanced) {
      ex.run_chunks_balanced(24, 1, body);
    } else {
      ex.run_chunks(24, 1, body);
    }
    std::sort(share1.begin(), share1.end());
    EXPECT_EQ(share1, want) << "worker 1's share, " << (balanced ? "balanced" : "plain");
  }
}

TEST(Executor, RegionsAfterPrefetchHintsCoverEveryIndexOnce) {
  // Hints published before every region (as a decode does before each matmul), matching it or
  // not, with 2-4 workers that prefetch while they wait: every index still runs exactly once.
  alignas(64) static std::byte weights[4096 * 64];
  for (int threads : {2, 3, 4}) {
    Executor ex(ExecutorSettings{}.set_threads(threads).set_idle_prefetch(true));
    for (int round = 0; round < 200; ++round) {
      const int64_t n = 100 + 37 * (round % 50);
      ops::PrefetchPlan plan;
      plan.total_units = round % 3 == 0 ? n + 1 : n;
      plan.align = 16;
      plan.n_segments = 1;
      plan.segments[0] = {weights, plan.total_units, 1, 64, 1};
      ex.prefetch_next(plan);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      ex.run_chunks(n, 16, [&](int, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " threads, index " << i;
      }
    }
  }
}

TEST(Executor, ExceptionsPropagateAndExecutorStaysUsable) {
  Executor ex(ExecutorSettings{}.set_threads(2));
  for (int bad_chunk : {0, 1}) {
    EXPECT_THROW(ex.run_chunks(100, 1,
                               [&](int c, int64_t, int64_t) {
                                 if (c == bad_chunk) throw std::runtime_error("chunk failed");
                               }),
                 std::runtime_error);
  }
  std::atomic<int64_t> sum{0};
  ex.run_chunks(100, 1, [&](int, int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100);
}

TEST(Executor, NestedRunChunksRunsSerially) {
  BracketObserver obs;
  Executor ex(ExecutorSettings{}.set_threads(2));
  ex.set_observer(&obs);
  std::atomic<int64_t> inner{0}, outer_calls{0};
  ex.run_chunks(10, 1, [&](int, int64_t, int64_t) {
    ++outer_calls;
    ex.run_chunks(50, 1, [&](int, int64_t b, int64_t e) { inner += e - b; });
  });
  EXPECT_GE(outer_calls.load(), 2);
  EXPECT_EQ(inner.load(), outer_calls.load() * 50);  // every outer call ran all 50 inside it
  EXPECT_FALSE(obs.nested);  // inner chunks are inside the outer bracket, not new brackets
  EXPECT_GE(obs.begins, 1);
  EXPECT_LE(obs.begins, 2);
}

TEST(Executor, PinningHoldsWhileWorking) {
  const Topology topo = Topology::detect();
  if (topo.allowed_core_count() < 2) GTEST_SKIP() << "needs two allowed physical cores";
  const std::vector<int> mask_before = thread_mask();
  {
    Executor ex(topo, ExecutorSettings{}.set_threads(2).set_pin(PinSpec::parse("cores")));
    ASSERT_EQ(ex.cpus().size(), 2u);
    EXPECT_EQ(ex.joined_workers(), 1);
    EXPECT_EQ(thread_mask(), std::vector<int>{ex.cpus()[0]});  // the caller is pinned too
    std::mutex mu;
    std::set<std::pair<int, int>> chunk_cpu;  // (chunk, cpu it ran on)
    std::atomic<int> bad_masks{0};
    for (int iter = 0; iter < 200; ++iter) {
      ex.run_chunks(2, 1, [&](int c, int64_t, int64_t) {
        volatile double x = 0;  // a little work so the OS has a chance to move us
        for (int i = 0; i < 20000; ++i) x = x + i * 0.5;
        const auto mask = thread_mask();
        if (mask.size() != 1) bad_masks++;
        std::lock_guard<std::mutex> lock(mu);
        chunk_cpu.emplace(c, sched_getcpu());
      });
    }
    EXPECT_EQ(bad_masks.load(), 0);
    // Each chunk ran on a pinned CPU (chunks may be stolen, so either CPU, but never another).
    for (auto [c, cpu] : chunk_cpu) {
      EXPECT_TRUE(cpu == ex.cpus()[0] || cpu == ex.cpus()[1]) << "chunk " << c << " on " << cpu;
    }
    for (const WorkerPlacement& p : ex.placements()) {
      EXPECT_EQ(p.pinned_cpu, ex.cpus()[static_cast<size_t>(p.worker)]);
      if (p.chunks == 0) continue;
      EXPECT_EQ(p.first_cpu, p.pinned_cpu) << "worker " << p.worker;
      EXPECT_EQ(p.last_cpu, p.pinned_cpu) << "worker " << p.worker;
      EXPECT_EQ(p.off_target, 0) << "worker " << p.worker;
    }
    EXPECT_GT(ex.placements()[0].chunks, 0);
  }
  EXPECT_EQ(thread_mask(), mask_before);  // restored on destruction
}

TEST(Executor, ImpossibleRequestsAreClearErrors) {
  const Topology topo = Topology::detect();
  const int cores = topo.allowed_core_count();
  try {
    Executor ex(topo, ExecutorSettings{}.set_threads(cores + 1).set_pin(PinSpec::parse("cores")));
    FAIL() << "more threads than cores accepted";
  } catch (const TopologyError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot place"));
  }
  try {
    Executor ex(topo, ExecutorSettings{}.set_threads(1).set_pin(PinSpec::parse("list:4000")));
    FAIL() << "CPU outside the mask accepted";
  } catch (const TopologyError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CPU 4000"));
  }
}

TEST(Executor, DefaultThreadCountIsOnePerAllowedCore) {
  const Topology topo = Topology::detect();
  Executor ex(topo, ExecutorSettings{});
  EXPECT_EQ(ex.workers(), topo.allowed_core_count());
  EXPECT_TRUE(ex.cpus().empty());  // default pin policy: none
}

TEST(Executor, SeveralLiveExecutorsEachGetTheirWorkers) {
  const auto t0 = std::chrono::steady_clock::now();
  Executor a(ExecutorSettings{}.set_threads(2));
  Executor b(ExecutorSettings{}.set_threads(3));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(a.joined_workers(), 1);
  EXPECT_EQ(b.joined_workers(), 2);
  EXPECT_LT(ms, 1000.0);  // nobody waited for a worker that never came
  std::atomic<int64_t> sum{0};
  a.run_chunks(10, 1, [&](int, int64_t b0, int64_t e0) {
    b.run_chunks(10, 1, [&](int, int64_t b1, int64_t e1) { sum += (e0 - b0) * (e1 - b1); });
  });
  EXPECT_EQ(sum.load(), 100);
}

TEST(Executor, OversubscribedUnpinnedStillCompletes) {
  // More threads than CPUs (allowed only unpinned): correct, if slow.
  Executor ex(ExecutorSettings{}.set_threads(6).set_spin_us(0));
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < 50; ++i) {
    ex.run_chunks(600, 1, [&](int, int64_t b, int64_t e) { sum += e - b; });
  }
  EXPECT_EQ(sum.load(), 50 * 600);
}

}  // namespace
}  // namespace pacer::runtime
