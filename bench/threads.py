#!/usr/bin/env python3
"""bench/threads: does the default thread count fit the CPUs the process may use, and does the
pool degrade gracefully when they are oversubscribed? Runs `hone generate` (greedy, fixed
prompt) and reads its "generated N tokens in S s (R tok/s)" line. Prints JSON:

  one_cpu:  under `taskset -c 0`, decode tok/s with the default (-t 0), with -t 1, and with
            -t <online CPUs> (what the default used to be); target: default within 10% of -t 1.
  hog:      with every CPU allowed, decode tok/s quiet and with a busy-loop process pinned to
            CPU 0; target: the hogged run keeps >= 50% of the quiet one.

  bench/threads.py [-m MODEL] [--hone BIN] [-n TOKENS] [--reps N]

Medians and min/max over --reps runs. Without -m: SmolLM2-135M-Instruct Q4_1."""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "tools"))
RATE = re.compile(r"generated (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tok/s\), \S+ \((\d+) threads\)")


def gen(hone, model, n, threads, prefix=()):
    cmd = list(prefix) + [hone, "generate", "-m", model, "-p", "The capital of France is", "-n", str(n),
                          "--device", "cpu", "-t", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = RATE.search(r.stderr + r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr[-400:]))
    return float(m.group(3)), int(m.group(4))


def summary(xs):
    return {"median_tok_s": round(statistics.median(xs), 2), "min": round(min(xs), 2),
            "max": round(max(xs), 2), "runs": [round(x, 2) for x in xs]}


def series(reps, fn):
    xs, threads = [], None
    for _ in range(reps):
        rate, threads = fn()
        xs.append(rate)
    s = summary(xs)
    s["threads"] = threads
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model")
    ap.add_argument("--hone", default=os.environ.get("HONE_BIN") or os.path.join(SRC, "build", "hone"))
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    model = a.model
    if not model:
        from find_smollm2 import find_smollm2
        model = find_smollm2()
    online = os.cpu_count() or 1
    cpu0 = ("taskset", "-c", "0")
    out = {"bench": "threads", "machine": {"cpu": platform.processor() or platform.machine(), "cores": online,
                                           "os": platform.platform(), "load_avg_1m_before": os.getloadavg()[0]},
           "model": os.path.basename(model), "tokens": a.n, "reps": a.reps}
    try:
        out["commit"] = subprocess.run(["git", "-C", SRC, "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        out["commit"] = "unknown"
    gen(a.hone, model, 4, 1)  # warm the page cache
    one = {"default": series(a.reps, lambda: gen(a.hone, model, a.n, 0, cpu0)),
           "t1": series(a.reps, lambda: gen(a.hone, model, a.n, 1, cpu0)),
           "t_online": series(a.reps, lambda: gen(a.hone, model, a.n, online, cpu0))}
    one["default_over_t1"] = round(one["default"]["median_tok_s"] / one["t1"]["median_tok_s"], 3)
    one["target_met"] = one["default_over_t1"] >= 0.9
    out["one_cpu"] = one
    quiet = series(a.reps, lambda: gen(a.hone, model, a.n, 0))
    hog = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
    try:
        busy = series(a.reps, lambda: gen(a.hone, model, a.n, 0))
    finally:
        hog.kill()
        hog.wait()
    out["hog"] = {"quiet": quiet, "hog_on_cpu0": busy,
                  "kept": round(busy["median_tok_s"] / quiet["median_tok_s"], 3)}
    out["hog"]["target_met"] = out["hog"]["kept"] >= 0.5
    out["machine"]["load_avg_1m_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
