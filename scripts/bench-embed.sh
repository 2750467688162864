#!/usr/bin/env bash
# Embedding speed: sentences per second for a batch of 32 texts of 64
# tokens on a bge-base-shaped encoder (hidden 768, 12 layers, random
# weights) at F16 and Q8_0: moonlm's BenchmarkEmbedBgeBase (engine/
# embed_bench_test.go, which writes the files and the texts into the bench
# directory on first use), and, where LLAMA_EMBEDDING names llama.cpp's
# llama-embedding binary, that binary on the same files, texts and
# threads (mean pooling, L2-normalized, every text in one batch). The
# runs are interleaved (each round runs moonlm and llama-embedding on F16,
# then on Q8_0) and the medians printed at the end, with the load average
# before and after.
# llama-embedding's performance report is lost (its log thread is not
# flushed at exit), so its time is the process's wall time after the log
# line that precedes the decode: the decode plus printing the vectors and
# exiting, a slight overestimate.
# Settings (environment): THREADS (2), ROUNDS (5), BENCHTIME (go test
# -benchtime, 5x), MOONLM_BENCH_DIR (build/bench), MOONLM_TESTDATA (the
# shared test data, for the vocabulary).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2}
rounds=${ROUNDS:-5}
dir=${MOONLM_BENCH_DIR:-$PWD/build/bench}
export MOONLM_TESTDATA=${MOONLM_TESTDATA:-$(cd .. && pwd)/shared/testdata}
bin=$(mktemp -d)/engine.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./engine/
# The files and texts, written on first use (one iteration, not counted).
(cd engine && "$bin" -test.run '^$' -test.bench 'EmbedBgeBase' -test.benchtime 1x \
  -embed-threads "$threads" -embed-bench-dir "$dir" >/dev/null)
results=$(mktemp)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for typ in f16 q8_0; do
    (cd engine && "$bin" -test.run '^$' -test.bench "EmbedBgeBase/^$typ\$" -test.benchtime "${BENCHTIME:-5x}" \
      -embed-threads "$threads" -embed-bench-dir "$dir") |
      awk -v r="$r" -v typ="$typ" '/sentences\/s/ { for (i = 1; i < NF; i++) if ($(i+1) == "sentences/s") s = $i
        printf "round %d moonlm %s: %.2f sentences/s\n", r, typ, s }' | tee -a "$results"
    if [ -n "${LLAMA_EMBEDDING:-}" ]; then
      texts=$dir/embed-texts.txt
      n=$(grep -c . "$texts")
      start=$(date +%s.%N)
      log=$("$LLAMA_EMBEDDING" -m "$dir/bge-base-$typ.gguf" -f "$texts" -t "$threads" -tb "$threads" \
        -c 2048 -b 2048 -ub 2048 --pooling mean --embd-normalize 2 2>&1 >/dev/null) || { echo "$log" >&2; exit 1; }
      end=$(date +%s.%N)
      # The log line before the decode, stamped M.SS.mmm.uuu after start.
      stamp=$(grep -m1 'batch_decode: n_tokens' <<<"$log" | awk '{ print $1 }')
      awk -v s="$start" -v e="$end" -v st="$stamp" -v n="$n" -v typ="$typ" -v r="$r" 'BEGIN {
        split(st, f, "."); t0 = f[1] * 60 + f[2] + f[3] / 1e3 + f[4] / 1e6
        ms = (e - s - t0) * 1000
        printf "round %d llama-embedding %s: %.2f sentences/s (%d texts in %.0f ms)\n", r, typ, n * 1000 / ms, n, ms }' |
        tee -a "$results"
    fi
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
for who in moonlm llama-embedding; do
  for typ in f16 q8_0; do
    grep " $who $typ:" "$results" | awk '{ print $5 }' | sort -n |
      awk -v who="$who" -v typ="$typ" '{ v[NR] = $1 } END { if (NR) printf "median %s %s: %.2f sentences/s (best %.2f, %d rounds)\n",
        who, typ, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[NR], NR }'
  done
done
rm -f "$results"
