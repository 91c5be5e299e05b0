// TODO(issue): `pacer compare` is being written; until then it says so and fails.
#include <stdexcept>

#include "tools/commands.h"

namespace pacer::tools {

void add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "(not yet available)");
  cmd->allow_extras();
  cmd->callback([] { throw std::runtime_error("'pacer compare' is not implemented yet"); });
}

}  // namespace pacer::tools
