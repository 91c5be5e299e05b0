#!/usr/bin/env bash
# Regenerates tests/data/tokenizer/<preset>.out: the token ids that llama.cpp's own tokenizer
# gives for each text of tests/data/tokenizer/texts.inp on the vocabulary of pacer's synthetic
# preset (add_special off, parse_special off, as llama.cpp's test-tokenizer-0). The test
# tests/loader/tokenizer_vectors_test.cpp holds pacer's tokenizer to these facts.
#
# Usage: LLAMA_BIN=/path/to/llama.cpp/build/bin scripts/tokenizer-vectors-from-llamacpp.sh
# (pacer never builds or ships llama.cpp: point LLAMA_BIN at a build of your own). Run it only
# when the synthetic vocabularies or the texts change; the test names the file to regenerate.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LLAMA_BIN:?set LLAMA_BIN to a llama.cpp build/bin folder}"
PACER=${PACER:-build/tools/pacer}
DATA=tests/data/tokenizer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One file per text (texts.inp: texts separated by "\n__ggml_vocab_test__\n").
perl -e 'local $/; my $s = <STDIN>; my @t = split(/\n__ggml_vocab_test__\n/, $s, -1);
         for my $i (0..$#t) { open(my $f, ">", sprintf("%s/%03d.txt", $ARGV[0], $i)) or die;
                              print $f $t[$i]; close $f }' "$work" < "$DATA/texts.inp"
for preset in tiny tiny-qwen2 tiny-phi3; do
  "$PACER" gguf synth --arch "$preset" --type f32 -o "$work/$preset.gguf" >/dev/null
  out="$DATA/$preset.out"
  : > "$out.tmp"
  for f in "$work"/[0-9]*.txt; do
    if [ -s "$f" ]; then
      ids=$("$LLAMA_BIN/llama-tokenize" -m "$work/$preset.gguf" -f "$f" --ids --no-bos \
              --no-escape --no-parse-special --log-disable 2>/dev/null | tail -n 1)
    else
      ids="[]"  # llama-tokenize refuses an empty prompt; no text gives no token
    fi
    # "[1, 2, 3]" -> "1 2 3"
    echo "$ids" | tr -d '[],' | sed 's/^ *//' >> "$out.tmp"
  done
  mv "$out.tmp" "$out"
  echo "wrote $out ($(wc -l < "$out") texts)"
done
