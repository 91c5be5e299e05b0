// TODO(issue): `pacer bench` is being written; until then it says so and fails.
#include <stdexcept>

#include "tools/commands.h"

namespace pacer::tools {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "(not yet available)");
  cmd->allow_extras();
  cmd->callback([] { throw std::runtime_error("'pacer bench' is not implemented yet"); });
}

}  // namespace pacer::tools
