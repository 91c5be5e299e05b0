// The recorder on fake counter and frequency sources: every delta it writes is known exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "eventlog/schema.h"
#include "hwcounters/frequency.h"
#include "runtime/executor.h"
#include "runtime/recorder.h"
#include "tests/runtime/recorder_fakes.h"

namespace pacer::runtime {
namespace {

using nlohmann::json;
using testing::fake_options;
using testing::FakeCounterSource;
using testing::of_type;
using testing::read_log;
using testing::temp_log_path;
using testing::TwoWorkers;

// Worker w's source counts instructions += 100 (w+1), task_clock_ns += 5000, runq_ns += 7 per
// read; a chunk bracket (two reads) therefore adds exactly one increment.
CounterSourceFactory per_worker_fakes() {
  return [](int worker) {
    std::vector<std::unique_ptr<hwcounters::CounterSource>> v;
    v.push_back(std::make_unique<FakeCounterSource>(
        std::vector<std::string>{"instructions", "task_clock_ns"},
        std::vector<uint64_t>{100u * static_cast<uint64_t>(worker + 1), 5000}));
    v.push_back(std::make_unique<FakeCounterSource>(std::vector<std::string>{"runq_ns"},
                                                    std::vector<uint64_t>{7}));
    return v;
  };
}

const json& worker(const json& op, int w) {
  for (const json& x : op["workers"]) {
    if (x["w"] == w) return x;
  }
  static const json none;
  ADD_FAILURE() << "no worker " << w << " in " << op.dump();
  return none;
}

TEST(Recorder, OffIsInertAndWritesNothing) {
  // Run from an empty directory: a recorder that wrote anything (a default or relative file name)
  // would leave it there.
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(temp_log_path("off")).replace_extension(".dir");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  {
    Recorder off;
    EXPECT_FALSE(off.enabled());
    off.write_header({{"command", "run"}});
    { auto scope = off.op({.name = "rope"}); }
    off.on_chunk_begin(0);
    off.on_chunk_end(0);
    off.begin_step(Phase::Decode, 0);
    off.end_step({});
    off.write_footer(json::object());
    RecorderOptions o;  // empty path: off, whatever else is asked for
    o.workers = 2;
    o.extra_events = {"instructions"};
    Recorder also_off(o);
    EXPECT_FALSE(also_off.enabled());
    also_off.write_header(json::object());
    also_off.begin_step(Phase::Prefill, 0);
    { auto scope = also_off.op({.name = "attn_qkv", .kind = OpKind::Matmul}); }
    also_off.end_step({.phase = Phase::Prefill});
    also_off.write_footer(json::object());
  }
  fs::current_path(cwd);
  EXPECT_TRUE(fs::is_empty(dir)) << dir << " has "
                                 << fs::begin(fs::directory_iterator(dir))->path();
  fs::remove_all(dir);
}

TEST(Recorder, UnwritablePathNamesThePath) {
  RecorderOptions o = fake_options("/nonexistent-dir/x/events.jsonl", 1, per_worker_fakes());
  try {
    Recorder rec(o);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x/events.jsonl"), std::string::npos)
        << e.what();
  }
}

TEST(Recorder, SerialOpRecordsTheCallingThreadsDeltas) {
  const std::string path = temp_log_path("rec");
  {
    Recorder rec(fake_options(path, 2, per_worker_fakes()));
    ASSERT_TRUE(rec.enabled());
    rec.write_header({{"command", "run"}, {"model", {{"path", "m.gguf"}, {"arch", "llama"}}}});
    rec.begin_step(Phase::Decode, 0);
    { auto s = rec.op({.name = "rope", .layer = 3, .kind = OpKind::Elementwise}); }
    rec.end_step({.phase = Phase::Decode, .step = 0, .n_past = 4, .token = 42, .piece = " hi"});
    rec.write_footer({{"stop", "n_predict"}});
  }
  const auto log = read_log(path);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0]["type"], "header");
  const json& op = log[1];
  EXPECT_EQ(op["type"], "op");
  EXPECT_EQ(op["name"], "rope");
  EXPECT_EQ(op["layer"], 3);
  EXPECT_EQ(op["kind"], "elementwise");
  EXPECT_EQ(op["phase"], "decode");
  EXPECT_EQ(op["step"], 0);
  EXPECT_FALSE(op.contains("wtype"));
  EXPECT_FALSE(op.contains("weight_bytes"));
  ASSERT_EQ(op["workers"].size(), 1u);
  const json& w = op["workers"][0];
  EXPECT_EQ(w["w"], 0);
  EXPECT_EQ(w["counters"]["instructions"], 100);
  EXPECT_EQ(w["counters"]["task_clock_ns"], 5000);
  EXPECT_EQ(w["oncpu_ns"], 5000);
  EXPECT_EQ(w["runq_ns"], 7);
  EXPECT_FALSE(w["counters"].contains("runq_ns"));
  EXPECT_DOUBLE_EQ(w["freq_mhz"].get<double>(), 2345.0);
  EXPECT_LE(op["t0_ns"].get<int64_t>(), op["t1_ns"].get<int64_t>());
  EXPECT_EQ(w["t0_ns"], op["t0_ns"]);
  EXPECT_EQ(w["t1_ns"], op["t1_ns"]);
  EXPECT_GE(w["cpu"].get<int>(), 0);

  const json& step = log[2];
  EXPECT_EQ(step["type"], "step");
  EXPECT_EQ(step["token"], 42);
  EXPECT_EQ(step["piece"], " hi");
  EXPECT_EQ(step["n_past"], 4);
  EXPECT_LE(step["t0_ns"].get<int64_t>(), op["t0_ns"].get<int64_t>());
  EXPECT_GE(step["t1_ns"].get<int64_t>(), op["t1_ns"].get<int64_t>());
  const double step_ms = step["step_ms"].get<double>();
  EXPECT_NEAR(step["tok_s"].get<double>(), 1000.0 / step_ms, 1e-6 * 1000.0 / step_ms);
  ASSERT_EQ(step["freq"].size(), 1u);
  EXPECT_DOUBLE_EQ(step["freq"][0]["mhz"].get<double>(), 2345.0);
  EXPECT_EQ(step["recorder"]["ops"], 1);

  const json& footer = log[3];
  EXPECT_EQ(footer["type"], "footer");
  EXPECT_EQ(footer["steps"], 1);
  EXPECT_EQ(footer["stop"], "n_predict");
  EXPECT_EQ(footer["recorder"]["ops"], 1);
  EXPECT_EQ(footer["recorder"]["dropped_slices"], 0);
}

TEST(Recorder, ParallelOpsBracketEachWorkerOnItsOwnThread) {
  const std::string path = temp_log_path("rec");
  {
    Recorder rec(fake_options(path, 2, per_worker_fakes()));
    rec.write_header(json::object());
    TwoWorkers pool(rec);
    for (int step = 0; step < 3; ++step) {
      rec.begin_step(Phase::Decode, step);
      {
        auto s = rec.op({.name = "attn_qkv",
                         .layer = 0,
                         .kind = OpKind::Matmul,
                         .wtype = ops::WeightType::Q8_0,
                         .rows = 1152,
                         .cols = 896,
                         .tokens = 1,
                         .weight_bytes = 1096704});
        pool.run(1, 1);
      }
      {
        auto s = rec.op({.name = "ffn_down", .layer = 0, .kind = OpKind::Matmul});
        pool.run(2, 0);  // worker 0 also takes worker 1's chunk (the executor's "help")
      }
      rec.end_step({.phase = Phase::Decode, .step = step, .token = 1});
    }
    rec.write_footer(json::object());
  }
  const auto log = read_log(path);
  const auto ops = of_type(log, "op");
  ASSERT_EQ(ops.size(), 6u);
  for (int step = 0; step < 3; ++step) {
    const json& qkv = ops[static_cast<size_t>(2 * step)];
    EXPECT_EQ(qkv["name"], "attn_qkv");
    EXPECT_EQ(qkv["step"], step);
    EXPECT_EQ(qkv["wtype"], "q8_0");
    EXPECT_EQ(qkv["rows"], 1152);
    EXPECT_EQ(qkv["cols"], 896);
    EXPECT_EQ(qkv["weight_bytes"], 1096704);
    ASSERT_EQ(qkv["workers"].size(), 2u);
    // Each worker's counts come from its own thread's source: 100 (w0) and 200 (w1).
    EXPECT_EQ(worker(qkv, 0)["counters"]["instructions"], 100);
    EXPECT_EQ(worker(qkv, 1)["counters"]["instructions"], 200);
    EXPECT_EQ(worker(qkv, 1)["runq_ns"], 7);
    for (const json& w : qkv["workers"]) {
      EXPECT_GE(w["t0_ns"].get<int64_t>(), qkv["t0_ns"].get<int64_t>());
      EXPECT_LE(w["t1_ns"].get<int64_t>(), qkv["t1_ns"].get<int64_t>());
      EXPECT_DOUBLE_EQ(w["freq_mhz"].get<double>(), 2345.0);
    }
    const json& down = ops[static_cast<size_t>(2 * step + 1)];
    ASSERT_EQ(down["workers"].size(), 1u);
    EXPECT_EQ(worker(down, 0)["chunks"], 2);
    EXPECT_EQ(worker(down, 0)["counters"]["instructions"], 200);
    EXPECT_EQ(worker(down, 0)["counters"]["task_clock_ns"], 10000);
  }
  const auto steps = of_type(log, "step");
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[2]["freq"].size(), 2u);
  const json footer = of_type(log, "footer").at(0);
  EXPECT_EQ(footer["recorder"]["threads"], 2);
}

// With context_switches counted, schedstat is read only after the thread was switched out: a
// thread never switched out pays for one read, not two per op.
TEST(Recorder, RunQueueIsReadOnlyAfterAContextSwitch) {
  for (const uint64_t switches_per_read : {0u, 1u}) {
    const std::string path = temp_log_path("rec" + std::to_string(switches_per_read));
    FakeCounterSource* runq_source = nullptr;
    CounterSourceFactory f = [&](int) {
      std::vector<std::unique_ptr<hwcounters::CounterSource>> v;
      v.push_back(std::make_unique<FakeCounterSource>(
          std::vector<std::string>{"task_clock_ns", "context_switches"},
          std::vector<uint64_t>{1000, switches_per_read}));
      auto rq = std::make_unique<FakeCounterSource>(std::vector<std::string>{"runq_ns"},
                                                    std::vector<uint64_t>{7});
      runq_source = rq.get();
      v.push_back(std::move(rq));
      return v;
    };
    {
      RecorderOptions o = fake_options(path, 1, f);
      o.reuse_reading_ns = 0;  // every bracket reads (reuse has its own test below)
      Recorder rec(o);
      rec.begin_step(Phase::Decode, 0);
      for (int k = 0; k < 10; ++k) {
        auto s = rec.op({.name = "residual", .layer = k});
      }
      rec.end_step({.phase = Phase::Decode, .step = 0});
      ASSERT_NE(runq_source, nullptr);
      // Switching every read: two schedstat reads per op; never switching: only the first.
      EXPECT_EQ(runq_source->reads(), switches_per_read ? 20 : 1);
      rec.write_footer(json::object());
    }
    const auto log = read_log(path);
    const auto ops = of_type(log, "op");
    ASSERT_EQ(ops.size(), 10u);
    for (const json& op : ops) {
      EXPECT_EQ(op["workers"][0]["runq_ns"], switches_per_read ? 7 : 0);
      EXPECT_EQ(op["workers"][0]["counters"]["context_switches"], switches_per_read);
    }
    EXPECT_EQ(of_type(log, "footer").at(0)["recorder"]["runq_reads"], switches_per_read ? 20 : 1);
  }
}

// Back-to-back serial ops reuse the previous op's end reading as their begin reading: 10 ops cost
// 11 counter reads instead of 20, and every op still gets its own delta (the fake source advances
// by 1000 ns of task clock per read, so each op sees exactly one read's worth).
TEST(Recorder, BackToBackOpsReuseThePreviousEndReading) {
  for (const int64_t window : {int64_t{0}, int64_t{1'000'000'000}}) {
    const std::string path = temp_log_path("reuse" + std::to_string(window));
    FakeCounterSource* source = nullptr;
    CounterSourceFactory f = [&](int) {
      std::vector<std::unique_ptr<hwcounters::CounterSource>> v;
      auto s = std::make_unique<FakeCounterSource>(std::vector<std::string>{"task_clock_ns"},
                                                   std::vector<uint64_t>{1000});
      source = s.get();
      v.push_back(std::move(s));
      return v;
    };
    {
      RecorderOptions o = fake_options(path, 1, f);
      o.reuse_reading_ns = window;
      Recorder rec(o);
      rec.begin_step(Phase::Decode, 0);
      for (int k = 0; k < 10; ++k) {
        auto s = rec.op({.name = "residual", .layer = k});
      }
      rec.end_step({.phase = Phase::Decode, .step = 0});
      ASSERT_NE(source, nullptr);
      EXPECT_EQ(source->reads(), window > 0 ? 11 : 20);
      rec.write_footer(json::object());
    }
    const auto ops = of_type(read_log(path), "op");
    ASSERT_EQ(ops.size(), 10u);
    for (const json& op : ops) EXPECT_EQ(op["workers"][0]["counters"]["task_clock_ns"], 1000);
  }
}

TEST(Recorder, NestedSerialOpsEachGetTheirOwnBracket) {
  const std::string path = temp_log_path("rec");
  {
    Recorder rec(fake_options(path, 1, per_worker_fakes()));
    rec.begin_step(Phase::Prefill, 0);
    {
      auto outer = rec.op({.name = "attention", .layer = 1, .kind = OpKind::Attention});
      { auto inner = rec.op({.name = "rope", .layer = 1, .kind = OpKind::Elementwise}); }
    }
    rec.end_step({.phase = Phase::Prefill, .step = 0, .n_tokens = 8});
  }
  const auto ops = of_type(read_log(path), "op");
  ASSERT_EQ(ops.size(), 2u);
  // Reads: outer open (1), inner open (2), inner close (3), outer close (4).
  EXPECT_EQ(ops[0]["name"], "attention");
  EXPECT_EQ(ops[0]["workers"][0]["counters"]["instructions"], 300);
  EXPECT_EQ(ops[1]["name"], "rope");
  EXPECT_EQ(ops[1]["workers"][0]["counters"]["instructions"], 100);
  EXPECT_EQ(ops[0]["phase"], "prefill");
}

TEST(Recorder, AnOpStillOpenAtStepEndIsWrittenWhenItCloses) {
  const std::string path = temp_log_path("rec");
  {
    Recorder rec(fake_options(path, 1, per_worker_fakes()));
    rec.begin_step(Phase::Decode, 0);
    { auto done = rec.op({.name = "embed", .kind = OpKind::Embed}); }
    {
      auto spanning = rec.op({.name = "output", .kind = OpKind::Matmul});
      rec.end_step({.phase = Phase::Decode, .step = 0});
      rec.begin_step(Phase::Decode, 1);
    }
    rec.end_step({.phase = Phase::Decode, .step = 1});
  }
  const auto log = read_log(path);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0]["name"], "embed");
  EXPECT_EQ(log[1]["type"], "step");
  EXPECT_EQ(log[1]["recorder"]["ops"], 1);
  EXPECT_EQ(log[2]["name"], "output");
  EXPECT_GT(log[2]["t1_ns"].get<int64_t>(), log[1]["t1_ns"].get<int64_t>());
  EXPECT_EQ(log[2]["workers"][0]["counters"]["instructions"], 100);
  EXPECT_EQ(log[3]["type"], "step");
}

TEST(Recorder, PrefillStepsCarryBatchSizeAndDecodeThroughputOnlyCountsDecode) {
  const std::string path = temp_log_path("rec");
  {
    Recorder rec(fake_options(path, 1, per_worker_fakes()));
    rec.begin_step(Phase::Prefill, 0);
    rec.end_step({.phase = Phase::Prefill, .step = 0, .n_tokens = 8});
    rec.begin_step(Phase::Decode, 1);
    { auto s = rec.op({.name = "sample", .kind = OpKind::Sample}); }
    rec.end_step({.phase = Phase::Decode, .step = 1, .token = 5});
    rec.write_footer({{"n_generated", 1}});
  }
  const auto log = read_log(path);
  const auto steps = of_type(log, "step");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0]["n_tokens"], 8);
  EXPECT_FALSE(steps[0].contains("token"));
  EXPECT_FALSE(steps[0].contains("tok_s"));
  EXPECT_EQ(steps[1]["token"], 5);
  EXPECT_NEAR(steps[1]["tok_s"].get<double>(), 1000.0 / steps[1]["step_ms"].get<double>(), 1e-3);
  const auto ops = of_type(log, "op");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0]["phase"], "sample");  // sampling ops say so whatever the step
  const json footer = of_type(log, "footer").at(0);
  EXPECT_EQ(footer["n_generated"], 1);
  EXPECT_NEAR(footer["decode_tok_s"].get<double>(), steps[1]["tok_s"].get<double>(), 1e-6);
  EXPECT_TRUE(footer.contains("prefill_tok_s"));
}

TEST(Recorder, FrequencyFromCyclesAndRefCyclesIsPerOp) {
  const std::string path = temp_log_path("rec");
  CounterSourceFactory f = [](int) {
    std::vector<std::unique_ptr<hwcounters::CounterSource>> v;
    v.push_back(std::make_unique<FakeCounterSource>(
        std::vector<std::string>{"cycles", "ref_cycles", "instructions"},
        std::vector<uint64_t>{3000, 2000, 4500}));
    return v;
  };
  auto opts = fake_options(path, 1, f);
  auto fake_freq = std::make_shared<testing::FakeFrequency>(1.0);
  opts.frequency_source = fake_freq;
  {
    Recorder rec(opts);
    rec.write_header(json::object());
    rec.begin_step(Phase::Decode, 0);
    { auto s = rec.op({.name = "ffn_act", .layer = 2, .kind = OpKind::Elementwise}); }
    rec.end_step({.phase = Phase::Decode, .step = 0, .token = 1});
  }
  EXPECT_EQ(fake_freq->samples.load(), 0) << "no per-step sampling when counters give frequency";
  const auto log = read_log(path);
  const double tsc = hwcounters::tsc_info().mhz;
  EXPECT_EQ(log[0]["frequency"]["source"], "cycles/ref-cycles");
  EXPECT_EQ(log[0]["frequency"]["granularity"], "per_op");
  const auto ops = of_type(log, "op");
  ASSERT_EQ(ops.size(), 1u);
  const json& w = ops[0]["workers"][0];
  EXPECT_NEAR(w["freq_mhz"].get<double>(), 1.5 * tsc, 0.051);  // 3000/2000 x TSC, 1 decimal
  const json step = of_type(log, "step").at(0);
  EXPECT_NEAR(step["freq"][0]["mhz"].get<double>(), 1.5 * tsc, 0.051);
}

// A per-step frequency source that notes which thread sampled, and when.
class TimedFrequency final : public hwcounters::FrequencySource {
 public:
  using Sample = std::pair<std::thread::id, std::chrono::steady_clock::time_point>;
  std::string_view name() const noexcept override { return "timed_fake"; }
  std::string detail() const override { return "fixed"; }
  double sample_mhz(int) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.emplace_back(std::this_thread::get_id(), std::chrono::steady_clock::now());
    return 2345.0;
  }
  std::vector<Sample> samples() {
    std::lock_guard<std::mutex> lock(mu_);
    return samples_;
  }

 private:
  std::mutex mu_;
  std::vector<Sample> samples_;
};

TEST(Recorder, AnIdleWorkerTakesTheStepsFrequencySampleBeforeTheStepsFirstJob) {
  // With a once-per-step frequency source, a worker that waits for the step's first job takes its
  // sample while it waits (Executor -> ChunkObserver::on_idle), not at the start of its first
  // chunk, where the calibration (~10 us) would hold up its part of that op.
  using Clock = std::chrono::steady_clock;
  const std::string path = temp_log_path("idle_freq");
  auto freq = std::make_shared<TimedFrequency>();
  RecorderOptions o = fake_options(path, 2, per_worker_fakes());
  o.frequency_source = freq;
  const auto caller = std::this_thread::get_id();
  std::vector<std::pair<Clock::time_point, Clock::time_point>> windows;  // step begin .. its job
  {
    Recorder rec(o);
    rec.write_header({{"command", "test"}});
    Executor ex(ExecutorSettings{}.set_threads(2).set_spin_us(10'000'000));
    if (ex.joined_workers() < 1) GTEST_SKIP() << "TBB supplied no worker thread";
    ex.set_observer(&rec);
    for (int step = 0; step < 3; ++step) {
      const Clock::time_point begin = Clock::now();
      rec.begin_step(Phase::Decode, step);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the worker waits, spinning
      const Clock::time_point job = Clock::now();
      {
        auto op = rec.op({.name = "ffn_down", .layer = 0, .kind = OpKind::Matmul});
        // Share 0 (the caller's) waits until another thread has run share 1, so worker 1 runs a
        // chunk in every step (the first one attaches it to the recorder).
        std::atomic<bool> other_ran{false};
        ex.run_chunks(2, 1, [&](int c, int64_t, int64_t) {
          if (std::this_thread::get_id() != caller) {
            other_ran = true;
          } else if (c == 0) {
            const auto limit = Clock::now() + std::chrono::seconds(2);
            while (!other_ran && Clock::now() < limit) std::this_thread::yield();
          }
        });
      }
      rec.end_step({.phase = Phase::Decode, .step = step, .token = 7});
      windows.emplace_back(begin, job);
    }
    ex.set_observer(nullptr);
    rec.write_footer(json::object());
  }
  std::vector<TimedFrequency::Sample> worker_samples;
  for (const auto& s : freq->samples()) {
    if (s.first != caller) worker_samples.push_back(s);
  }
  // Step 0: the worker attaches at its first chunk and samples there. Then one sample a step,
  // each between the step's begin_step and its job.
  ASSERT_EQ(worker_samples.size(), 3u);
  for (size_t step = 1; step < 3; ++step) {
    EXPECT_GT(worker_samples[step].second, windows[step].first) << "step " << step;
    EXPECT_LT(worker_samples[step].second, windows[step].second)
        << "step " << step << ": the worker sampled inside the step's first op";
  }
  for (const json& st : of_type(read_log(path), "step")) {
    ASSERT_EQ(st["freq"].size(), 2u) << st.dump();
    for (const json& f : st["freq"]) EXPECT_DOUBLE_EQ(f["mhz"].get<double>(), 2345.0);
  }
}

TEST(Recorder, MultiplexedCountsAreScaledAndMarked) {
  const std::string path = temp_log_path("rec");
  CounterSourceFactory f = [](int) {
    std::vector<std::unique_ptr<hwcounters::CounterSource>> v;
    // Counting a quarter of the enabled time: deltas scale by 4.
    v.push_back(std::make_unique<FakeCounterSource>(std::vector<std::string>{"llc_misses"},
                                                    std::vector<uint64_t>{10}, 250));
    return v;
  };
  {
    Recorder rec(fake_options(path, 1, f));
    rec.begin_step(Phase::Decode, 0);
    { auto s = rec.op({.name = "output", .kind = OpKind::Matmul}); }
    rec.end_step({.phase = Phase::Decode, .step = 0});
  }
  const json c = of_type(read_log(path), "op").at(0)["workers"][0]["counters"];
  EXPECT_EQ(c["llc_misses"], 40);
  EXPECT_DOUBLE_EQ(c["mux"].get<double>(), 0.25);
}

TEST(Recorder, EachStepIsOnDiskBeforeTheNextBegins) {
  const std::string path = temp_log_path("rec");
  Recorder rec(fake_options(path, 1, per_worker_fakes()));
  rec.write_header(json::object());
  rec.begin_step(Phase::Decode, 0);
  { auto s = rec.op({.name = "embed", .kind = OpKind::Embed, .weight_bytes = 4096}); }
  rec.end_step({.phase = Phase::Decode, .step = 0, .token = 3});
  rec.begin_step(Phase::Decode, 1);
  {
    auto s = rec.op({.name = "embed", .kind = OpKind::Embed});  // in flight: not yet written
  }
  // Read while the recorder is alive, as after a kill -9.
  const auto log = read_log(path);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0]["type"], "header");
  EXPECT_EQ(log[1]["type"], "op");
  EXPECT_EQ(log[1]["weight_bytes"], 4096);  // weights streamed by a non-matmul op
  EXPECT_FALSE(log[1].contains("wtype"));
  EXPECT_EQ(log[2]["type"], "step");
}

TEST(Recorder, ChunksOutsideOpsAndUnknownSlotsAreCountedNotWritten) {
  const std::string path = temp_log_path("rec");
  {
    Recorder rec(fake_options(path, 1, per_worker_fakes()));
    rec.begin_step(Phase::Decode, 0);
    rec.on_chunk_begin(0);  // no op open
    rec.on_chunk_end(0);
    {
      auto s = rec.op({.name = "attn_out", .kind = OpKind::Matmul});
      rec.on_chunk_begin(0);
      rec.on_chunk_end(0);
      rec.on_chunk_begin(5);  // slot beyond RecorderOptions::workers
      rec.on_chunk_end(5);
    }
    rec.end_step({.phase = Phase::Decode, .step = 0});
    rec.write_footer(json::object());
  }
  const auto log = read_log(path);
  const json footer = of_type(log, "footer").at(0);
  EXPECT_EQ(footer["recorder"]["unattributed_chunks"], 1);
  EXPECT_EQ(footer["recorder"]["dropped_slices"], 1);
  EXPECT_EQ(of_type(log, "op").at(0)["workers"].size(), 1u);
}

TEST(Recorder, HeaderMergesCallerFieldsWithMeasuredOnes) {
  const std::string path = temp_log_path("rec");
  {
    Recorder rec(fake_options(path, 2, per_worker_fakes()));
    rec.write_header({{"command", "run"},
                      {"argv", {"pacer", "run"}},
                      {"model", {{"path", "m.gguf"}, {"params", 123}}},
                      {"run", {{"threads", 2}, {"pin", "compact"}, {"cpus", {0, 1}}}},
                      {"host", {{"topology", {{"cores", 2}}}}},
                      {"load_ms", 12.5}});
  }
  const json h = read_log(path).at(0);
  EXPECT_EQ(h["schema"], 1);
  EXPECT_FALSE(h["pacer_version"].get<std::string>().empty());
  EXPECT_FALSE(h["git_sha"].get<std::string>().empty());
  EXPECT_EQ(h["time_utc"].get<std::string>().size(), 20u);  // 2026-11-21T15:00:00Z
  EXPECT_EQ(h["model"]["params"], 123);
  EXPECT_EQ(h["run"]["pin"], "compact");
  EXPECT_EQ(h["load_ms"], 12.5);
  EXPECT_EQ(h["host"]["topology"]["cores"], 2);                     // the caller's
  EXPECT_FALSE(h["host"]["cpu_model"].get<std::string>().empty());  // the recorder's
  EXPECT_TRUE(h["host"]["tsc_mhz"].get<double>() > 0);
  EXPECT_EQ(h["counters"]["live"], (json{"instructions", "task_clock_ns", "runq_ns"}));
  EXPECT_EQ(h["counters"]["runq"], "per_op");
  ASSERT_FALSE(h["counters"]["unavailable"].empty());
  EXPECT_EQ(h["counters"]["unavailable"][0]["event"], "fake_missing");
  EXPECT_EQ(h["frequency"]["source"], "fake_frequency");
  EXPECT_EQ(h["frequency"]["granularity"], "per_step");
  EXPECT_TRUE(h["bandwidth_gbs"].is_null());
  EXPECT_TRUE(h["thermal"].contains("throttle_counters"));
  EXPECT_FALSE(h["derived_metrics"].empty());
}

// The header says what one op bracket's counter reads cost: with a source whose every read takes
// 20 us, a bracket (a begin and an end read) costs at least 40 us; the measurement reads nothing
// into any op and is not counted as a schedstat read. Without counter sources there is no figure.
TEST(Recorder, HeaderCarriesTheMeasuredBracketCost) {
  constexpr int64_t kReadNs = 20'000;
  const std::string path = temp_log_path("bracket");
  FakeCounterSource* source = nullptr;
  CounterSourceFactory f = [&](int) {
    std::vector<std::unique_ptr<hwcounters::CounterSource>> v;
    auto s = std::make_unique<FakeCounterSource>(std::vector<std::string>{"task_clock_ns"},
                                                 std::vector<uint64_t>{1000});
    s->set_read_cost_ns(kReadNs);
    source = s.get();
    v.push_back(std::move(s));
    return v;
  };
  {
    RecorderOptions o = fake_options(path, 1, f);
    o.reuse_reading_ns = 0;
    Recorder rec(o);
    rec.write_header(json::object());
    ASSERT_NE(source, nullptr);
    const int reads_after_header = source->reads();
    EXPECT_GE(reads_after_header, 2);  // the measurement read the thread's own source
    rec.begin_step(Phase::Decode, 0);
    { auto s = rec.op({.name = "residual", .layer = 0}); }
    rec.end_step({.phase = Phase::Decode, .step = 0});
    EXPECT_EQ(source->reads(), reads_after_header + 2);
    rec.write_footer(json::object());
  }
  const auto log = read_log(path);
  const json& c = log.at(0)["counters"];
  ASSERT_TRUE(c.contains("bracket_ns")) << c.dump();
  EXPECT_GE(c["bracket_ns"].get<int64_t>(), 2 * kReadNs);
  EXPECT_LT(c["bracket_ns"].get<int64_t>(), 2 * kReadNs + 20'000'000);  // a preempted median
  // The op's own delta is one read's worth: the measurement's reads went nowhere.
  EXPECT_EQ(of_type(log, "op").at(0)["workers"][0]["counters"]["task_clock_ns"], 1000);
  EXPECT_EQ(of_type(log, "footer").at(0)["recorder"]["runq_reads"], 0);

  const std::string bare = temp_log_path("bracket_none");
  {
    Recorder rec(fake_options(
        bare, 1, [](int) { return std::vector<std::unique_ptr<hwcounters::CounterSource>>{}; }));
    rec.write_header(json::object());
  }
  EXPECT_FALSE(read_log(bare).at(0)["counters"].contains("bracket_ns"));
}

// Every key the recorder itself writes into the header's objects and the step's and footer's
// recorder objects is one eventlog/schema.h names (the reader looks them up by those names).
TEST(Recorder, HeaderAndRecorderObjectsUseTheSchemasKeys) {
  const std::string path = temp_log_path("rec");
  {
    Recorder rec(fake_options(path, 2, per_worker_fakes()));
    rec.write_header(json::object());
    rec.begin_step(Phase::Decode, 0);
    { auto s = rec.op({.name = "rope", .layer = 0, .kind = OpKind::Elementwise}); }
    rec.end_step({.phase = Phase::Decode, .step = 0, .n_past = 1, .token = 1, .piece = "a"});
    rec.write_footer(json::object());
  }
  const auto log = read_log(path);
  ASSERT_EQ(log.size(), 4u);
  auto keys_of = [](const json& obj) {
    std::set<std::string> k;
    for (const auto& [name, v] : obj.items()) k.insert(name);
    return k;
  };
  auto within = [&](const json& obj, const auto& schema, const char* where) {
    ASSERT_TRUE(obj.is_object()) << where;
    for (const std::string& k : keys_of(obj))
      EXPECT_NE(std::find(schema.begin(), schema.end(), k), schema.end()) << where << k;
  };
  json top = log[0];
  top.erase("type");
  within(top, eventlog::header_key::kAll, "");
  within(log[0]["host"], eventlog::host_key::kAll, "host.");
  within(log[0]["counters"], eventlog::counters_key::kAll, "counters.");
  within(log[0]["frequency"], eventlog::frequency_key::kAll, "frequency.");
  within(log[0]["thermal"], eventlog::thermal_key::kAll, "thermal.");
  within(log[0]["cgroup"], eventlog::cgroup_key::kAll, "cgroup.");
  const auto& step_keys = eventlog::step_recorder_key::kAll;
  const auto& footer_keys = eventlog::footer_recorder_key::kAll;
  EXPECT_EQ(keys_of(log[2]["recorder"]), std::set<std::string>(step_keys.begin(), step_keys.end()));
  EXPECT_EQ(keys_of(log[3]["recorder"]),
            std::set<std::string>(footer_keys.begin(), footer_keys.end()));
}

}  // namespace
}  // namespace pacer::runtime
