#!/usr/bin/env bash
# Run-queue contention, end to end: the same decode run twice, the second with one busy-loop
# co-runner pinned to each of the workers' CPUs, then `pacer compare`. The verdict must name
# run-queue contention (not frequency) as the main cause.
#
#   scripts/scenario-runq.sh [--pacer BIN] [--out DIR] [-n TOKENS] [-t THREADS] [--hogs-per-cpu K]
#
# Writes DIR/model.gguf, normal.jsonl, abnormal.jsonl, compare.md, compare.json, compare.html.
# Exit status: 0 the verdict names the run queue; 1 it names something else; 2 a step failed;
# 77 `pacer run` is not implemented in this build (callers treat it as "skipped").
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
pacer=${PACER:-$root/build/tools/pacer}
out=""
tokens=16
# Steps must last milliseconds: with ~0.2 ms steps (the "tiny" model) workers wake from their
# futex with CFS sleeper credit and preempt the hogs, so there is no run-queue delay to see.
arch=qwen2.5-0.5b
wtype=q4_0
threads=2
hogs_per_cpu=1
prompt="The quick brown fox jumps over the lazy dog"

while [ $# -gt 0 ]; do
  case "$1" in
    --pacer) pacer=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -n) tokens=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --hogs-per-cpu) hogs_per_cpu=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "scenario-runq: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$pacer" ] || { echo "scenario-runq: pacer binary not found: $pacer (--pacer BIN)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "scenario-runq: taskset (util-linux) is required" >&2; exit 2; }
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/pacer-runq.XXXXXX")
fi
mkdir -p "$out"

hog_pids=()
stop_hogs() {
  for pid in "${hog_pids[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${hog_pids[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
  hog_pids=()
}
trap stop_hogs EXIT

# Runs `pacer run`, mapping "not implemented" to exit 77.
pacer_run() {
  local events=$1 err=$out/run.err
  if ! "$pacer" run -m "$out/model.gguf" -p "$prompt" -n "$tokens" -t "$threads" --pin compact \
      --events-out "$events" >"$out/run.out" 2>"$err"; then
    if grep -qi "not implemented" "$err"; then
      echo "scenario-runq: skipped: $(head -n1 "$err")" >&2
      exit 77
    fi
    echo "scenario-runq: pacer run failed:" >&2
    cat "$err" >&2
    exit 2
  fi
}

echo "== model: $out/model.gguf" >&2
if ! "$pacer" gguf synth --arch "$arch" --type "$wtype" -o "$out/model.gguf" >"$out/synth.out" 2>"$out/synth.err"; then
  if grep -qi "not implemented" "$out/synth.err"; then
    echo "scenario-runq: skipped: $(head -n1 "$out/synth.err")" >&2
    exit 77
  fi
  cat "$out/synth.err" >&2
  exit 2
fi

echo "== normal run" >&2
pacer_run "$out/normal.jsonl"

# The workers' CPUs, from the normal run's header ("cpus":[0,1]).
cpus=$(head -n1 "$out/normal.jsonl" | grep -o '"cpus":\[[0-9, ]*\]' | head -n1 | tr -dc '0-9,' | tr ',' ' ')
if [ -z "$cpus" ]; then
  echo "scenario-runq: the normal run's header names no worker CPUs" >&2
  exit 2
fi

echo "== abnormal run: $hogs_per_cpu busy loop(s) pinned to each of CPUs $cpus" >&2
for cpu in $cpus; do
  for _ in $(seq "$hogs_per_cpu"); do
    taskset -c "$cpu" sh -c 'while :; do :; done' &
    hog_pids+=("$!")
  done
done
sleep 0.2  # let the scheduler see the hogs before the run starts
pacer_run "$out/abnormal.jsonl"
stop_hogs

echo "== compare" >&2
for report in compare.md compare.html compare.json; do
  if ! "$pacer" compare "$out/normal.jsonl" "$out/abnormal.jsonl" -o "$out/$report" \
      2>"$out/compare.err"; then
    echo "scenario-runq: pacer compare failed:" >&2
    cat "$out/compare.err" >&2
    exit 2
  fi
done

verdict=$(grep -m1 '^\*\*Verdict:\*\*' "$out/compare.md" | sed 's/^\*\*Verdict:\*\* //')
cause=$(grep -m1 '"main_cause":' "$out/compare.json" | sed -e 's/.*"main_cause": *//' -e 's/[",]//g')
echo "verdict: $verdict"
echo "main cause: $cause"
echo "reports: $out/compare.md $out/compare.html $out/compare.json"
[ "$cause" = "run queue" ]
