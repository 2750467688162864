#!/usr/bin/env bash
# Runs moonlm bench and llama.cpp's llama-bench side by side on one GGUF
# file: interleaved rounds (ours, theirs, ours, theirs, ...), same threads,
# then medians and ratios for pp (prefill) and tg (decode), plus
#  - open to first token: wall time of a whole process that opens the model
#    and evaluates a one-token prompt (ours: moonlm bench -p 1 -n 0 -r 1
#    --no-warmup; theirs: llama-bench -p 1 -n 0 -r 1 --no-warmup), warm page
#    cache, interleaved as well;
#  - with MEMBW=1, a plain memory-read bandwidth figure and the weight bytes
#    per second each engine achieves while decoding.
#   LLAMA_BENCH=/path/to/llama-bench scripts/compare.sh MODEL.gguf
# Settings (environment): MOONLM_CLI (build/moonlm), THREADS (2), P (512),
# N (128), ROUNDS (5), MEMBW (0), LLAMA_ARGS (extra llama-bench arguments,
# e.g. "--poll 0" so its threads sleep instead of spinning on a shared
# machine). Besides medians it prints the best round of each side: on a
# machine shared with other work the best round is the least disturbed one.
set -euo pipefail
model=${1:?usage: LLAMA_BENCH=... scripts/compare.sh MODEL.gguf}
cli=${MOONLM_CLI:-build/moonlm}
lb=${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary}
threads=${THREADS:-2}
p=${P:-512}
n=${N:-128}
rounds=${ROUNDS:-5}
# The load test skips llama-bench's warm-up run: --no-warmup, or -w 0 in
# builds that spell it so (ik_llama.cpp's).
nowarm=--no-warmup
if ! "$lb" --help 2>&1 | grep -q -- --no-warmup; then nowarm="-w 0"; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }
for i in $(seq 1 "$rounds"); do
  "$cli" bench -m "$model" -t "$threads" -p "$p" -n "$n" -r 1 --json > "$tmp/ours.$i.json"
  # shellcheck disable=SC2086
  "$lb" -m "$model" -t "$threads" -p "$p" -n "$n" -r 1 ${LLAMA_ARGS:-} -o json > "$tmp/theirs.$i.json" 2>"$tmp/theirs.$i.err"
done
for i in $(seq 1 "$rounds"); do
  t0=$(now); "$cli" bench -m "$model" -t "$threads" -p 1 -n 0 -r 1 --no-warmup --json > /dev/null; t1=$(now)
  echo "$t0 $t1" > "$tmp/ours.load.$i"
  # shellcheck disable=SC2086
  t0=$(now); "$lb" -m "$model" -t "$threads" -p 1 -n 0 -r 1 $nowarm ${LLAMA_ARGS:-} -o json > /dev/null 2>&1; t1=$(now)
  echo "$t0 $t1" > "$tmp/theirs.load.$i"
done
if [ "${MEMBW:-0}" = 1 ]; then
  "$cli" bench -m "$model" -t "$threads" -p 0 -n 16 -r 1 --membw --json > "$tmp/membw.json"
fi
"$lb" --version > "$tmp/version" 2>&1 || true

python3 - "$tmp" "$rounds" "$p" "$n" "$model" "$threads" "${LLAMA_ARGS:-}" <<'PY'
import json, os, statistics, sys
tmp, rounds, p, n, model, threads, largs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
ours_pp, ours_tg, th_pp, th_tg, ours_load, th_load = [], [], [], [], [], []
ours = None
for i in range(1, rounds + 1):
    ours = json.load(open(f"{tmp}/ours.{i}.json"))
    ours_pp.append(ours["prefill_tok_s"]); ours_tg.append(ours["decode_tok_s"])
    for r in json.load(open(f"{tmp}/theirs.{i}.json")):
        if r["n_prompt"] == p and r["n_gen"] == 0: th_pp.append(r["avg_ts"])
        if r["n_prompt"] == 0 and r["n_gen"] == n: th_tg.append(r["avg_ts"])
    for name, acc in (("ours", ours_load), ("theirs", th_load)):
        t0, t1 = map(float, open(f"{tmp}/{name}.load.{i}").read().split())
        acc.append((t1 - t0) * 1e3)
med = statistics.median
def fmt(xs): return " ".join(f"{x:.1f}" for x in xs)
print(f"model {os.path.basename(model)}: {ours['file_bytes']/2**20:.1f} MiB, {ours['arch']}, kernels {ours['kernels']}, {threads} threads, {rounds} interleaved rounds")
ver = [l for l in open(tmp + '/version').read().splitlines() if l.startswith('version')]
print(f"llama.cpp: {ver[0] if ver else '?'}; llama-bench extra arguments: {largs or 'none'}")
print(f"{'test':<14}{'moonlm':>10}{'llama.cpp':>11}{'ratio':>7}{'best ours':>11}{'best theirs':>13}{'ratio':>7}   rounds (ours | theirs)")
rows = [(f"pp{p} tok/s", ours_pp, th_pp, True), (f"tg{n} tok/s", ours_tg, th_tg, True),
        ("load+1tok ms", ours_load, th_load, False)]
summary = {"model": os.path.basename(model), "threads": int(threads), "rounds": rounds}
for label, a, b, higher in rows:
    if not a or not b:
        print(f"{label:<14} missing results"); continue
    ma, mb = med(a), med(b)
    ratio = ma / mb if higher else mb / ma
    ba, bb = (max(a), max(b)) if higher else (min(a), min(b))
    bratio = ba / bb if higher else bb / ba
    print(f"{label:<14}{ma:>10.2f}{mb:>11.2f}{ratio:>7.2f}{ba:>11.2f}{bb:>13.2f}{bratio:>7.2f}   {fmt(a)} | {fmt(b)}")
    summary[label.split()[0]] = {"ours": ma, "llama_cpp": mb, "ratio": ratio, "best_ours": ba, "best_llama_cpp": bb, "best_ratio": bratio}
print("(ratio > 1: moonlm faster; for load+1tok it is llama.cpp's time over ours; best: the fastest round)")
print(f"peak RSS (ours) {ours['peak_rss_bytes']/2**20:.1f} MiB; file {ours['file_bytes']/2**20:.1f} MiB + KV {ours['kv_bytes']/2**20:.1f} MiB + 64 MiB = {(ours['file_bytes']+ours['kv_bytes'])/2**20+64:.1f} MiB; allocations per token {ours['allocs_per_token']:.3f}")
mb_path = f"{tmp}/membw.json"
if os.path.exists(mb_path):
    bw = json.load(open(mb_path))["mem_read_gb_s"]
    wb = ours["weight_bytes_per_token"]
    o, t = med(ours_tg) * wb / 1e9, med(th_tg) * wb / 1e9
    print(f"memory read {bw:.2f} GB/s; weights per token {wb/1e6:.1f} MB; decode reads {o:.2f} GB/s ours ({o/bw:.0%}), {t:.2f} GB/s llama.cpp ({t/bw:.0%})")
    summary["mem_read_gb_s"] = bw; summary["ours_weight_gb_s"] = o; summary["theirs_weight_gb_s"] = t
summary["peak_rss_bytes"] = ours["peak_rss_bytes"]; summary["allocs_per_token"] = ours["allocs_per_token"]
print("summary " + json.dumps(summary))
PY
