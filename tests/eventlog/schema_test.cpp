// The event-log schema's name tables: one table prints and parses each enum, and unknown values
// follow the one documented rule (unknown names -> Other, values outside the table -> "other").
#include "eventlog/schema.h"
#include "eventlog/metrics.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace pacer::eventlog {
namespace {

TEST(EventLogSchema, EveryPhaseNamePrintsAndParsesBackToItsValue) {
  std::set<std::string> names;
  for (const auto& [value, name] : kPhaseNames) {
    EXPECT_EQ(phase_name(value), name);
    EXPECT_EQ(parse_phase(name), value) << name;
    names.insert(std::string(name));
  }
  EXPECT_EQ(names, (std::set<std::string>{"tokenize", "prefill", "decode", "sample", "detokenize",
                                          "other"}));
  EXPECT_EQ(kPhaseCount, 6u);
}

TEST(EventLogSchema, EveryOpKindNamePrintsAndParsesBackToItsValue) {
  std::set<std::string> names;
  for (const auto& [value, name] : kOpKindNames) {
    EXPECT_EQ(op_kind_name(value), name);
    EXPECT_EQ(parse_op_kind(name), value) << name;
    names.insert(std::string(name));
  }
  EXPECT_EQ(names, (std::set<std::string>{"matmul", "attention", "norm", "elementwise", "embed",
                                          "sample", "other"}));
}

TEST(EventLogSchema, UnknownNamesParseToOtherAndUnknownValuesPrintAsOther) {
  EXPECT_EQ(parse_phase("warmup"), Phase::Other);
  EXPECT_EQ(parse_phase(""), Phase::Other);
  EXPECT_EQ(parse_phase("Decode"), Phase::Other);  // names are case-sensitive
  EXPECT_EQ(parse_op_kind("conv2d"), OpKind::Other);
  EXPECT_EQ(phase_name(static_cast<Phase>(200)), "other");
  EXPECT_EQ(op_kind_name(static_cast<OpKind>(200)), "other");
}

TEST(EventLogSchema, TablesAreUsableAtCompileTime) {
  static_assert(phase_name(Phase::Prefill) == "prefill");
  static_assert(parse_op_kind("attention") == OpKind::Attention);
  static_assert(kSchemaVersion == 1, "bump docs/event-log.md's title with the version");
  SUCCEED();
}

// Every derived metric reads logged counters (or the op's wall time) by their schema keys, and
// its name is unique, so the header's `derived_metrics` and the reader's formulas stay one table.
TEST(DerivedMetrics, ReadSchemaCounterKeysAndHaveUniqueNames) {
  const std::set<std::string_view> keys(counter_key::kStandard.begin(),
                                        counter_key::kStandard.end());
  std::set<std::string_view> names;
  for (const DerivedMetric& m : kDerivedMetrics) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_TRUE(keys.count(m.numerator)) << m.name << ": " << m.numerator;
    EXPECT_TRUE(keys.count(m.denominator) || m.denominator == kWallNs)
        << m.name << ": " << m.denominator;
    EXPECT_EQ(find_metric(m.name), &m);
  }
  EXPECT_EQ(find_metric("no_such_metric"), nullptr);
  // Hand-computed: 3e6 cycles over 2e6 ns of task-clock is 1500 MHz; 30 misses in 20k
  // instructions are 1.5 per 1k; a zero denominator has no value.
  EXPECT_DOUBLE_EQ(*evaluate_metric(metric(metric_name::kFreqMhzTaskClock), 3e6, 2e6), 1500.0);
  EXPECT_DOUBLE_EQ(*evaluate_metric(metric(metric_name::kLlcMpki), 30, 20000), 1.5);
  EXPECT_FALSE(evaluate_metric(metric(metric_name::kIpc), 5, 0).has_value());
}

}  // namespace
}  // namespace pacer::eventlog
