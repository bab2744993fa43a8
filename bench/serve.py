#!/usr/bin/env python3
"""bench/serve: `hone serve` under 1, 4 and 16 concurrent streaming clients on the CPU.
Prints JSON: per concurrency the aggregate generated tokens/s (median and spread over
--reps runs), time to first token p50/p99 and inter-token latency p50, and the 16-client
speedup over one client (target >= 4x: a step reads the weights once for all its rows).

  bench/serve.py [-m MODEL] [--hone BIN] [-t THREADS] [--clients 1,4,16] [--max-tokens N]
                 [--requests N] [--reps N]

Without -m: SmolLM2-135M-Instruct Q4_1 (tools/find_smollm2.py). Traffic stays on 127.0.0.1;
the server is started on a free port and always killed at the end."""
import argparse
import http.client
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "tools"))

TOPICS = ["a lighthouse keeper", "a clockmaker", "a lost robot", "a desert caravan", "a tiny dragon",
          "a sunken ship", "a mountain village", "a jazz pianist", "a chess prodigy", "a cartographer",
          "an old library", "a space station", "a night train", "a beekeeper", "a glassblower",
          "a storm chaser"]


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one_request(port, prompt, max_tokens):
    """Streams one completion; -> (t_start, t_first, token_times, t_end, completion_tokens)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:200]))
    first, times, usage = None, [], None
    for raw in r:
        line = raw.strip()
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            break
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]["completion_tokens"]
        if ev.get("choices") and ev["choices"][0].get("text"):
            now = time.perf_counter()
            if first is None:
                first = now
            times.append(now)
    t1 = time.perf_counter()
    c.close()
    return t0, first if first is not None else t1, times, t1, usage or 0


def run_level(port, clients, requests, max_tokens, rep):
    results, errors = [], []
    lock = threading.Lock()

    def client(i):
        for k in range(requests):
            prompt = "Story %d.%d.%d: once upon a time there was %s who" % (rep, i, k, TOPICS[(i + k) % len(TOPICS)])
            try:
                res = one_request(port, prompt, max_tokens)
                with lock:
                    results.append(res)
            except Exception as e:
                with lock:
                    errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(900)
    if errors:
        raise RuntimeError("client errors: %s" % errors[:3])
    t_begin = min(r[0] for r in results)
    t_end = max(r[3] for r in results)
    tokens = sum(r[4] for r in results)
    ttft = [r[1] - r[0] for r in results]
    itl = [b - a for r in results for a, b in zip(r[2], r[2][1:])]
    return tokens / (t_end - t_begin), ttft, itl, tokens


def start_server(hone, model, threads, max_batch, ctx, profile=False):
    """A `hone serve` on a free port of 127.0.0.1 (without the live profiler unless profile):
    -> (process, port, log path)."""
    log = tempfile.NamedTemporaryFile(prefix="hone-bench-serve-", suffix=".log", delete=False)
    cmd = [hone, "serve", "-m", model, "--port", "0", "--max-batch", str(max_batch), "--ctx", str(ctx)]
    if not profile:
        cmd.append("--no-profile")
    if threads:
        cmd += ["-t", str(threads)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 120
    while time.time() < deadline:
        with open(log.name) as f:
            m = re.search(r"listening on http://[^ ]*:(\d+)", f.read())
        if m:
            return proc, int(m.group(1)), log.name
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    with open(log.name) as f:
        raise RuntimeError("server did not start: " + f.read()[-1000:])


def stop_server(proc, logname):
    """Ends a server from start_server (terminate, then kill after 30 s) and drops its log."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    os.unlink(logname)


def git_commit():
    return subprocess.run(["git", "-C", SRC, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, timeout=10).stdout.strip() or "unknown"


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "os": platform.platform(),
            "load_avg_1m_before": os.getloadavg()[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model")
    ap.add_argument("--hone", default=os.environ.get("HONE_BIN") or os.path.join(SRC, "build", "hone"))
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests", type=int, default=1, help="requests per client per run")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=1024)
    a = ap.parse_args()
    model = a.model
    if not model:
        from find_smollm2 import find_smollm2
        model = find_smollm2()
    levels = [int(x) for x in a.clients.split(",")]
    mach = machine()
    proc, port, logname = start_server(a.hone, model, a.threads, max(levels), a.ctx)
    out = {"bench": "serve", "machine": mach, "model": os.path.basename(model), "threads": a.threads or os.cpu_count(),
           "max_tokens": a.max_tokens, "requests_per_client": a.requests, "reps": a.reps, "levels": []}
    try:
        out["commit"] = git_commit()
        one_request(port, "Warm-up: hello", 8)
        for n in levels:
            runs, ttft, itl = [], [], []
            for rep in range(a.reps):
                tps, tt, it, _ = run_level(port, n, a.requests, a.max_tokens, rep)
                runs.append(tps)
                ttft += tt
                itl += it
            out["levels"].append({
                "clients": n,
                "tok_s_median": round(statistics.median(runs), 1),
                "tok_s_min": round(min(runs), 1), "tok_s_max": round(max(runs), 1),
                "tok_s_runs": [round(x, 1) for x in runs],
                "ttft_ms_p50": round(1000 * pct(ttft, 50), 1), "ttft_ms_p99": round(1000 * pct(ttft, 99), 1),
                "itl_ms_p50": round(1000 * pct(itl, 50), 2) if itl else None,
                "itl_ms_p99": round(1000 * pct(itl, 99), 2) if itl else None,
            })
        by = {lv["clients"]: lv["tok_s_median"] for lv in out["levels"]}
        if 1 in by and 16 in by:
            out["speedup_16_vs_1"] = round(by[16] / by[1], 2)
            out["target_speedup"] = 4.0
            out["target_met"] = out["speedup_16_vs_1"] >= 4.0
        out["machine"]["load_avg_1m_after"] = os.getloadavg()[0]
    finally:
        stop_server(proc, logname)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
