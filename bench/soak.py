#!/usr/bin/env python3
"""bench/soak: one `hone serve` under N clients for M minutes, for what only time shows: leaks
and failures. Each client loops over a mix of requests (plain and streamed completions and
chat, prompts that share prefixes and prompts that do not, a random max_tokens, a client that
now and then hangs up mid-stream) until the time is up. Prints JSON: requests done and failed
(target 0), the server's RSS after the warm-up, at the end and its growth (target < 1%), the
slope of RSS over the post-warm-up samples, end-to-end latency median and p99, and the KV blocks
still held once the traffic has stopped (target 0).

  bench/soak.py [-m MODEL] [--hone BIN] [-t THREADS] [--clients 16] [--minutes 30]
                [--warmup-minutes W] [--max-tokens 32] [--sample-s 5] [--out FILE]

Without -m: SmolLM2-135M-Instruct Q4_1 (tools/find_smollm2.py). --minutes 3 --warmup-minutes
0.5 is a short run. Traffic stays on 127.0.0.1; the server is started on a free port (with its
live profiler, as served) and always stopped at the end."""
import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serve as sb  # noqa: E402  (bench/serve.py: server start/stop, percentiles, machine facts)

SYSTEM = ("You are a patient assistant for a museum's visitors. Answer in two sentences, "
          "plainly, and never invent opening hours.")
TOPICS = sb.TOPICS


def rss_kib(pid):
    """(VmRSS, RssAnon, RssFile) in KiB: the file part is the mapped model's pages."""
    v = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k = line.split(":")[0]
            if k in ("VmRSS", "RssAnon", "RssFile"):
                v[k] = int(line.split()[1])
    return v.get("VmRSS", 0), v.get("RssAnon", 0), v.get("RssFile", 0)


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
    finally:
        c.close()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def one(port, rng, max_tokens, i, k):
    """One request of the mix; -> None when it succeeded, else what went wrong."""
    kind = rng.choice(["completion", "completion_stream", "chat", "chat_stream", "hangup"])
    topic = TOPICS[rng.randrange(len(TOPICS))]
    n = rng.randint(1, max_tokens)
    if kind.startswith("chat"):
        path = "/v1/chat/completions"
        body = {"messages": [{"role": "system", "content": SYSTEM},
                             {"role": "user", "content": "Tell me about %s (visitor %d, question %d)." % (topic, i, k)}]}
    else:
        path = "/v1/completions"
        shared = rng.random() < 0.5  # half share a long prefix (the prefix cache), half are fresh
        body = {"prompt": ("Museum guide, page one. " * 6 if shared else "Note %d.%d: " % (i, k)) +
                "Once upon a time there was %s who" % topic}
    body.update({"max_tokens": n, "temperature": rng.choice([0, 0.8]), "seed": k})
    stream = kind.endswith("stream") or kind == "hangup"
    if stream:
        body["stream"] = True
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return "HTTP %d: %s" % (r.status, r.read()[:200])
        if not stream:
            j = json.loads(r.read())
            return None if j.get("usage", {}).get("completion_tokens", 0) >= 1 else "no tokens: %r" % j
        events = 0
        for raw in r:
            line = raw.strip()
            if line == b"data: [DONE]":
                return None
            if line.startswith(b"data: "):
                events += 1
                if kind == "hangup" and events >= 2:
                    return None  # the client leaves mid-stream: the server must cancel and free it
        return None if kind == "hangup" else "stream ended without [DONE]"
    except Exception as e:
        return repr(e)
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model")
    ap.add_argument("--hone", default=os.environ.get("HONE_BIN") or os.path.join(sb.SRC, "build", "hone"))
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup-minutes", type=float, default=None, help="default: a tenth of the run, at most 3")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--sample-s", type=float, default=5.0, help="RSS sampling period")
    ap.add_argument("--out", help="also write the JSON here")
    a = ap.parse_args()
    if a.clients < 1 or a.minutes <= 0 or a.max_tokens < 1 or a.sample_s <= 0:
        ap.error("--clients, --minutes, --max-tokens and --sample-s must be positive")
    warm = a.warmup_minutes if a.warmup_minutes is not None else min(3.0, a.minutes / 10)
    if not 0 <= warm < a.minutes:
        ap.error("--warmup-minutes must be in [0, --minutes)")
    model = a.model
    if not model:
        from find_smollm2 import find_smollm2
        model = find_smollm2()
    if not model or not os.path.isfile(model):
        print("bench/soak: no model (-m, or SmolLM2 through tools/find_smollm2.py)", file=sys.stderr)
        return 2
    mach = sb.machine()
    proc, port, logname = sb.start_server(a.hone, model, a.threads, a.clients, a.ctx, profile=True)
    out = {"bench": "soak", "machine": mach, "model": os.path.basename(model), "clients": a.clients,
           "minutes": a.minutes, "warmup_minutes": warm, "max_tokens": a.max_tokens,
           "threads": a.threads or os.cpu_count()}
    lock = threading.Lock()
    lat, errors, done = [], [], [0]
    t0 = time.time()
    t_warm, t_end = t0 + 60 * warm, t0 + 60 * a.minutes

    def client(i):
        rng = random.Random(1000 + i)
        k = 0
        while time.time() < t_end:
            s = time.perf_counter()
            err = one(port, rng, a.max_tokens, i, k)
            dt = time.perf_counter() - s
            now = time.time()
            with lock:
                done[0] += 1
                if err:
                    errors.append(err)
                elif now >= t_warm:
                    lat.append(dt)
            k += 1

    try:
        out["commit"] = sb.git_commit()
        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.clients)]
        for th in threads:
            th.start()
        full = []  # (seconds since start, VmRSS, RssAnon, RssFile) in KiB
        while time.time() < t_end and proc.poll() is None:
            full.append((round(time.time() - t0, 1),) + rss_kib(proc.pid))
            time.sleep(min(a.sample_s, max(0.0, t_end - time.time())))
        for th in threads:
            th.join(330)
        alive = proc.poll() is None
        full.append((round(time.time() - t0, 1),) + (rss_kib(proc.pid) if alive else (0, 0, 0)))
        samples = [(x[0], x[1]) for x in full]
        after = [(t, r) for t, r in samples if t >= 60 * warm]
        rss_warm, rss_end = after[0][1], after[-1][1]
        anon = [x for x in full if x[0] >= 60 * warm]
        # least-squares slope of RSS over the post-warm-up samples: a leak is a trend, not a blip
        slope = None
        if len(after) >= 3:
            mt = statistics.mean(t for t, _ in after)
            mr = statistics.mean(r for _, r in after)
            den = sum((t - mt) ** 2 for t, _ in after)
            slope = sum((t - mt) * (r - mr) for t, r in after) / den * 60 if den else None
        m = {}
        if alive:
            deadline = time.time() + 30  # hung-up streams are cancelled within a step
            while time.time() < deadline:
                m = metrics(port)
                if m.get("hone_requests_running", 1) == 0 and m.get("hone_kv_cache_blocks_active", 1) == 0:
                    break
                time.sleep(0.2)
        out.update({
            "requests": done[0], "failed": len(errors), "failures": errors[:5], "server_alive": alive,
            "rss_kib_after_warmup": rss_warm, "rss_kib_end": rss_end,
            "rss_kib_max": max(r for _, r in samples),
            "rss_anon_kib_after_warmup": anon[0][2], "rss_anon_kib_end": anon[-1][2],
            "rss_file_kib_after_warmup": anon[0][3], "rss_file_kib_end": anon[-1][3],
            "rss_growth_pct": round(100.0 * (rss_end - rss_warm) / rss_warm, 3) if rss_warm else None,
            "rss_slope_kib_per_min": round(slope, 1) if slope is not None else None,
            "rss_samples_t_rss_anon_file": full[:: max(1, len(full) // 40)],
            "latency_s_median": round(statistics.median(lat), 4) if lat else None,
            "latency_s_p99": round(sb.pct(lat, 99), 4) if lat else None,
            "requests_per_s": round(done[0] / (time.time() - t0), 2),
            "kv_blocks_active_after": m.get("hone_kv_cache_blocks_active"),
            "requests_running_after": m.get("hone_requests_running"),
            "prefix_cache_hits": m.get("hone_prefix_cache_hits_total"),
            "targets": {"failed": 0, "rss_growth_pct_below": 1.0, "kv_blocks_active_after": 0},
        })
        out["target_met"] = (out["failed"] == 0 and alive and out["rss_growth_pct"] is not None and
                             out["rss_growth_pct"] < 1.0 and out["kv_blocks_active_after"] == 0)
        out["machine"]["load_avg_1m_after"] = os.getloadavg()[0]
    finally:
        sb.stop_server(proc, logname)
    text = json.dumps(out, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
