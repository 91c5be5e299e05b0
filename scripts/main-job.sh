#!/usr/bin/env bash
# What ./run.sh runs after the build. Kept separate so it can be re-run without rebuilding.
set -euo pipefail
cd "$(dirname "$0")/.."
pacer=build/tools/pacer
models=${PACER_CACHE_DIR:-.cache}/models
mkdir -p "$models"
model=$models/qwen2.5-0.5b-q8_0.gguf
if [ ! -f "$model" ]; then
  echo "== generating the default model: $model" >&2
  "$pacer" gguf synth --arch qwen2.5-0.5b --type q8_0 --seed 1 -o "$model.tmp"
  mv "$model.tmp" "$model"
fi
echo "== pacer gguf inspect $model"
"$pacer" gguf inspect "$model"
