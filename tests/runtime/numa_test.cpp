// --numa placement (runtime/numa.h): worker -> CPU/node on hwloc synthetic 1/2/4/8-node machines
// against lists worked out by hand, the page spans each node's workers stream, and on this
// machine's real node(s) the memory policy the kernel reports after bind/interleave.
#include "runtime/numa.h"

#include <sys/mman.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <string>

#include <nlohmann/json.hpp>

#include "eventlog/schema.h"
#include "runtime/session.h"
#include "tests/runtime/runtime_test_util.h"

namespace pacer::runtime {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One node (hwloc adds it above the package): 4 cores of 2 PUs, core k = PUs 2k, 2k+1.
constexpr const char* kOneNode = "pack:1 core:4 pu:2";
// Two sockets, one node each: node n = PUs 8n..8n+7, core k of node n = PUs 8n+2k, 8n+2k+1.
constexpr const char* kTwoNodes = "pack:2 [numa] core:4 pu:2";
// Two sockets x two sub-NUMA clusters: node n = PUs 2n, 2n+1, one PU per core.
constexpr const char* kFourNodes = "pack:2 group:2 [numa] core:2 pu:1";
// Eight sockets: node n = PUs 4n..4n+3, cores (4n, 4n+1) and (4n+2, 4n+3).
constexpr const char* kEightNodes = "pack:8 [numa] core:2 pu:2";

std::string plan_error(const Topology& t, NumaPolicy p, int threads, int start = -1) {
  try {
    plan_numa(t, p, threads, start);
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "";
}

TEST(NumaPolicyNames, ParseAndPrintRoundTrip) {
  for (const char* name : {"none", "distribute", "isolate", "interleave"}) {
    EXPECT_EQ(numa_policy_name(parse_numa_policy(name)), name);
  }
  EXPECT_EQ(parse_numa_policy("distribute"), NumaPolicy::Distribute);
  try {
    parse_numa_policy("numactl");
    ADD_FAILURE() << "numactl is a bench-only alias, not a policy";
  } catch (const TopologyError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'numactl'"));
  }
}

TEST(NumaPlan, SyntheticTopologiesHaveTheDescribedNodes) {
  // Guards the hand-computed expectations below: the node each PU sits on.
  const Topology two = Topology::from_synthetic(kTwoNodes);
  ASSERT_EQ(two.numa_nodes.size(), 2u);
  EXPECT_THAT(two.numa_nodes[1].cpus, ElementsAre(8, 9, 10, 11, 12, 13, 14, 15));
  const Topology four = Topology::from_synthetic(kFourNodes);
  ASSERT_EQ(four.numa_nodes.size(), 4u);
  EXPECT_THAT(four.numa_nodes[2].cpus, ElementsAre(4, 5));
  const Topology eight = Topology::from_synthetic(kEightNodes);
  ASSERT_EQ(eight.numa_nodes.size(), 8u);
  EXPECT_THAT(eight.numa_nodes[7].cpus, ElementsAre(28, 29, 30, 31));
  EXPECT_THAT(nodes_with_allowed_cpus(eight), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST(NumaPlan, NoneLeavesPlacementToThePinPolicy) {
  const NumaPlan p = plan_numa(Topology::from_synthetic(kTwoNodes), NumaPolicy::None, 4, 0);
  EXPECT_TRUE(p.cpus.empty());
  EXPECT_EQ(p.pin().policy, PinPolicy::None);
}

TEST(NumaPlan, OneNodeDistributeIsCoresFirst) {
  const Topology t = Topology::from_synthetic(kOneNode);
  NumaPlan p = plan_numa(t, NumaPolicy::Distribute, -1, 0);  // auto: one per core
  EXPECT_THAT(p.cpus, ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(p.worker_node, ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(p.memory_nodes, ElementsAre(0));
  p = plan_numa(t, NumaPolicy::Distribute, 6, 0);  // then the SMT siblings
  EXPECT_THAT(p.cpus, ElementsAre(0, 2, 4, 6, 1, 3));
  EXPECT_EQ(p.pin().policy, PinPolicy::List);
  EXPECT_THAT(p.pin().cpus, ElementsAre(0, 2, 4, 6, 1, 3));
}

TEST(NumaPlan, TwoNodesDistributeSplitsEvenlyInNodeBlocks) {
  const Topology t = Topology::from_synthetic(kTwoNodes);
  NumaPlan p = plan_numa(t, NumaPolicy::Distribute, 4, 0);
  EXPECT_THAT(p.cpus, ElementsAre(0, 2, 8, 10));
  EXPECT_THAT(p.worker_node, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(p.memory_nodes, ElementsAre(0, 1));
  p = plan_numa(t, NumaPolicy::Distribute, 5, 0);  // the odd worker goes to the lower node
  EXPECT_THAT(p.cpus, ElementsAre(0, 2, 4, 8, 10));
  EXPECT_THAT(p.worker_node, ElementsAre(0, 0, 0, 1, 1));
  p = plan_numa(t, NumaPolicy::Distribute, -1, 0);  // auto: every core of both nodes
  EXPECT_THAT(p.cpus, ElementsAre(0, 2, 4, 6, 8, 10, 12, 14));
  EXPECT_THAT(
      plan_error(t, NumaPolicy::Distribute, 17),
      HasSubstr("--numa distribute cannot place 17 threads: nodes 0-1 have 16 allowed CPUs"));
}

TEST(NumaPlan, FourAndEightNodesDistribute) {
  NumaPlan p = plan_numa(Topology::from_synthetic(kFourNodes), NumaPolicy::Distribute, 6, 0);
  EXPECT_THAT(p.cpus, ElementsAre(0, 1, 2, 3, 4, 6));
  EXPECT_THAT(p.worker_node, ElementsAre(0, 0, 1, 1, 2, 3));
  EXPECT_THAT(p.memory_nodes, ElementsAre(0, 1, 2, 3));

  const Topology eight = Topology::from_synthetic(kEightNodes);
  p = plan_numa(eight, NumaPolicy::Distribute, 8, 0);
  EXPECT_THAT(p.cpus, ElementsAre(0, 4, 8, 12, 16, 20, 24, 28));
  EXPECT_THAT(p.worker_node, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  p = plan_numa(eight, NumaPolicy::Distribute, 12, 0);
  EXPECT_THAT(p.cpus, ElementsAre(0, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 28));
  EXPECT_THAT(p.worker_node, ElementsAre(0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7));
  // Fewer workers than nodes: only the nodes with workers get memory.
  p = plan_numa(eight, NumaPolicy::Distribute, 3, 0);
  EXPECT_THAT(p.worker_node, ElementsAre(0, 1, 2));
  EXPECT_THAT(p.memory_nodes, ElementsAre(0, 1, 2));
}

TEST(NumaPlan, IsolateStaysOnTheStartNode) {
  const Topology t = Topology::from_synthetic(kTwoNodes);
  NumaPlan p = plan_numa(t, NumaPolicy::Isolate, -1, 9);  // started on node 1: its 4 cores
  EXPECT_THAT(p.cpus, ElementsAre(8, 10, 12, 14));
  EXPECT_THAT(p.worker_node, Each(1));
  EXPECT_THAT(p.memory_nodes, ElementsAre(1));
  p = plan_numa(t, NumaPolicy::Isolate, 6, 3);
  EXPECT_THAT(p.cpus, ElementsAre(0, 2, 4, 6, 1, 3));
  EXPECT_THAT(p.memory_nodes, ElementsAre(0));
  EXPECT_THAT(plan_error(t, NumaPolicy::Isolate, 9, 9),
              HasSubstr("--numa isolate cannot place 9 threads: node 1 has 8 allowed CPUs"));
  // Unknown start CPU: the first allowed CPU's node.
  p = plan_numa(Topology::from_synthetic(kTwoNodes, {12, 13, 14, 15}), NumaPolicy::Isolate, -1, 3);
  EXPECT_THAT(p.cpus, ElementsAre(12, 14));
  EXPECT_THAT(p.worker_node, Each(1));
}

TEST(NumaPlan, InterleaveDistributesWorkersAndSpreadsMemoryOverEveryNode) {
  const NumaPlan p = plan_numa(Topology::from_synthetic(kFourNodes), NumaPolicy::Interleave, 2, 0);
  EXPECT_THAT(p.cpus, ElementsAre(0, 2));
  EXPECT_THAT(p.worker_node, ElementsAre(0, 1));
  EXPECT_THAT(p.memory_nodes, ElementsAre(0, 1, 2, 3));
}

TEST(NumaPlan, RespectsTheAllowedCpus) {
  // Only node 1's first two cores allowed: distribute uses node 1 alone.
  const Topology t = Topology::from_synthetic(kTwoNodes, {8, 9, 10, 11});
  const NumaPlan p = plan_numa(t, NumaPolicy::Distribute, -1, 0);
  EXPECT_THAT(p.cpus, ElementsAre(8, 10));
  EXPECT_THAT(p.memory_nodes, ElementsAre(1));
  EXPECT_THAT(nodes_of_cpus(t, std::vector<int>{0, 9, 99}), ElementsAre(0, 1, -1));
}

// ---- Weight spans: which pages each node's workers stream.

constexpr int64_t kPage = 4096;
constexpr std::uintptr_t kBase = 0x10000000;

ops::WeightMatrix f32_matrix(std::uintptr_t addr, int64_t rows, int64_t cols) {
  ops::WeightMatrix m;
  m.type = ops::WeightType::F32;
  m.data = reinterpret_cast<const std::byte*>(addr);
  m.rows = rows;
  m.cols = cols;
  return m;
}

TEST(WeightNodeSpans, ConsecutiveWorkersOfANodeMergeIntoOneSpan) {
  // 64 rows of one page each; 4 workers get 16 rows apiece (align 16); nodes 0, 0, 1, 1.
  const std::vector<std::vector<ops::WeightMatrix>> groups{{f32_matrix(kBase, 64, 1024)}};
  const auto spans = weight_node_spans(groups, std::vector<int>{0, 0, 1, 1}, kPage);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].begin, kBase);
  EXPECT_EQ(spans[0].end, kBase + 32 * kPage);
  EXPECT_EQ(spans[0].node, 0);
  EXPECT_EQ(spans[1].begin, kBase + 32 * kPage);
  EXPECT_EQ(spans[1].end, kBase + 64 * kPage);
  EXPECT_EQ(spans[1].node, 1);
  EXPECT_FALSE(spans[0].owned);
}

TEST(WeightNodeSpans, FusedMatricesShareOnePartitionSplitByBytes) {
  // {A, B} run as one partition: worker 0 has all of A, worker 1 all of B, both when A and B are
  // 32 F32 rows of 1024 (a page a row) and when B is 64 F16 rows of 1024 (half a page a row,
  // 32 pages): the shares are cut by bytes (ops::StreamPartition, as matmul() runs them); by
  // rows (48 each) worker 0 would also have had that B's first 16 rows.
  const std::uintptr_t b = kBase + 0x100000;
  ops::WeightMatrix half = f32_matrix(b, 64, 1024);
  half.type = ops::WeightType::F16;
  for (const ops::WeightMatrix& second : {f32_matrix(b, 32, 1024), half}) {
    SCOPED_TRACE(ops::type_name(second.type));
    const std::vector<std::vector<ops::WeightMatrix>> groups{{f32_matrix(kBase, 32, 1024), second}};
    const auto spans = weight_node_spans(groups, std::vector<int>{3, 5}, kPage);
    ASSERT_EQ(spans.size(), 2u);
    EXPECT_EQ(spans[0].begin, kBase);
    EXPECT_EQ(spans[0].end, kBase + 32 * kPage);
    EXPECT_EQ(spans[0].node, 3);
    EXPECT_EQ(spans[1].begin, b);
    EXPECT_EQ(spans[1].end, b + 32 * kPage);
    EXPECT_EQ(spans[1].node, 5);
  }
}

TEST(WeightNodeSpans, APageSharedByTwoWorkersGoesToTheOneWhoseRowsStartInIt) {
  // 256 rows of 128 bytes (8 pages), 3 workers: 16 units of 16 rows split 6/5/5, so rows
  // [0, 96), [96, 176), [176, 256): byte 12288 (page 3 exactly) and byte 22528 (inside page 5).
  const std::vector<std::vector<ops::WeightMatrix>> groups{{f32_matrix(kBase, 256, 32)}};
  const auto spans = weight_node_spans(groups, std::vector<int>{0, 1, 2}, kPage);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].end, kBase + 3 * kPage);
  EXPECT_EQ(spans[1].begin, kBase + 3 * kPage);
  EXPECT_EQ(spans[1].end, kBase + 5 * kPage);
  EXPECT_EQ(spans[2].begin, kBase + 5 * kPage);
  EXPECT_EQ(spans[2].end, kBase + 8 * kPage);
}

TEST(WeightNodeSpans, InterleavedMatricesUseWholeGroupsAndAreOwned) {
  // Q8_0 x16, 64 columns: one block pair per 16-row group = 64 + 2 * 512 = 1088 bytes; 64 rows
  // = 4 groups = 4352 bytes. Worker 1 (rows 32-63) starts at byte 2176, inside page 0: it takes
  // the page, worker 0's span is empty, and the span runs to the end of page 1.
  ops::WeightMatrix m;
  m.type = ops::WeightType::Q8_0;
  m.layout = ops::WeightLayout::Interleaved16;
  m.data = reinterpret_cast<const std::byte*>(kBase);
  m.rows = 64;
  m.cols = 64;
  const std::vector<std::vector<ops::WeightMatrix>> groups{{m}};
  const auto spans = weight_node_spans(groups, std::vector<int>{0, 1}, kPage);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].begin, kBase);
  EXPECT_EQ(spans[0].end, kBase + 2 * kPage);
  EXPECT_EQ(spans[0].node, 1);
  EXPECT_TRUE(spans[0].owned);
}

// ---- This machine: the kernel's view of the pages after bind / interleave.

// An anonymous mapping of `pages` pages, unmapped at scope exit.
struct Mapping {
  explicit Mapping(size_t pages) : bytes(pages * static_cast<size_t>(page_bytes())) {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error(std::strerror(errno));
    p = static_cast<std::byte*>(m);
  }
  ~Mapping() { munmap(p, bytes); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void touch() const {
    for (size_t i = 0; i < bytes; i += static_cast<size_t>(page_bytes())) p[i] = std::byte{1};
  }
  size_t bytes;
  std::byte* p = nullptr;
};

int first_node() {
  const std::vector<int> nodes = nodes_with_allowed_cpus(Topology::detect());
  return nodes.empty() ? 0 : nodes.front();
}

TEST(NumaMemory, BindPutsEveryPageOnTheNodeAndTheKernelReportsThePolicy) {
  const int node = first_node();
  Mapping m(32);
  EXPECT_THAT(resident_nodes(m.p, m.bytes), Each(-ENOENT));  // nothing faulted in yet
  bind_memory(m.p + 100, m.bytes - 200, node, false);        // rounded out to whole pages
  m.touch();
  const MemPolicy pol = memory_policy_at(m.p);
  EXPECT_EQ(pol.mode, "bind");
  EXPECT_THAT(pol.nodes, ElementsAre(node));
  EXPECT_EQ(memory_policy_at(m.p + m.bytes - 1).mode, "bind");
  EXPECT_EQ(node_of_page(m.p + 5 * page_bytes()), node);
  const std::vector<int> where = resident_nodes(m.p, m.bytes);
  ASSERT_EQ(where.size(), 32u);
  EXPECT_THAT(where, Each(node));
}

TEST(NumaMemory, InterleaveIsThePolicyAndMovesResidentPages) {
  const std::vector<int> nodes = nodes_with_allowed_cpus(Topology::detect());
  Mapping m(16);
  m.touch();  // resident before the policy: MPOL_MF_MOVE applies it to them
  EXPECT_EQ(memory_policy_at(m.p).mode, "default");
  interleave_memory(m.p, m.bytes, nodes, true);
  const MemPolicy pol = memory_policy_at(m.p);
  EXPECT_EQ(pol.mode, "interleave");
  EXPECT_EQ(pol.nodes, nodes);
  // Page i on nodes[i % n] is what interleave means; with one node every page is on it.
  const std::vector<int> where = resident_nodes(m.p, m.bytes);
  for (int w : where) EXPECT_NE(std::find(nodes.begin(), nodes.end(), w), nodes.end()) << w;
  if (nodes.size() == 1) {
    EXPECT_THAT(where, Each(nodes[0]));
  }
}

TEST(NumaMemory, ANodeThatDoesNotExistIsAnErrorNamingTheCall) {
  Mapping m(1);
  try {
    bind_memory(m.p, m.bytes, 1000, false);
    ADD_FAILURE() << "node 1000 accepted";
  } catch (const NumaError& e) {
    EXPECT_THAT(e.what(), HasSubstr("mbind(bind node 1000)"));
  }
}

// Weights of one layer in an anonymous mapping (as the file mapping would be) and a KV cache.
struct FakeModel {
  static constexpr int64_t kRows = 64, kCols = 1024;  // one page per F32 row
  Mapping weights{static_cast<size_t>(9 * kRows)};    // 7 layer matrices + output (+1 spare)
  Mapping kv{size_t{8}};
  loader::Weights w;
  FakeModel() {
    w.layers.resize(1);
    loader::LayerWeights& L = w.layers[0];
    int k = 0;
    for (ops::WeightMatrix* m :
         {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &w.output}) {
      *m = f32_matrix(reinterpret_cast<std::uintptr_t>(weights.p) +
                          static_cast<std::uintptr_t>(k++ * kRows * kPage),
                      kRows, kCols);
    }
    weights.touch();
  }
};

TEST(NumaMemory, PlaceMemoryBindsWeightsAndKvAndMeasuresThem) {
  if (page_bytes() != kPage) GTEST_SKIP() << "the fake model assumes 4 KiB pages";
  const int node = first_node();
  FakeModel fm;
  const std::vector<int> workers{node, node};
  const std::vector<int> nodes{node};
  const NumaPlacement p =
      place_memory(NumaPolicy::Distribute, workers, nodes, fm.w, {fm.kv.p, fm.kv.bytes});
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.weights, "bind");  // one node: every worker's rows on it
  EXPECT_EQ(p.kv, "bind");
  EXPECT_EQ(p.weight_bytes_file, 8 * FakeModel::kRows * kPage);
  EXPECT_EQ(p.weight_bytes_owned, 0);
  EXPECT_EQ(p.weights_on_node_pct, 100.0);
  EXPECT_EQ(memory_policy_at(fm.w.layers[0].w_up.data).mode, "bind");
  EXPECT_EQ(memory_policy_at(fm.kv.p).mode, "bind");

  const nlohmann::json j = numa_json(p);
  for (const auto& [k, v] : j.items()) {
    EXPECT_NE(std::find(eventlog::numa_key::kAll.begin(), eventlog::numa_key::kAll.end(), k),
              eventlog::numa_key::kAll.end())
        << k << " is not in eventlog/schema.h numa_key";
  }
  EXPECT_EQ(j["policy"], "distribute");
  const nlohmann::json expect_workers =
      nlohmann::json::array({nlohmann::json{{"node", node}, {"workers", 2}}});
  EXPECT_EQ(j["workers_per_node"], expect_workers);
  EXPECT_EQ(j["worker_node"], nlohmann::json(workers));
}

TEST(NumaMemory, PlaceMemoryInterleaves) {
  const std::vector<int> nodes = nodes_with_allowed_cpus(Topology::detect());
  FakeModel fm;
  const std::vector<int> workers{nodes[0]};
  const NumaPlacement p =
      place_memory(NumaPolicy::Interleave, workers, nodes, fm.w, {fm.kv.p, fm.kv.bytes});
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.weights, "interleave");
  EXPECT_EQ(p.kv, "interleave");
  EXPECT_EQ(memory_policy_at(fm.w.output.data).mode, "interleave");
  EXPECT_EQ(memory_policy_at(fm.kv.p).mode, "interleave");
  EXPECT_LT(p.weights_on_node_pct, 0);  // not measured: no page has one intended node
}

TEST(NumaMemory, ARefusedCallIsRecordedNotThrown) {
  FakeModel fm;
  const std::vector<int> workers{1000};
  const std::vector<int> nodes{1000};
  const NumaPlacement p =
      place_memory(NumaPolicy::Isolate, workers, nodes, fm.w, {fm.kv.p, fm.kv.bytes});
  EXPECT_THAT(p.error, HasSubstr("mbind(bind node 1000)"));
  EXPECT_EQ(numa_json(p)["error"], p.error);
}

TEST(NumaMemory, PolicyNoneTouchesNothing) {
  FakeModel fm;
  const NumaPlacement p = place_memory(NumaPolicy::None, {}, {}, fm.w, {fm.kv.p, fm.kv.bytes});
  EXPECT_EQ(p.weights, "kernel");
  EXPECT_EQ(p.kv, "kernel");
  EXPECT_EQ(memory_policy_at(fm.w.layers[0].wq.data).mode, "default");
  EXPECT_TRUE(numa_json(p)["weights_on_node_pct"].is_null());
}

// ---- A session: the policy alone (pin none) plans the workers; placement changes no number.

TEST(NumaSession, IsolatePlansTheWorkersBindsTheWeightsAndKeepsTheLogits) {
  const test::SynthModel synth("tiny", ops::WeightType::F32);
  const std::vector<int32_t> prompt{1, 5, 9, 2};
  SessionOptions so;
  so.threads = 2;
  so.ctx = 32;
  std::vector<float> plain;
  {
    Session s(synth.model(), so);
    const auto l = s.prefill(prompt);
    plain.assign(l.begin(), l.end());
    EXPECT_EQ(s.numa().policy, NumaPolicy::None);
    EXPECT_EQ(s.numa().weights, "kernel");
  }
  const Topology topo = Topology::detect();
  if (topo.allowed_cpus.size() < 2) GTEST_SKIP() << "needs 2 allowed CPUs to place 2 workers";
  so.numa = NumaPolicy::Isolate;
  Session s(synth.model(), so);
  ASSERT_EQ(s.executor().cpus().size(), 2u);  // pinned by the plan
  const std::vector<int> nodes = nodes_of_cpus(topo, s.executor().cpus());
  EXPECT_EQ(nodes[0], nodes[1]);
  EXPECT_EQ(s.numa().worker_node, nodes);
  EXPECT_EQ(s.numa().error, "");
  EXPECT_EQ(s.numa().weights, "bind");
  EXPECT_EQ(s.numa().kv, "bind");
  const MemPolicy pol = memory_policy_at(synth.model().weights().layers[0].w_down.data);
  EXPECT_EQ(pol.mode, "bind");
  EXPECT_THAT(pol.nodes, ElementsAre(nodes[0]));
  const auto l = s.prefill(prompt);
  EXPECT_EQ(std::vector<float>(l.begin(), l.end()), plain);  // same partition, same sums
}

}  // namespace
}  // namespace pacer::runtime
