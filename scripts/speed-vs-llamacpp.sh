#!/usr/bin/env bash
# pacer's decode and prefill speed against llama.cpp's CPU backend on the same GGUF files and
# thread counts, the two tools alternating round by round. Needs a llama.cpp build of your own
# (LLAMA_BIN: the folder holding llama-bench and llama-quantize); pacer never builds or ships
# llama.cpp.
#
#   LLAMA_BIN=~/llama.cpp/build/bin scripts/speed-vs-llamacpp.sh OUT_DIR [PRESET...]
#
# For each synthetic preset (default tinyllama-1.1b): pacer writes the F16 model, llama-quantize
# makes the other types from it, and per file and round both tools run
# `-p PROMPT -n GEN -t THREADS -r REPS` (pacer first in odd rounds, llama.cpp first in even ones,
# so a host that drifts one way favours neither). Environment: TYPES (default
# "f16 q8_0 q4_0 q4_k_m q5_k_m"; any llama-quantize type name), THREADS (1,2), ROUNDS (2), REPS
# (3), PROMPT (64), GEN (32), DEPTH (unset: none; one depth, e.g. 4096, adds `-d 4096` to both;
# a llama-bench without -d (before its n-depth option, e.g. c392e50) is replaced for the llama.cpp
# side by llama-batched-bench from the same folder, `-npp DEPTH -ntg GEN -npl 1` per thread count,
# whose S_TG t/s is decode after DEPTH tokens; it has no prefill at depth, so pacer then runs
# `-p 0` and the rows are the tg rows at the depth), PACER (the pacer binary), PACER_ARGS (more
# `pacer bench` flags),
# LLAMA_ARGS (more `llama-bench` flags; default `--mmap 0`: llama.cpp then holds its weights in
# anonymous memory as pacer does its repacked copies. Mapped file pages can read much slower: on a
# 2-vCPU Zen 5 guest llama-bench's TinyLlama Q8_0 decode at 1 thread ran 9.4-15 tok/s mapped and
# 22 with --mmap 0. LLAMA_ARGS= gives llama-bench's own defaults), BATCHED_ARGS (the
# llama-batched-bench flags in its place; default `--no-mmap`).
#
# Prints one row per (file, threads, test): each tool's t/s per round, pacer / llama.cpp per
# round, pacer's % of the roofline it measured around the row, llama.cpp's rate against that same
# roofline, and the targets:
#   - decode (tg) >= 1.00x llama.cpp, >= 1.10x where llama.cpp reads below 85 % of the roofline,
#     and pacer >= 90 % of the roofline where the weights are larger than the LLC (a row above
#     100 % is a probe that under-read, not a pass);
#   - prefill (pp) >= 1.00x.
# Each figure is the median over the rounds. Raw outputs: OUT_DIR/raw/. Exit 0 when every row
# meets its targets, 1 when one does not, 2 on a usage error.
set -euo pipefail
if [ $# -lt 1 ]; then
  sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
out=$1
shift
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(tinyllama-1.1b)
pacer=${PACER:-$(dirname "$0")/../build/tools/pacer}
bin=${LLAMA_BIN:?set LLAMA_BIN to a llama.cpp build/bin folder}
types=${TYPES:-"f16 q8_0 q4_0 q4_k_m q5_k_m"}
threads=${THREADS:-1,2}
rounds=${ROUNDS:-2}
reps=${REPS:-3}
prompt=${PROMPT:-64}
gen=${GEN:-32}
depth=()
[ -z "${DEPTH:-}" ] || depth=(-d "$DEPTH")
read -r -a pacer_args <<<"${PACER_ARGS:-}"
read -r -a llama_args <<<"${LLAMA_ARGS---mmap 0}"
read -r -a batched_args <<<"${BATCHED_ARGS---no-mmap}"
for tool in "$pacer" "$bin/llama-bench" "$bin/llama-quantize"; do
  [ -x "$tool" ] || { echo "speed-vs-llamacpp: $tool: not found or not executable" >&2; exit 2; }
done
# llama.cpp's side at a depth: llama-bench -d where it has it, else llama-batched-bench.
llama_runner=run_llama
if [ -n "${DEPTH:-}" ]; then
  [[ $DEPTH =~ ^[0-9]+$ ]] || { echo "speed-vs-llamacpp: DEPTH=$DEPTH: one depth (a number)" >&2; exit 2; }
  help=$("$bin/llama-bench" --help 2>&1 || true)
  if [[ $help != *n-depth* ]]; then
    [ -x "$bin/llama-batched-bench" ] || {
      echo "speed-vs-llamacpp: DEPTH: $bin/llama-bench has no -d and $bin/llama-batched-bench is missing" >&2
      exit 2
    }
    llama_runner=run_llama_batched
    prompt=0
  fi
fi
mkdir -p "$out/raw"
rows=$out/rows.tsv
: >"$rows"

# One markdown table of either tool -> "threads<TAB>test<TAB>t/s<TAB>roof %<TAB>ceiling t/s"
# lines, columns found by their header names (llama-bench's columns vary between versions).
# pacer's roofline cell: "84% of 61.9 t/s (39.0 GB/s); reps ..." (% and ceiling), "n/a (...)"
# (weights fit the LLC: "na") or "-" (prefill). llama.cpp has none ("-").
table_rows() {
  awk -F'|' '
    function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
    /^\|/ {
      if (!have) {
        for (i = 2; i < NF; ++i) col[trim($i)] = i
        have = ("threads" in col) && ("test" in col) && ("t/s" in col)
        next
      }
      if ($2 ~ /^[ :-]+$/) next
      split(trim($(col["t/s"])), ts, " ")
      pct = "-"; ceil = "-"
      if ("roofline" in col) {
        roof = trim($(col["roofline"]))
        if (roof ~ /^n\/a/) { pct = "na"; ceil = "na" }
        else if (match(roof, /^[0-9.]+% of [0-9.]+ t\/s/)) {
          split(substr(roof, 1, RLENGTH), w, " ")
          pct = w[1]; sub(/%/, "", pct); ceil = w[3]
        }
      }
      printf "%s\t%s\t%s\t%s\t%s\n", trim($(col["threads"])), trim($(col["test"])), ts[1], pct, ceil
    }'
}

run_pacer() {
  "$pacer" bench -m "$1" -p "$prompt" -n "$gen" -t "$threads" -r "$reps" "${depth[@]}" "${pacer_args[@]}" -o md
}
run_llama() {
  "$bin/llama-bench" -m "$1" -p "$prompt" -n "$gen" -t "$threads" -r "$reps" "${depth[@]}" \
    "${llama_args[@]}" -o md
}

# llama-batched-bench's table (columns PP, TG, B, N_KV, T_PP s, S_PP t/s, T_TG s, S_TG t/s, ...)
# as a llama-bench-like table: one "tgGEN @ dDEPTH" row per thread count, t/s = S_TG t/s.
run_llama_batched() {
  local t out
  echo "| threads | test | t/s |"
  echo "|--:|---|--:|"
  for t in ${threads//,/ }; do
    out=$("$bin/llama-batched-bench" -m "$1" -c $((DEPTH + gen + 16)) -npp "$DEPTH" -ntg "$gen" \
      -npl 1 -t "$t" "${batched_args[@]}" 2>&1) || { echo "$out" >&2; return 1; }
    awk -F'|' -v th="$t" -v test="tg$gen @ d$DEPTH" '
      function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
      /^\|/ && !have { for (i = 2; i < NF; ++i) col[trim($i)] = i; have = "S_TG t/s" in col; next }
      have && /^\|/ && trim($2) ~ /^[0-9]+$/ { printf "| %s | %s | %s |\n", th, test, trim($(col["S_TG t/s"])); found = 1 }
      END { exit !found }' <<<"$out" || { echo "$out" >&2; echo "speed-vs-llamacpp: no S_TG t/s in llama-batched-bench output" >&2; return 1; }
  done
}

for preset in "${presets[@]}"; do
  f16=$out/$preset-f16.gguf
  [ -s "$f16" ] || "$pacer" gguf synth --arch "$preset" --type f16 -o "$f16" >/dev/null
  for t in $types; do
    model=$out/$preset-$t.gguf
    if [ "$t" != f16 ] && [ ! -s "$model" ]; then
      "$bin/llama-quantize" "$f16" "$model" "${t^^}" >"$out/raw/$preset-$t-quantize.log" 2>&1 ||
        { echo "speed-vs-llamacpp: llama-quantize $t failed: $out/raw/$preset-$t-quantize.log" >&2; exit 1; }
    fi
    for ((r = 1; r <= rounds; ++r)); do
      order=(pacer llama)
      [ $((r % 2)) -eq 1 ] || order=(llama pacer)
      for tool in "${order[@]}"; do
        raw=$out/raw/$preset-$t-r$r-$tool.md
        runner=run_pacer
        [ "$tool" = pacer ] || runner=$llama_runner
        "$runner" "$model" >"$raw" 2>"$raw.err" ||
          { echo "speed-vs-llamacpp: $tool bench failed on $model: $raw.err" >&2; exit 1; }
        table_rows <"$raw" | sed "s|^|$preset-$t\t$tool\t$r\t|" >>"$rows"
        echo "  $preset-$t round $r $tool done" >&2
      done
    done
  done
done

# rows.tsv: file, tool, round, threads, test, t/s, roof %, ceiling t/s.
awk -F'\t' '
  function median(list,    n, a, i, j, t) {
    n = split(list, a, ",")
    for (i = 2; i <= n; ++i) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; --j) {
      t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
    }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function add(arr, k, v,    had) { had = k in arr; arr[k] = had ? arr[k] "," v : v }
  function show(list, fmt_,    n, a, i, s) {
    n = split(list, a, ",")
    for (i = 1; i <= n; ++i) s = s (i > 1 ? ", " : "") (a[i] ~ /^[0-9.]+$/ ? sprintf(fmt_, a[i]) : a[i])
    return s
  }
  {
    k = $1 SUBSEP $4 SUBSEP $5
    if (!(k in seen)) { seen[k] = 1; order[++n] = k }
    key[k, $2, $3] = $6
    if ($2 == "pacer") { pct[k, $3] = $7; ceil[k, $3] = $8 }
    if ($3 > maxr) maxr = $3
  }
  END {
    print "| file | threads | test | pacer t/s | llama.cpp t/s | pacer / llama.cpp | pacer % roof | llama.cpp % roof | target | met |"
    print "|---|--:|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= n; ++i) {
      k = order[i]; split(k, p, SUBSEP)
      pt = ""; lt = ""; ratio = ""; pr = ""; lr = ""; fits = 0; missing = 0
      for (r = 1; r <= maxr; ++r) {
        if (!((k, "pacer", r) in key) || !((k, "llama", r) in key)) { missing = 1; continue }
        a = key[k, "pacer", r]; b = key[k, "llama", r]
        add(T, i "p", a); add(T, i "l", b); add(T, i "x", a / b)
        if (pct[k, r] == "na") fits = 1
        else if (pct[k, r] != "-") { add(T, i "pr", pct[k, r]); add(T, i "lr", 100 * b / ceil[k, r]) }
      }
      if (!((i "x") in T)) { printf "| %s | %s | %s | missing in one tool | | | | | | no |\n", p[1], p[2], p[3]; bad++; continue }
      x = median(T[i "x"]); tg = p[3] ~ /^tg/
      need = 1.0; roofed = tg && ((i "pr") in T)
      if (roofed && median(T[i "lr"]) < 85) need = 1.10
      ok = x >= need && !missing; why = ""
      if (x < need) why = sprintf("%.2fx < %.2fx", x, need)
      if (roofed) {
        m = median(T[i "pr"])
        if (m > 100) { ok = 0; why = why (why ? "; " : "") sprintf("%.0f%% roof: probe under-read", m) }
        else if (m < 90) { ok = 0; why = why (why ? "; " : "") sprintf("%.0f%% < 90%% roof", m) }
      }
      if (missing) why = why (why ? "; " : "") "a round is missing"
      target = sprintf(">= %.2fx", need) (roofed ? ", >= 90% roof" : tg && fits ? " (fits the LLC)" : "")
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], p[3],
             show(T[i "p"], "%.2f"), show(T[i "l"], "%.2f"), show(T[i "x"], "%.2f"),
             roofed ? show(T[i "pr"], "%.0f") : "-", roofed ? show(T[i "lr"], "%.0f") : "-",
             target, ok ? "yes" : "no: " why
      if (!ok) bad++
    }
    printf "\n%d of %d rows meet their targets (medians over %d round%s).\n", n - bad, n, maxr, maxr == 1 ? "" : "s"
    exit bad > 0
  }' "$rows"
