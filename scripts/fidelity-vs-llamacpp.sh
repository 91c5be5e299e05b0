#!/usr/bin/env bash
# Scores pacer against llama.cpp on the same GGUF files (docs/fidelity.md). Needs a llama.cpp
# build of your own (LLAMA_BIN: the folder holding llama-perplexity and llama-quantize); pacer
# never builds or ships llama.cpp.
#
#   LLAMA_BIN=~/llama.cpp/build/bin scripts/fidelity-vs-llamacpp.sh OUT_DIR TEXT [PRESET...]
#
# For each synthetic preset: pacer writes an F16 model; llama-perplexity makes the KL-divergence
# base from it; llama-quantize makes the quantized files; then pacer and llama.cpp each score
# every file against that base. Prints one table row per (preset, type).
set -euo pipefail
out=${1:?output folder}
text=${2:?text file}
shift 2
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(tiny tiny-llama3 tiny-qwen2 tiny-qwen3 tiny-gemma3 tiny-phi3)
pacer=${PACER:-$(dirname "$0")/../build/tools/pacer}
bin=${LLAMA_BIN:?set LLAMA_BIN to a llama.cpp build/bin folder}
ctx=${CTX:-128}
chunks=${CHUNKS:-8}
threads=${THREADS:-2}
types=${TYPES:-"f16 q8_0 q4_0 q4_k_m q5_k_m"}
mkdir -p "$out"

# "Mean KLD" and "Same top p" from a --kl-divergence report.
kld() { grep -E 'Mean +KLD' | awk '{print $3}'; }
top() { grep -E '^Same top p:' | awk '{print $4}'; }

printf '| model | type | pacer KLD | llama.cpp KLD | pacer same top | llama.cpp same top |\n'
printf '|---|---|---|---|---|---|\n'
for p in "${presets[@]}"; do
  f16="$out/$p-f16.gguf"
  "$pacer" gguf synth --arch "$p" --type f16 -o "$f16" >/dev/null
  base="$out/$p.kld"
  "$bin/llama-perplexity" -m "$f16" -f "$text" -c "$ctx" --chunks "$chunks" -t "$threads" \
    --kl-divergence-base "$base" >/dev/null 2>&1
  for t in $types; do
    file="$f16"
    if [ "$t" != f16 ]; then
      file="$out/$p-$t.gguf"
      "$bin/llama-quantize" "$f16" "$file" "$(echo "$t" | tr a-z A-Z)" >/dev/null 2>&1
    fi
    pr=$("$pacer" perplexity -m "$file" --kl-divergence "$base" -t "$threads" 2>/dev/null)
    lr=$("$bin/llama-perplexity" -m "$file" --kl-divergence-base "$base" --kl-divergence \
           -t "$threads" 2>&1)
    printf '| %s | %s | %s | %s | %s | %s |\n' "$p" "$t" "$(kld <<<"$pr")" "$(kld <<<"$lr")" \
      "$(top <<<"$pr")" "$(top <<<"$lr")"
  done
done
