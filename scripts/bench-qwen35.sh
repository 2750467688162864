#!/usr/bin/env bash
# Writes the Qwen3.5-0.8B-shaped benchmark model (random Q8_0 weights,
# Qwen3 tokenizer) once, then runs moonlm bench and the given llama-bench
# binaries on it side by side: ROUNDS interleaved rounds (moonlm, then each
# llama-bench in turn), every process under the lock file BENCH_LOCK when
# set, with the load average before and after each run.
#   LLAMA_BENCH=... IK_BENCH=... scripts/bench-qwen35.sh [MOONLM_CLI]
# Settings (environment): MOONLM_BENCH_DIR (build/bench-qwen35), THREADS
# (2), P (512), N (128), ROUNDS (2), R (repetitions per process, 2),
# BENCH_LOCK, LLAMA_BENCH and IK_BENCH (either may be left out). The
# tokenizer comes from the shared test data
# ($MOONLM_TESTDATA/vocab/ggml-vocab-qwen3.gguf, 151,936 tokens; the
# published model has 248,320).
set -euo pipefail
cli=${1:-build/moonlm}
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${MOONLM_BENCH_DIR:-$repo/build/bench-qwen35}
vocab=${MOONLM_TESTDATA:-../shared/testdata}/vocab/ggml-vocab-qwen3.gguf
threads=${THREADS:-2} p=${P:-512} n=${N:-128} rounds=${ROUNDS:-2} r=${R:-2}
model=$dir/bench-qwen35-0.8b.Q8_0.gguf
mkdir -p "$dir"
if [ ! -s "$model" ]; then
  if [ ! -f "$vocab" ]; then
    echo "bench-qwen35.sh: $vocab not found (set MOONLM_TESTDATA)" >&2
    exit 1
  fi
  "$cli" make-bench-model --arch qwen35 --vocab "$vocab" --type q8_0 -o "$model" >&2
fi
echo "model $model"
locked() {
  if [ -n "${BENCH_LOCK:-}" ]; then flock "$BENCH_LOCK" "$@"; else "$@"; fi
}
one() { # name, command...
  local name=$1
  shift
  echo "== $name, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$@" 2>&1 | grep -E 'pp[0-9]|tg[0-9]' || true
  echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}
export -f one
for round in $(seq "$rounds"); do
  echo "# round $round"
  locked bash -c 'one moonlm "$@"' _ "$cli" bench -m "$model" -t "$threads" -p "$p" -n "$n" -r "$r"
  for lb in ${LLAMA_BENCH:-} ${IK_BENCH:-}; do
    locked bash -c 'one "$1" "$@"' _ "$lb" -m "$model" -t "$threads" -p "$p" -n "$n" -r "$r"
  done
done
