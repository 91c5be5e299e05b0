// One-line warnings about a run's configuration, shared by run, perplexity and bench.
#include <cstdio>

#include "tools/commands.h"

namespace pacer::tools {

void warn_configuration(const runtime::Executor& ex, int64_t ctx, int64_t n_ctx_train) {
  const auto allowed = static_cast<int>(ex.topology().allowed_cpus.size());
  if (allowed > 0 && ex.workers() > allowed) {
    std::fprintf(stderr,
                 "pacer: warning: %d threads on %d allowed CPUs: workers will wait for each other "
                 "(oversubscribed; use -t %d or fewer)\n",
                 ex.workers(), allowed, allowed);
  }
  if (n_ctx_train > 0 && ctx > n_ctx_train) {
    std::fprintf(stderr,
                 "pacer: warning: context %lld is above the model's training context %lld\n",
                 static_cast<long long>(ctx), static_cast<long long>(n_ctx_train));
  }
}

}  // namespace pacer::tools
