// compare_attribution: the LMDI split on hand-built timings with values worked out by hand.
#include "analysis/compare_attribution.h"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace pacer::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One op "a", one cycle per run.
RunCycles one_op_run(double step_ns, const OpTiming& t) {
  RunCycles r;
  r.path = "hand";
  r.step_ids = {1};
  r.step_ns = {step_ns};
  r.op_order = {"a"};
  r.timing["a"] = {t};
  return r;
}

OpTiming timing(double wall, double span, double oncpu, double runq, double instr, double cycles,
                double freq_cycles) {
  OpTiming t;
  t.wall_ns = wall;
  t.span_ns = span;
  t.oncpu_ns = oncpu;
  t.runq_ns = runq;
  t.instructions = instr;
  t.cycles = cycles;
  t.freq_cycles = freq_cycles;
  t.instances = 1;
  return t;
}

// normal:   wall 1000 = span 900 + sync 100; span = oncpu 600 + runq 100 + blocked 200;
//           1200 instructions, 1800 cycles: F = 1800/600 = 3 GHz, CPI = 1.5. Step 1200 (200
//           outside).
// abnormal: wall 1600 = span 1500 + sync 100; span = oncpu 1000 + runq 200 + blocked 300;
//           1500 instructions, 2000 cycles: F = 2 GHz, CPI = 4/3. Step 1900 (300 outside).
// L = (1000 - 600) / ln(1000/600) = 783.046075588487
//   frequency    = -L ln(2/3)          = +317.4978616921598
//   IPC          =  L ln((4/3) / 1.5)  =  -92.22954384162995
//   instructions =  L ln(1500/1200)    = +174.73168214947015    (the three sum to ΔON = 400)
//   run queue = 200 - 100 = 100; blocked = 300 - 200 = 100; residual = sync 0 + outside 100.
//   Total = 400 + 100 + 100 + 100 = 700 = 1900 - 1200.
TEST(CompareAttribution, CountersSplitMatchesHandComputation) {
  const RunCycles a = one_op_run(1200, timing(1000, 900, 600, 100, 1200, 1800, 1800));
  const RunCycles b = one_op_run(1900, timing(1600, 1500, 1000, 200, 1500, 2000, 2000));
  const Attribution r = attribute(a, b);
  EXPECT_EQ(r.level, SplitLevel::Counters);
  EXPECT_TRUE(r.runq_measured);
  EXPECT_NEAR(r.part(Part::Frequency), 317.4978616921598, 1e-9);
  EXPECT_NEAR(r.part(Part::Ipc), -92.22954384162995, 1e-9);
  EXPECT_NEAR(r.part(Part::Instructions), 174.73168214947015, 1e-9);
  EXPECT_NEAR(r.part(Part::RunQueue), 100, 1e-9);
  EXPECT_NEAR(r.part(Part::Blocked), 100, 1e-9);
  EXPECT_NEAR(r.part(Part::Residual), 100, 1e-9);
  EXPECT_NEAR(r.residual_outside_ns, 100, 1e-9);
  EXPECT_NEAR(r.residual_sync_ns, 0, 1e-9);
  EXPECT_DOUBLE_EQ(r.part(Part::CpuWork), 0);
  EXPECT_NEAR(r.sum_of_parts(), 700, 1e-9);
  EXPECT_DOUBLE_EQ(r.delta_ns(), 700);
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_NEAR(r.ops[0].freq_mhz[0], 3000, 1e-9);
  EXPECT_NEAR(r.ops[0].freq_mhz[1], 2000, 1e-9);
  EXPECT_NEAR(r.ops[0].cpi[1], 4.0 / 3.0, 1e-12);
}

// The imbalance figure is the per-cycle sum of the ops' excess in each run, and it is not a part:
// the parts still add up to the measured difference.
TEST(CompareAttribution, ExcessIsCarriedBesideTheParts) {
  OpTiming ta = timing(1000, 900, 600, 100, 1200, 1800, 1800);
  OpTiming tb = timing(1600, 1500, 1000, 200, 1500, 2000, 2000);
  ta.excess_ns = 50;
  tb.excess_ns = 450;
  const Attribution r = attribute(one_op_run(1200, ta), one_op_run(1900, tb));
  EXPECT_DOUBLE_EQ(r.span_excess_ns[0], 50);
  EXPECT_DOUBLE_EQ(r.span_excess_ns[1], 450);
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_DOUBLE_EQ(r.ops[0].excess_ns[1], 450);
  EXPECT_NEAR(r.sum_of_parts(), 700, 1e-9);
  // An op without worker data in one run contributes to neither run's figure.
  OpTiming none = tb;
  none.span_ns = none.oncpu_ns = none.excess_ns = kNaN;
  none.instances_without_workers = 1;
  const Attribution n = attribute(one_op_run(1200, ta), one_op_run(1900, none));
  EXPECT_DOUBLE_EQ(n.span_excess_ns[0], 0);
  EXPECT_DOUBLE_EQ(n.span_excess_ns[1], 0);
}

TEST(CompareAttribution, SymmetricWhenRunsSwap) {
  const RunCycles a = one_op_run(1200, timing(1000, 900, 600, 100, 1200, 1800, 1800));
  const RunCycles b = one_op_run(1900, timing(1600, 1500, 1000, 200, 1500, 2000, 2000));
  const Attribution fwd = attribute(a, b), back = attribute(b, a);
  for (int p = 0; p < kPartCount; ++p) EXPECT_NEAR(fwd.parts[p], -back.parts[p], 1e-9) << p;
}

TEST(CompareAttribution, ClockOnlyKeepsIpcAndInstructionsTogether) {
  // No PMU: cycles implied by the clock. normal 600 ns at 3 GHz = 1800; abnormal 1000 ns at
  // 2 GHz = 2000. L = 783.046...; frequency = -L ln(2/3) = 317.4978...;
  // CPU work = L ln(2000/1800) = 82.5021... (= 400 - 317.4978).
  const RunCycles a = one_op_run(1200, timing(1000, 900, 600, 100, kNaN, kNaN, 1800));
  const RunCycles b = one_op_run(1900, timing(1600, 1500, 1000, 200, kNaN, kNaN, 2000));
  const Attribution r = attribute(a, b);
  EXPECT_EQ(r.level, SplitLevel::Frequency);
  EXPECT_NEAR(r.part(Part::Frequency), 317.4978616921598, 1e-9);
  EXPECT_NEAR(r.part(Part::CpuWork), 400 - 317.4978616921598, 1e-9);
  EXPECT_DOUBLE_EQ(r.part(Part::Ipc), 0);
  EXPECT_NEAR(r.sum_of_parts(), 700, 1e-9);
  ASSERT_FALSE(r.not_measured.empty());
  EXPECT_NE(r.not_measured[0].find("IPC and instruction count"), std::string::npos);
}

TEST(CompareAttribution, OnCpuOnlyAndNoRunq) {
  const RunCycles a = one_op_run(1200, timing(1000, 900, 600, kNaN, kNaN, kNaN, kNaN));
  const RunCycles b = one_op_run(1900, timing(1600, 1500, 1000, kNaN, kNaN, kNaN, kNaN));
  const Attribution r = attribute(a, b);
  EXPECT_EQ(r.level, SplitLevel::OnCpu);
  EXPECT_FALSE(r.runq_measured);
  EXPECT_NEAR(r.part(Part::OnCpu), 400, 1e-9);
  // Off-CPU without run-queue data: (1500 - 1000) - (900 - 600) = 200, all "blocked".
  EXPECT_NEAR(r.part(Part::Blocked), 200, 1e-9);
  EXPECT_NEAR(r.sum_of_parts(), 700, 1e-9);
}

TEST(CompareAttribution, NoWorkerDataIsAllResidual) {
  const RunCycles a = one_op_run(1200, timing(1000, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN));
  const RunCycles b = one_op_run(1900, timing(1600, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN));
  const Attribution r = attribute(a, b);
  EXPECT_EQ(r.level, SplitLevel::None);
  EXPECT_NEAR(r.part(Part::Residual), 700, 1e-9);
  EXPECT_NEAR(r.residual_unmeasured_ns, 600, 1e-9);
  EXPECT_NEAR(r.residual_outside_ns, 100, 1e-9);
}

TEST(CompareAttribution, OpInOneRunOnlyIsResidual) {
  RunCycles a = one_op_run(1200, timing(1000, 900, 600, 100, 1200, 1800, 1800));
  RunCycles b = one_op_run(2400, timing(1000, 900, 600, 100, 1200, 1800, 1800));
  b.op_order.push_back("extra");
  b.timing["extra"] = {timing(500, 450, 400, 0, 800, 1200, 1200)};
  const Attribution r = attribute(a, b);
  EXPECT_NEAR(r.sum_of_parts(), 1200, 1e-9);
  EXPECT_EQ(r.ops[0].op, "extra");  // largest |delta| first
  EXPECT_EQ(r.ops[0].level, SplitLevel::None);
  EXPECT_NEAR(r.ops[0].part(Part::Residual), 500, 1e-9);
}

// Late wake-ups: the abnormal run's critical workers start 1400 ns after the op (normal: 100), and
// the step shows 1300 ns of run-queue wait that no slice covers. The op's sync grows by 1300, all
// of it dispatch delay, and all of that is explained by the run-queue wait outside slices.
//   normal:   wall 1000 = dispatch 100 + span 800 + join 100; span = oncpu 800.
//   abnormal: wall 2300 = dispatch 1400 + span 800 + join 100; runq outside slices 1300.
// Δ step = 1300 = run queue 1300 (moved from dispatch), residual 0.
TEST(CompareAttribution, RunQueueOutsideSlicesExplainsDispatchDelay) {
  OpTiming ta = timing(1000, 800, 800, 0, kNaN, kNaN, kNaN);
  ta.dispatch_ns = 100;
  ta.join_ns = 100;
  OpTiming tb = timing(2300, 800, 800, 0, kNaN, kNaN, kNaN);
  tb.dispatch_ns = 1400;
  tb.join_ns = 100;
  RunCycles a = one_op_run(1000, ta), b = one_op_run(2300, tb);
  a.runq_outside_ns = {0};
  b.runq_outside_ns = {1300};
  const Attribution r = attribute(a, b);
  EXPECT_NEAR(r.part(Part::RunQueue), 1300, 1e-9);
  EXPECT_NEAR(r.runq_outside_ns, 1300, 1e-9);
  EXPECT_NEAR(r.part(Part::Residual), 0, 1e-9);
  EXPECT_NEAR(r.residual_dispatch_ns, 0, 1e-9);
  EXPECT_NEAR(r.residual_join_ns, 0, 1e-9);
  EXPECT_NEAR(r.sum_of_parts(), 1300, 1e-9);

  // Without the step-level run-queue figure the same delay stays residual, as dispatch delay.
  a.runq_outside_ns = {kNaN};
  const Attribution u = attribute(a, b);
  EXPECT_NEAR(u.part(Part::RunQueue), 0, 1e-9);
  EXPECT_NEAR(u.residual_dispatch_ns, 1300, 1e-9);
  EXPECT_NEAR(u.part(Part::Residual), 1300, 1e-9);

  // Never more than the dispatch and outside time grew by: 5000 ns of uncovered wait (e.g. while
  // another op ran) still moves only 1300.
  a.runq_outside_ns = {0};
  b.runq_outside_ns = {5000};
  const Attribution capped = attribute(a, b);
  EXPECT_NEAR(capped.part(Part::RunQueue), 1300, 1e-9);
  EXPECT_NEAR(capped.sum_of_parts(), 1300, 1e-9);
}

}  // namespace
}  // namespace pacer::analysis
