#!/bin/sh
# Speculative decoding benchmark: greedy decode speed of `moonlm generate`
# without and with drafting, on a code-editing and a summary prompt,
# interleaved, ROUNDS rounds; prints one line per run (take medians).
# usage: docs/bench/spec-bench.sh MOONLM_BINARY [ROUNDS]
# Models: build/models (SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M).
set -eu
BIN=$1
ROUNDS=${2:-3}
DIR=$(dirname "$0")
M=build/models
echo "# $(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for case in \
    "smollm2 code $M/SmolLM2-135M-Instruct.Q4_1.gguf spec-code.txt" \
    "smollm2 summary $M/SmolLM2-135M-Instruct.Q4_1.gguf spec-summary.txt" \
    "gemma3 code $M/gemma-3-270m-q4_k_m.gguf spec-code.gemma.txt" \
    "gemma3 summary $M/gemma-3-270m-q4_k_m.gguf spec-summary.gemma.txt"; do
    set -- $case
    for mode in plain lookup; do
      flag=""
      [ "$mode" = lookup ] && flag=--lookup
      out=$("$BIN" generate -m "$3" -f "$DIR/$4" -n 200 --temp 0 -t 2 --no-display-prompt $flag 2>&1 >/dev/null)
      tg=$(echo "$out" | sed -n 's/.*generated \([0-9]*\) tokens in \([0-9.]*\) s (\([0-9.]*\) tok\/s).*/\1 \3/p')
      acc=$(echo "$out" | sed -n 's/.*drafted \([0-9]*\) tokens, accepted \([0-9]*\).*/\1 \2/p')
      echo "$round $1 $2 $mode tokens,tok/s: $tg drafted,accepted: ${acc:--}"
    done
  done
done
echo "# end load average: $(cut -d' ' -f1-3 /proc/loadavg)"
