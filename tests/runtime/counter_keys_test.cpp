// The keys hwcounters' sources count under are the log's counter keys (eventlog/schema.h): the
// recorder writes them unchanged, and analysis looks them up by the schema's names.
#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "eventlog/schema.h"
#include "hwcounters/event_table.h"

namespace pacer::runtime {
namespace {

TEST(CounterKeys, DefaultEventTablesCountExactlyTheSchemasStandardKeys) {
  std::set<std::string> counted;
  for (const auto& e : hwcounters::default_hardware_events()) counted.insert(std::string(e.key));
  for (const auto& e : hwcounters::software_events()) counted.insert(std::string(e.key));
  std::set<std::string> schema;
  for (std::string_view k : eventlog::counter_key::kStandard) schema.insert(std::string(k));
  EXPECT_EQ(counted, schema);
}

TEST(CounterKeys, DerivedMetricsReadOnlySchemaKeys) {
  const auto& standard = eventlog::counter_key::kStandard;
  auto known = [&](std::string_view k) {
    return k == "wall_ns" || std::find(standard.begin(), standard.end(), k) != standard.end();
  };
  for (const auto& m : hwcounters::derived_metrics()) {
    EXPECT_TRUE(known(m.numerator)) << m.name << ": " << m.numerator;
    EXPECT_TRUE(known(m.denominator)) << m.name << ": " << m.denominator;
  }
}

}  // namespace
}  // namespace pacer::runtime
