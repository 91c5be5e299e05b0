#!/usr/bin/env bash
# Side-by-side GEMV figures: pacer's bench (pacer_bench_ops) and llama.cpp's CPU backend
# (bench/compare/ggml_gemv.cpp, built here against /work/llama.cpp/build) at the same shapes,
# types and thread counts. Prints one table row per (type, shape, threads, cold) with medians.
#
# usage: bench/compare/run_compare.sh PACER_BENCH_BINARY [REPS]
#   LLAMA_DIR (default /work/llama.cpp) must hold a build with build/bin/libggml*.so.
#   TYPES, SHAPES, THREADS, COLD override the defaults below (space-separated).
set -euo pipefail
bench=${1:?usage: run_compare.sh PACER_BENCH_BINARY [REPS]}
reps=${2:-5}
llama=${LLAMA_DIR:-/work/llama.cpp}
here=$(cd "$(dirname "$0")" && pwd)
types=${TYPES:-"q4_0 q8_0 f16"}
shapes=${SHAPES:-"5632x2048 151936x896"}
threads_list=${THREADS:-"1 2"}
cold_list=${COLD:-"0 1"}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -std=c++17 -O2 -I"$llama/ggml/include" "$here/ggml_gemv.cpp" -L"$llama/build/bin" \
  -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$llama/build/bin" -o "$work/ggml_gemv"

echo "# $(date -u +%FT%TZ) $(uptime)"
printf '%-6s %-12s %-7s %-4s %12s %10s %12s %10s %8s\n' type shape threads cold \
  pacer_us pacer_GB/s llama_us llama_GB/s pacer/llama
for t in $types; do
  for s in $shapes; do
    rows=${s%x*}
    cols=${s#*x}
    for th in $threads_list; do
      for c in $cold_list; do
        filter="BM_gemv/${t}_avx512/rows:${rows}/cols:${cols}/threads:${th}/cold:${c}/"
        "$bench" --benchmark_filter="$filter" --benchmark_repetitions="$reps" \
          --benchmark_report_aggregates_only=true --benchmark_format=json \
          >"$work/p.json" 2>/dev/null
        read -r p_us p_gbs < <(python3 - "$work/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = [b for b in d["benchmarks"] if b.get("aggregate_name") == "median"][0]
print(m["real_time"], m["bytes_per_second"] / 1e9)
PY
)
        read -r _ _ _ _ _ l_us l_gbs < <("$work/ggml_gemv" "$t" "$rows" "$cols" "$th" "$c" "$reps")
        printf '%-6s %-12s %-7s %-4s %12.1f %10.2f %12.1f %10.2f %8.2f\n' "$t" "$s" "$th" "$c" \
          "$p_us" "$p_gbs" "$l_us" "$l_gbs" "$(python3 -c "print($l_us/$p_us)")"
      done
    done
  done
done
