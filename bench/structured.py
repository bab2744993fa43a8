#!/usr/bin/env python3
"""bench/structured: the cost of structured decoding. One streaming chat request at a time
against `hone serve`: with a json_schema response_format (greedy, so every rep writes the
same JSON), then without one for exactly as many tokens (ignore_eos). Decode tokens/s of
each is (tokens - 1) / (last token - first token), so prefill and the grammar's one-off
compile stay out of it; the first constrained request (which builds the vocabulary trie) is
a warm-up. The two runs of a rep go back to back, in alternating order, so a neighbour's
load hits both; the ratio is the median of the reps' ratios, and 1 / the median inter-token
interval gives a second, load-robust rate. Prints JSON with the machine, the commit, the median and spread
of both, and the ratio (target: constrained >= 0.9 x unconstrained).

  bench/structured.py [-m MODEL] [--hone BIN] [-t THREADS] [--reps N] [--clients N]

Without -m: SmolLM2-135M-Instruct Q4_1 (tools/find_smollm2.py). Traffic stays on 127.0.0.1."""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SRC, "tools"))
import serve as bench_serve  # noqa: E402  (start_server, stop_server, machine, git_commit)

SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 40},
    "year": {"type": "integer"},
    "genre": {"enum": ["drama", "comedy", "thriller", "documentary"]},
    "cast": {"type": "array", "items": {"type": "string", "maxLength": 24}, "minItems": 6, "maxItems": 6},
    "rating": {"type": "number"}},
    "required": ["title", "year", "genre", "cast", "rating"], "additionalProperties": False}
PROMPT = "Describe a film as JSON: its title, year, genre, six cast members and a rating."


def stream_chat(port, body):
    """-> (completion_tokens, t_first_token, t_last_token, text, chunk times)."""
    body = dict(body, stream=True, stream_options={"include_usage": True},
                messages=[{"role": "user", "content": PROMPT}], temperature=0)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:300]))
    first = last = None
    usage, parts, times = None, [], []
    for raw in r:
        line = raw.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        j = json.loads(line[6:])
        if j.get("usage"):
            usage = j["usage"]
        for ch in j.get("choices", []):
            piece = ch.get("delta", {}).get("content")
            if piece:
                now = time.perf_counter()
                first = first or now
                last = now
                parts.append(piece)
                times.append(now)
    c.close()
    return usage["completion_tokens"], first, last, "".join(parts), times


def itl_rate(times):
    gaps = [b - a for a, b in zip(times, times[1:])]
    return 1.0 / statistics.median(gaps) if gaps else float("nan")


def rate(n, first, last):
    return (n - 1) / (last - first) if last and first and last > first else float("nan")


def concurrent(port, clients, body):
    """clients requests at once; -> aggregate decode tokens/s and the replies."""
    res = [None] * clients

    def go(i):
        res[i] = stream_chat(port, dict(body, seed=i))

    ths = [threading.Thread(target=go, args=(i,)) for i in range(clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    first = min(r[1] for r in res)
    last = max(r[2] for r in res)
    return sum(r[0] - 1 for r in res) / (last - first), res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model")
    ap.add_argument("--hone", default=os.environ.get("HONE_BIN") or os.path.join(SRC, "build", "hone"))
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--clients", type=int, default=1)
    a = ap.parse_args()
    model = a.model
    if not model:
        from find_smollm2 import find_smollm2
        model = find_smollm2()
    mach = bench_serve.machine()
    proc, port, logname = bench_serve.start_server(a.hone, model, a.threads, max(a.clients, 1), 1024)
    fmt = {"type": "json_schema", "json_schema": {"name": "film", "schema": SCHEMA, "strict": True}}
    out = {"bench": "structured", "machine": mach, "model": os.path.basename(model),
           "threads": a.threads or os.cpu_count(), "reps": a.reps, "clients": a.clients}
    try:
        out["commit"] = bench_serve.git_commit()
        n, _, _, text, _ = stream_chat(port, {"max_tokens": 400, "response_format": fmt})  # warm-up: the trie
        json.loads(text)
        out["constrained_tokens"] = n
        with_s, without_s, ratios, itl_w, itl_wo, valid = [], [], [], [], [], 0
        for _ in range(a.reps):
            if a.clients == 1:
                # the pair's order alternates, so that a trend in the neighbours' load favours neither
                plain_first = len(with_s) % 2 == 1
                if plain_first:
                    m, f2, l2, _, two = stream_chat(port, {"max_tokens": out["constrained_tokens"], "ignore_eos": True})
                n, f, l, text, tw = stream_chat(port, {"max_tokens": 400, "response_format": fmt})
                if not plain_first:
                    m, f2, l2, _, two = stream_chat(port, {"max_tokens": n, "ignore_eos": True})
                with_s.append(rate(n, f, l))
                itl_w.append(itl_rate(tw))
                texts = [text]
                without_s.append(rate(m, f2, l2))
                itl_wo.append(itl_rate(two))
            else:
                r1, res = concurrent(port, a.clients, {"max_tokens": 400, "response_format": fmt,
                                                       "temperature": 0.8})
                with_s.append(r1)
                texts = [r[3] for r in res]
                r2, _ = concurrent(port, a.clients, {"max_tokens": max(r[0] for r in res), "ignore_eos": True})
                without_s.append(r2)
            ratios.append(with_s[-1] / without_s[-1])
            for t in texts:
                try:
                    json.loads(t)
                    valid += 1
                except ValueError:
                    pass
        med_w, med_wo = statistics.median(with_s), statistics.median(without_s)
        out.update({
            "json_schema_tok_s_median": round(med_w, 1), "json_schema_tok_s_runs": [round(x, 1) for x in with_s],
            "plain_tok_s_median": round(med_wo, 1), "plain_tok_s_runs": [round(x, 1) for x in without_s],
            "ratio_median_of_pairs": round(statistics.median(ratios), 3),
            "ratio_runs": [round(x, 3) for x in ratios], "target_ratio": 0.9,
            "target_met": statistics.median(ratios) >= 0.9,
            "outputs_parsed": valid, "outputs": a.reps * a.clients})
        if itl_w:
            out["json_schema_tok_s_from_median_itl"] = round(statistics.median(itl_w), 1)
            out["plain_tok_s_from_median_itl"] = round(statistics.median(itl_wo), 1)
            out["ratio_from_median_itl"] = round(statistics.median(itl_w) / statistics.median(itl_wo), 3)
        out["machine"]["load_avg_1m_after"] = os.getloadavg()[0]
    finally:
        bench_serve.stop_server(proc, logname)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
