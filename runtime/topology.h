#pragma once
// The machine as hwloc sees it (packages, NUMA nodes, cores, SMT siblings, caches) plus the CPUs
// this process may run on, and the pin policies that turn "N threads" into a list of CPUs.
//
// CPU ids are OS indices (what sched_getcpu() returns and taskset takes). Worker slot i of the
// executor runs on assign_cpus(...)[i]; slot 0 is the calling thread.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pacer::runtime {

// Impossible pin requests, malformed policy strings, hwloc failures. The message is one line
// naming the policy, the request and what the machine allows.
class TopologyError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CacheLevel {
  int level = 0;           // 1, 2, 3, ...
  std::string type;        // "data" | "instruction" | "unified"
  int64_t size_bytes = 0;  // one instance
  int line_bytes = 0;
  int instances = 0;
  int cpus_per_instance = 0;  // PUs sharing one instance (of the first instance)
  std::string name() const;   // "L1d", "L1i", "L2", ...
};

struct NumaNode {
  int os_index = 0;
  int64_t memory_bytes = 0;  // local memory hwloc reports (0 when unknown)
  std::vector<int> cpus;     // PUs attached to the node
};

struct Core {
  int index = 0;         // logical index, topology order
  int package = 0;       // logical index of its package
  int numa = -1;         // os_index of its NUMA node, -1 when unknown
  std::vector<int> pus;  // SMT siblings (OS CPU ids), topology order
};

struct Topology {
  std::string source;     // "this machine", "synthetic: <desc>", "xml"
  std::string cpu_model;  // package 0's CPUModel info, may be empty
  int packages = 1;
  std::vector<NumaNode> numa_nodes;
  std::vector<Core> cores;         // every core, topology order
  std::vector<CacheLevel> caches;  // by level, data before instruction
  std::vector<int> allowed_cpus;   // sorted; CPUs the process may run on (sched_getaffinity)

  int pu_count() const noexcept;
  bool smt() const noexcept;  // some core has more than one PU
  // Cores with at least one allowed PU: the default thread count.
  int allowed_core_count() const noexcept;
  bool is_allowed(int cpu) const noexcept;

  // This machine (hwloc) restricted to the calling thread's affinity mask.
  static Topology detect();
  // An hwloc synthetic description, e.g. "pack:2 core:4 pu:2"; allowed empty = every PU.
  static Topology from_synthetic(std::string_view description, std::vector<int> allowed = {});
  // An hwloc XML export (lstopo --of xml); allowed empty = every PU.
  static Topology from_xml(std::string_view xml, std::vector<int> allowed = {});
};

enum class PinPolicy {
  None,     // no pinning: the OS places threads anywhere in the allowed set
  Compact,  // fill a core's SMT siblings, then the next core
  Scatter,  // spread over packages/NUMA nodes first, one PU per core before any sibling
  Cores,    // one thread per physical core, never two on SMT siblings
  List,     // an explicit CPU list, worker i on the i-th CPU
};

struct PinSpec {
  PinPolicy policy = PinPolicy::None;
  std::vector<int> cpus;  // List only

  // "none" | "compact" | "scatter" | "cores" | "list:0,2,4-7". Throws TopologyError.
  static PinSpec parse(std::string_view text);
  std::string to_string() const;
};

// The CPU of each worker slot for `threads` threads, or an empty vector for PinPolicy::None.
// Throws TopologyError when the request is impossible: more threads than the policy has CPUs
// among the allowed ones, or a listed CPU outside the process's affinity mask.
std::vector<int> assign_cpus(const Topology& topo, const PinSpec& pin, int threads);

// The most worker threads a session runs (the recorder brackets as many: thread_registry.h).
inline constexpr int kMaxWorkerThreads = 256;

// threads <= 0 means "auto": the list's length for PinPolicy::List, else one per allowed
// physical core (at most kMaxWorkerThreads). Positive values are returned unchanged; above
// kMaxWorkerThreads they throw TopologyError.
int resolve_threads(const Topology& topo, const PinSpec& pin, int threads);

// "0-3,8,10-11" (sorted, ranges collapsed) and its inverse (throws TopologyError).
std::string format_cpu_list(std::vector<int> cpus);
std::vector<int> parse_cpu_list(std::string_view text);

// Element 0 of every list, then element 1 of every list, ...: a core's SMT siblings come after the
// first PU of every other core, and domains take turns.
std::vector<int> take_in_turn(const std::vector<std::vector<int>>& lists);

// The CPU the calling thread is running on now (sched_getcpu), -1 if unknown.
int current_cpu() noexcept;

nlohmann::json topology_json(const Topology& topo);

}  // namespace pacer::runtime
