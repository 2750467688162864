#!/usr/bin/env python3
"""make bench: moonlm against llama.cpp and ik_llama.cpp, interleaved.

Runs `moonlm bench` and the llama-bench binaries named by LLAMA_BENCH and
IK_BENCH (either may be unset) on the same files, one process per engine per
round, the engines taking turns within every round, and writes
OUT/results.json and OUT/results.svg (one panel per phase, each on its own
scale). Phases: prefill ppP, decode tgN at 2 and 1 threads, and decode tgN
at depth D (the context already holds D tokens: llama-bench -d, moonlm bench
-d; ik_llama.cpp's llama-bench has no -d, so its figure is derived from -p D
and -pg D,N). Every run records the load average next to its figures.

Environment: MOONLM_CLI (build/moonlm), MODELS (space-separated GGUF paths;
default: SmolLM2-135M Q4_1 and the 1B-shaped benchmark models), OUT
(build/bench), THREADS (2), ROUNDS (3), P (512), N (128), DEPTH (4096),
QUICK=1 (P=128, N=32, DEPTH=512, ROUNDS=2: minutes on a 2-core machine),
FROM_LOG (rebuild the results of an interrupted run from its standard error;
MOONLM_COMMIT then names the commit that run measured),
BENCH_LOCK (a file each run holds with flock, for machines shared with
other benchmarks), EXTRA_LLAMA / EXTRA_IK (more llama-bench arguments).
"""
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env(name, default):
    v = os.environ.get(name, "")
    return v if v != "" else default


QUICK = env("QUICK", "0") == "1"
CLI = env("MOONLM_CLI", os.path.join(ROOT, "build/moonlm"))
OUT = env("OUT", env("MOONLM_BENCH_DIR", os.path.join(ROOT, "build/bench")))
THREADS = int(env("THREADS", "2"))
ROUNDS = int(env("ROUNDS", "2" if QUICK else "3"))
P = int(env("P", "128" if QUICK else "512"))
N = int(env("N", "32" if QUICK else "128"))
DEPTH = int(env("DEPTH", "512" if QUICK else "4096"))
LOCK = env("BENCH_LOCK", "")
ENGINES = [("moonlm", CLI)]
for name, var in (("llama.cpp", "LLAMA_BENCH"), ("ik_llama.cpp", "IK_BENCH")):
    if env(var, ""):
        ENGINES.append((name, os.environ[var]))


def run(cmd, timeout=1800):
    """Runs cmd (under BENCH_LOCK when set); returns stdout, load before/after."""
    if LOCK:
        cmd = ["flock", LOCK] + cmd
    load0 = os.getloadavg()[0]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    load1 = os.getloadavg()[0]
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r.stdout, [round(load0, 2), round(load1, 2)]


def default_models():
    ms = []
    smol = os.path.join(ROOT, "build/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(smol):
        ms.append(smol)
    bench = env("MOONLM_BENCH_DIR", os.path.join(ROOT, "build/bench"))
    for f in ("bench-llama-1b.Q4_K_M.gguf", "bench-llama-1b.Q8_0.gguf"):
        p = os.path.join(bench, f)
        if os.path.exists(p):
            ms.append(p)
    return ms


def moonlm(model, threads, p, n, depth):
    out, load = run([CLI, "bench", "-m", model, "-t", str(threads), "-p", str(p), "-n", str(n),
                     "-d", str(depth), "-r", "1", "--json"])
    d = json.loads(out)
    return {"pp": d["prefill_tok_s"] if p else None, "tg": d["decode_tok_s"] if n else None,
            "allocs_per_token": d.get("allocs_per_token"), "peak_rss_bytes": d.get("peak_rss_bytes"),
            "load": load}


def llama(binary, extra, model, threads, p, n, depth, ik):
    cmd = [binary, "-m", model, "-t", str(threads), "-r", "1", "-o", "json"]
    if ik and depth:
        # No -d: decode at depth from the time of -pg D,N less that of -p D.
        cmd += ["-p", str(depth), "-n", "0", "-pg", "%d,%d" % (depth, n)]
    else:
        cmd += ["-p", str(p), "-n", str(n)]
        if depth:
            cmd += ["-d", str(depth)]
    out, load = run(cmd + extra.split())
    rows = json.loads(out)
    res = {"pp": None, "tg": None, "load": load}
    if ik and depth:
        pp = next(r for r in rows if r["n_prompt"] == depth and r["n_gen"] == 0)
        pg = next(r for r in rows if r["n_prompt"] == depth and r["n_gen"] == n)
        t_pp = depth / pp["avg_ts"]
        t_pg = (depth + n) / pg["avg_ts"]
        res["tg"] = n / (t_pg - t_pp) if t_pg > t_pp else None
        res["derived"] = "-p %d and -pg %d,%d" % (depth, depth, n)
        return res
    for r in rows:
        if r["n_prompt"] == p and r["n_gen"] == 0 and p:
            res["pp"] = r["avg_ts"]
        if r["n_prompt"] == 0 and r["n_gen"] == n and n:
            res["tg"] = r["avg_ts"]
    return res


def measure(engine, binary, model, threads, p, n, depth):
    if engine == "moonlm":
        return moonlm(model, threads, p, n, depth)
    extra = env("EXTRA_IK" if engine == "ik_llama.cpp" else "EXTRA_LLAMA", "")
    return llama(binary, extra, model, threads, p, n, depth, engine == "ik_llama.cpp")


def phases(model):
    """(name, threads, p, n, depth, key) of each phase measured on model."""
    ps = [("pp%d" % P, THREADS, P, 0, 0, "pp"),
          ("tg%d" % N, THREADS, 0, N, 0, "tg")]
    if THREADS != 1:
        ps.append(("tg%d, 1 thread" % N, 1, 0, N, 0, "tg"))
    if DEPTH and "1b" in os.path.basename(model).lower():
        ps.append(("tg%d at depth %d" % (N, DEPTH), THREADS, 0, N, DEPTH, "tg"))
    return ps


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def machine():
    cpu = re.search(r"model name\s*:\s*(.*)", read("/proc/cpuinfo"))
    caches = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    if os.path.isdir(base):
        for idx in sorted(os.listdir(base)):
            d = os.path.join(base, idx)
            lvl, typ, size = (read(os.path.join(d, f)).strip() for f in ("level", "type", "size"))
            if lvl:
                caches["L%s%s" % (lvl, {"Data": "d", "Instruction": "i"}.get(typ, ""))] = size
    flags = re.search(r"flags\s*:\s*(.*)", read("/proc/cpuinfo"))
    have = sorted(set(flags.group(1).split()) & {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                                  "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile"}) if flags else []
    out, load = run([CLI, "bench", "-m", MODELS[0], "-t", str(THREADS), "-p", "0", "-n", "1", "-r", "1",
                     "--no-warmup", "--membw", "--json"])
    bw = json.loads(out).get("mem_read_gb_s")
    return {"cpu": cpu.group(1).strip() if cpu else platform.processor(), "cores": os.cpu_count(),
            "caches": caches, "flags": have, "kernel": platform.release(),
            "mem_read_gb_s": round(bw, 1) if bw else None, "mem_read_load": load}


def cmake_flags(binary):
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(binary))), "CMakeCache.txt")
    keep = ("CMAKE_BUILD_TYPE", "GGML_NATIVE", "GGML_OPENMP", "GGML_AVX512", "GGML_CUDA", "CMAKE_C_COMPILER_VERSION")
    flags = {}
    for line in read(cache).splitlines():
        k = line.split(":", 1)[0]
        if k in keep and "=" in line:
            flags[k] = line.split("=", 1)[1]
    return flags


def versions():
    v = {}
    for name, binary in ENGINES:
        if name == "moonlm":
            c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
            dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True).stdout.strip()
            ver = subprocess.run([binary, "version"], capture_output=True, text=True).stdout.strip().splitlines()[0]
            commit = env("MOONLM_COMMIT", c.stdout.strip() + ("+changes" if dirty else ""))
            v[name] = {"commit": commit, "version": ver,
                       "build": "go build -trimpath (make cli); " + subprocess.run(
                           ["go", "version"], capture_output=True, text=True).stdout.strip()}
            continue
        r = subprocess.run([binary, "--version"], capture_output=True, text=True)
        text = (r.stdout + r.stderr).strip()
        m = re.search(r"commit ([0-9a-f]+)", text)
        commit = m.group(1) if m else ""
        if not commit:
            src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(binary))))
            g = subprocess.run(["git", "-C", src, "rev-parse", "--short=8", "HEAD"], capture_output=True, text=True)
            commit = g.stdout.strip()
        vline = next((l for l in text.splitlines() if "version" in l and "usage" not in l and "error" not in l), "")
        v[name] = {"commit": commit, "version": vline,
                   "cmake": cmake_flags(binary)}
    return v


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def svg(results, path):
    """One panel per phase, each with its own scale; bars per model and engine."""
    names = [e for e, _ in ENGINES]
    colors = {"moonlm": "#2b6cb0", "llama.cpp": "#dd6b20", "ik_llama.cpp": "#38a169"}
    panels = []
    for ph in results["phases"]:
        rows = [(m, r) for m, r in ph["models"].items() if any(r.get(e) for e in names)]
        if rows:
            panels.append((ph["name"], rows))
    pw, top = 460, 70
    bar = 14
    heights = [top + len(rows) * (len(names) * bar + 18) + 30 for _, rows in panels]
    cols = 2
    W = cols * pw + 20
    rowsH = [max(heights[i:i + cols]) for i in range(0, len(heights), cols)]
    H = 84 + sum(rowsH) + 30
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="10" y="22" font-size="15" font-weight="bold">moonlm vs llama.cpp vs ik_llama.cpp: tokens/s, higher is better</text>',
         '<text x="10" y="40">%s, %s cores, L3 %s, plain read %s GB/s; %d threads unless said; median of %d interleaved rounds</text>' % (
             esc(results["machine"]["cpu"]), results["machine"]["cores"], esc(results["machine"]["caches"].get("L3", "?")),
             results["machine"]["mem_read_gb_s"], THREADS, results.get("rounds_done", ROUNDS)),
         '<text x="10" y="56">load average during the runs %s; %s</text>' % (esc(results.get("load_range", "?")), esc(results["date"])),
         ]
    x0 = 10
    for i, (e) in enumerate(names):
        o.append('<rect x="%d" y="64" width="12" height="12" fill="%s"/><text x="%d" y="74">%s %s</text>' % (
            x0, colors.get(e, "#777"), x0 + 16, esc(e), esc(results["versions"][e]["commit"])))
        x0 += 200
    y = 84
    for r0 in range(0, len(panels), cols):
        for c, (name, rows) in enumerate(panels[r0:r0 + cols]):
            px = 10 + c * pw
            vmax = max((r.get(e) or 0) for _, r in rows for e in names) or 1
            o.append('<text x="%d" y="%d" font-weight="bold">%s</text>' % (px, y + 16, esc(name)))
            o.append('<text x="%d" y="%d" fill="#555">tokens/s, higher is better (scale of this panel: 0 to %.0f)</text>' % (px, y + 32, vmax))
            yy = y + 44
            label_w, bw = 150, pw - 150 - 70
            for m, r in rows:
                o.append('<text x="%d" y="%d">%s</text>' % (px, yy + bar * len(names) / 2 + 4, esc(short(m))))
                for e in names:
                    v = r.get(e)
                    if v:
                        w = max(1, bw * v / vmax)
                        o.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>' % (px + label_w, yy, w, bar - 2, colors.get(e, "#777")))
                        o.append('<text x="%.1f" y="%d">%s</text>' % (px + label_w + w + 4, yy + bar - 3, fmt(v)))
                    yy += bar
                yy += 18
        y += rowsH[r0 // cols]
    o.append('<text x="10" y="%d" fill="#555">%s</text>' % (H - 10, esc(results["note"])))
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def fmt(v):
    return "%.0f" % v if v >= 100 else "%.1f" % v


def short(model):
    b = os.path.basename(model)
    return {"SmolLM2-135M-Instruct.Q4_1.gguf": "SmolLM2-135M Q4_1", "bench-llama-1b.Q4_K_M.gguf": "1B-shaped Q4_K_M",
            "bench-llama-1b.Q8_0.gguf": "1B-shaped Q8_0", "gemma-3-270m-q4_k_m.gguf": "Gemma 3 270M Q4_K_M"}.get(b, b)


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


MODELS = env("MODELS", "").split() or default_models()


def main():
    if not MODELS:
        sys.exit("bench-page: no models (set MODELS or run make models bench-models)")
    os.makedirs(OUT, exist_ok=True)
    print("bench-page: %s; engines %s; rounds %d, pp%d, tg%d, depth %d" % (
        " ".join(short(m) for m in MODELS), ", ".join(e for e, _ in ENGINES), ROUNDS, P, N, DEPTH), file=sys.stderr)
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": QUICK,
               "settings": {"threads": THREADS, "rounds": ROUNDS, "p": P, "n": N, "depth": DEPTH},
               "machine": machine(), "versions": versions(), "phases": [],
               "note": "each engine in its own process per round, engines interleaved; llama-bench defaults; "
                       "ik_llama.cpp at depth from -p D and -pg D,N"}
    table = {}  # (phase, model) -> engine -> [runs]
    order = []
    for m in MODELS:
        for ph in phases(m):
            order.append((m, ph))
    if env("FROM_LOG", ""):
        from_log(env("FROM_LOG", ""), table, order)
        write(results, table, order)
        return
    for rnd in range(ROUNDS):
        if rnd:
            write(results, table, order)  # an interrupted run keeps the rounds done
        for m, (name, threads, p, n, depth, key) in order:
            for e, binary in ENGINES:
                t0 = time.time()
                try:
                    r = measure(e, binary, m, threads, p, n, depth)
                except Exception as ex:  # a failing engine leaves a gap, not a crash
                    r = {"error": str(ex)[-500:]}
                r["value"] = r.get(key)
                r["seconds"] = round(time.time() - t0, 1)
                table.setdefault((name, m), {}).setdefault(e, []).append(r)
                print("round %d %-22s %-18s %-12s %s (load %s)" % (rnd + 1, name, short(m), e,
                      fmt(r["value"]) if r.get("value") else r.get("error", "-")[:80], r.get("load")), file=sys.stderr)
    write(results, table, order)
    for ph in results["phases"]:
        for m, r in ph["models"].items():
            print("%-24s %-20s %s" % (ph["name"], m, "  ".join("%s %s" % (e, fmt(v) if v else "-") for e, v in r.items())))


def from_log(path, table, order):
    """Fills table from the progress lines of an earlier run's standard error."""
    names = {short(m): m for m, _ in order}
    phase_names = sorted({ph[0] for _, ph in order}, key=len, reverse=True)
    for line in read(path).splitlines():
        if not line.startswith("round "):
            continue
        rest = line.split(" ", 2)[2]
        name = next((p for p in phase_names if rest.startswith(p + " ")), None)
        if not name:
            continue
        rest = rest[len(name):].strip()
        model = next((sm for sm in sorted(names, key=len, reverse=True) if rest.startswith(sm + " ")), None)
        if not model:
            continue
        rest = rest[len(model):].split()
        engine, value = rest[0], rest[1]
        load = re.search(r"load \[([\d.]+), ([\d.]+)\]", line)
        try:
            v = float(value)
        except ValueError:
            v = None
        table.setdefault((name, names[model]), {}).setdefault(engine, []).append(
            {"value": v, "load": [float(load.group(1)), float(load.group(2))] if load else None})


def write(results, table, order):
    """Writes results.json and results.svg from the runs in table so far."""
    results["phases"] = []
    for name in dict.fromkeys(ph[0] for _, ph in order):
        entry = {"name": name, "models": {}}
        for m in MODELS:
            runs = table.get((name, m))
            if not runs:
                continue
            med = {e: median([r.get("value") for r in rs]) for e, rs in runs.items()}
            entry["models"][short(m)] = med
            entry.setdefault("runs", {})[short(m)] = runs
        results["phases"].append(entry)
    rounds = min((len(rs) for runs in table.values() for rs in runs.values()), default=0)
    results["rounds_done"] = rounds
    loads = [x for runs in table.values() for rs in runs.values() for r in rs for x in r.get("load") or []]
    if loads:
        results["load_range"] = "%.1f-%.1f" % (min(loads), max(loads))
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    svg(results, os.path.join(OUT, "results.svg"))
    print("wrote %s and %s" % (os.path.join(OUT, "results.json"), os.path.join(OUT, "results.svg")), file=sys.stderr)


if __name__ == "__main__":
    main()
