#!/usr/bin/env bash
# make bench: moonlm bench over SmolLM2-135M Q4_1 (scripts/fetch-model.sh)
# and the synthetic 1B benchmark models (scripts/bench-models.sh). Where
# LLAMA_BENCH names a llama.cpp llama-bench binary, each model is also run
# side by side with it (scripts/compare.sh: interleaved rounds, medians,
# ratios; memory bandwidth for the 1B models).
# Settings (environment): MOONLM_CLI (build/moonlm), THREADS (2), ROUNDS (5).
set -euo pipefail
cd "$(dirname "$0")/.."
cli=${MOONLM_CLI:-build/moonlm}
threads=${THREADS:-2}
rounds=${ROUNDS:-5}
smol=$(scripts/fetch-model.sh smollm2)
mapfile -t big < <(scripts/bench-models.sh "$cli")
for m in "$smol" "${big[@]}"; do
  echo "== $(basename "$m")"
  if [ -n "${LLAMA_BENCH:-}" ]; then
    membw=0
    [ "$m" = "$smol" ] || membw=1
    MOONLM_CLI=$cli THREADS=$threads ROUNDS=$rounds MEMBW=$membw scripts/compare.sh "$m"
  else
    "$cli" bench -m "$m" -t "$threads" -r "$rounds" --pg 512,128
  fi
  echo
done
