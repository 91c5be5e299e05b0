// TODO(issue): `pacer trace` is being written; until then it says so and fails.
#include <stdexcept>

#include "tools/commands.h"

namespace pacer::tools {

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("trace", "(not yet available)");
  cmd->allow_extras();
  cmd->callback([] { throw std::runtime_error("'pacer trace' is not implemented yet"); });
}

}  // namespace pacer::tools
