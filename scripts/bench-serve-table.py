"""Prints internal/servebench's JSON lines (stdin) as a table; with
--compare N, moonlm's throughput and p99 time to first token against
llama-server's at N clients."""
import json
import sys

rows = [json.loads(line) for line in sys.stdin if line.strip()]
if len(sys.argv) == 3 and sys.argv[1] == "--compare":
    n = int(sys.argv[2])
    at = {r["name"]: r for r in rows if r["clients"] == n}
    a, b = at.get("moonlm"), at.get("llama-server")
    if not a or not b or not b["tokens_per_s"] or not b["ttft_p99_ms"]:
        print(f"no comparison at {n} clients")
        sys.exit(0)
    print(f"at {n} clients: moonlm {a['tokens_per_s']:.1f} tok/s, llama-server {b['tokens_per_s']:.1f} tok/s "
          f"({a['tokens_per_s'] / b['tokens_per_s']:.2f}x); p99 time to first token {a['ttft_p99_ms']:.0f} ms "
          f"vs {b['ttft_p99_ms']:.0f} ms ({a['ttft_p99_ms'] / b['ttft_p99_ms']:.2f}x)")
    sys.exit(0)
print(f"{'server':<13}{'clients':>7}{'requests':>9}{'failed':>7}{'tokens':>8}{'tok/s':>9}"
      f"{'ttft p50':>10}{'ttft p99':>10}{'itl p50':>9}{'itl p99':>9}{'lat p99':>9}")
for r in rows:
    print(f"{r['name']:<13}{r['clients']:>7}{r['requests']:>9}{r['failed']:>7}{r['tokens']:>8}{r['tokens_per_s']:>9.1f}"
          f"{r['ttft_p50_ms']:>8.0f}ms{r['ttft_p99_ms']:>8.0f}ms{r['itl_p50_ms']:>7.1f}ms{r['itl_p99_ms']:>7.1f}ms"
          f"{r['latency_p99_s']:>8.2f}s")
