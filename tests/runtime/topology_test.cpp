// Topology discovery (hwloc synthetic strings and an XML fixture) and the pin-policy mapping,
// checked against CPU lists worked out by hand from the described machines.
#include "runtime/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace pacer::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Two sockets, 4 cores each, 2 SMT threads per core, numbered the way Linux numbers most Intel
// servers: the first thread of every core (0-7) before the siblings (8-15). Core k holds PUs
// k and k + 8; package 0 has cores 0-3.
constexpr const char* kTwoSocketSmt =
    "pack:2 [numa(memory=8589934592)] l3:1(size=33554432) l2:4(size=1048576) l1d:1(size=49152) "
    "core:1 "
    "pu:2(indexes=0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15)";

// One package, two NUMA nodes (sub-NUMA clustering), 2 cores per node, 2 PUs per core, PUs
// numbered consecutively: node 0 has PUs 0-3, node 1 has 4-7.
constexpr const char* kSubNuma = "pack:1 group:2 [numa(memory=2GB)] core:2 pu:2";

std::vector<int> cpus(const Topology& t, std::string_view pin, int threads) {
  return assign_cpus(t, PinSpec::parse(pin), threads);
}

std::string error_of(const Topology& t, std::string_view pin, int threads) {
  try {
    assign_cpus(t, PinSpec::parse(pin), threads);
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "";
}

TEST(Topology, SyntheticTwoSocketStructure) {
  const Topology t = Topology::from_synthetic(kTwoSocketSmt);
  EXPECT_EQ(t.packages, 2);
  EXPECT_EQ(t.cores.size(), 8u);
  EXPECT_EQ(t.pu_count(), 16);
  EXPECT_TRUE(t.smt());
  ASSERT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_EQ(t.numa_nodes[0].memory_bytes, 8LL << 30);
  EXPECT_THAT(t.numa_nodes[1].cpus, ElementsAre(4, 5, 6, 7, 12, 13, 14, 15));
  EXPECT_THAT(t.cores[1].pus, ElementsAre(1, 9));
  EXPECT_EQ(t.cores[5].package, 1);
  EXPECT_EQ(t.cores[5].numa, 1);
  EXPECT_EQ(t.allowed_cpus.size(), 16u);  // no mask given: every PU
  EXPECT_EQ(t.allowed_core_count(), 8);

  // Caches: one L3 per package, one L2 and L1d per core.
  ASSERT_EQ(t.caches.size(), 3u);
  EXPECT_EQ(t.caches[0].name(), "L1d");
  EXPECT_EQ(t.caches[0].instances, 8);
  EXPECT_EQ(t.caches[0].size_bytes, 48 * 1024);
  EXPECT_EQ(t.caches[1].name(), "L2");
  EXPECT_EQ(t.caches[1].cpus_per_instance, 2);
  EXPECT_EQ(t.caches[2].name(), "L3");
  EXPECT_EQ(t.caches[2].instances, 2);
  EXPECT_EQ(t.caches[2].size_bytes, 32LL << 20);
  EXPECT_EQ(t.caches[2].cpus_per_instance, 8);
}

TEST(PinPolicy, CompactFillsSiblingsFirst) {
  const Topology t = Topology::from_synthetic(kTwoSocketSmt);
  EXPECT_THAT(cpus(t, "compact", 4), ElementsAre(0, 8, 1, 9));
  EXPECT_THAT(cpus(t, "compact", 5), ElementsAre(0, 8, 1, 9, 2));
  EXPECT_EQ(cpus(t, "compact", 16).size(), 16u);
  EXPECT_THAT(error_of(t, "compact", 17), HasSubstr("cannot place 17 threads"));
}

TEST(PinPolicy, CoresSkipsSiblings) {
  const Topology t = Topology::from_synthetic(kTwoSocketSmt);
  EXPECT_THAT(cpus(t, "cores", 8), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  const std::string err = error_of(t, "cores", 9);
  EXPECT_THAT(err, HasSubstr("'cores'"));
  EXPECT_THAT(err, HasSubstr("9 threads"));
  EXPECT_THAT(err, HasSubstr("8 CPUs"));
}

TEST(PinPolicy, ScatterAlternatesPackagesThenUsesSiblings) {
  const Topology t = Topology::from_synthetic(kTwoSocketSmt);
  EXPECT_THAT(cpus(t, "scatter", 2), ElementsAre(0, 4));
  EXPECT_THAT(cpus(t, "scatter", 4), ElementsAre(0, 4, 1, 5));
  // Every physical core is used before any SMT sibling.
  EXPECT_THAT(cpus(t, "scatter", 10), ElementsAre(0, 4, 1, 5, 2, 6, 3, 7, 8, 12));
  EXPECT_THAT(error_of(t, "scatter", 17), HasSubstr("cannot place 17 threads"));
}

TEST(PinPolicy, ScatterSpreadsOverNumaNodesOfOnePackage) {
  const Topology t = Topology::from_synthetic(kSubNuma);
  ASSERT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_THAT(cpus(t, "scatter", 2), ElementsAre(0, 4));
  EXPECT_THAT(cpus(t, "scatter", 4), ElementsAre(0, 4, 2, 6));
  EXPECT_THAT(cpus(t, "scatter", 6), ElementsAre(0, 4, 2, 6, 1, 5));
  EXPECT_THAT(cpus(t, "compact", 3), ElementsAre(0, 1, 2));
}

TEST(PinPolicy, ScatterAcrossPackagesBeforeNodesOfOnePackage) {
  // 2 packages x 2 NUMA nodes x 2 cores x 1 PU: PUs 0-1 node 0, 2-3 node 1 (package 0), ...
  const Topology t = Topology::from_synthetic("pack:2 group:2 [numa] core:2 pu:1");
  ASSERT_EQ(t.numa_nodes.size(), 4u);
  EXPECT_THAT(cpus(t, "scatter", 2), ElementsAre(0, 4));
  EXPECT_THAT(cpus(t, "scatter", 4), ElementsAre(0, 4, 2, 6));
}

TEST(PinPolicy, AllowedMaskRestrictsEveryPolicy) {
  // The process may only run on package 0's first two cores and one sibling: {0, 1, 8}.
  const Topology t = Topology::from_synthetic(kTwoSocketSmt, {8, 1, 0});
  EXPECT_THAT(t.allowed_cpus, ElementsAre(0, 1, 8));
  EXPECT_EQ(t.allowed_core_count(), 2);
  EXPECT_THAT(cpus(t, "compact", 3), ElementsAre(0, 8, 1));
  EXPECT_THAT(cpus(t, "cores", 2), ElementsAre(0, 1));
  EXPECT_THAT(cpus(t, "scatter", 3), ElementsAre(0, 1, 8));
  EXPECT_THAT(error_of(t, "cores", 3), HasSubstr("the process may run on CPUs 0-1,8"));
  EXPECT_THAT(cpus(t, "list:8,0", 2), ElementsAre(8, 0));
  const std::string outside = error_of(t, "list:0,4", 2);
  EXPECT_THAT(outside, HasSubstr("CPU 4"));
  EXPECT_THAT(outside, HasSubstr("outside"));
}

TEST(PinPolicy, ListAndThreadResolution) {
  const Topology t = Topology::from_synthetic(kTwoSocketSmt);
  EXPECT_THAT(cpus(t, "list:3,1,7", 2), ElementsAre(3, 1));  // the first N of the list
  EXPECT_THAT(error_of(t, "list:3,1", 3), HasSubstr("cannot place 3 threads"));
  EXPECT_THAT(error_of(t, "list:99", 1), HasSubstr("CPU 99"));
  EXPECT_TRUE(cpus(t, "none", 64).empty());  // unpinned: oversubscription is the user's call
  EXPECT_EQ(resolve_threads(t, PinSpec::parse("list:2-5"), -1), 4);
  EXPECT_EQ(resolve_threads(t, PinSpec::parse("scatter"), -1), 8);  // one per physical core
  EXPECT_EQ(resolve_threads(t, PinSpec::parse("scatter"), 3), 3);
  EXPECT_THAT(error_of(t, "compact", 0), HasSubstr("positive"));
  // More workers than a session runs (and the recorder brackets) is refused, not attempted.
  EXPECT_EQ(resolve_threads(t, PinSpec{}, kMaxWorkerThreads), kMaxWorkerThreads);
  EXPECT_THROW(resolve_threads(t, PinSpec{}, kMaxWorkerThreads + 1), TopologyError);
}

TEST(PinSpec, ParseAndFormat) {
  EXPECT_EQ(PinSpec::parse("compact").policy, PinPolicy::Compact);
  EXPECT_EQ(PinSpec::parse(" cores ").policy, PinPolicy::Cores);
  const PinSpec list = PinSpec::parse("list:0,2,4-6");
  EXPECT_EQ(list.policy, PinPolicy::List);
  EXPECT_THAT(list.cpus, ElementsAre(0, 2, 4, 5, 6));
  EXPECT_EQ(list.to_string(), "list:0,2,4,5,6");
  EXPECT_THROW(PinSpec::parse("spread"), TopologyError);
  EXPECT_THROW(PinSpec::parse("list:"), TopologyError);
  EXPECT_THROW(PinSpec::parse("list:1,x"), TopologyError);
  EXPECT_THROW(PinSpec::parse("list:1,"), TopologyError);
  EXPECT_THROW(PinSpec::parse("list:5-2"), TopologyError);
  EXPECT_THROW(PinSpec::parse("list:-1"), TopologyError);
  try {
    PinSpec::parse("list:1,2,1");
    FAIL() << "duplicate CPU accepted";
  } catch (const TopologyError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CPU 1 twice"));
  }
  EXPECT_EQ(format_cpu_list({5, 0, 1, 2, 8, 9, 3}), "0-3,5,8-9");
  EXPECT_EQ(format_cpu_list({}), "(none)");
  EXPECT_THAT(parse_cpu_list("7,0-2"), ElementsAre(7, 0, 1, 2));
}

TEST(Topology, BadSyntheticDescriptionIsAnError) {
  EXPECT_THROW(Topology::from_synthetic("pack:two core:x"), TopologyError);
  EXPECT_THROW(Topology::from_synthetic("pack:1 core:2", {40, 41}), TopologyError);
}

// A hand-written hwloc XML: one package, L3, two cores with SMT siblings numbered 0/2 and 1/3.
constexpr const char* kXmlFixture = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
 <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" gp_index="1">
  <object type="Package" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
   <info name="CPUModel" value="Fixture CPU 9000"/>
   <object type="NUMANode" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="8589934592"/>
   <object type="L3Cache" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4" cache_size="16777216" depth="3" cache_linesize="64" cache_associativity="16" cache_type="0">
    <object type="Core" os_index="0" cpuset="0x00000005" complete_cpuset="0x00000005" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5">
     <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6"/>
     <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7"/>
    </object>
    <object type="Core" os_index="1" cpuset="0x0000000a" complete_cpuset="0x0000000a" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="8">
     <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="9"/>
     <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="10"/>
    </object>
   </object>
  </object>
 </object>
</topology>
)";

TEST(Topology, XmlFixture) {
  const Topology t = Topology::from_xml(kXmlFixture);
  EXPECT_EQ(t.cpu_model, "Fixture CPU 9000");
  EXPECT_EQ(t.packages, 1);
  ASSERT_EQ(t.cores.size(), 2u);
  EXPECT_THAT(t.cores[0].pus, ElementsAre(0, 2));
  EXPECT_THAT(t.cores[1].pus, ElementsAre(1, 3));
  ASSERT_EQ(t.numa_nodes.size(), 1u);
  EXPECT_EQ(t.numa_nodes[0].memory_bytes, 8LL << 30);
  ASSERT_EQ(t.caches.size(), 1u);
  EXPECT_EQ(t.caches[0].name(), "L3");
  EXPECT_EQ(t.caches[0].line_bytes, 64);
  EXPECT_THAT(cpus(t, "compact", 3), ElementsAre(0, 2, 1));
  EXPECT_THAT(cpus(t, "cores", 2), ElementsAre(0, 1));
  EXPECT_THROW(Topology::from_xml("<topology>broken"), TopologyError);
}

TEST(Topology, JsonCarriesEveryField) {
  const Topology t = Topology::from_synthetic(kTwoSocketSmt, {0, 1, 2, 3});
  const nlohmann::json j = topology_json(t);
  EXPECT_EQ(j["packages"], 2);
  EXPECT_EQ(j["pus"], 16);
  EXPECT_EQ(j["smt"], true);
  EXPECT_EQ(j["numa_nodes"].size(), 2u);
  EXPECT_EQ(j["numa_nodes"][0]["memory_bytes"], 8LL << 30);
  EXPECT_EQ(j["core_list"][3]["pus"], nlohmann::json::array({3, 11}));
  EXPECT_EQ(j["caches"][2]["name"], "L3");
  EXPECT_EQ(j["allowed_cpus"], nlohmann::json::array({0, 1, 2, 3}));
}

TEST(Topology, ThisMachineIsConsistent) {
  const Topology t = Topology::detect();
  EXPECT_GE(t.cores.size(), 1u);
  EXPECT_GE(t.packages, 1);
  ASSERT_FALSE(t.allowed_cpus.empty());
  std::set<int> pus;
  for (const Core& c : t.cores) pus.insert(c.pus.begin(), c.pus.end());
  for (int cpu : t.allowed_cpus) EXPECT_TRUE(pus.count(cpu)) << cpu;
  const int cpu = current_cpu();
  EXPECT_TRUE(t.is_allowed(cpu)) << cpu;
  // Every policy can give one thread per allowed core.
  const int n = t.allowed_core_count();
  for (const char* p : {"compact", "scatter", "cores"}) {
    const auto got = cpus(t, p, n);
    EXPECT_EQ(std::set<int>(got.begin(), got.end()).size(), static_cast<size_t>(n)) << p;
  }
}

}  // namespace
}  // namespace pacer::runtime
