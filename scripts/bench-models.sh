#!/usr/bin/env bash
# Writes the synthetic benchmark models (random weights, Llama-3.2-1B shape,
# Llama 3 tokenizer) into a cache folder, once, and prints their paths.
#   scripts/bench-models.sh [MOONLM_CLI]
# The folder is $MOONLM_BENCH_DIR, by default build/bench of this checkout; a
# model already in the folder older versions used,
# ${XDG_CACHE_HOME:-~/.cache}/moonlm/bench, is used from there (read only).
# The tokenizer comes from the shared test data
# ($MOONLM_TESTDATA/vocab/ggml-vocab-llama3.gguf).
# With MOONLM_BENCH_MOE=1 it also writes (and prints the path of) the
# mixture-of-experts model: OLMoE-1B-7B-shaped, Q4_K_M, about 4 GB, with
# the GPT-2 vocabulary padded to OLMoE's 50304 rows, into
# $MOONLM_BENCH_MOE_DIR (default: the same folder).
set -euo pipefail
cli=${1:-build/moonlm}
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${MOONLM_BENCH_DIR:-$repo/build/bench}
old=${XDG_CACHE_HOME:-$HOME/.cache}/moonlm/bench
testdata=${MOONLM_TESTDATA:-../shared/testdata}
vocab=$testdata/vocab/ggml-vocab-llama3.gguf
mkdir -p "$dir"
for t in q8_0 q4_k_m; do
  name=$(echo "$t" | tr a-z A-Z)
  out=$dir/bench-llama-1b.$name.gguf
  if [ ! -s "$out" ] && [ -s "$old/bench-llama-1b.$name.gguf" ]; then
    echo "$old/bench-llama-1b.$name.gguf"
    continue
  fi
  if [ ! -s "$out" ]; then
    if [ ! -f "$vocab" ]; then
      echo "bench-models.sh: $vocab not found (set MOONLM_TESTDATA)" >&2
      exit 1
    fi
    "$cli" make-bench-model --vocab "$vocab" --type "$t" -o "$out" >&2
  fi
  echo "$out"
done
if [ "${MOONLM_BENCH_MOE:-0}" = 1 ]; then
  moedir=${MOONLM_BENCH_MOE_DIR:-$dir}
  out=$moedir/bench-olmoe-1b-7b.Q4_K_M.gguf
  if [ ! -s "$out" ]; then
    moevocab=$testdata/vocab/ggml-vocab-gpt-2.gguf
    if [ ! -f "$moevocab" ]; then
      echo "bench-models.sh: $moevocab not found (set MOONLM_TESTDATA)" >&2
      exit 1
    fi
    mkdir -p "$moedir"
    "$cli" make-bench-model --arch olmoe --vocab "$moevocab" --type q4_k_m -o "$out" >&2
  fi
  echo "$out"
fi
