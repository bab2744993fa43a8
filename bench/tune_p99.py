#!/usr/bin/env python3
"""Client latency of `hone serve` with continuous tuning off vs on (--tune --llm none
--auto-apply): the same closed-loop greedy traffic (2 clients, 16-token completions) for a
fixed time against each; prints JSON with p50/p99/max latency, requests, failures and the
machine's load average. All traffic to 127.0.0.1; servers are killed at the end.
usage: bench/tune_p99.py [MODEL] [SECONDS]   (MODEL: SmolLM2 if found, else the tiny q8_0)"""
import json
import os
import sys
import tempfile
import threading
import time
import subprocess

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import serverlib as sl  # noqa: E402

PROMPTS = ["Once upon a time", "The quick brown fox", "Hello there", "Dear diary,",
           "Roses are red,", "The answer is", "Write a haiku about the sea", "List three colours"]


def run(model, secs, tune_args):
    lat, fails = [], 0
    lock = threading.Lock()
    with sl.Server(model, *tune_args) as s:
        sl.complete(s, "warm up", max_tokens=4)
        end = time.time() + secs

        def client(k):
            nonlocal fails
            i = k
            while time.time() < end and i < 100000:
                t0 = time.time()
                st, _ = s.post("/v1/completions", {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": 16,
                                                   "temperature": 0, "ignore_eos": True}, timeout=120)
                with lock:
                    if st == 200:
                        lat.append(time.time() - t0)
                    else:
                        fails += 1
                i += 2
        th = [threading.Thread(target=client, args=(k,)) for k in range(2)]
        for x in th:
            x.start()
        for x in th:
            x.join()
        tun = None
        if tune_args:
            st, _, body = s.request("GET", "/v1/hone/tuning")
            tun = json.loads(body)
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else None  # noqa: E731
    out = {"requests": len(lat), "failed": fails, "p50_s": q(0.50), "p99_s": q(0.99),
           "max_s": lat[-1] if lat else None}
    if tun:
        out["tuning"] = {k: tun.get(k) for k in ("state", "applied", "kept", "rolled_back")}
        out["tuning"]["candidates"] = tun.get("candidates")
    return out


def main():
    model = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else (sl.smollm2_path() or os.path.join(sl.DATA, "tiny-llama-q8_0.gguf"))
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 40
    tmp = tempfile.mkdtemp(prefix="hone-tune-p99-")
    repo = os.path.join(tmp, "repo")
    subprocess.run(["git", "init", "-q", repo], check=True)
    subprocess.run(["git", "-C", repo, "-c", "user.email=b@b", "-c", "user.name=b", "commit", "-q",
                    "--allow-empty", "-m", "base"], check=True)
    load0 = os.getloadavg()
    off = run(model, secs, [])
    on = run(model, secs, ["--tune", "--llm", "none", "--auto-apply", "--tune-budget", "3",
                           "--tune-interval", "2", "--tune-watch", "10", "--tune-spot", "2",
                           "--tune-repo", repo, "--tune-state-dir", os.path.join(tmp, "state")])
    print(json.dumps({"model": os.path.basename(model), "seconds_each": secs, "clients": 2,
                      "threads": os.environ.get("HONE_SERVE_TEST_THREADS", "1"), "cpus": os.cpu_count(),
                      "loadavg_before": load0, "loadavg_after": os.getloadavg(),
                      "tuning_off": off, "tuning_on": on}, indent=1))
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
