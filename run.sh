#!/usr/bin/env bash
# The main job: install what is missing, build Release, and run the default benchmark on the
# embedded default model (a synthetic Qwen2.5-0.5B-shaped Q8_0 model generated on first use).
# Extra arguments go to `pacer bench` (e.g. ./run.sh -t 1,2).
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install-deps.sh
# Only what the main job needs: no test or benchmark frameworks.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPACER_BUILD_TESTS=OFF \
  -DPACER_BUILD_BENCH=OFF >/dev/null
cmake --build build --target pacer -j "$(nproc)"
exec ./scripts/main-job.sh "$@"
