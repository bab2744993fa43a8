#!/usr/bin/env python3
"""`hone serve` end to end on a tiny model: the routes, streaming vs not, stop strings with
hold-back, seeds, usage, 16 concurrent greedy clients equal to each alone, prefix-cache hits
with identical output, preemption under a small KV cache, a corpus of bad requests, the API
key, a full queue, and request text kept out of the log. All traffic goes to 127.0.0.1."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server, chat, complete  # noqa: E402

PROMPTS = ["Once upon a time", "The quick brown fox", "In a galaxy far away", "Hello there",
           "My favourite food is", "The capital of France", "Water boils at", "A B C D E",
           "It was a dark and stormy night", "To be or not to be", "The answer is",
           "Numbers: 1, 2, 3,", "Dear diary,", "Breaking news:", "Roses are red,", "Tokens"]
LONG = ("The history of the printing press begins in the fifteenth century, when movable type "
        "changed how books were made, copied and sold across Europe; within fifty years, "
        "millions of volumes circulated among scholars, merchants and clergy, and the price of "
        "a book fell by more than half, which in turn encouraged literacy in cities and towns. ")


def text_of(j):
    c = j["choices"][0]
    return c["message"]["content"] if "message" in c else c["text"]


def streamed_text(events):
    out = []
    for e in events:
        for c in e.get("choices", []):
            d = c.get("delta")
            out.append(d.get("content") or "" if d is not None else c.get("text", ""))
    return "".join(out)


def test_routes_and_usage(t):
    with Server() as s:
        st, _, body = s.request("GET", "/health")
        t.check(st == 200 and json.loads(body)["status"] == "ok", "/health")
        st, _, body = s.request("GET", "/v1/models")
        models = json.loads(body)
        t.check(st == 200 and models["object"] == "list" and
                models["data"][0]["id"] == "tiny-llama-f32", "/v1/models: %r" % models)
        j = complete(s, "Once upon a time", max_tokens=7, ignore_eos=True)
        t.check(j["object"] == "text_completion" and j["id"].startswith("cmpl-"), "completion object")
        u = j["usage"]
        t.check(u["completion_tokens"] == 7 and j["choices"][0]["finish_reason"] == "length",
                "max_tokens reached: %r" % j)
        ids = subprocess.run([sl.BIN, "tokenize", "-m", sl.TINY, "-p", "Once upon a time"],
                             capture_output=True, text=True, timeout=60).stdout.split()
        t.check(u["prompt_tokens"] == len(ids), "prompt_tokens %d vs %d" % (u["prompt_tokens"], len(ids)))
        t.check(u["total_tokens"] == u["prompt_tokens"] + 7, "total_tokens")
        j = chat(s, "Hi", max_tokens=5, ignore_eos=True)
        t.check(j["object"] == "chat.completion" and j["choices"][0]["message"]["role"] == "assistant",
                "chat object: %r" % j)
        t.check(j["usage"]["completion_tokens"] == 5, "chat usage")
        m = s.metrics()
        t.check(m.get('hone_requests_total{route="/v1/completions",status="200"}') == 1,
                "requests by route and status")
        t.check(m["hone_generated_tokens_total"] == 12, "generated tokens %r" % m["hone_generated_tokens_total"])
        t.check(m["hone_time_to_first_token_seconds_count"] == 2, "ttft histogram")
        t.check(m["hone_inter_token_latency_seconds_count"] == 10, "itl histogram")
        t.check(m["hone_kv_cache_blocks"] > 0, "kv blocks total")
        # a route that does not exist, and a method a route does not take
        st, _, body = s.request("GET", "/v1/nothing")
        t.check(st == 404 and json.loads(body)["error"]["type"] == "invalid_request_error", "404")


def test_curl_stream(t):
    with Server() as s:
        body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                           "temperature": 0, "stream": True, "ignore_eos": True,
                           "stream_options": {"include_usage": True}})
        r = subprocess.run(["curl", "-sS", "-N", "--max-time", "30", "-H",
                            "Content-Type: application/json", "-d", body,
                            s.url + "/v1/chat/completions"], capture_output=True, text=True, timeout=60)
        lines = [x for x in r.stdout.split("\n") if x]
        t.check(r.returncode == 0 and lines and lines[-1] == "data: [DONE]", "curl stream ends in [DONE]")
        events = [json.loads(x[6:]) for x in lines[:-1]]
        t.check(events[0]["choices"][0]["delta"].get("role") == "assistant", "first chunk has the role")
        t.check(all(e["object"] == "chat.completion.chunk" for e in events), "chunk objects")
        t.check(events[-2]["choices"][0]["finish_reason"] == "length", "finish chunk")
        t.check(events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 4,
                "usage chunk: %r" % events[-1])
        r = subprocess.run(["curl", "-sS", "--max-time", "30", s.url + "/v1/models"],
                           capture_output=True, text=True, timeout=60)
        t.check(json.loads(r.stdout)["data"][0]["id"] == "tiny-llama-f32", "curl models")


def test_stream_equals_plain(t):
    with Server() as s:
        for p in PROMPTS[:4]:
            plain = complete(s, p, max_tokens=16)
            st, ev, done = s.stream("/v1/completions", {"prompt": p, "max_tokens": 16,
                                                        "temperature": 0, "stream": True})
            t.check(st == 200 and done, "stream status")
            t.check(streamed_text(ev) == text_of(plain), "stream == plain for %r" % p)
            t.check(ev[-1]["choices"][0]["finish_reason"] == plain["choices"][0]["finish_reason"],
                    "finish reasons agree")
            t.check("usage" not in ev[-1], "no usage chunk unless asked")
        body = {"messages": [{"role": "user", "content": "Tell me"}], "max_tokens": 16, "temperature": 0}
        plain = s.post("/v1/chat/completions", body)[1]
        st, ev, done = s.stream("/v1/chat/completions", dict(body, stream=True))
        t.check(streamed_text(ev) == text_of(plain), "chat stream == plain")


def pick_stop(text):
    """A 3-character ASCII window of text (a stop string likely spanning tokens), or None."""
    for i in range(4, len(text) - 3):
        w = text[i:i + 3]
        if all(c.isascii() and c.isalnum() for c in w) and text.find(w) == i:
            return w
    return None


def test_stop_strings(t):
    with Server() as s:
        n_tested = 0
        for p in PROMPTS:
            full = text_of(complete(s, p, max_tokens=24, ignore_eos=True))
            stop = pick_stop(full)
            if not stop:
                continue
            n_tested += 1
            want = full[:full.find(stop)]
            j = complete(s, p, max_tokens=24, ignore_eos=True, stop=stop)
            t.check(text_of(j) == want and j["choices"][0]["finish_reason"] == "stop",
                    "stop %r: %r vs %r" % (stop, text_of(j), want))
            j = complete(s, p, max_tokens=24, ignore_eos=True, stop=["\u00e9\u00e9nope", stop])
            t.check(text_of(j) == want, "stop array")
            st, ev, done = s.stream("/v1/completions", {"prompt": p, "max_tokens": 24, "temperature": 0,
                                                        "ignore_eos": True, "stop": [stop], "stream": True})
            got = streamed_text(ev)
            t.check(got == want and ev[-1]["choices"][0]["finish_reason"] == "stop",
                    "streamed stop %r: %r vs %r" % (stop, got, want))
            t.check(all(stop not in e["choices"][0]["text"] for e in ev), "stop text never sent")
            if n_tested == 4:
                break
        t.check(n_tested >= 2, "found stop strings to test (%d)" % n_tested)
        # a stop string that never occurs: the held-back prefix is sent at the end
        full = text_of(complete(s, PROMPTS[0], max_tokens=10, ignore_eos=True))
        j = complete(s, PROMPTS[0], max_tokens=10, ignore_eos=True, stop=full[-1] + "\u2603never")
        t.check(text_of(j) == full and j["choices"][0]["finish_reason"] == "length", "unmatched stop")


def test_seeds(t):
    with Server() as s:
        a = complete(s, "Once", max_tokens=12, temperature=1.0, seed=42, ignore_eos=True)
        b = complete(s, "Once", max_tokens=12, temperature=1.0, seed=42, ignore_eos=True)
        c = complete(s, "Once", max_tokens=12, temperature=1.0, seed=7, top_p=0.9, ignore_eos=True)
        t.check(text_of(a) == text_of(b), "same seed, same text")
        t.check(c["usage"]["completion_tokens"] == 12, "top_p sampling runs")


def run_concurrently(fn, args, timeout=120):
    results = [None] * len(args)
    errors = []

    start = threading.Barrier(len(args))

    def work(i):
        try:
            start.wait(timeout)  # every client sends at the same moment, so they overlap
            results[i] = fn(*args[i])
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(args))]
    for th in threads:
        th.start()
    deadline = time.time() + timeout
    for th in threads:
        th.join(max(0.1, deadline - time.time()))
    return results, errors


def test_concurrent_greedy(t):
    # 64 tokens a request: 16-token requests on the tiny model could finish before the other
    # clients' requests reached the server (1.14 sequences a step on a loaded CI machine)
    n = 64
    with Server() as s:
        def one(p, stream):
            if stream:
                st, ev, done = s.stream("/v1/completions", {"prompt": p, "max_tokens": n, "temperature": 0,
                                                            "stream": True, "ignore_eos": True})
                assert st == 200 and done
                return streamed_text(ev)
            return text_of(complete(s, p, max_tokens=n, ignore_eos=True))

        alone = [one(p, False) for p in PROMPTS]
        steps0 = s.metrics()
        results, errors = run_concurrently(one, [(p, i % 2 == 1) for i, p in enumerate(PROMPTS)])
        t.check(not errors, "errors: %r" % errors)
        for p, a, b in zip(PROMPTS, alone, results):
            t.check(a == b, "concurrent %r: %r vs alone %r" % (p, b, a))
        m = s.metrics()
        seqs = m["hone_batch_size_sum"] - steps0["hone_batch_size_sum"]
        steps = m["hone_batch_size_count"] - steps0["hone_batch_size_count"]
        t.check(steps > 0 and seqs / steps > 1.5, "steps batch sequences (%.2f per step)" % (seqs / max(steps, 1)))
        t.check(m["hone_generated_tokens_total"] == 2 * len(PROMPTS) * n, "all tokens generated")


def test_prefix_cache(t):
    with Server() as s, Server(sl.TINY, "--no-prefix-cache") as ref:
        p = LONG + " Question one?"
        m0 = s.metrics()
        a = complete(s, p, max_tokens=10, ignore_eos=True)
        m1 = s.metrics()
        t.check(m1["hone_prefix_cache_hits_total"] == m0["hone_prefix_cache_hits_total"], "first: no hit")
        t.check(a["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, "first: nothing cached")
        n_prompt = a["usage"]["prompt_tokens"]
        t.check(n_prompt > 64, "a long prompt (%d tokens)" % n_prompt)
        b = complete(s, p, max_tokens=10, ignore_eos=True)
        m2 = s.metrics()
        hits = m2["hone_prefix_cache_hits_total"] - m1["hone_prefix_cache_hits_total"]
        t.check(hits == (n_prompt - 1) // 16, "second: %d blocks hit" % hits)
        t.check(b["usage"]["prompt_tokens_details"]["cached_tokens"] == hits * 16, "cached_tokens")
        t.check(text_of(a) == text_of(b), "same output after a hit")
        # another question on the same long prefix, against a server without prefix caching
        q = LONG + " A different question, with a longer tail of its own?"
        c = complete(s, q, max_tokens=12, ignore_eos=True)
        m3 = s.metrics()
        t.check(m3["hone_prefix_cache_hits_total"] > m2["hone_prefix_cache_hits_total"], "shared prefix hits")
        t.check(c["usage"]["prompt_tokens_details"]["cached_tokens"] >= 64, "shared blocks reused")
        r = complete(ref, q, max_tokens=12, ignore_eos=True)
        t.check(r["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, "reference computes all")
        t.check(text_of(c) == text_of(r), "hit == recompute: %r vs %r" % (text_of(c), text_of(r)))
        # chat: the system prompt's blocks are shared between conversations
        x = chat(s, "first conversation", max_tokens=4)
        y = chat(s, "second conversation", max_tokens=4)
        t.check(y["usage"]["prompt_tokens_details"]["cached_tokens"] >= 16, "chat template prefix reused")
        t.check(x["usage"]["prompt_tokens"] > 0, "chat usage")
        m4 = s.metrics()
        t.check(m4["hone_kv_cache_blocks_active"] == 0 and m4["hone_prefix_cache_blocks"] > 0,
                "idle: blocks only in the prefix cache")


def test_preemption_keeps_output(t):
    # 17 blocks of 16 tokens: one full 256-token context fits, four long requests do not
    prompts = [LONG[:300 - 40 * i] + PROMPTS[i] for i in range(4)]
    with Server(sl.TINY, "--kv-blocks", "17", "--no-prefix-cache") as s:
        alone = [text_of(complete(s, p, max_tokens=100, ignore_eos=True)) for p in prompts]
        results, errors = run_concurrently(
            lambda p: text_of(complete(s, p, max_tokens=100, ignore_eos=True)), [(p,) for p in prompts])
        t.check(not errors, "errors: %r" % errors)
        for a, b in zip(alone, results):
            t.check(a == b, "preempted output equals alone")
        m = s.metrics()
        t.check(m["hone_preemptions_total"] > 0, "preemptions happened (%d)" % m["hone_preemptions_total"])
        t.check(m["hone_kv_cache_blocks_used"] == 0, "all blocks free at the end")


BIG = "x" * (2 << 20)
BAD = [
    # (name, path, body, status, type, code)
    ("malformed json", "/v1/completions", b'{"prompt": "hi",', 400, "invalid_request_error", "invalid_json"),
    ("empty body", "/v1/completions", b"", 400, "invalid_request_error", "invalid_json"),
    ("not an object", "/v1/completions", [1, 2], 400, "invalid_request_error", "invalid_json"),
    ("invalid utf-8", "/v1/completions", b'{"prompt": "caf\xc3\x28"}', 400, "invalid_request_error", "invalid_encoding"),
    ("lone surrogate", "/v1/completions", b'{"prompt": "a\\ud800b"}', 400, "invalid_request_error", None),
    ("missing prompt", "/v1/completions", {"max_tokens": 4}, 400, "invalid_request_error", "missing_required_parameter"),
    ("prompt number", "/v1/completions", {"prompt": 5}, 400, "invalid_request_error", "invalid_type"),
    ("prompt batch of non-ids", "/v1/completions", {"prompt": [["a"]]}, 400, "invalid_request_error", "invalid_value"),
    ("empty prompt", "/v1/completions", {"prompt": ""}, 400, "invalid_request_error", "invalid_value"),
    ("token id out of range", "/v1/completions", {"prompt": [1, 999999]}, 400, "invalid_request_error", "invalid_value"),
    ("unknown model", "/v1/completions", {"model": "gpt-9", "prompt": "hi"}, 404, "invalid_request_error", "model_not_found"),
    ("model not a string", "/v1/completions", {"model": 3, "prompt": "hi"}, 400, "invalid_request_error", "invalid_type"),
    ("negative max_tokens", "/v1/completions", {"prompt": "hi", "max_tokens": -1}, 400, "invalid_request_error", "invalid_value"),
    ("zero max_tokens", "/v1/completions", {"prompt": "hi", "max_tokens": 0}, 400, "invalid_request_error", "invalid_value"),
    ("huge max_tokens", "/v1/completions", {"prompt": "hi", "max_tokens": 10 ** 12}, 400, "invalid_request_error", "invalid_value"),
    ("fractional max_tokens", "/v1/completions", {"prompt": "hi", "max_tokens": 2.5}, 400, "invalid_request_error", "invalid_type"),
    ("string max_tokens", "/v1/completions", {"prompt": "hi", "max_tokens": "4"}, 400, "invalid_request_error", "invalid_type"),
    ("negative temperature", "/v1/completions", {"prompt": "hi", "temperature": -0.5}, 400, "invalid_request_error", "invalid_value"),
    ("temperature too high", "/v1/completions", {"prompt": "hi", "temperature": 7}, 400, "invalid_request_error", "invalid_value"),
    ("top_p zero", "/v1/completions", {"prompt": "hi", "top_p": 0}, 400, "invalid_request_error", "invalid_value"),
    ("top_p above one", "/v1/completions", {"prompt": "hi", "top_p": 1.5}, 400, "invalid_request_error", "invalid_value"),
    ("seed string", "/v1/completions", {"prompt": "hi", "seed": "x"}, 400, "invalid_request_error", "invalid_type"),
    ("n = 65", "/v1/completions", {"prompt": "hi", "n": 65}, 400, "invalid_request_error", "invalid_value"),
    ("prompts x n over 64", "/v1/completions", {"prompt": ["a", "b", "c"], "n": 30}, 400, "invalid_request_error", "invalid_value"),
    ("presence_penalty 3", "/v1/completions", {"prompt": "hi", "presence_penalty": 3}, 400, "invalid_request_error", "invalid_value"),
    ("logit_bias key", "/v1/completions", {"prompt": "hi", "logit_bias": {"x": 1}}, 400, "invalid_request_error", "invalid_value"),
    ("logit_bias 101", "/v1/completions", {"prompt": "hi", "logit_bias": {"1": 101}}, 400, "invalid_request_error", "invalid_value"),
    ("top_logprobs without logprobs", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}, 400, "invalid_request_error", "invalid_value"),
    ("echo on chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "echo": True}, 400, "invalid_request_error", "unsupported_parameter"),
    ("stop number", "/v1/completions", {"prompt": "hi", "stop": 3}, 400, "invalid_request_error", "invalid_type"),
    ("stop array of numbers", "/v1/completions", {"prompt": "hi", "stop": ["a", 1]}, 400, "invalid_request_error", "invalid_type"),
    ("five stops", "/v1/completions", {"prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}, 400, "invalid_request_error", "invalid_value"),
    ("empty stop", "/v1/completions", {"prompt": "hi", "stop": ""}, 400, "invalid_request_error", "invalid_value"),
    ("stream not bool", "/v1/completions", {"prompt": "hi", "stream": "yes"}, 400, "invalid_request_error", "invalid_type"),
    ("stream_options without stream", "/v1/completions", {"prompt": "hi", "stream_options": {"include_usage": True}}, 400, "invalid_request_error", "invalid_value"),
    ("logprobs 21", "/v1/completions", {"prompt": "hi", "logprobs": 21}, 400, "invalid_request_error", "invalid_value"),
    ("logprobs bool on completions", "/v1/completions", {"prompt": "hi", "logprobs": True}, 400, "invalid_request_error", "invalid_type"),
    ("embeddings without input", "/v1/embeddings", {"model": "x"}, 404, "invalid_request_error", "model_not_found"),
    ("embeddings missing input", "/v1/embeddings", {}, 400, "invalid_request_error", "missing_required_parameter"),
    ("embeddings bad format", "/v1/embeddings", {"input": "hi", "encoding_format": "hex"}, 400, "invalid_request_error", "invalid_value"),
    ("prompt longer than the context", "/v1/completions", {"prompt": LONG * 4}, 400, "invalid_request_error", "context_length_exceeded"),
    ("oversized body", "/v1/completions", {"prompt": BIG}, 413, "invalid_request_error", "request_too_large"),
    ("missing messages", "/v1/chat/completions", {"max_tokens": 3}, 400, "invalid_request_error", "missing_required_parameter"),
    ("messages not an array", "/v1/chat/completions", {"messages": "hi"}, 400, "invalid_request_error", "invalid_type"),
    ("empty messages", "/v1/chat/completions", {"messages": []}, 400, "invalid_request_error", "invalid_value"),
    ("bad role", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, 400, "invalid_request_error", "invalid_value"),
    ("role not a string", "/v1/chat/completions", {"messages": [{"role": 1, "content": "hi"}]}, 400, "invalid_request_error", "invalid_type"),
    ("missing content", "/v1/chat/completions", {"messages": [{"role": "user"}]}, 400, "invalid_request_error", "missing_required_parameter"),
    ("content number", "/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400, "invalid_request_error", "invalid_type"),
    ("content image part", "/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]}, 400, "invalid_request_error", "invalid_value"),
    ("message not an object", "/v1/chat/completions", {"messages": ["hi"]}, 400, "invalid_request_error", "invalid_type"),
    ("chat temperature", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "temperature": 2.5}, 400, "invalid_request_error", "invalid_value"),
    ("chat context overflow", "/v1/chat/completions", {"messages": [{"role": "user", "content": LONG * 4}]}, 400, "invalid_request_error", "context_length_exceeded"),
]


def test_bad_inputs(t):
    with Server() as s:
        for name, path, body, status, etype, code in BAD:
            st, _, raw = s.request("POST", path, body)
            try:
                err = json.loads(raw)["error"]
            except Exception:
                err = {}
            ok = (st == status and err.get("type") == etype and (code is None or err.get("code") == code)
                  and isinstance(err.get("message"), str) and "param" in err)
            t.check(ok, "%s: %d %r" % (name, st, err))
        t.check(len(BAD) >= 20, "corpus size")
        # a huge declared body is refused before it is sent
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n{")
        head = sock.recv(4096)
        sock.close()
        t.check(head.startswith(b"HTTP/1.1 413"), "huge Content-Length: %r" % head[:40])
        st, _, raw = s.request("GET", "/v1/completions")
        t.check(st == 405 and json.loads(raw)["error"]["code"] == "method_not_allowed", "GET on a POST route")
        st, _, raw = s.request("POST", "/health", b"{}")
        t.check(st == 405, "POST on a GET route")
        # still serving, and every bad request was counted by status
        st, _, raw = s.request("GET", "/health")
        t.check(st == 200, "alive after the corpus")
        t.check(complete(s, "still fine", max_tokens=3)["usage"]["completion_tokens"] >= 1, "serves after")
        m = s.metrics()
        n400 = m.get('hone_requests_total{route="/v1/completions",status="400"}', 0) + \
            m.get('hone_requests_total{route="/v1/chat/completions",status="400"}', 0) + \
            m.get('hone_requests_total{route="/v1/embeddings",status="400"}', 0)
        t.check(n400 == sum(1 for b in BAD if b[3] == 400), "400s counted (%d)" % n400)
        t.check(s.proc.poll() is None, "process alive")


def test_api_key(t):
    with Server(sl.TINY, "--api-key", "s3cret") as s:
        st, _, _ = s.request("GET", "/health")
        t.check(st == 200, "/health needs no key")
        for path in ["/v1/models", "/metrics", "/v1/hone/profile"]:
            st, _, raw = s.request("GET", path)
            t.check(st == 401 and json.loads(raw)["error"]["type"] == "authentication_error", "401 on " + path)
        st, _, raw = s.request("POST", "/v1/completions", {"prompt": "hi"},
                               headers={"Authorization": "Bearer wrong"})
        t.check(st == 401, "wrong key")
        st, _, raw = s.request("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2},
                               headers={"Authorization": "Bearer s3cret"})
        t.check(st == 200, "right key")
        st, _, raw = s.request("GET", "/v1/models", headers={"Authorization": "Bearer s3cret"})
        t.check(st == 200, "right key on models")


def test_queue_full_and_logging(t):
    with Server(sl.TINY, "--max-queue", "0") as s:
        st, _, raw = s.request("POST", "/v1/completions", {"prompt": "hi"})
        err = json.loads(raw)["error"]
        t.check(st == 503 and err["code"] == "overloaded", "503 when the queue is full: %r" % err)
    secret = "PRIVATE-PROMPT-TEXT-1234"
    with Server() as s:
        j = complete(s, secret, max_tokens=2)
        t.check(j["usage"]["completion_tokens"] >= 1, "served")
        t.check(secret not in s.log_text(), "request text not logged by default")
        t.check("/v1/completions 200" in s.wait_log("/v1/completions 200"),
                "the request is logged without its text")
    with Server(sl.TINY, "--log-requests") as s:
        complete(s, secret, max_tokens=2)
        t.check(secret in s.wait_log(secret), "--log-requests logs the text")


def test_profile(t):
    with Server(sl.TINY, "--no-profile") as s:
        st, _, raw = s.request("GET", "/v1/hone/profile")
        t.check(st == 404, "no profile when off")
    with Server(sl.TINY) as s:
        complete(s, "profile me", max_tokens=4)
        st, _, raw = s.request("GET", "/v1/hone/profile")
        if st == 404 and "not built in" in raw.decode():
            return  # a build without profiler/profile.h
        j = json.loads(raw)
        t.check(st == 200 and j["summary"]["steps"] > 0, "profile JSON")
        m = s.metrics()
        shares = [v for k, v in m.items() if k.startswith("hone_slot_time_share")]
        t.check(shares and 0.9 < sum(shares) < 1.1, "slot shares sum to 1 (%r)" % sum(shares))


def test_device_cuda(t):
    """`serve --device cuda`: without a usable GPU it exits 1 with the backend's reason; with one
    it serves (one sequence per step) and answers a completion."""
    usage = subprocess.run([sl.BIN, "serve", "--help"], capture_output=True, text=True).stdout
    t.check("--device cpu|cuda|auto" in usage, "serve --help lists --device")
    bad = subprocess.run([sl.BIN, "serve", "-m", sl.TINY, "--device", "tpu"], capture_output=True, text=True)
    t.check(bad.returncode == 2 and "--device expects cpu, cuda or auto" in bad.stderr,
            "an unknown device is a usage error (%d: %s)" % (bad.returncode, bad.stderr))
    p = subprocess.Popen([sl.BIN, "serve", "-m", sl.TINY, "--device", "cuda", "--port", "0"],
                         stderr=subprocess.PIPE, text=True)
    err, listening = "", False
    deadline = time.time() + 120
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        err += line
        if "listening on" in line:
            listening = True
            break
    if not listening:
        rc = p.wait(timeout=30)
        t.check(rc == 1, "no GPU: exit 1 (got %r)" % rc)
        t.check("hone serve: --device cuda: no usable GPU (" in err, "the backend's reason: %r" % err)
        return
    p.terminate()
    p.wait(timeout=60)
    t.check(" on cuda: " in err and "batch 1," in err, "a GPU: serves on CUDA, one sequence per step (%r)" % err)
    with Server(sl.TINY, "--device", "cuda") as s:
        r = complete(s, "Once upon a time", max_tokens=8)
        t.check(r["choices"][0]["text"] != "", "a completion on the GPU")


def main():
    if not os.path.isfile(sl.TINY) or not os.path.isfile(sl.BIN):
        print("skipped: needs %s and %s" % (sl.TINY, sl.BIN), file=sys.stderr)
        return sl.SKIP
    return sl.Checks().run([test_routes_and_usage, test_curl_stream, test_stream_equals_plain,
                            test_stop_strings, test_seeds, test_concurrent_greedy, test_prefix_cache,
                            test_preemption_keeps_output, test_bad_inputs, test_api_key,
                            test_queue_full_and_logging, test_profile, test_device_cuda])


if __name__ == "__main__":
    sys.exit(main())
