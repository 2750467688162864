#!/usr/bin/env bash
# make bench-serve: a bounded load test of `moonlm serve` on loopback, and
# of llama.cpp's llama-server beside it where LLAMA_SERVER names its binary,
# with the same --parallel. For each model (SmolLM2-135M Q4_1 and the
# synthetic 1B Q4_K_M of scripts/bench-models.sh) and each server in turn,
# internal/servebench sends CLIENTS concurrent clients REQUESTS streaming
# completions each (ignore_eos, MAX_TOKENS tokens each) and prints the
# aggregate tokens/s, time to first token and inter-token latency
# percentiles; with both servers it ends with moonlm's ratios at 8 clients.
# Settings (environment): MOONLM_CLI (build/moonlm), LLAMA_SERVER (none),
# PARALLEL (8), CLIENTS (1,4,8,16), REQUESTS (2), MAX_TOKENS (64),
# THREADS (2), CTX (512 per slot), MODELS (space-separated paths).
set -euo pipefail
cd "$(dirname "$0")/.."
cli=${MOONLM_CLI:-build/moonlm}
parallel=${PARALLEL:-8}
clients=${CLIENTS:-1,4,8,16}
requests=${REQUESTS:-2}
max_tokens=${MAX_TOKENS:-64}
threads=${THREADS:-2}
ctx=${CTX:-512}
bench=build/servebench
go build -o "$bench" ./internal/servebench
if [ -n "${MODELS:-}" ]; then
  read -r -a models <<<"$MODELS"
else
  models=("$(scripts/fetch-model.sh smollm2)")
  while read -r m; do
    case $m in *Q4_K_M*) models+=("$m") ;; esac
  done < <(scripts/bench-models.sh "$cli")
fi
logs=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$logs"
}
trap cleanup EXIT

# wait_ready URL: until /health answers 200 (at most two minutes).
wait_ready() {
  for _ in $(seq 600); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "bench-serve: the server exited" >&2; return 1; }
    sleep 0.2
  done
  echo "bench-serve: $1 not ready after two minutes" >&2
  return 1
}

stop_server() {
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
}

for m in "${models[@]}"; do
  echo "== $(basename "$m"): --parallel $parallel, $requests requests per client, $max_tokens tokens each, $threads threads"
  out=$logs/$(basename "$m").jsonl
  "$cli" serve -m "$m" --port 0 --parallel "$parallel" --ctx "$ctx" -t "$threads" 2>"$logs/moonlm.log" &
  pid=$!
  url=
  for _ in $(seq 600); do
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$logs/moonlm.log")
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$logs/moonlm.log" >&2; exit 1; }
  wait_ready "$url"
  "$bench" -url "$url" -name moonlm -clients "$clients" -requests "$requests" -max-tokens "$max_tokens" -json | tee -a "$out" |
    python3 scripts/bench-serve-table.py
  stop_server
  if [ -n "${LLAMA_SERVER:-}" ]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$LLAMA_SERVER" -m "$m" --host 127.0.0.1 --port "$port" -np "$parallel" -c $((parallel * ctx)) -t "$threads" \
      >"$logs/llama.log" 2>&1 &
    pid=$!
    wait_ready "http://127.0.0.1:$port" || { tail -20 "$logs/llama.log" >&2; exit 1; }
    "$bench" -url "http://127.0.0.1:$port" -name llama-server -clients "$clients" -requests "$requests" -max-tokens "$max_tokens" -json |
      tee -a "$out" | python3 scripts/bench-serve-table.py
    stop_server
    python3 scripts/bench-serve-table.py --compare 8 <"$out"
  fi
  echo
done
