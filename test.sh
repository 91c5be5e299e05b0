#!/usr/bin/env bash
# Install what is missing, build (Release, with tests and benchmarks), run the whole suite.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install-deps.sh --tests
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPACER_BUILD_TESTS=ON -DPACER_BUILD_BENCH=ON \
  -DPACER_WERROR=ON >/dev/null
cmake --build build -j "$(nproc)"
cd build
ctest --output-on-failure --timeout 900 "$@"
