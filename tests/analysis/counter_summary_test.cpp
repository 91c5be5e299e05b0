// analysis/counter_summary on a hand-written log: totals, derived figures and the events that were
// not counted, each worked out by hand.
#include "analysis/counter_summary.h"

#include <string>

#include <gtest/gtest.h>

namespace pacer::analysis {
namespace {

// Two ops, three slices. instructions 1000+2000+3000 = 6000, cycles 1500+1500+1000 = 4000 ->
// IPC 1.50; on-CPU 1000+1000+2000 = 4000 ns -> cycles / on-CPU = 1.000 GHz; runq 0+500+500 =
// 1000 ns = 25.0% of on-CPU. Ops span 1000 .. 1,001,000 ns = 1 ms: 4 us on-CPU -> 0.00 CPUs.
// llc_misses 3 + 0 + 3 = 6 per 6000 instructions = 1.00 per 1k. Op time 4000 + 101000 ns.
// The steps (whole, every worker, as perf stat counts): a prefill of 2,000,000 ns and a decode
// of 1,002,000 ns = 3.002 ms with on-CPU 4,000,000 + 1,500,000 ns = 5.5 ms -> 1.83 CPUs
// utilized; run queue 1,100,000 ns = 20.0% of it; context switches 7 + 3 + 4 + 1 = 15 over
// 3.002 ms = 4,996.7 /sec (what the ops saw of them is far less: a worker sleeps between ops).
const char* kLog =
    R"({"type":"header","schema":1,"model":{"arch":"llama","type":"q8_0"},"counters":{"mode":"hardware","scope":"user","live":["instructions","cycles"],"unavailable":[{"event":"ref_cycles","reason":"not supported by this PMU"}]},"frequency":{"source":"cycles","nominal_mhz":2596.1354721114903}}
{"type":"op","step":1,"phase":"decode","name":"a","layer":0,"kind":"matmul","t0_ns":1000,"t1_ns":5000,"workers":[{"w":0,"cpu":0,"t0_ns":1000,"t1_ns":2000,"oncpu_ns":1000,"runq_ns":0,"counters":{"instructions":1000,"cycles":1500,"llc_misses":3}},{"w":1,"cpu":1,"t0_ns":1000,"t1_ns":2500,"oncpu_ns":1000,"runq_ns":500,"counters":{"instructions":2000,"cycles":1500,"llc_misses":0}}]}
{"type":"op","step":1,"phase":"decode","name":"b","layer":0,"kind":"norm","t0_ns":900000,"t1_ns":1001000,"workers":[{"w":0,"cpu":0,"t0_ns":900000,"t1_ns":1001000,"oncpu_ns":2000,"runq_ns":500,"counters":{"instructions":3000,"cycles":1000,"llc_misses":3}}]}
{"type":"step","step":0,"phase":"prefill","n_past":0,"n_tokens":3,"t0_ns":-2000000,"t1_ns":0,"sched":{"runq_ns":1000000,"oncpu_ns":4000000,"nvcsw":7,"nivcsw":3}}
{"type":"step","step":1,"phase":"decode","n_past":1,"token":5,"t0_ns":0,"t1_ns":1002000,"sched":{"runq_ns":100000,"oncpu_ns":1500000,"nvcsw":4,"nivcsw":1}}
{"type":"footer","steps":1,"n_prompt":3,"n_generated":1}
)";

TEST(CounterSummary, TotalsAndDerivedFiguresByHand) {
  const CounterSummary s = summarize_counters_text(kLog, "hand.jsonl");
  EXPECT_EQ(s.ops, 2);
  EXPECT_EQ(s.slices, 3);
  EXPECT_DOUBLE_EQ(s.wall_ns, 1'000'000);
  EXPECT_DOUBLE_EQ(s.op_wall_ns, 105'000);
  EXPECT_TRUE(s.steps.has_sched);
  EXPECT_EQ(s.steps.prefill_steps, 1);
  EXPECT_EQ(s.steps.decode_steps, 1);
  EXPECT_DOUBLE_EQ(s.steps.wall_ns, 3'002'000);
  EXPECT_DOUBLE_EQ(s.steps.oncpu_ns, 5'500'000);
  EXPECT_DOUBLE_EQ(s.steps.runq_ns, 1'100'000);
  EXPECT_EQ(s.steps.context_switches, 15);
  EXPECT_DOUBLE_EQ(s.oncpu_ns, 4000);
  EXPECT_DOUBLE_EQ(s.runq_ns, 1000);
  ASSERT_NE(s.find("instructions"), nullptr);
  EXPECT_DOUBLE_EQ(s.find("instructions")->total, 6000);
  EXPECT_DOUBLE_EQ(s.find("cycles")->total, 4000);
  EXPECT_EQ(s.find("cycles")->slices, 3);

  const std::string text = render_counter_summary(s);
  for (const char* want :
       {"hardware counters, scope user", "whole steps (1 prefill + 1 decode, 0.003 s",
        "5.50 msec  on-CPU time (task-clock)  #  1.83 CPUs utilized",
        "1.10 msec  run-queue wait            #  20.0% of on-CPU time",
        "15  context_switches          #  4,996.7 /sec",
        "inside recorded ops (3 op slices in 2 ops, 0.000 s of op time)", "6,000  instructions",
        "#  1.50 insn per cycle", "4,000  cycles", "#  1.000 GHz", "#  25.0% of on-CPU time",
        "#  1.00 per 1k instructions", "<not counted>  ref_cycles", "not supported by this PMU",
        "0.001  seconds from the first recorded op's start to the last one's end",
        "nominal 2596 MHz"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_EQ(text.find("2596.13"), std::string::npos) << text;
}

}  // namespace
}  // namespace pacer::analysis
