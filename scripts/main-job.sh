#!/usr/bin/env bash
# What ./run.sh runs after the build (kept separate so it can be re-run without rebuilding):
# generate the default model (Qwen2.5-0.5B shape, Q8_0) once, benchmark decode (tg) at 1 and all
# physical cores with recording on, then print the profile report of the recorded run.
# Extra arguments replace the default bench arguments (e.g. ./run.sh -n 128 -t 2 -r 5).
set -euo pipefail
cd "$(dirname "$0")/.."
pacer=build/tools/pacer
cache=${PACER_CACHE_DIR:-.cache}
models=$cache/models
mkdir -p "$models"
model=$models/qwen2.5-0.5b-q8_0.gguf
if [ ! -f "$model" ]; then
  echo "== generating the default model: $model" >&2
  "$pacer" gguf synth --arch qwen2.5-0.5b --type q8_0 --seed 1 -o "$model"
fi
events=$cache/events/main-job
rm -rf "$events"
mkdir -p "$events"
cores=$(nproc)
if [ $# -gt 0 ]; then
  bench_args=("$@")
else
  threads=1
  [ "$cores" -gt 1 ] && threads="1,$cores"
  bench_args=(-p 0 -n 64 -t "$threads" -r 3)
fi
echo "== pacer bench -m $model ${bench_args[*]} --events-out $events"
"$pacer" bench -m "$model" "${bench_args[@]}" --events-out "$events"
log=$(ls -t "$events"/*.jsonl | head -n 1)
echo
echo "== pacer report $log"
"$pacer" report "$log"
