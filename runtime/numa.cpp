#include "runtime/numa.h"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eventlog/schema.h"
#include "ops/matmul.h"
#include "ops/matmul_rows.h"
#include "ops/parallel.h"
#include "runtime/forward.h"

namespace pacer::runtime {
namespace {

constexpr int kMaskBits = 1024;  // node ids the masks below hold (the kernel's MAX_NUMNODES)
constexpr int kWordBits = 64;
using NodeMask = std::array<unsigned long, kMaskBits / kWordBits>;

NodeMask mask_of(std::span<const int> nodes) {
  NodeMask m{};
  for (int n : nodes) {
    if (n < 0 || n >= kMaskBits) throw NumaError(fmt::format("NUMA node {} out of range", n));
    m[static_cast<size_t>(n / kWordBits)] |= 1UL << (n % kWordBits);
  }
  return m;
}

std::string errno_text(int e) {
  return fmt::format("{} ({})", std::strerror(e), e);
}

// The pages covering [p, p + bytes) (mbind wants a page-aligned start).
std::pair<std::uintptr_t, size_t> page_range(const void* p, size_t bytes) {
  const auto page = static_cast<std::uintptr_t>(page_bytes());
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t b = a / page * page;
  const std::uintptr_t e = (a + bytes + page - 1) / page * page;
  return {b, e - b};
}

void mbind_range(const void* p, size_t bytes, int mode, std::span<const int> nodes, bool move,
                 std::string_view what) {
  if (bytes == 0) return;
  const auto [begin, len] = page_range(p, bytes);
  const NodeMask mask = mask_of(nodes);
  // maxnode counts one past the bits the kernel reads (it decrements it first).
  const long rc = syscall(SYS_mbind, begin, len, mode, mask.data(),
                          static_cast<unsigned long>(kMaskBits + 1), move ? MPOL_MF_MOVE : 0U);
  if (rc != 0) {
    throw NumaError(
        fmt::format("mbind({}) of {} bytes at {:#x}: {}", what, len, begin, errno_text(errno)));
  }
}

// The allowed PUs of each core of `node`, first PU of every core before any sibling.
std::vector<int> node_cpu_order(const Topology& topo, int node) {
  std::vector<std::vector<int>> cores;
  for (const Core& c : topo.cores) {
    if (c.numa != node) continue;
    std::vector<int> pus;
    for (int p : c.pus) {
      if (topo.is_allowed(p)) pus.push_back(p);
    }
    if (!pus.empty()) cores.push_back(std::move(pus));
  }
  return take_in_turn(cores);
}

int allowed_cores_on(const Topology& topo, int node) {
  int n = 0;
  for (const Core& c : topo.cores) {
    if (c.numa == node &&
        std::any_of(c.pus.begin(), c.pus.end(), [&](int p) { return topo.is_allowed(p); }))
      ++n;
  }
  return n;
}

}  // namespace

NumaPolicy parse_numa_policy(std::string_view text) {
  for (NumaPolicy p :
       {NumaPolicy::None, NumaPolicy::Distribute, NumaPolicy::Isolate, NumaPolicy::Interleave}) {
    if (text == numa_policy_name(p)) return p;
  }
  throw TopologyError(fmt::format(
      "unknown NUMA policy '{}' (expected none, distribute, isolate or interleave)", text));
}

std::string_view numa_policy_name(NumaPolicy p) noexcept {
  switch (p) {
    case NumaPolicy::None:
      return "none";
    case NumaPolicy::Distribute:
      return "distribute";
    case NumaPolicy::Isolate:
      return "isolate";
    case NumaPolicy::Interleave:
      return "interleave";
  }
  return "?";
}

PinSpec NumaPlan::pin() const {
  if (policy == NumaPolicy::None) return {};
  return {PinPolicy::List, cpus};
}

std::vector<int> nodes_with_allowed_cpus(const Topology& topo) {
  std::set<int> nodes;
  for (const Core& c : topo.cores) {
    if (c.numa < 0) continue;
    if (std::any_of(c.pus.begin(), c.pus.end(), [&](int p) { return topo.is_allowed(p); }))
      nodes.insert(c.numa);
  }
  return {nodes.begin(), nodes.end()};
}

std::vector<int> nodes_of_cpus(const Topology& topo, std::span<const int> cpus) {
  std::map<int, int> node_of;
  for (const Core& c : topo.cores) {
    for (int p : c.pus) node_of[p] = c.numa;
  }
  std::vector<int> out;
  for (int cpu : cpus) {
    const auto it = node_of.find(cpu);
    out.push_back(it == node_of.end() ? -1 : it->second);
  }
  return out;
}

NumaPlan plan_numa(const Topology& topo, NumaPolicy policy, int threads, int start_cpu) {
  NumaPlan plan;
  plan.policy = policy;
  if (policy == NumaPolicy::None) return plan;
  const std::vector<int> all = nodes_with_allowed_cpus(topo);
  if (all.empty()) {
    throw TopologyError(fmt::format("--numa {}: no NUMA node has a CPU the process may run on",
                                    numa_policy_name(policy)));
  }

  std::vector<int> nodes = all;
  if (policy == NumaPolicy::Isolate) {
    int start = -1;
    if (start_cpu >= 0 && topo.is_allowed(start_cpu)) {
      start = nodes_of_cpus(topo, std::span<const int>(&start_cpu, 1))[0];
    }
    if (start < 0 || std::find(all.begin(), all.end(), start) == all.end()) {
      start = nodes_of_cpus(topo, std::span<const int>(topo.allowed_cpus.data(), 1))[0];
    }
    nodes = {start};
  }
  if (threads <= 0) {
    threads = 0;
    for (int n : nodes) threads += allowed_cores_on(topo, n);
    threads = std::max(1, threads);
  }

  // Round-robin over the nodes, one worker per node per round while a node has PUs left: counts
  // differ by at most one (lower nodes get the extra) unless a node runs out.
  std::vector<std::vector<int>> order;
  for (int n : nodes) order.push_back(node_cpu_order(topo, n));
  std::vector<size_t> count(nodes.size(), 0);
  int placed = 0;
  while (placed < threads) {
    bool any = false;
    for (size_t i = 0; i < nodes.size() && placed < threads; ++i) {
      if (count[i] < order[i].size()) {
        ++count[i];
        ++placed;
        any = true;
      }
    }
    if (!any) {
      std::vector<int> cpus;
      for (const auto& o : order) cpus.insert(cpus.end(), o.begin(), o.end());
      throw TopologyError(
          fmt::format("--numa {} cannot place {} threads: node{} {} ha{} {} allowed CPU{} ({})",
                      numa_policy_name(policy), threads, nodes.size() == 1 ? "" : "s",
                      format_cpu_list(nodes), nodes.size() == 1 ? "s" : "ve", cpus.size(),
                      cpus.size() == 1 ? "" : "s", format_cpu_list(cpus)));
    }
  }
  // Worker slots in node blocks: each node's workers own one contiguous run of every matrix's
  // rows (the static partition hands out rows in slot order), so placement is one range each.
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t k = 0; k < count[i]; ++k) {
      plan.cpus.push_back(order[i][k]);
      plan.worker_node.push_back(nodes[i]);
    }
    if (count[i] > 0 && policy != NumaPolicy::Interleave) plan.memory_nodes.push_back(nodes[i]);
  }
  if (policy == NumaPolicy::Interleave) plan.memory_nodes = all;
  return plan;
}

std::vector<NodeSpan> weight_node_spans(std::span<const std::vector<ops::WeightMatrix>> groups,
                                        std::span<const int> worker_node, int64_t page) {
  std::vector<NodeSpan> out;
  const int workers = static_cast<int>(worker_node.size());
  if (workers == 0 || page <= 0) return out;
  const auto pg = static_cast<std::uintptr_t>(page);
  for (const auto& group : groups) {
    const ops::StreamPartition part(group);
    for (size_t i = 0; i < group.size(); ++i) {
      const ops::WeightMatrix& m = group[i];
      if (m.data == nullptr || m.rows == 0) continue;
      const auto base = reinterpret_cast<std::uintptr_t>(m.data);
      const auto [all_b, all_e] = ops::row_byte_range(m, 0, m.rows);
      const std::uintptr_t matrix_end =
          (base + static_cast<std::uintptr_t>(all_e) + pg - 1) / pg * pg;
      std::vector<NodeSpan> spans;  // this matrix's, in address order
      for (int w = 0; w < workers; ++w) {
        const auto [cb, ce] = ops::static_chunk(part.total_units(), part.align(), workers, w);
        const auto [b, e] = part.rows(i, cb, ce);
        if (b >= e) continue;
        const auto [ob, oe] = ops::row_byte_range(m, b, e);
        (void)oe;
        const std::uintptr_t sb = (base + static_cast<std::uintptr_t>(ob)) / pg * pg;
        if (!spans.empty() && spans.back().node == worker_node[static_cast<size_t>(w)]) continue;
        if (!spans.empty()) spans.back().end = sb;
        spans.push_back({sb, 0, worker_node[static_cast<size_t>(w)],
                         m.layout == ops::WeightLayout::Interleaved16});
      }
      if (!spans.empty()) spans.back().end = matrix_end;
      for (const NodeSpan& s : spans) {
        if (s.begin < s.end) out.push_back(s);
      }
    }
  }
  return out;
}

int64_t page_bytes() noexcept {
  return sysconf(_SC_PAGESIZE);
}

void bind_memory(const void* p, size_t bytes, int node, bool move) {
  const int nodes[] = {node};
  mbind_range(p, bytes, MPOL_BIND, nodes, move, fmt::format("bind node {}", node));
}

void interleave_memory(const void* p, size_t bytes, std::span<const int> nodes, bool move) {
  if (nodes.empty()) throw NumaError("interleave over no NUMA nodes");
  mbind_range(p, bytes, MPOL_INTERLEAVE, nodes, move,
              fmt::format("interleave nodes {}", format_cpu_list({nodes.begin(), nodes.end()})));
}

MemPolicy memory_policy_at(const void* p) {
  int mode = 0;
  NodeMask mask{};
  if (syscall(SYS_get_mempolicy, &mode, mask.data(), static_cast<unsigned long>(kMaskBits + 1), p,
              MPOL_F_ADDR) != 0) {
    throw NumaError(fmt::format("get_mempolicy(MPOL_F_ADDR) at {}: {}", p, errno_text(errno)));
  }
  MemPolicy out;
  switch (mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES)) {
    case MPOL_DEFAULT:
      out.mode = "default";
      break;
    case MPOL_PREFERRED:
      out.mode = "preferred";
      break;
    case MPOL_BIND:
      out.mode = "bind";
      break;
    case MPOL_INTERLEAVE:
      out.mode = "interleave";
      break;
    case MPOL_LOCAL:
      out.mode = "local";
      break;
    default:
      out.mode = "other";
      break;
  }
  for (int n = 0; n < kMaskBits; ++n) {
    if (mask[static_cast<size_t>(n / kWordBits)] & (1UL << (n % kWordBits))) out.nodes.push_back(n);
  }
  return out;
}

int node_of_page(const void* p) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0UL, p, MPOL_F_NODE | MPOL_F_ADDR) != 0) {
    throw NumaError(
        fmt::format("get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR) at {}: {}", p, errno_text(errno)));
  }
  return node;
}

std::vector<int> resident_nodes(const void* p, size_t bytes) {
  const auto [begin, len] = page_range(p, bytes);
  const auto page = static_cast<size_t>(page_bytes());
  const size_t n = len / page;
  std::vector<void*> pages(n);
  for (size_t i = 0; i < n; ++i) pages[i] = reinterpret_cast<void*>(begin + i * page);
  std::vector<int> status(n, 0);
  if (n > 0 && syscall(SYS_move_pages, 0, static_cast<unsigned long>(n), pages.data(), nullptr,
                       status.data(), 0) != 0) {
    throw NumaError(
        fmt::format("move_pages(query) of {} pages at {:#x}: {}", n, begin, errno_text(errno)));
  }
  return status;
}

namespace {

// Share of sampled resident pages of `spans` that sit on their span's node (-1: none resident).
// At most ~64k pages are asked about, spread evenly, so a 100 GB model costs one short syscall.
double on_node_pct(const std::vector<NodeSpan>& spans) {
  const auto page = static_cast<std::uintptr_t>(page_bytes());
  std::uintptr_t total_pages = 0;
  for (const NodeSpan& s : spans) total_pages += (s.end - s.begin) / page;
  const std::uintptr_t stride = std::max<std::uintptr_t>(1, total_pages / 65536);
  std::vector<void*> pages;
  std::vector<int> want;
  for (const NodeSpan& s : spans) {
    for (std::uintptr_t a = s.begin; a < s.end; a += stride * page) {
      pages.push_back(reinterpret_cast<void*>(a));
      want.push_back(s.node);
    }
  }
  std::vector<int> status(pages.size(), 0);
  if (pages.empty() || syscall(SYS_move_pages, 0, static_cast<unsigned long>(pages.size()),
                               pages.data(), nullptr, status.data(), 0) != 0) {
    return -1;
  }
  int64_t resident = 0, on_node = 0;
  for (size_t i = 0; i < status.size(); ++i) {
    if (status[i] < 0) continue;  // not resident (or not movable): nothing to judge
    ++resident;
    if (status[i] == want[i]) ++on_node;
  }
  return resident == 0 ? -1.0 : std::round(1000.0 * on_node / resident) / 10;
}

}  // namespace

NumaPlacement place_memory(NumaPolicy policy, std::span<const int> worker_node,
                           std::span<const int> memory_nodes, const loader::Weights& weights,
                           std::span<std::byte> kv) {
  NumaPlacement p;
  p.policy = policy;
  p.worker_node.assign(worker_node.begin(), worker_node.end());
  p.memory_nodes.assign(memory_nodes.begin(), memory_nodes.end());
  p.weights = p.kv = "kernel";
  if (policy == NumaPolicy::None || memory_nodes.empty()) return p;
  const auto groups = matmul_groups(weights);
  try {
    if (policy == NumaPolicy::Interleave) {
      for (const auto& group : groups) {
        for (const ops::WeightMatrix& m : group) {
          if (m.data == nullptr) continue;
          const auto bytes = static_cast<size_t>(ops::row_byte_range(m, 0, m.rows).second);
          interleave_memory(m.data, bytes, memory_nodes, true);
          (m.layout == ops::WeightLayout::Interleaved16 ? p.weight_bytes_owned
                                                        : p.weight_bytes_file) +=
              static_cast<int64_t>(bytes);
        }
      }
      p.weights = "interleave";
    } else {
      // The weights' pages of each node's workers; the weights are read-only, so binding and
      // migrating their pages never changes a byte of the (const) model.
      const std::vector<NodeSpan> spans = weight_node_spans(groups, worker_node, page_bytes());
      for (const NodeSpan& s : spans) {
        bind_memory(reinterpret_cast<const void*>(s.begin), s.end - s.begin, s.node, true);
        (s.owned ? p.weight_bytes_owned : p.weight_bytes_file) +=
            static_cast<int64_t>(s.end - s.begin);
      }
      p.weights = memory_nodes.size() == 1 ? "bind" : "per_worker_node";
      p.weights_on_node_pct = on_node_pct(spans);
    }
    // The cache is position-major (all heads of a position in one row, ops::attention's layout),
    // so a page holds every head: it cannot follow the head partition; spreading it over the
    // workers' nodes at least balances the traffic (docs/numa.md).
    if (!kv.empty()) {
      if (memory_nodes.size() == 1 && policy != NumaPolicy::Interleave) {
        bind_memory(kv.data(), kv.size(), memory_nodes[0], true);
        p.kv = "bind";
      } else {
        interleave_memory(kv.data(), kv.size(), memory_nodes, true);
        p.kv = "interleave";
      }
    }
  } catch (const NumaError& e) {
    p.error = e.what();
  }
  return p;
}

nlohmann::json numa_json(const NumaPlacement& p) {
  namespace key = eventlog::numa_key;
  std::map<int, int> per_node;
  for (int n : p.worker_node) ++per_node[n];
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& [node, count] : per_node) {
    workers.push_back({{key::kNode, node}, {key::kWorkers, count}});
  }
  nlohmann::json j = {{key::kPolicy, numa_policy_name(p.policy)},
                      {key::kWorkerNode, p.worker_node},
                      {key::kWorkersPerNode, std::move(workers)},
                      {key::kMemoryNodes, p.memory_nodes},
                      {key::kWeights, p.weights},
                      {key::kKv, p.kv},
                      {key::kWeightBytesOwned, p.weight_bytes_owned},
                      {key::kWeightBytesFile, p.weight_bytes_file}};
  j[key::kWeightsOnNodePct] =
      p.weights_on_node_pct < 0 ? nlohmann::json() : nlohmann::json(p.weights_on_node_pct);
  if (!p.error.empty()) j[key::kError] = p.error;
  return j;
}

}  // namespace pacer::runtime
