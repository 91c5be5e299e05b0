// `pacer topo`: the machine as the executor sees it (packages, NUMA nodes, cores, SMT siblings,
// caches, the process's allowed CPUs) and which CPUs each pin policy would give N threads.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hwcounters/host_facts.h"
#include "runtime/topology.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct TopoOptions {
  bool json = false;
  int threads = -1;
  std::string pin;        // empty: show every policy
  std::string synthetic;  // hwloc synthetic description instead of this machine
  std::string xml_path;   // hwloc XML file instead of this machine
  std::string allowed;    // CPU list overriding the allowed set (with --synthetic/--xml)
};

std::string human_bytes(int64_t b) {
  if (b <= 0) return "?";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.{}f} {}", v, v < 10 ? 1 : 0, units[u]);
}

runtime::Topology load_topology(const TopoOptions& o) {
  std::vector<int> allowed;
  if (!o.allowed.empty()) {
    if (o.synthetic.empty() && o.xml_path.empty()) {
      throw runtime::TopologyError(
          "--allowed only applies to --synthetic or --xml (use taskset for this machine)");
    }
    allowed = runtime::parse_cpu_list(o.allowed);
  }
  if (!o.synthetic.empty()) return runtime::Topology::from_synthetic(o.synthetic, allowed);
  if (!o.xml_path.empty()) {
    std::ifstream in(o.xml_path, std::ios::binary);
    if (!in) throw runtime::TopologyError("cannot read topology XML file " + o.xml_path);
    std::stringstream ss;
    ss << in.rdbuf();
    return runtime::Topology::from_xml(ss.str(), allowed);
  }
  return runtime::Topology::detect();
}

void print_text(const runtime::Topology& t, bool this_machine) {
  std::cout << fmt::format("topology    {}\n", t.source);
  // The logs and bench name the CPU as the kernel does (/proc/cpuinfo); hwloc reads CPUID's brand
  // string, which a hypervisor may set to something else: both, when they differ.
  const std::string kernel_name =
      this_machine ? hwcounters::collect_host_facts().cpu_model : std::string();
  if (!kernel_name.empty() && !t.cpu_model.empty() && kernel_name != t.cpu_model) {
    std::cout << fmt::format("CPU model   {} (CPUID brand string: {})\n", kernel_name, t.cpu_model);
  } else if (!t.cpu_model.empty() || !kernel_name.empty()) {
    std::cout << fmt::format("CPU model   {}\n", kernel_name.empty() ? t.cpu_model : kernel_name);
  }
  std::cout << fmt::format("packages    {}\n", t.packages);
  std::cout << fmt::format("NUMA nodes  {}\n", t.numa_nodes.size());
  for (const auto& n : t.numa_nodes) {
    std::cout << fmt::format("  node {:<3} {:>10}  CPUs {}\n", n.os_index,
                             human_bytes(n.memory_bytes), runtime::format_cpu_list(n.cpus));
  }
  std::cout << fmt::format("cores       {} ({} PUs, SMT {})\n", t.cores.size(), t.pu_count(),
                           t.smt() ? "on" : "off");
  for (int p = 0; p < t.packages; ++p) {
    std::string line = fmt::format("  package {}:", p);
    for (const auto& c : t.cores) {
      if (c.package != p) continue;
      std::vector<std::string> pus;
      for (int pu : c.pus) pus.push_back(std::to_string(pu));
      line += fmt::format(" core {} [{}]", c.index, fmt::join(pus, ","));
    }
    std::cout << line << "\n";
  }
  std::cout << "caches\n";
  for (const auto& c : t.caches) {
    std::cout << fmt::format("  {:<4} {:>9} x{:<4} {} CPU{} each, {} B lines\n", c.name(),
                             human_bytes(c.size_bytes), c.instances, c.cpus_per_instance,
                             c.cpus_per_instance == 1 ? "" : "s", c.line_bytes);
  }
  std::cout << fmt::format("allowed     CPUs {} ({} CPUs on {} cores)\n",
                           runtime::format_cpu_list(t.allowed_cpus), t.allowed_cpus.size(),
                           t.allowed_core_count());
}

std::string worker_map(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size(); ++i) parts.push_back(fmt::format("w{}->{}", i, cpus[i]));
  return fmt::format("{}", fmt::join(parts, " "));
}

void run_topo(const TopoOptions& o) {
  const runtime::Topology t = load_topology(o);
  nlohmann::json j = runtime::topology_json(t);

  if (!o.pin.empty()) {
    // One policy asked for: an impossible request is an error (exit 1), as it would be for run.
    const runtime::PinSpec spec = runtime::PinSpec::parse(o.pin);
    const int threads = runtime::resolve_threads(t, spec, o.threads);
    const std::vector<int> cpus = runtime::assign_cpus(t, spec, threads);
    j["pinning"] = {{"policy", spec.to_string()}, {"threads", threads}, {"cpus", cpus}};
    if (o.json) {
      std::cout << j.dump(2) << "\n";
      return;
    }
    print_text(t, o.synthetic.empty() && o.xml_path.empty());
    std::cout << fmt::format(
        "\npin {} with {} threads: {}\n", spec.to_string(), threads,
        cpus.empty() ? "unpinned (the OS places the threads)" : worker_map(cpus));
    return;
  }

  const int threads = runtime::resolve_threads(t, runtime::PinSpec{}, o.threads);
  nlohmann::json policies = nlohmann::json::object();
  std::vector<std::string> lines;
  for (const char* name : {"compact", "scatter", "cores"}) {
    try {
      const auto cpus = runtime::assign_cpus(t, runtime::PinSpec::parse(name), threads);
      policies[name] = {{"cpus", cpus}};
      lines.push_back(fmt::format("  {:<8} {}", name, worker_map(cpus)));
    } catch (const runtime::TopologyError& e) {
      policies[name] = {{"error", e.what()}};
      lines.push_back(fmt::format("  {:<8} impossible: {}", name, e.what()));
    }
  }
  j["pinning"] = {{"threads", threads}, {"policies", policies}};
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_text(t, o.synthetic.empty() && o.xml_path.empty());
  std::cout << fmt::format(
      "\npin policies for {} threads (worker -> CPU; worker 0 is the calling "
      "thread):\n",
      threads);
  for (const auto& l : lines) std::cout << l << "\n";
}

}  // namespace

void add_topo_command(CLI::App& app) {
  auto opts = std::make_shared<TopoOptions>();
  auto* cmd = app.add_subcommand(
      "topo",
      "Show packages, NUMA nodes, cores, SMT siblings, caches, allowed CPUs and what a "
      "pin policy gives N threads");
  cmd->add_flag("--json", opts->json, "Print JSON instead of text");
  cmd->add_option("-t,--threads", opts->threads,
                  "Threads to place (default: one per allowed physical core)")
      ->check(thread_count());
  cmd->add_option("--pin", opts->pin,
                  "Pin policy: none | compact | scatter | cores | list:0,2,4 (default: show all)");
  cmd->add_option("--synthetic", opts->synthetic,
                  "Describe an hwloc synthetic topology instead of this machine, e.g. "
                  "'pack:2 core:4 pu:2'");
  cmd->add_option("--xml", opts->xml_path, "Load an hwloc XML topology (lstopo --of xml)");
  cmd->add_option("--allowed", opts->allowed,
                  "With --synthetic/--xml: the CPUs the process may use, e.g. 0-3,8");
  cmd->callback([opts] { run_topo(*opts); });
}

}  // namespace pacer::tools
