#include "runtime/topology.h"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace pacer::runtime {
namespace {

// Owns an hwloc topology for the duration of one build_ call.
struct HwlocTopology {
  hwloc_topology_t t = nullptr;
  HwlocTopology() {
    if (hwloc_topology_init(&t) != 0) throw TopologyError("hwloc: cannot initialise a topology");
  }
  ~HwlocTopology() { hwloc_topology_destroy(t); }
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
};

std::vector<int> pus_of(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

std::string cache_type_name(hwloc_obj_cache_type_t t) {
  switch (t) {
    case HWLOC_OBJ_CACHE_DATA:
      return "data";
    case HWLOC_OBJ_CACHE_INSTRUCTION:
      return "instruction";
    default:
      return "unified";
  }
}

// Reads everything pacer needs out of a loaded hwloc topology.
Topology read_topology(hwloc_topology_t t, std::string source) {
  Topology topo;
  topo.source = std::move(source);
  topo.packages = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE));
  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0)) {
    if (const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel")) {
      topo.cpu_model = model;  // CPUID's brand string, padded with blanks by some CPUs
      const size_t end = topo.cpu_model.find_last_not_of(' ');
      topo.cpu_model.erase(end == std::string::npos ? 0 : end + 1);
    }
  }

  std::vector<hwloc_obj_t> numa_objs;
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n));) {
    numa_objs.push_back(n);
    topo.numa_nodes.push_back({static_cast<int>(n->os_index),
                               n->attr ? static_cast<int64_t>(n->attr->numanode.local_memory) : 0,
                               pus_of(n->cpuset)});
  }

  // Some VMs expose PUs without Core objects: then each PU is its own core.
  const bool have_cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0;
  const hwloc_obj_type_t core_type = have_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  for (hwloc_obj_t c = nullptr; (c = hwloc_get_next_obj_by_type(t, core_type, c));) {
    Core core;
    core.index = static_cast<int>(topo.cores.size());
    core.pus = pus_of(c->cpuset);
    if (core.pus.empty()) continue;
    if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, c)) {
      core.package = static_cast<int>(pkg->logical_index);
    }
    // The most local node: several nodes can cover a core (a package-wide node above per-group
    // nodes); the one with the smallest cpuset is the core's own.
    int best_weight = INT_MAX;
    for (hwloc_obj_t n : numa_objs) {
      const int weight = hwloc_bitmap_weight(n->cpuset);
      if (hwloc_bitmap_intersects(n->cpuset, c->cpuset) && weight < best_weight) {
        core.numa = static_cast<int>(n->os_index);
        best_weight = weight;
      }
    }
    topo.cores.push_back(std::move(core));
  }
  if (topo.cores.empty()) throw TopologyError("hwloc: topology " + topo.source + " has no CPUs");

  const hwloc_obj_type_t cache_types[] = {
      HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L2ICACHE,
      HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L3ICACHE, HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE};
  for (hwloc_obj_type_t type : cache_types) {
    const int count = hwloc_get_nbobjs_by_type(t, type);
    if (count <= 0) continue;
    hwloc_obj_t first = hwloc_get_obj_by_type(t, type, 0);
    CacheLevel level;
    level.level = static_cast<int>(first->attr->cache.depth);
    level.type = cache_type_name(first->attr->cache.type);
    level.size_bytes = static_cast<int64_t>(first->attr->cache.size);
    level.line_bytes = static_cast<int>(first->attr->cache.linesize);
    level.instances = count;
    level.cpus_per_instance = hwloc_bitmap_weight(first->cpuset);
    topo.caches.push_back(std::move(level));
  }
  return topo;
}

// Keeps only allowed CPUs that exist in the topology; empty request = every PU.
std::vector<int> resolve_allowed(const Topology& topo, std::vector<int> requested) {
  std::set<int> all;
  for (const Core& c : topo.cores) all.insert(c.pus.begin(), c.pus.end());
  if (requested.empty()) return {all.begin(), all.end()};
  std::vector<int> out;
  for (int cpu : requested) {
    if (all.count(cpu)) out.push_back(cpu);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) {
    throw TopologyError("none of the allowed CPUs " + format_cpu_list(requested) +
                        " exists in topology " + topo.source);
  }
  return out;
}

std::vector<int> process_affinity() {
  // Grow the mask until the kernel accepts its size (machines with more than 1024 CPUs).
  for (int ncpus = 1024; ncpus <= (1 << 20); ncpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    const size_t size = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
      std::vector<int> out;
      for (int i = 0; i < ncpus; ++i) {
        if (CPU_ISSET_S(i, size, set)) out.push_back(i);
      }
      CPU_FREE(set);
      return out;
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;
  }
  return {};  // unknown: resolve_allowed then treats every PU as allowed
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

int parse_cpu_id(std::string_view s, std::string_view whole) {
  s = trim(s);
  int v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < 0) {
    throw TopologyError(fmt::format("bad CPU id '{}' in CPU list '{}'", s, whole));
  }
  return v;
}

std::string policy_error(const PinSpec& pin, int threads, size_t available, std::string_view what,
                         const Topology& topo) {
  return fmt::format(
      "pin policy '{}' cannot place {} threads: it has {} CPU{} here ({}); the process may run "
      "on CPUs {}",
      pin.to_string(), threads, available, available == 1 ? "" : "s", what,
      format_cpu_list(topo.allowed_cpus));
}

}  // namespace

std::string CacheLevel::name() const {
  std::string n = "L" + std::to_string(level);
  if (type == "data") n += "d";
  if (type == "instruction") n += "i";
  return n;
}

int Topology::pu_count() const noexcept {
  int n = 0;
  for (const Core& c : cores) n += static_cast<int>(c.pus.size());
  return n;
}

bool Topology::smt() const noexcept {
  return std::any_of(cores.begin(), cores.end(), [](const Core& c) { return c.pus.size() > 1; });
}

bool Topology::is_allowed(int cpu) const noexcept {
  return std::binary_search(allowed_cpus.begin(), allowed_cpus.end(), cpu);
}

int Topology::allowed_core_count() const noexcept {
  int n = 0;
  for (const Core& c : cores) {
    if (std::any_of(c.pus.begin(), c.pus.end(), [&](int p) { return is_allowed(p); })) ++n;
  }
  return n;
}

Topology Topology::detect() {
  HwlocTopology h;
  if (hwloc_topology_load(h.t) != 0)
    throw TopologyError("hwloc: cannot load this machine's topology");
  Topology topo = read_topology(h.t, "this machine");
  topo.allowed_cpus = resolve_allowed(topo, process_affinity());
  return topo;
}

Topology Topology::from_synthetic(std::string_view description, std::vector<int> allowed) {
  HwlocTopology h;
  const std::string desc(description);
  if (hwloc_topology_set_synthetic(h.t, desc.c_str()) != 0 || hwloc_topology_load(h.t) != 0) {
    throw TopologyError("hwloc: invalid synthetic topology '" + desc + "'");
  }
  Topology topo = read_topology(h.t, "synthetic: " + desc);
  topo.allowed_cpus = resolve_allowed(topo, std::move(allowed));
  return topo;
}

Topology Topology::from_xml(std::string_view xml, std::vector<int> allowed) {
  HwlocTopology h;
  if (hwloc_topology_set_xmlbuffer(h.t, xml.data(), static_cast<int>(xml.size())) != 0 ||
      hwloc_topology_load(h.t) != 0) {
    throw TopologyError("hwloc: invalid XML topology");
  }
  Topology topo = read_topology(h.t, "xml");
  topo.allowed_cpus = resolve_allowed(topo, std::move(allowed));
  return topo;
}

PinSpec PinSpec::parse(std::string_view text) {
  const std::string_view t = trim(text);
  if (t == "none") return {PinPolicy::None, {}};
  if (t == "compact") return {PinPolicy::Compact, {}};
  if (t == "scatter") return {PinPolicy::Scatter, {}};
  if (t == "cores") return {PinPolicy::Cores, {}};
  if (t.substr(0, 5) == "list:") {
    PinSpec spec{PinPolicy::List, parse_cpu_list(t.substr(5))};
    std::vector<int> sorted = spec.cpus;
    std::sort(sorted.begin(), sorted.end());
    if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
      throw TopologyError(fmt::format("pin list '{}' names CPU {} twice", t, *dup));
    }
    return spec;
  }
  throw TopologyError(fmt::format(
      "unknown pin policy '{}' (expected none, compact, scatter, cores or list:0,2,4)", t));
}

std::string PinSpec::to_string() const {
  switch (policy) {
    case PinPolicy::None:
      return "none";
    case PinPolicy::Compact:
      return "compact";
    case PinPolicy::Scatter:
      return "scatter";
    case PinPolicy::Cores:
      return "cores";
    case PinPolicy::List: {
      std::string s = "list:";
      for (size_t i = 0; i < cpus.size(); ++i) s += (i ? "," : "") + std::to_string(cpus[i]);
      return s;
    }
  }
  return "?";
}

std::vector<int> assign_cpus(const Topology& topo, const PinSpec& pin, int threads) {
  if (threads <= 0)
    throw TopologyError(fmt::format("thread count must be positive, got {}", threads));
  auto allowed_pus = [&](const Core& c) {
    std::vector<int> out;
    for (int p : c.pus) {
      if (topo.is_allowed(p)) out.push_back(p);
    }
    return out;
  };

  std::vector<int> order;  // every CPU the policy would hand out, in hand-out order
  std::string what;
  switch (pin.policy) {
    case PinPolicy::None:
      return {};
    case PinPolicy::Compact:
      for (const Core& c : topo.cores) {
        for (int p : allowed_pus(c)) order.push_back(p);
      }
      what = "every allowed PU";
      break;
    case PinPolicy::Cores:
      for (const Core& c : topo.cores) {
        if (auto pus = allowed_pus(c); !pus.empty()) order.push_back(pus.front());
      }
      what = "one per physical core with an allowed PU";
      break;
    case PinPolicy::Scatter: {
      // Domains are (package, NUMA node) pairs. Within a domain, the first PU of every core comes
      // before any second sibling; domains then take turns, ordered so that consecutive domains
      // sit on different packages (package 0 node 0, package 1 node 0, package 0 node 1, ...).
      std::map<std::pair<int, int>, size_t> domain_of;
      std::vector<std::vector<std::vector<int>>> domains;  // domain -> core -> allowed PUs
      std::map<int, std::vector<size_t>> domains_of_package;
      for (const Core& c : topo.cores) {
        auto pus = allowed_pus(c);
        if (pus.empty()) continue;
        auto [it, added] = domain_of.try_emplace({c.package, c.numa}, domains.size());
        if (added) {
          domains_of_package[c.package].push_back(domains.size());
          domains.emplace_back();
        }
        domains[it->second].push_back(std::move(pus));
      }
      std::vector<size_t> domain_order;
      for (size_t k = 0;; ++k) {
        bool any = false;
        for (const auto& [pkg, ids] : domains_of_package) {
          if (k < ids.size()) {
            domain_order.push_back(ids[k]);
            any = true;
          }
        }
        if (!any) break;
      }
      std::vector<std::vector<int>> queues;
      for (size_t d : domain_order) queues.push_back(take_in_turn(domains[d]));
      order = take_in_turn(queues);
      what = "every allowed PU";
      break;
    }
    case PinPolicy::List:
      for (int cpu : pin.cpus) {
        if (!topo.is_allowed(cpu)) {
          throw TopologyError(fmt::format(
              "pin policy '{}' names CPU {}, which is outside the CPUs the process may run on ({})",
              pin.to_string(), cpu, format_cpu_list(topo.allowed_cpus)));
        }
      }
      order = pin.cpus;
      what = "the listed CPUs";
      break;
  }
  if (static_cast<size_t>(threads) > order.size()) {
    throw TopologyError(policy_error(pin, threads, order.size(), what, topo));
  }
  order.resize(static_cast<size_t>(threads));
  return order;
}

int resolve_threads(const Topology& topo, const PinSpec& pin, int threads) {
  if (threads > kMaxWorkerThreads) {
    throw TopologyError(
        fmt::format("{} threads: pacer runs at most {}", threads, kMaxWorkerThreads));
  }
  if (threads > 0) return threads;
  if (pin.policy == PinPolicy::List && !pin.cpus.empty()) {
    if (pin.cpus.size() > static_cast<size_t>(kMaxWorkerThreads)) {
      throw TopologyError(fmt::format("--pin lists {} CPUs: pacer runs at most {} threads",
                                      pin.cpus.size(), kMaxWorkerThreads));
    }
    return static_cast<int>(pin.cpus.size());
  }
  return std::clamp(topo.allowed_core_count(), 1, kMaxWorkerThreads);
}

std::string format_cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "(none)" : out;
}

std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> out;
  std::string_view rest = text;
  if (trim(rest).empty()) throw TopologyError("empty CPU list");
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (comma != std::string_view::npos && trim(rest).empty()) {
      throw TopologyError(fmt::format("CPU list '{}' ends with a comma", text));
    }
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      out.push_back(parse_cpu_id(item, text));
      continue;
    }
    const int lo = parse_cpu_id(item.substr(0, dash), text);
    const int hi = parse_cpu_id(item.substr(dash + 1), text);
    if (hi < lo || hi - lo > 65536) {
      throw TopologyError(fmt::format("bad CPU range '{}' in CPU list '{}'", trim(item), text));
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

std::vector<int> take_in_turn(const std::vector<std::vector<int>>& lists) {
  std::vector<int> out;
  for (size_t round = 0;; ++round) {
    bool any = false;
    for (const auto& l : lists) {
      if (round < l.size()) {
        out.push_back(l[round]);
        any = true;
      }
    }
    if (!any) return out;
  }
}

int current_cpu() noexcept {
  return sched_getcpu();
}

nlohmann::json topology_json(const Topology& topo) {
  nlohmann::json j;
  j["source"] = topo.source;
  j["cpu_model"] = topo.cpu_model;
  j["packages"] = topo.packages;
  j["cores"] = topo.cores.size();
  j["pus"] = topo.pu_count();
  j["smt"] = topo.smt();
  j["numa_nodes"] = nlohmann::json::array();
  for (const NumaNode& n : topo.numa_nodes) {
    j["numa_nodes"].push_back(
        {{"os_index", n.os_index}, {"memory_bytes", n.memory_bytes}, {"cpus", n.cpus}});
  }
  j["core_list"] = nlohmann::json::array();
  for (const Core& c : topo.cores) {
    j["core_list"].push_back(
        {{"core", c.index}, {"package", c.package}, {"numa", c.numa}, {"pus", c.pus}});
  }
  j["caches"] = nlohmann::json::array();
  for (const CacheLevel& c : topo.caches) {
    j["caches"].push_back({{"name", c.name()},
                           {"level", c.level},
                           {"type", c.type},
                           {"size_bytes", c.size_bytes},
                           {"line_bytes", c.line_bytes},
                           {"instances", c.instances},
                           {"cpus_per_instance", c.cpus_per_instance}});
  }
  j["allowed_cpus"] = topo.allowed_cpus;
  return j;
}

}  // namespace pacer::runtime
