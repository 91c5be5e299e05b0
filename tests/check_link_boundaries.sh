#!/usr/bin/env bash
# The layering on the archives' symbols (the CMake graph is checked at configure time, top-level
# CMakeLists.txt): every symbol a library leaves undefined must not be defined (strongly) in a
# library above it. analysis and hwcounters use nothing of runtime, ops or loader; the loader
# nothing of the kernels (pacer_ops), only pacer_ops_types.
# Usage: check_link_boundaries.sh NM analysis.a hwcounters.a loader.a ops_types.a ops.a runtime.a
set -euo pipefail
nm_bin=$1 analysis=$2 hwcounters=$3 loader=$4 ops_types=$5 ops=$6 runtime=$7
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Names a library defines with a strong definition (code, data, bss, read-only); weak and unique
# definitions (inline functions, template instances) are everyone's copy and prove nothing.
strong() { "$nm_bin" -g -P --defined-only "$1" 2>/dev/null | awk '$2 ~ /^[TDBRGS]$/ {print $1}' | sort -u; }
# Names a library needs from elsewhere: undefined somewhere in it, defined nowhere in it.
needs() {
  "$nm_bin" -g -P --defined-only "$1" 2>/dev/null | awk 'NF >= 2 {print $1}' | sort -u > "$tmp/def"
  "$nm_bin" -g -P -u "$1" 2>/dev/null | awk '{print $1}' | sort -u | comm -23 - "$tmp/def"
}

failed=0
# check NAME LIB FORBIDDEN...: no symbol LIB needs is defined in a FORBIDDEN library.
check() {
  local name=$1 lib=$2
  shift 2
  needs "$lib" > "$tmp/needs"
  for above in "$@"; do
    local hits
    hits=$(strong "$above" | comm -12 "$tmp/needs" -)
    if [[ -n $hits ]]; then
      echo "FAIL: $name uses $(basename "$above"):"
      echo "$hits" | c++filt | head -20 | sed 's/^/  /'
      failed=1
    fi
  done
}
check analysis "$analysis" "$runtime" "$ops" "$ops_types" "$loader"
check hwcounters "$hwcounters" "$runtime" "$ops" "$ops_types" "$loader"
check loader "$loader" "$ops"
check ops_types "$ops_types" "$ops"

# The method must see real edges, or every check above would pass vacuously: the loader uses
# pacer_ops_types (quantize_row), the runtime uses the kernels (matmul).
needs "$loader" | comm -12 - <(strong "$ops_types") | grep -q . ||
  { echo "FAIL: found no symbol of pacer_ops_types that the loader uses"; failed=1; }
needs "$runtime" | comm -12 - <(strong "$ops") | grep -q . ||
  { echo "FAIL: found no symbol of pacer_ops that the runtime uses"; failed=1; }
[[ $failed == 0 ]] && echo "link boundaries hold"
exit $failed
