#!/usr/bin/env python3
"""Long context (issue 18): the served context is the model's trained one; admission refuses a
prompt + max_tokens that cannot fit (HTTP 400, OpenAI's shape, code context_length_exceeded)
before any work, an unset max_tokens is the room left; /metrics reports the KV pool in bytes
and the request limit; `hone info` reports the KV memory and `hone generate` refuses an
oversized request before it opens a backend. Every expected figure comes from the GGUF's
metadata (tests/reference/reference.py reads it), none is written here."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

from reference import ReferenceModel  # noqa: E402

LONG = os.path.join(sl.DATA, "tiny-llama-long-f32.gguf")
GEMMA = os.path.join(sl.DATA, "tiny-gemma3-f32.gguf")


def ctx_of(path):
    r = ReferenceModel(path)
    return r, int(r._field(f"{r.arch}.context_length"))


def token_bytes(r):
    return 2 * 4 * r.n_layer * r.n_kv * r.head_dim


def prompt_tokens(s, prompt):
    st, j = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0})
    assert st == 200, (st, j)
    return j["usage"]["prompt_tokens"]


def is_ctx_error(st, j):
    return (st == 400 and isinstance(j, dict) and j.get("error", {}).get("code") == "context_length_exceeded"
            and j["error"].get("type") == "invalid_request_error" and j["error"].get("message"))


def test_admission_and_metrics(t):
    r, ctx = ctx_of(sl.TINY)
    tb = token_bytes(r)
    with Server(sl.TINY, "--no-profile") as s:
        m = s.metrics()
        t.check(m.get("hone_context_length") == ctx, "context %r, trained %d" % (m.get("hone_context_length"), ctx))
        t.check(m.get("hone_kv_cache_token_bytes") == tb, "token bytes %r, GGUF says %d" % (m.get("hone_kv_cache_token_bytes"), tb))
        pool = m["hone_kv_cache_blocks"] * m["hone_kv_cache_block_tokens"]
        t.check(m.get("hone_kv_cache_bytes") == pool * tb, "pool bytes %r != %r tokens x %d" % (m.get("hone_kv_cache_bytes"), pool, tb))
        t.check(pool >= 2 * ctx, "pool %d tokens < 2 contexts of %d" % (pool, ctx))
        t.check(m.get("hone_request_tokens_max") == min(ctx, pool), "request max %r" % m.get("hone_request_tokens_max"))
        p = prompt_tokens(s, "Once upon a time")
        room = ctx - p
        # prompt + max_tokens one over the context: 400 before any work (no tokens generated)
        gen0 = s.metrics()["hone_generated_tokens_total"]
        for path, body, param in (
                ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": room + 1}, "prompt"),
                ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": room + 1, "stream": True}, "prompt")):
            st, j = s.post(path, body)
            t.check(is_ctx_error(st, j), "%s max_tokens %d: %r %r" % (path, room + 1, st, j))
            t.check(isinstance(j, dict) and j.get("error", {}).get("param") == param, "param %r" % (j,))
            t.check(isinstance(j, dict) and str(p + room + 1) in j["error"]["message"], "message names the total: %r" % (j,))
        t.check(s.metrics()["hone_generated_tokens_total"] == gen0, "a refused request generated tokens")
        # exactly the context: served to the end
        st, j = s.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": room, "temperature": 0,
                                           "ignore_eos": True})
        t.check(st == 200 and j["usage"]["completion_tokens"] == room and j["choices"][0]["finish_reason"] == "length",
                "max_tokens = room %d: %r" % (room, (st, j.get("usage") if isinstance(j, dict) else j)))
        m = s.metrics()
        used = m["hone_kv_cache_blocks_used"] * m["hone_kv_cache_block_tokens"] * tb
        t.check(m.get("hone_kv_cache_bytes_used") == used, "bytes used %r != %r" % (m.get("hone_kv_cache_bytes_used"), used))
        t.check(0 <= used <= m["hone_kv_cache_bytes"], "bytes used %r of %r" % (used, m["hone_kv_cache_bytes"]))
        # chat without max_tokens: the room left; completions without: the default cap (16)
        st, j = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "temperature": 0,
                                                "ignore_eos": True})
        t.check(st == 200 and j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] == ctx,
                "chat unset max_tokens fills the context: %r" % (j.get("usage") if isinstance(j, dict) else j,))
        st, j = s.post("/v1/completions", {"prompt": "Once upon a time", "temperature": 0, "ignore_eos": True})
        t.check(st == 200 and j["usage"]["completion_tokens"] == 16, "completions' default cap: %r" % (j,))
        st, j = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": ctx})
        t.check(is_ctx_error(st, j) and j["error"]["param"] == "messages", "chat max_tokens = context: %r %r" % (st, j))


def test_trained_context_default(t):
    r, ctx = ctx_of(LONG)
    t.check(ctx > 4096, "the long tiny model's context is %d" % ctx)
    with Server(LONG, "--no-profile") as s:
        m = s.metrics()
        t.check(m.get("hone_context_length") == ctx, "served context %r, trained %d" % (m.get("hone_context_length"), ctx))
        t.check(m.get("hone_kv_cache_bytes") >= 2 * ctx * token_bytes(r), "pool %r" % m.get("hone_kv_cache_bytes"))
        t.check(re.search(r"ctx %d," % ctx, s.log_text()) is not None, "the start line names ctx %d" % ctx)
    with Server(LONG, "--no-profile", "--ctx", "1000") as s:
        t.check(s.metrics().get("hone_context_length") == 1000, "--ctx 1000 is served")


def run(*args):
    p = subprocess.run([sl.BIN, *args], capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def test_info(t):
    for path in (LONG, GEMMA):
        r, ctx = ctx_of(path)
        rc, out, err = run("info", "-m", path)
        t.check(rc == 0, "info rc %d: %s" % (rc, err))
        tb = token_bytes(r)
        t.check("kv cache      %d bytes per token" % tb in out, "%s: bytes per token %d in %r" % (path, tb, out))
        t.check("%.1f MiB at the full context (%d tokens)" % (tb * ctx / 2 ** 20, ctx) in out, "%s: full-context MiB" % path)
        m = re.search(r"serve pool    (\d+) tokens \(([\d.]+) MiB\) for a (\d+)-token context", out)
        t.check(m and int(m.group(1)) >= 2 * int(m.group(3)) and abs(float(m.group(2)) - int(m.group(1)) * tb / 2 ** 20) < 0.1,
                "%s: serve pool line %r" % (path, m and m.group(0)))
        wins = [r.layer_window(L) for L in range(r.n_layer)]
        if any(wins):
            swa = sum(min(w, ctx) if w else ctx for w in wins) * tb // r.n_layer
            want = "sliding window: %d of %d layers see %d keys; a SWA-aware cache would need %.1f MiB" % (
                sum(1 for w in wins if w), r.n_layer, max(wins), swa / 2 ** 20)
            t.check(want in out, "%s: %r in %r" % (path, want, out))
        else:
            t.check("sliding window" not in out, "%s: no windows, no SWA line" % path)
    t.check(any(ReferenceModel(GEMMA).layer_window(L) for L in range(7)), "tiny Gemma 3 has windowed layers")


def test_generate_refuses_before_the_backend(t):
    r, ctx = ctx_of(sl.TINY)
    ids = "1,17,300"
    rc, out, err = run("generate", "-m", sl.TINY, "--prompt-tokens", ids, "-n", str(ctx - 3), "-t", "1")
    t.check(rc == 0, "prompt + -n = the context runs: rc %d %s" % (rc, err[-300:]))
    # one more: refused; with --device cuda too, so no backend was tried (CPU-only: no CUDA error)
    for dev in ("cpu", "cuda"):
        rc, out, err = run("generate", "-m", sl.TINY, "--prompt-tokens", ids, "-n", str(ctx - 2), "--device", dev)
        t.check(rc != 0 and "context length exceeded" in err and "cuda" not in err.lower().replace("--device", ""),
                "%s: prompt + -n over the context: rc %d %r" % (dev, rc, err))
    # hone logits plans the same way: prompt + the steps' fed tokens at most the context
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "l.bin")
        rc, _, err = run("logits", "-m", sl.TINY, "--prompt-tokens", ids, "--steps", str(ctx - 2), "--out", out)
        t.check(rc == 0 and os.path.getsize(out) > 0, "logits filling the context: rc %d %s" % (rc, err[-300:]))
        rc, _, err = run("logits", "-m", sl.TINY, "--prompt-tokens", ids, "--steps", str(ctx - 1), "--out", out)
        t.check(rc != 0 and "context length exceeded" in err, "logits past the context: rc %d %r" % (rc, err))


if __name__ == "__main__":
    for p in (sl.TINY, LONG, GEMMA):
        if not os.path.exists(p):
            print("missing %s (run the make_testdata test)" % p, file=sys.stderr)
            sys.exit(sl.SKIP)
    sys.exit(sl.Checks().run([test_admission_and_metrics, test_trained_context_default, test_info,
                              test_generate_refuses_before_the_backend]))
