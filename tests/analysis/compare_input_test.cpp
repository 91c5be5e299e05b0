// compare_input: one hand-written log, every expected number worked out by hand below.
#include "analysis/compare_input.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace pacer::analysis {
namespace {

// Decode step 1 (t 1000..11000 = 10000 ns) has two ffn_down instances on workers pinned to
// CPUs 2 and 3:
//   layer 0 (wall 4000): w0 cpu2 3000 ns, 3000 MHz, oncpu 3000, runq 0,   6000 instr, 9000 cycles
//                        w1 cpu3 3800 ns, 2000 MHz, oncpu 3000, runq 800, 4000 instr, 6000 cycles
//   layer 1 (wall 2000): w0 cpu2 1500 ns, 3000 MHz, oncpu 1500, runq 0,   3000 instr, 4500 cycles
//                        w1 cpu3 1000 ns, 3000 MHz, oncpu 1000, runq 0,   2000 instr, 3000 cycles
// A prefill step 0 comes first (not a cycle); an op of step 2 has no step line (dropped).
const char* kLog =
    R"({"type":"header","schema":1,"model":{"arch":"llama","type":"q8_0","n_layers":2},"run":{"threads":2,"cpus":[2,3]},"frequency":{"source":"cycles","nominal_mhz":3000}}
{"type":"op","step":0,"phase":"prefill","name":"ffn_down","layer":0,"kind":"matmul","t0_ns":100,"t1_ns":600,"workers":[{"w":0,"cpu":2,"t0_ns":100,"t1_ns":600,"oncpu_ns":500}]}
{"type":"step","step":0,"phase":"prefill","n_past":4,"n_tokens":4,"t0_ns":0,"t1_ns":900}
{"type":"op","step":1,"phase":"decode","name":"ffn_down","layer":0,"kind":"matmul","t0_ns":2000,"t1_ns":6000,"workers":[{"w":0,"cpu":2,"cpu_end":2,"t0_ns":2100,"t1_ns":5100,"freq_mhz":3000,"runq_ns":0,"oncpu_ns":3000,"counters":{"instructions":6000,"cycles":9000}},{"w":1,"cpu":3,"cpu_end":3,"t0_ns":2100,"t1_ns":5900,"freq_mhz":2000,"runq_ns":800,"oncpu_ns":3000,"counters":{"instructions":4000,"cycles":6000}}]}
{"type":"op","step":1,"phase":"decode","name":"ffn_down","layer":1,"kind":"matmul","t0_ns":6000,"t1_ns":8000,"workers":[{"w":0,"cpu":2,"cpu_end":2,"t0_ns":6100,"t1_ns":7600,"freq_mhz":3000,"runq_ns":0,"oncpu_ns":1500,"counters":{"instructions":3000,"cycles":4500}},{"w":1,"cpu":3,"cpu_end":3,"t0_ns":6100,"t1_ns":7100,"freq_mhz":3000,"runq_ns":0,"oncpu_ns":1000,"counters":{"instructions":2000,"cycles":3000}}]}
{"type":"step","step":1,"phase":"decode","n_past":5,"token":7,"t0_ns":1000,"t1_ns":11000,"freq":[{"w":0,"cpu":2,"mhz":3000},{"w":1,"cpu":3,"mhz":2500}],"sched":{"runq_ns":800,"oncpu_ns":8500,"nvcsw":0,"nivcsw":1},"process_cpu_usage":0.85,"host_cpu_usage":1.5}
{"type":"op","step":2,"phase":"decode","name":"ffn_down","layer":0,"kind":"matmul","t0_ns":12000,"t1_ns":13000,"workers":[]}
)";

class CompareInputTest : public ::testing::Test {
 protected:
  RunCycles run = load_run_text(kLog, "hand.jsonl");
  const Cell& cell(const std::string& op, int dev) {
    const auto* s = run.find(op, dev);
    EXPECT_NE(s, nullptr) << op << " " << dev;
    return s->at(0);
  }
};

TEST_F(CompareInputTest, OneCyclePerDecodeStep) {
  ASSERT_EQ(run.cycles(), 1u);
  EXPECT_EQ(run.prefill_steps, 1);
  EXPECT_EQ(run.step_ids[0], 1);
  EXPECT_DOUBLE_EQ(run.step_ns[0], 10000);
  EXPECT_EQ(run.op_order, std::vector<std::string>({"ffn_down"}));
  EXPECT_EQ(run.cpu_devices, std::set<int>({2, 3}));
  // The step-2 op without a step line and the incomplete run are both noted.
  bool dropped = false, incomplete = false;
  for (const auto& n : run.notes) {
    dropped = dropped || n.find("without a step line") != std::string::npos;
    incomplete = incomplete || n.find("footer") != std::string::npos;
  }
  EXPECT_TRUE(dropped);
  EXPECT_TRUE(incomplete);
}

TEST_F(CompareInputTest, HostCellAggregatesWorkersAndLayers) {
  const Cell& c = cell("ffn_down", kHostDevice);
  EXPECT_DOUBLE_EQ(c.time_ns, 6000);  // 4000 + 2000 wall
  // Clock weighted by on-CPU time: (3000*3000 + 2000*3000 + 3000*1500 + 3000*1000) / 8500.
  EXPECT_NEAR(c.value(Metric::CpuFrequency), 22.5e6 / 8500, 1e-9);
  EXPECT_NEAR(c.value(Metric::Ipc), 15000.0 / 22500.0, 1e-12);
  EXPECT_DOUBLE_EQ(c.value(Metric::Instructions), 15000);
  EXPECT_DOUBLE_EQ(c.value(Metric::Cycles), 22500);
  EXPECT_DOUBLE_EQ(c.value(Metric::RunqDelay), 800);
  EXPECT_DOUBLE_EQ(c.value(Metric::OncpuTime), 8500);
  EXPECT_TRUE(std::isnan(c.value(Metric::LlcMisses)));  // not in the log: absent, not 0
}

TEST_F(CompareInputTest, CpuCellsSeparateWorkers) {
  const Cell& c2 = cell("ffn_down", 2);
  EXPECT_DOUBLE_EQ(c2.time_ns, 4500);  // 3000 + 1500
  EXPECT_DOUBLE_EQ(c2.value(Metric::CpuFrequency), 3000);
  EXPECT_DOUBLE_EQ(c2.value(Metric::Instructions), 9000);
  const Cell& c3 = cell("ffn_down", 3);
  EXPECT_DOUBLE_EQ(c3.time_ns, 4800);  // 3800 + 1000
  EXPECT_DOUBLE_EQ(c3.value(Metric::CpuFrequency), (2000.0 * 3000 + 3000.0 * 1000) / 4000);
  EXPECT_DOUBLE_EQ(c3.value(Metric::RunqDelay), 800);
}

TEST_F(CompareInputTest, CriticalPathTiming) {
  // Layer 0 waits for w1 (3800 ns), layer 1 for w0 (1500 ns).
  const OpTiming& t = run.timing.at("ffn_down").at(0);
  EXPECT_EQ(t.instances, 2);
  EXPECT_DOUBLE_EQ(t.wall_ns, 6000);
  EXPECT_DOUBLE_EQ(t.span_ns, 3800 + 1500);
  EXPECT_DOUBLE_EQ(t.oncpu_ns, 3000 + 1500);
  EXPECT_DOUBLE_EQ(t.runq_ns, 800 + 0);
  EXPECT_DOUBLE_EQ(t.instructions, 4000 + 3000);
  EXPECT_DOUBLE_EQ(t.cycles, 6000 + 4500);
  EXPECT_DOUBLE_EQ(t.freq_cycles, 3000 * 2.0 + 1500 * 3.0);  // on-CPU ns x GHz
  // Sync around the critical chunks: layer 0 starts 100 after the op and ends 100 before it;
  // layer 1 starts 100 after and ends 8000 - 7600 = 400 before.
  EXPECT_DOUBLE_EQ(t.dispatch_ns, 100 + 100);
  EXPECT_DOUBLE_EQ(t.join_ns, 100 + 400);
  // Load imbalance: the waited-for slice over the instance's mean slice, (3000 + 3800) / 2 = 3400
  // and (1500 + 1000) / 2 = 1250.
  EXPECT_DOUBLE_EQ(t.excess_ns, (3800 - 3400) + (1500 - 1250));
  // The step's run-queue wait (800) is all inside w1's layer-0 slice.
  EXPECT_DOUBLE_EQ(run.runq_outside_ns.at(0), 0);
}

// A worker woken late: w1 starts 1400 ns into the op (it waited 1300 ns runnable before its
// chunk, in no slice) and finishes last with a shorter slice than w0. The op waited for w1.
TEST(CompareInput, CriticalWorkerIsTheLastToFinish) {
  const char* log =
      R"({"type":"header","schema":1,"model":{"arch":"llama","type":"q8_0","n_layers":1},"run":{"threads":2,"cpus":[0,1]}}
{"type":"op","step":1,"phase":"decode","name":"ffn_down","layer":0,"kind":"matmul","t0_ns":2000,"t1_ns":6000,"workers":[{"w":0,"cpu":0,"t0_ns":2100,"t1_ns":5000,"runq_ns":0,"oncpu_ns":2900},{"w":1,"cpu":1,"t0_ns":3400,"t1_ns":5900,"runq_ns":0,"oncpu_ns":2500}]}
{"type":"step","step":1,"phase":"decode","n_past":5,"token":7,"t0_ns":1000,"t1_ns":7000,"sched":{"runq_ns":1300,"oncpu_ns":5400,"nvcsw":1,"nivcsw":1}}
)";
  const RunCycles run = load_run_text(log, "late.jsonl");
  const OpTiming& t = run.timing.at("ffn_down").at(0);
  EXPECT_DOUBLE_EQ(t.span_ns, 2500);  // w1's slice, not w0's longer one
  EXPECT_DOUBLE_EQ(t.oncpu_ns, 2500);
  EXPECT_DOUBLE_EQ(t.dispatch_ns, 1400);                      // 3400 - 2000
  EXPECT_DOUBLE_EQ(t.join_ns, 100);                           // 6000 - 5900
  EXPECT_DOUBLE_EQ(t.excess_ns, 2500 - (2900 + 2500) / 2.0);  // negative: it started late
  EXPECT_DOUBLE_EQ(run.runq_outside_ns.at(0), 1300);
}

TEST_F(CompareInputTest, PseudoOpsFromTheScheduler) {
  const Cell& on = cell(std::string(kOncpuOp), kHostDevice);
  EXPECT_DOUBLE_EQ(on.time_ns, 8500);                      // sched.oncpu_ns
  EXPECT_DOUBLE_EQ(on.value(Metric::CpuFrequency), 2750);  // mean of the step's 3000 and 2500
  EXPECT_DOUBLE_EQ(on.value(Metric::ProcessCpuUsage), 0.85);
  EXPECT_DOUBLE_EQ(on.value(Metric::HostCpuUsage), 1.5);
  EXPECT_DOUBLE_EQ(on.value(Metric::ContextSwitches), 1);
  EXPECT_DOUBLE_EQ(cell(std::string(kRunqOp), kHostDevice).time_ns, 800);
  EXPECT_DOUBLE_EQ(cell(std::string(kOncpuOp), 2).time_ns, 4500);
  EXPECT_DOUBLE_EQ(cell(std::string(kOncpuOp), 3).time_ns, 4000);
  EXPECT_DOUBLE_EQ(cell(std::string(kRunqOp), 3).time_ns, 800);
  EXPECT_DOUBLE_EQ(cell(std::string(kRunqOp), 3).value(Metric::CpuFrequency), 2500);
  EXPECT_DOUBLE_EQ(run.step_freq_mhz.at(kHostDevice).at(0), 2750);
  EXPECT_DOUBLE_EQ(run.step_freq_mhz.at(3).at(0), 2500);
}

TEST(CompareInput, SkipStepsAndNoDecodeError) {
  const std::string header =
      R"({"type":"header","schema":1,"model":{"arch":"llama","type":"q8_0"}})"
      "\n";
  std::string log = header;
  for (int s = 1; s <= 3; ++s)
    log += "{\"type\":\"step\",\"step\":" + std::to_string(s) +
           ",\"phase\":\"decode\",\"t0_ns\":" + std::to_string(s * 1000) +
           ",\"t1_ns\":" + std::to_string(s * 1000 + 100 * s) + "}\n";
  const RunCycles r = load_run_text(log, "steps.jsonl", {.skip_steps = 1});
  ASSERT_EQ(r.cycles(), 2u);
  EXPECT_EQ(r.skipped_steps, 1);
  EXPECT_DOUBLE_EQ(r.step_ns[0], 200);
  try {
    load_run_text(header, "empty.jsonl");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("empty.jsonl: no decode steps"), std::string::npos)
        << e.what();
  }
}

TEST(CompareInput, NamesAndLabels) {
  EXPECT_EQ(device_label(kHostDevice), "host");
  EXPECT_EQ(device_label(5), "CPU 5");
  EXPECT_EQ(device_label(-3), "worker 1");
  EXPECT_EQ(metric_info(Metric::CpuFrequency).name, "cpu_frequency");
  EXPECT_EQ(metric_info(Metric::RunqDelay).name, "runq_delay");
}

}  // namespace
}  // namespace pacer::analysis

namespace pacer::analysis {
namespace {

// A 1-thread run whose tokenize and prefill slices ran on CPU 5 and whose decode ran on CPU 2:
// only CPU 2 is a worker of the compared (decode) steps.
TEST(CompareInput, WorkerDevicesComeFromDecodeStepsOnly) {
  const char* log =
      R"({"type":"header","schema":1,"model":{"arch":"llama","type":"q8_0","n_layers":1},"run":{"threads":1,"pin":"list:2","cpus":[2]},"frequency":{"source":"cycles","nominal_mhz":3000}}
{"type":"op","step":0,"phase":"tokenize","name":"tokenize","layer":-1,"kind":"other","t0_ns":10,"t1_ns":20,"workers":[{"w":0,"cpu":5,"cpu_end":5,"t0_ns":10,"t1_ns":20,"oncpu_ns":10}]}
{"type":"op","step":0,"phase":"prefill","name":"ffn_down","layer":0,"kind":"matmul","t0_ns":100,"t1_ns":600,"workers":[{"w":0,"cpu":5,"cpu_end":5,"t0_ns":100,"t1_ns":600,"oncpu_ns":500}]}
{"type":"step","step":0,"phase":"prefill","n_past":4,"n_tokens":4,"t0_ns":0,"t1_ns":900}
{"type":"op","step":1,"phase":"decode","name":"ffn_down","layer":0,"kind":"matmul","t0_ns":2000,"t1_ns":6000,"workers":[{"w":0,"cpu":2,"cpu_end":2,"t0_ns":2100,"t1_ns":5100,"freq_mhz":3000,"runq_ns":0,"oncpu_ns":3000}]}
{"type":"step","step":1,"phase":"decode","n_past":5,"token":7,"t0_ns":1000,"t1_ns":11000}
)";
  const RunCycles run = load_run_text(log, "one-thread.jsonl");
  ASSERT_EQ(run.cycles(), 1u);
  EXPECT_EQ(run.cpu_devices, std::set<int>({2}));
  EXPECT_EQ(run.header.run.threads, 1);
}

}  // namespace
}  // namespace pacer::analysis

namespace pacer::analysis {
namespace {

// Unpinned (pin none): worker 0 runs decode step 1 on CPU 0 and step 2 on CPU 1. Keyed by CPU,
// each CPU would hold the worker's time in one step and none in the other; keyed by worker, the
// worker's series is continuous.
TEST(CompareInput, UnpinnedRunsAreKeyedByWorker) {
  const char* log =
      R"({"type":"header","schema":1,"model":{"arch":"llama","type":"q8_0","n_layers":1},"run":{"threads":1,"pin":"none"},"frequency":{"source":"cycles","nominal_mhz":3000}}
{"type":"op","step":1,"phase":"decode","name":"ffn_down","layer":0,"kind":"matmul","t0_ns":2000,"t1_ns":6000,"workers":[{"w":0,"cpu":0,"cpu_end":0,"t0_ns":2100,"t1_ns":5100,"freq_mhz":3000,"runq_ns":0,"oncpu_ns":3000}]}
{"type":"step","step":1,"phase":"decode","n_past":5,"token":7,"t0_ns":1000,"t1_ns":11000}
{"type":"op","step":2,"phase":"decode","name":"ffn_down","layer":0,"kind":"matmul","t0_ns":12000,"t1_ns":16000,"workers":[{"w":0,"cpu":1,"cpu_end":1,"t0_ns":12100,"t1_ns":15100,"freq_mhz":3000,"runq_ns":0,"oncpu_ns":3000}]}
{"type":"step","step":2,"phase":"decode","n_past":6,"token":8,"t0_ns":11000,"t1_ns":21000}
)";
  const RunCycles run = load_run_text(log, "unpinned.jsonl");
  ASSERT_EQ(run.cycles(), 2u);
  EXPECT_EQ(run.cpu_devices, std::set<int>({-2}));  // worker 0
  EXPECT_EQ(device_label(-2), "worker 0");
  const auto* series = run.find("ffn_down", -2);
  ASSERT_NE(series, nullptr);
  EXPECT_DOUBLE_EQ(series->at(0).time_ns, 3000);
  EXPECT_DOUBLE_EQ(series->at(1).time_ns, 3000);
  EXPECT_EQ(run.find("ffn_down", 0), nullptr);
  bool noted = false;
  for (const auto& n : run.notes) noted = noted || n.find("keyed by worker") != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace pacer::analysis
