#pragma once
// NUMA placement for multi-socket servers (`--numa`, docs/numa.md): which node each worker runs
// on, and where the memory it streams lives.
//
// Decode streams every weight once per token, and the static row partition gives each pinned
// worker the same rows every token. On a machine with several NUMA nodes a worker reading its
// rows from another node's memory pays the interconnect (typically half the local bandwidth or
// less), so each worker's rows belong on its own node:
//   distribute  workers spread evenly over the nodes (contiguous blocks of worker slots per
//               node); each worker's rows of every matmul weight bound to its node (pages that
//               are already resident migrate); the KV cache interleaved over those nodes.
//   isolate     every worker on the node the process started on; weights and KV cache bound
//               there.
//   interleave  workers as distribute; weights and KV cache interleaved page by page over every
//               node with an allowed CPU (no node is a hot spot, half or more of reads remote).
//   none        placement left to --pin and the kernel (llama-bench's `numactl`).
//
// The placement logic is pure (a Topology in, worker -> CPU/node out) so it is tested on hwloc
// synthetic multi-node topologies; the memory calls are the raw mbind / get_mempolicy /
// move_pages system calls (no libnuma).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "loader/weights.h"
#include "ops/matmul.h"
#include "runtime/topology.h"

namespace pacer::runtime {

enum class NumaPolicy { None, Distribute, Isolate, Interleave };

// "none" | "distribute" | "isolate" | "interleave"; anything else throws TopologyError.
NumaPolicy parse_numa_policy(std::string_view text);
std::string_view numa_policy_name(NumaPolicy p) noexcept;

// Where each worker slot runs under a policy.
struct NumaPlan {
  NumaPolicy policy = NumaPolicy::None;
  std::vector<int> cpus;          // worker slot -> OS CPU id (empty for None)
  std::vector<int> worker_node;   // worker slot -> NUMA node os_index
  std::vector<int> memory_nodes;  // nodes the memory goes to (bound per worker, or interleaved)

  // As a pin list for the executor (PinPolicy::List of cpus; PinPolicy::None for None).
  PinSpec pin() const;
};

// threads <= 0: one per allowed physical core of the policy's nodes (isolate: of the start
// node). start_cpu: the CPU the process started on (isolate's node; -1 or unknown: the first
// allowed CPU's). Within a node, the first PU of every core comes before any SMT sibling.
// Throws TopologyError when the nodes have fewer allowed PUs than threads.
NumaPlan plan_numa(const Topology& topo, NumaPolicy policy, int threads, int start_cpu);

// NUMA nodes (os_index, ascending) that have at least one allowed CPU.
std::vector<int> nodes_with_allowed_cpus(const Topology& topo);
// The node of each CPU (-1 when the topology does not know it).
std::vector<int> nodes_of_cpus(const Topology& topo, std::span<const int> cpus);

// A page-aligned address range and the node it belongs to.
struct NodeSpan {
  std::uintptr_t begin = 0, end = 0;  // page-aligned, begin < end
  int node = -1;
  bool owned = false;  // pacer's own copy (a repacked, Interleaved16 matrix), not the file mapping
};

// The pages each node's workers stream in forward()'s matmuls: per group (runtime::matmul_groups),
// worker w's rows are those of its share of the group's ops::StreamPartition (the split matmul()
// runs), placed on worker_node[w]. Consecutive workers on one node merge into one span. A page
// shared by two workers' rows goes to the worker whose rows start in it (the boundary is rounded
// down to a page); the span of a matrix's last rows is rounded up to the page end. Pure.
std::vector<NodeSpan> weight_node_spans(std::span<const std::vector<ops::WeightMatrix>> groups,
                                        std::span<const int> worker_node, int64_t page_bytes);

// ---- Memory policy (Linux system calls). Each throws NumaError naming the call and errno.

class NumaError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

int64_t page_bytes() noexcept;

// mbind(MPOL_BIND, {node}) on the pages covering [p, p + bytes); move: also migrate pages that
// are already resident elsewhere (MPOL_MF_MOVE: pages mapped by this process alone).
void bind_memory(const void* p, size_t bytes, int node, bool move);
// mbind(MPOL_INTERLEAVE, nodes): page i of the range on nodes[i % n] for pages faulted from now
// on; move: also redistribute resident pages.
void interleave_memory(const void* p, size_t bytes, std::span<const int> nodes, bool move);

struct MemPolicy {
  std::string mode;        // "default" | "preferred" | "bind" | "interleave" | "local" | "other"
  std::vector<int> nodes;  // the policy's node mask
};
// get_mempolicy(MPOL_F_ADDR): the policy governing the page at p.
MemPolicy memory_policy_at(const void* p);
// get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR): the node holding the page at p (faults it in).
int node_of_page(const void* p);
// move_pages(nodes = nullptr): the node of each page in [p, p + bytes), or a negative errno
// (-ENOENT: not resident) per page. Does not fault pages in.
std::vector<int> resident_nodes(const void* p, size_t bytes);

// What a session did with its memory under a policy (the header's run.numa).
struct NumaPlacement {
  NumaPolicy policy = NumaPolicy::None;
  std::vector<int> worker_node;  // per worker slot
  std::vector<int> memory_nodes;
  std::string weights;             // "per_worker_node" | "interleave" | "bind" | "kernel"
  std::string kv;                  // "interleave" | "bind" | "kernel"
  int64_t weight_bytes_owned = 0;  // placed bytes in pacer's own copies (repacked matrices)
  int64_t weight_bytes_file = 0;   // placed bytes of the file mapping (see docs/numa.md)
  // Share of resident sampled weight pages that sit on their intended node after placement
  // (-1: not measured: policy none, interleave, or the query failed).
  double weights_on_node_pct = -1;
  std::string error;  // why a memory call failed (threads stay placed; memory is the kernel's)
};

// Applies the policy to a session's memory: the matmul weights (forward()'s row partition over
// worker_node) and the KV cache. Never throws for a refused memory call (containers often forbid
// mbind): the threads stay placed and the reason goes to `error`. kv may be empty.
NumaPlacement place_memory(NumaPolicy policy, std::span<const int> worker_node,
                           std::span<const int> memory_nodes, const loader::Weights& weights,
                           std::span<std::byte> kv);

// run.numa as the header writes it (eventlog/schema.h numa_key).
nlohmann::json numa_json(const NumaPlacement& p);

}  // namespace pacer::runtime
