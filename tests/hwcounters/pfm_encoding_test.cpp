// libpfm4 encoding works without a PMU: generic perf names resolve to the kernel's ABI numbers
// (PERF_TYPE_HARDWARE = 0 with PERF_COUNT_HW_* ids, PERF_TYPE_SOFTWARE = 1 with PERF_COUNT_SW_*).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "hwcounters/event_table.h"
#include "hwcounters/pfm_encoding.h"

namespace pacer::hwcounters {
namespace {

struct Expected {
  const char* name;
  uint32_t type;
  uint64_t config;
};

TEST(PfmEncoding, GenericNamesResolveToKernelAbiNumbers) {
  // Numbers from include/uapi/linux/perf_event.h (perf_type_id, perf_hw_id, perf_sw_ids).
  const Expected cases[] = {
      {"cycles", kPerfTypeHardware, 0},
      {"instructions", kPerfTypeHardware, 1},
      {"cache-misses", kPerfTypeHardware, 3},
      {"branch-misses", kPerfTypeHardware, 5},
      {"ref-cycles", kPerfTypeHardware, 9},
      {"task-clock", kPerfTypeSoftware, 1},
      {"page-faults", kPerfTypeSoftware, 2},
      {"context-switches", kPerfTypeSoftware, 3},
      {"cpu-migrations", kPerfTypeSoftware, 4},
      {"PERF_COUNT_HW_CACHE_MISSES", kPerfTypeHardware, 3},
  };
  for (const Expected& e : cases) {
    const EncodeResult r = encode_event(e.name);
    ASSERT_TRUE(r.ok) << e.name << ": " << r.error;
    EXPECT_EQ(r.encoding.type, e.type) << e.name;
    EXPECT_EQ(r.encoding.config, e.config) << e.name;
    EXPECT_FALSE(r.encoding.exclude_kernel) << e.name << " should count kernel mode by default";
    EXPECT_FALSE(r.encoding.fstr.empty()) << e.name;
  }
}

TEST(PfmEncoding, UserModifierExcludesKernel) {
  const EncodeResult r = encode_event("instructions:u");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.encoding.exclude_kernel);
  EXPECT_FALSE(r.encoding.exclude_user);
}

TEST(PfmEncoding, UnknownEventNamesTheEventAndLibpfmReason) {
  const EncodeResult r = encode_event("no_such_event_xyz");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("no_such_event_xyz"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("not found"), std::string::npos) << r.error;
}

TEST(PfmEncoding, DefaultTablesEncodeWithUniqueKeys) {
  std::set<std::string> keys;
  for (auto table : {default_hardware_events(), software_events()}) {
    for (const EventDef& d : table) {
      const EncodeResult r = encode_event(d.pfm_name);
      EXPECT_TRUE(r.ok) << d.pfm_name << ": " << r.error;
      EXPECT_EQ(r.encoding.type == kPerfTypeSoftware, d.kind == EventKind::Software) << d.key;
      EXPECT_TRUE(keys.insert(std::string(d.key)).second) << "duplicate key " << d.key;
    }
  }
}

// libpfm4 detects the core PMU from CPUID even where the kernel exposes none (a KVM guest), so
// model-specific events still encode to raw configs. Machines where libpfm4 does not know the CPU
// model skip.
TEST(PfmEncoding, CorePmuEventsEncodeToRawConfigs) {
  std::string core;
  for (const PmuDescription& p : detected_pmus()) {
    if (p.core && p.nevents > 0) core = p.name;
  }
  if (core.empty()) GTEST_SKIP() << "libpfm4 detected no core PMU model for this CPU";
  int encoded = 0;
  for (const std::string& name : pmu_event_names(core, 40)) {
    const EncodeResult r = encode_event(name);
    if (!r.ok) continue;  // events needing a umask without a default do not encode bare
    ++encoded;
    EXPECT_NE(r.encoding.type, kPerfTypeSoftware) << name;
    EXPECT_NE(r.encoding.fstr.find(core + "::"), std::string::npos) << r.encoding.fstr;
  }
  EXPECT_GT(encoded, 0) << "no event of " << core << " encoded";
}

}  // namespace
}  // namespace pacer::hwcounters
