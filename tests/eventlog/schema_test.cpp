// The event-log schema's name tables: one table prints and parses each enum, and unknown values
// follow the one documented rule (unknown names -> Other, values outside the table -> "other").
#include "eventlog/schema.h"

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

}  // namespace
}  // namespace pacer::eventlog
