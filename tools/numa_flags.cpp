// --numa, shared by `pacer run`, `pacer perplexity` and `pacer bench` (tools/commands.h).
#include <string>

#include "runtime/numa.h"
#include "tools/commands.h"

namespace pacer::tools {

CLI::Option* add_numa_option(CLI::App* cmd, std::string* value, bool numactl) {
  std::vector<std::string> allowed{"none", "distribute", "isolate", "interleave"};
  std::string help =
      "NUMA placement: none | distribute (workers spread over nodes, each one's weight rows on "
      "its node) | isolate (all on the start node) | interleave (memory page-interleaved)";
  if (numactl) {
    allowed.push_back("numactl");
    help += " | numactl (= none: leave placement to the CPU set given, e.g. by numactl)";
  }
  return cmd->add_option("--numa", *value, help)->check(CLI::IsMember(allowed));
}

runtime::NumaPolicy numa_policy_of(const std::string& value) {
  return value.empty() || value == "numactl" ? runtime::NumaPolicy::None
                                             : runtime::parse_numa_policy(value);
}

void apply_numa(runtime::SessionOptions& so, const std::string& numa, const std::string& pin) {
  so.numa = numa_policy_of(numa);
  if (so.numa == runtime::NumaPolicy::None) return;
  if (!pin.empty() && pin != "none") {
    throw CLI::ValidationError("--numa",
                               "give --pin or --numa, not both (--numa places the threads)");
  }
  const runtime::NumaPlan plan =
      runtime::plan_numa(runtime::Topology::detect(), so.numa, so.threads, runtime::current_cpu());
  so.pin = plan.pin();
  so.threads = static_cast<int>(plan.cpus.size());
}

}  // namespace pacer::tools
