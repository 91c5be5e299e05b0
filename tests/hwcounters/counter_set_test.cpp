// CounterSet assembles the sources for one thread and explains what it could not count.
#include <gtest/gtest.h>

#include <algorithm>

#include "hwcounters/counter_set.h"

namespace pacer::hwcounters {
namespace {

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

const Unavailable* find_unavailable(const CounterSetStatus& st, std::string_view event) {
  for (const Unavailable& u : st.unavailable) {
    if (u.event == event) return &u;
  }
  return nullptr;
}

TEST(CounterSet, AlwaysHasOnCpuTimeAndExplainsMissingHardware) {
  CounterSet set = CounterSet::open_for_calling_thread({});
  const CounterSetStatus st = set.status();
  EXPECT_TRUE(contains(st.live, "task_clock_ns"));
  EXPECT_TRUE(st.mode == "hardware" || st.mode == "software" || st.mode == "clock") << st.mode;
  if (st.mode != "hardware") {
    const Unavailable* u = find_unavailable(st, "cycles");
    ASSERT_NE(u, nullptr);
    EXPECT_FALSE(u->reason.empty());
  } else {
    EXPECT_TRUE(contains(st.live, "cycles"));
  }
  EXPECT_FALSE(st.read.empty());
  // Every live key reads.
  for (auto& src : set.sources()) {
    Reading r;
    EXPECT_TRUE(src->read(r)) << src->name();
  }
}

TEST(CounterSet, UserEventsJoinTheirGroupOrAreRejectedWithLibpfmsMessage) {
  CounterSpec spec;
  spec.extra_events = {"major-faults", "no_such_event_xyz"};
  CounterSet set = CounterSet::open_for_calling_thread(spec);
  const CounterSetStatus st = set.status();
  if (st.mode != "clock") {
    EXPECT_TRUE(contains(st.live, "major-faults"));
  }
  const Unavailable* u = find_unavailable(st, "no_such_event_xyz");
  ASSERT_NE(u, nullptr);
  EXPECT_NE(u->reason.find("libpfm4"), std::string::npos) << u->reason;
}

TEST(CounterSet, HardwareOffListsEveryHardwareEventAsDisabled) {
  CounterSpec spec;
  spec.hardware = false;
  spec.schedstat = false;
  const CounterSetStatus st = CounterSet::open_for_calling_thread(spec).status();
  EXPECT_NE(st.mode, "hardware");
  for (const char* e : {"cycles", "instructions", "ref_cycles", "llc_misses", "branch_misses"}) {
    const Unavailable* u = find_unavailable(st, e);
    ASSERT_NE(u, nullptr) << e;
    EXPECT_EQ(u->reason, "hardware counters disabled");
  }
  EXPECT_FALSE(contains(st.live, "runq_ns"));
}

}  // namespace
}  // namespace pacer::hwcounters
