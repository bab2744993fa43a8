#!/usr/bin/env python3
"""The OpenAI surface beyond plain text (issue 21), through the official `openai` client:
logprobs and top_logprobs (chat, completions, streaming) equal to a log-softmax of `hone logits`
at the same positions, echo's prompt logprobs (what lm-evaluation-harness scores with), n
choices (each reproducible as n=1 with seed + i, the prompt computed once and shared through
the prefix cache), presence/frequency penalties and logit_bias checked on the values,
/v1/embeddings against an independent float64 forward pass (tests/reference), /v1/models/{id}
and aliases, CORS and keep-alive. Skips (77) without the `openai` package."""
import base64
import http.client
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

sys.path.insert(0, os.path.join(sl.SRC, "tests", "reference"))
import numpy as np  # noqa: E402
from hone_logits import read_logits  # noqa: E402

try:
    import openai
except ImportError:
    openai = None

TOL = 2e-5  # the server's logprob: (double)l - logZ rounded to f32 once; here in f64


def client(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def hone_logits(model, prompt_ids, steps, all_positions=False, tokens=None):
    """`hone logits` rows: (tokens fed, {position: log_softmax row as float64})."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.bin")
        cmd = [sl.BIN, "logits", "-m", model, "-t", "1", "--prompt-tokens", ",".join(map(str, prompt_ids)),
               "--steps", str(steps), "--out", out]
        if tokens:
            cmd += ["--tokens", ",".join(map(str, tokens))]
        if all_positions:
            cmd.append("--all-positions")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        lg = read_logits(out)
    rows = {}
    for r, pos in enumerate(lg.row_pos):
        x = lg.logits[r].astype(np.float64)
        m = x.max()
        rows[int(pos)] = x - (m + math.log(np.exp(x - m).sum()))
    return [int(t) for t in lg.tokens], rows


def tokenize(model, text):
    out = subprocess.run([sl.BIN, "tokenize", "-m", model, "-p", text], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    return [int(x) for x in out.replace(",", " ").split() if x.lstrip("-").isdigit()]


def top_values(row, k):
    return sorted(np.sort(row)[::-1][:k].tolist(), reverse=True)


def check_top(t, got_values, row, k, what):
    want = top_values(row, k)
    got = sorted(got_values, reverse=True)
    # token strings can collide in a completions dict (two ids, one text): compare what is there
    ok = len(got) <= k and all(any(abs(g - w) <= TOL for w in want) for g in got) and len(got) >= 1
    t.check(ok and abs(got[0] - want[0]) <= TOL, "%s: top %r vs %r" % (what, got[:3], want[:3]))


def test_completion_logprobs_match_hone_logits(t):
    model = sl.smollm2_path()
    if not model:
        print("SmolLM2 not installed: logprob equality on the real model skipped; tiny model used",
              file=sys.stderr)
        model = sl.TINY
    prompt = [int(x) for x in tokenize(model, "The capital of France is")]
    t.check(len(prompt) >= 3, "tokenize: %r" % prompt)
    fed, rows = hone_logits(model, prompt, 6, all_positions=True)
    last = max(rows)
    gen = fed[len(prompt):] + [int(np.argmax(rows[last]))]  # the last step's token is not fed
    with Server(model, "--ctx", "512") as s:
        c = client(s)
        mid = c.models.list().data[0].id
        r = c.completions.create(model=mid, prompt=prompt, max_tokens=6, temperature=0, logprobs=5,
                                 extra_body={"ignore_eos": True})
        lp = r.choices[0].logprobs
        t.check(len(lp.token_logprobs) == 6 and len(lp.top_logprobs) == 6 and len(lp.text_offset) == 6,
                "six logprob entries: %r" % lp)
        for i in range(6):
            row = rows[len(prompt) - 1 + i]
            t.check(abs(lp.token_logprobs[i] - row[gen[i]]) <= TOL,
                    "step %d: logprob %r vs log_softmax %r" % (i, lp.token_logprobs[i], row[gen[i]]))
            check_top(t, list(lp.top_logprobs[i].values()), row, 5, "step %d" % i)
        t.check(lp.text_offset[0] == len("The capital of France is".encode()) and
                all(b >= a for a, b in zip(lp.text_offset, lp.text_offset[1:])), "text_offset")
        # echo with max_tokens 0: the prompt's logprobs, the first null (lm-eval's loglikelihood)
        e = c.completions.create(model=mid, prompt=prompt, max_tokens=0, echo=True, logprobs=1, temperature=0)
        el = e.choices[0].logprobs
        t.check(e.choices[0].text == "The capital of France is" and e.usage.completion_tokens == 0,
                "echo text %r" % e.choices[0].text)
        t.check(len(el.token_logprobs) == len(prompt) and el.token_logprobs[0] is None and
                el.top_logprobs[0] is None and el.text_offset[0] == 0, "echo entries")
        for i in range(1, len(prompt)):
            row = rows[i - 1]
            t.check(abs(el.token_logprobs[i] - row[prompt[i]]) <= TOL,
                    "prompt token %d: %r vs %r" % (i, el.token_logprobs[i], row[prompt[i]]))
            check_top(t, list(el.top_logprobs[i].values()), row, 1, "prompt %d" % i)
        # echo and generation together: prompt entries then the generated ones
        eg = c.completions.create(model=mid, prompt=prompt, max_tokens=3, echo=True, logprobs=2, temperature=0,
                                  extra_body={"ignore_eos": True})
        gl = eg.choices[0].logprobs
        t.check(len(gl.token_logprobs) == len(prompt) + 3 and
                abs(gl.token_logprobs[len(prompt)] - rows[len(prompt) - 1][gen[0]]) <= TOL and
                eg.choices[0].text.startswith("The capital of France is"), "echo + generation")
        # streaming: the same logprobs, spread over the chunks
        parts = list(c.completions.create(model=mid, prompt=prompt, max_tokens=6, temperature=0, logprobs=5,
                                          stream=True, extra_body={"ignore_eos": True}))
        streamed = [v for ch in parts for choice in ch.choices if choice.logprobs
                    for v in choice.logprobs.token_logprobs]
        t.check(len(streamed) == 6 and all(abs(a - b) <= 1e-9 for a, b in zip(streamed, lp.token_logprobs)),
                "streamed logprobs == plain: %r" % streamed)
        # chat: logprobs.content[] with token, logprob, bytes, top_logprobs
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        ch = c.chat.completions.create(model=mid, messages=msgs, max_tokens=5, temperature=0, logprobs=True,
                                       top_logprobs=3)
        content = ch.choices[0].logprobs.content
        t.check(1 <= len(content) <= 5 and all(len(x.top_logprobs) == 3 for x in content), "chat logprobs shape")
        t.check(all(x.logprob <= 0 and x.top_logprobs[0].logprob >= x.logprob - 1e-6 for x in content),
                "greedy tokens are the most likely")
        text = "".join(bytes(x.bytes).decode("utf-8", "replace") for x in content)
        t.check(text == ch.choices[0].message.content, "bytes spell the content: %r vs %r" %
                (text, ch.choices[0].message.content))
        sc = c.chat.completions.create(model=mid, messages=msgs, max_tokens=5, temperature=0, logprobs=True,
                                       top_logprobs=3, stream=True)
        slp = [x.logprob for k in sc for choice in k.choices if choice.logprobs and choice.logprobs.content
               for x in choice.logprobs.content]
        t.check(slp == [x.logprob for x in content], "streamed chat logprobs")


def test_n_choices_and_seeds(t):
    with Server(sl.TINY) as s:
        c = client(s)
        prompt = "Once upon a time there was a little model that lived in a small file on a disk"  # > 16 tokens
        base = dict(model="tiny-llama-f32", prompt=prompt, max_tokens=8, temperature=0.9,
                    extra_body={"ignore_eos": True})
        before = s.metrics().get("hone_prefix_cache_hit_tokens_total", 0)
        r = c.completions.create(n=4, seed=1000, **base)
        t.check(len(r.choices) == 4 and sorted(ch.index for ch in r.choices) == [0, 1, 2, 3], "four choices")
        after = s.metrics().get("hone_prefix_cache_hit_tokens_total", 0)
        n_prompt = r.usage.prompt_tokens
        t.check(r.usage.completion_tokens == 32 and n_prompt > 16, "usage: prompt once, 4 x 8 generated")
        t.check(after - before >= 3 * (n_prompt // 16) * 16,
                "choices 1..3 read the prompt's full blocks from the prefix cache (%d tokens)" % (after - before))
        for ch in r.choices:
            one = c.completions.create(n=1, seed=1000 + ch.index, **base)
            t.check(one.choices[0].text == ch.text, "choice %d == n=1 with seed 1000+%d" % (ch.index, ch.index))
        t.check(len({ch.text for ch in r.choices}) > 1, "different seeds, different texts")
        msgs = [{"role": "user", "content": "Tell me a story."}]
        cr = c.chat.completions.create(model="tiny-llama-f32", messages=msgs, n=3, seed=7, max_tokens=6,
                                       temperature=1.0)
        for ch in cr.choices:
            one = c.chat.completions.create(model="tiny-llama-f32", messages=msgs, seed=7 + ch.index,
                                            max_tokens=6, temperature=1.0)
            t.check(one.choices[0].message.content == ch.message.content, "chat choice %d reproduced" % ch.index)
        # streaming n = 2: each chunk names its choice; the texts add up to the plain ones
        texts = ["", ""]
        finishes = 0
        for k in c.completions.create(n=2, seed=1000, stream=True, **base):
            for ch in k.choices:
                texts[ch.index] += ch.text
                finishes += ch.finish_reason is not None
        t.check(texts == [r.choices[0].text, r.choices[1].text] and finishes == 2, "streamed n=2")
        # a batch of prompts: choices prompt-major, as OpenAI numbers them
        b = c.completions.create(model="tiny-llama-f32", prompt=["Hello", "Goodbye"], n=2, seed=5, max_tokens=4,
                                 temperature=0.8, extra_body={"ignore_eos": True})
        t.check(len(b.choices) == 4, "2 prompts x n=2")
        for ch in b.choices:
            one = c.completions.create(model="tiny-llama-f32", prompt=["Hello", "Goodbye"][ch.index // 2],
                                       seed=5 + ch.index % 2, max_tokens=4, temperature=0.8,
                                       extra_body={"ignore_eos": True})
            t.check(one.choices[0].text == ch.text, "batch choice %d" % ch.index)


def test_penalties_and_logit_bias(t):
    with Server(sl.TINY) as s:
        c = client(s)
        kw = dict(model="tiny-llama-f32", prompt="the the the the", temperature=0, logprobs=20,
                  extra_body={"ignore_eos": True})
        plain = c.completions.create(max_tokens=1, **kw)
        top = plain.choices[0].logprobs.top_logprobs[0]
        first = plain.choices[0].logprobs.tokens[0]
        t.check(first == max(top, key=top.get), "greedy picks the most likely")
        ids = tokenize(sl.TINY, first)
        t.check(len(ids) == 1, "the greedy token re-tokenizes to one id: %r" % ids)
        banned = c.completions.create(max_tokens=1, logit_bias={str(ids[0]): -100}, **kw)
        second = sorted(top, key=top.get, reverse=True)[1]
        t.check(banned.choices[0].logprobs.tokens[0] == second, "banned: the runner-up (%r)" % second)
        t.check(abs(banned.choices[0].logprobs.token_logprobs[0] - top[second]) <= 1e-6,
                "logprobs are the model's own, before the bias")
        forced_tok = sorted(top, key=top.get)[0]
        fid = tokenize(sl.TINY, forced_tok)
        if len(fid) == 1:
            forced = c.completions.create(max_tokens=3, logit_bias={str(fid[0]): 100}, **kw)
            t.check(forced.choices[0].logprobs.tokens == [forced_tok] * 3, "+100 forces the token")
        # greedy with penalties: every chosen token maximises logprob - penalty over the top 20
        for name, pen in (("presence_penalty", 1.5), ("frequency_penalty", 0.7)):
            r = c.completions.create(max_tokens=12, **{name: pen}, **kw)
            lp = r.choices[0].logprobs
            counts = {}
            for i, tok in enumerate(lp.tokens):
                def penalised(x):
                    n = counts.get(x, 0)
                    return lp.top_logprobs[i][x] - (pen * (n > 0) if name == "presence_penalty" else pen * n)
                chosen = lp.token_logprobs[i] - (pen * (counts.get(tok, 0) > 0) if name == "presence_penalty"
                                                 else pen * counts.get(tok, 0))
                best = max(penalised(x) for x in lp.top_logprobs[i])
                t.check(chosen >= best - 1e-5, "%s step %d: chosen %.5f vs best %.5f" % (name, i, chosen, best))
                counts[tok] = counts.get(tok, 0) + 1
            plain12 = c.completions.create(max_tokens=12, **kw).choices[0].logprobs.tokens
            t.check(len(set(lp.tokens)) >= len(set(plain12)), "%s: at least as varied as plain" % name)


def test_embeddings(t):
    sys.path.insert(0, os.path.join(sl.SRC, "tests", "reference"))
    from reference import ReferenceModel
    ref = ReferenceModel(sl.TINY)
    with Server(sl.TINY) as s:
        c = client(s)
        texts = ["Hello there, world", "a", "Once upon a time"]
        r = c.embeddings.create(model="tiny-llama-f32", input=texts)
        t.check(len(r.data) == 3 and [d.index for d in r.data] == [0, 1, 2], "three embeddings")
        dim = len(r.data[0].embedding)
        t.check(dim == ref.hidden([1]).shape[1], "dim %d" % dim)
        total = 0
        for d, text in zip(r.data, texts):
            v = np.array(d.embedding)
            t.check(abs(np.linalg.norm(v) - 1.0) < 1e-5, "L2-normalised")
            ids = tokenize(sl.TINY, text)
            total += len(ids)
            want = ref.hidden(ids).mean(axis=0)
            want = want / np.linalg.norm(want)
            t.check(np.abs(v - want).max() < 1e-4, "mean-pooled final hidden state (max diff %.2e)" %
                    np.abs(v - want).max())
        t.check(r.usage.prompt_tokens == total and r.usage.total_tokens == total, "usage")
        one = c.embeddings.create(model="tiny-llama-f32", input=texts[0])
        t.check(one.data[0].embedding == r.data[0].embedding, "batched == alone")
        ids = tokenize(sl.TINY, texts[2])
        tok = c.embeddings.create(model="tiny-llama-f32", input=[ids])
        t.check(tok.data[0].embedding == r.data[2].embedding, "token ids == text")
        st, body = s.post("/v1/embeddings", {"input": texts[0], "encoding_format": "base64"})
        raw = base64.b64decode(body["data"][0]["embedding"])
        floats = struct.unpack("<%df" % (len(raw) // 4), raw)
        t.check(st == 200 and list(floats) == [np.float32(x) for x in r.data[0].embedding], "base64 == float")
        lastpool = os.path.join(sl.DATA, "tiny-llama-lastpool-f32.gguf")
        if os.path.isfile(lastpool):
            with Server(lastpool) as s2:
                lr = client(s2).embeddings.create(model="tiny-llama-lastpool-f32", input=texts[0])
                lref = ReferenceModel(lastpool).hidden(tokenize(lastpool, texts[0]))[-1]
                lref = lref / np.linalg.norm(lref)
                t.check(np.abs(np.array(lr.data[0].embedding) - lref).max() < 1e-4,
                        "pooling_type 3 in the metadata: the last token's hidden state")
        else:
            t.check(False, "tools/make_tiny_model.py makes tiny-llama-lastpool-f32.gguf")
        try:
            c.embeddings.create(model="nope", input="x")
            t.check(False, "unknown model must fail")
        except openai.NotFoundError as e:
            t.check(e.body["code"] == "model_not_found", "embeddings 404")


def test_models_cors_keepalive(t):
    with Server(sl.TINY, "--model-alias", "gpt-4o-mini", "--cors-origins", "http://app.example") as s:
        c = client(s)
        ids = [m.id for m in c.models.list().data]
        t.check(ids == ["tiny-llama-f32", "gpt-4o-mini"], "models + alias: %r" % ids)
        t.check(c.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini", "retrieve alias")
        r = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                      max_tokens=2)
        t.check(r.choices[0].message.role == "assistant", "an alias serves")
        try:
            c.models.retrieve("other")
            t.check(False, "unknown model id")
        except openai.NotFoundError as e:
            t.check(e.status_code == 404 and e.body["code"] == "model_not_found", "models/{id} 404")
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        sock = None
        for method, path, body in (("GET", "/health", None), ("GET", "/v1/models", None),
                                   ("GET", "/v1/models/tiny-llama-f32", None), ("GET", "/nope", None),
                                   ("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1}),
                                   ("GET", "/metrics", None)):
            conn.request(method, path, body=json.dumps(body) if body else None,
                         headers={"Origin": "http://app.example", "Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            t.check(resp.getheader("Connection", "").lower() != "close", "%s %s keeps the connection" % (method, path))
            t.check(resp.getheader("Access-Control-Allow-Origin") == "http://app.example", "%s CORS" % path)
            t.check(sock is None or conn.sock is sock, "%s on the same socket" % path)
            sock = conn.sock
        conn.request("OPTIONS", "/v1/chat/completions", headers={
            "Origin": "http://app.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        resp = conn.getresponse()
        resp.read()
        t.check(resp.status == 204 and resp.getheader("Access-Control-Allow-Origin") == "http://app.example" and
                "POST" in resp.getheader("Access-Control-Allow-Methods", "") and
                resp.getheader("Access-Control-Allow-Headers") == "authorization, content-type" and
                resp.getheader("Access-Control-Max-Age"), "preflight")
        conn.request("GET", "/health", headers={"Origin": "http://evil.example"})
        resp = conn.getresponse()
        resp.read()
        t.check(resp.getheader("Access-Control-Allow-Origin") is None, "an origin not listed gets no CORS header")
        conn.close()
    with Server(sl.TINY, "--api-key", "k") as s:  # a preflight needs no key; the rest does
        st, h, _ = s.request("OPTIONS", "/v1/models", headers={"Origin": "http://x"})
        t.check(st == 204 and "Access-Control-Allow-Origin" not in h, "preflight without CORS configured")
        st, _, _ = s.request("GET", "/v1/models")
        t.check(st == 401, "key still required")


def main():
    if openai is None:
        print("the openai package is not installed (pip install openai): skipped", file=sys.stderr)
        return sl.SKIP
    if not os.path.isfile(sl.TINY) or not os.path.isfile(sl.BIN):
        return sl.SKIP
    return sl.Checks().run([test_completion_logprobs_match_hone_logits, test_n_choices_and_seeds,
                            test_penalties_and_logit_bias, test_embeddings, test_models_cors_keepalive])


if __name__ == "__main__":
    sys.exit(main())
