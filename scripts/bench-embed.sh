#!/usr/bin/env bash
# Embedding speed: sentences per second for a batch of 32 texts of 64
# tokens on a bge-base-shaped encoder (hidden 768, 12 layers, random
# weights) at F16 and Q8_0: moonlm's BenchmarkEmbedBgeBase (engine/
# embed_bench_test.go, which writes the files and the texts into the bench
# directory on first use), and, where LLAMA_EMBEDDING names llama.cpp's
# llama-embedding binary, that binary on the same files, texts and
# threads (mean pooling, L2-normalized, every text in one batch). Its
# performance report is lost (its log thread is not flushed at exit), so
# its time is the process's wall time after the log line that precedes
# the decode: the decode plus printing the vectors and exiting, a slight
# overestimate.
# Settings (environment): THREADS (2), ROUNDS (5), BENCHTIME (go test
# -benchtime, 5x), MOONLM_BENCH_DIR (build/bench), MOONLM_TESTDATA (the
# shared test data, for the vocabulary).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2}
rounds=${ROUNDS:-5}
dir=${MOONLM_BENCH_DIR:-$PWD/build/bench}
export MOONLM_TESTDATA=${MOONLM_TESTDATA:-$(cd .. && pwd)/shared/testdata}
go test ./engine/ -run '^$' -bench 'EmbedBgeBase' -benchtime "${BENCHTIME:-5x}" -count "$rounds" \
  -embed-threads "$threads" -embed-bench-dir "$dir"
if [ -n "${LLAMA_EMBEDDING:-}" ]; then
  texts=$dir/embed-texts.txt
  n=$(grep -c . "$texts")
  for typ in f16 q8_0; do
    m=$dir/bge-base-$typ.gguf
    for _ in $(seq "$rounds"); do
      start=$(date +%s.%N)
      log=$("$LLAMA_EMBEDDING" -m "$m" -f "$texts" -t "$threads" -tb "$threads" -c 2048 -b 2048 -ub 2048 \
        --pooling mean --embd-normalize 2 2>&1 >/dev/null) || { echo "$log" >&2; exit 1; }
      end=$(date +%s.%N)
      # The log line before the decode, stamped M.SS.mmm.uuu after start.
      stamp=$(grep -m1 'batch_decode: n_tokens' <<<"$log" | awk '{ print $1 }')
      awk -v s="$start" -v e="$end" -v st="$stamp" -v n="$n" -v typ="$typ" 'BEGIN {
        split(st, f, "."); t0 = f[1] * 60 + f[2] + f[3] / 1e3 + f[4] / 1e6
        ms = (e - s - t0) * 1000
        printf "llama-embedding %s: %.2f sentences/s (%d texts in %.0f ms)\n", typ, n * 1000 / ms, n, ms }'
    done
  done
fi
