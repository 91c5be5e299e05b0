#!/usr/bin/env bash
# Side-by-side GEMV figures: pacer's bench (pacer_bench_ops, AVX-512 kernels) and llama.cpp's CPU
# backend (bench/compare/ggml_gemv.cpp, compiled here against $LLAMA_DIR/build) at the same
# shapes, types, thread counts and cold/hot setting. Both sides time single calls that include
# quantizing the activations.
#
# usage: bench/compare/run_compare.sh PACER_BENCH_BINARY [REPS]
#   TYPES, SHAPES, THREADS, COLD override the defaults below (space-separated lists).
# Columns: *_med = median per call (pacer: loop mean of the median repetition), *_best = fastest
# single call (the figure least disturbed by other load on a shared machine), in microseconds,
# and GB/s of weights streamed at the best call; ratio = llama_best / pacer_best (> 1: pacer
# faster).
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

echo "# $(date -u +%FT%TZ) load:$(cut -d' ' -f1-3 /proc/loadavg) reps=$reps"
printf '%-5s %-11s %-3s %-4s %10s %10s %8s | %10s %10s %8s | %6s\n' type shape thr cold \
  pacer_med pacer_best GB/s llama_med llama_best GB/s ratio
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
        read -r p_med p_best p_gbs < <(python3 - "$work/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
agg = {b["aggregate_name"]: b for b in d["benchmarks"] if "aggregate_name" in b}
print(agg["median"]["real_time"], agg["min"]["call_min_us"], agg["min"]["best_GB/s"])
PY
)
        read -r _ _ _ _ _ l_med _ l_best l_gbs < <("$work/ggml_gemv" "$t" "$rows" "$cols" "$th" \
          "$c" "$((reps * 40))")
        printf '%-5s %-11s %-3s %-4s %10.1f %10.1f %8.2f | %10.1f %10.1f %8.2f | %6.2f\n' "$t" "$s" \
          "$th" "$c" "$p_med" "$p_best" "$p_gbs" "$l_med" "$l_best" "$l_gbs" \
          "$(python3 -c "print($l_best/$p_best)")"
      done
    done
  done
done
