#!/usr/bin/env python3
"""`hone serve --speculate lookup` over HTTP: a repetitive prompt answered with speculation gives
the text of the same request without it (the request's "speculate": "none"), greedy and seeded;
/metrics counts the draft tokens and their acceptance; a bad "speculate" value is a 400. Then
`--speculate self --spec-mode distribution`: a request's "speculate": "self" with
"speculate_mode": "exact" gives plain's text; distribution mode greedy (one-hot target
distribution) gives it too, lookup and self drafts; a bad "speculate_mode" is a 400. On
SmolLM2 (a random tiny model never repeats itself, so it would draft nothing); skips without it.
Then `--draft MODEL` on the tiny llama (its 1-layer draft): "speculate": "draft" gives the text of
"none", greedy and seeded, the draft model's batch and row counters move in /metrics; a draft of
another vocabulary stops the server at start with a message naming the difference."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

PROMPT = "one two three four five six one two three four five six one two three four five six one two"


MODEL = None


def test_same_text(t):
    with Server(MODEL, "--ctx", "512", "--speculate", "lookup", "--spec-k", "4", "--no-profile") as s:
        for body in ({"temperature": 0}, {"temperature": 0.8, "seed": 7}, {"temperature": 1.0, "top_k": 20, "seed": 3}):
            req = dict(prompt=PROMPT, max_tokens=32, ignore_eos=True, **body)
            st1, spec = s.post("/v1/completions", req)
            st2, plain = s.post("/v1/completions", dict(req, speculate="none"))
            t.check(st1 == 200 and st2 == 200, "both answered (%r %r)" % (st1, st2))
            t.check(spec["choices"][0]["text"] == plain["choices"][0]["text"],
                    "the same text with and without speculation for %r" % (body,))
            t.check(spec["usage"]["completion_tokens"] == 32, "32 tokens")
        m = s.metrics()
        t.check(m["hone_spec_draft_tokens_total"] > 0, "drafts were verified")
        t.check(m["hone_spec_accepted_tokens_total"] <= m["hone_spec_draft_tokens_total"], "accepted <= drafted")
        t.check(m["hone_spec_emitted_tokens_total"] ==
                m["hone_spec_passes_total"] + m["hone_spec_accepted_tokens_total"], "emitted = passes + accepted")
        t.check(0 <= m["hone_spec_acceptance_ratio"] <= 1, "a ratio")
        st, j = s.post("/v1/completions", {"prompt": "x", "speculate": "sometimes"})
        t.check(st == 400 and j["error"]["param"] == "speculate", "bad value refused: %r" % (j,))


def test_self_and_distribution(t):
    with Server(MODEL, "--ctx", "512", "--speculate", "self", "--spec-mode", "distribution", "--spec-k", "3",
                "--self-layers", "20", "--no-profile") as s:
        cases = ((dict(temperature=0.8, seed=5, speculate_mode="exact"), "self exact, sampled"),
                 (dict(temperature=0), "self distribution, greedy"),
                 (dict(temperature=0, speculate="lookup"), "lookup distribution, greedy"))
        for body, what in cases:
            req = dict(prompt=PROMPT, max_tokens=16, ignore_eos=True, **body)
            st1, spec = s.post("/v1/completions", req)
            st2, plain = s.post("/v1/completions", dict(req, speculate="none"))
            t.check(st1 == 200 and st2 == 200, "%s: both answered (%r %r)" % (what, st1, st2))
            if st1 == 200 and st2 == 200:
                t.check(spec["choices"][0]["text"] == plain["choices"][0]["text"], "%s: plain's text" % what)
        m = s.metrics()
        t.check(m["hone_spec_draft_tokens_total"] > 0, "self drafts were verified")
        st, j = s.post("/v1/completions", {"prompt": "x", "speculate_mode": "loose"})
        t.check(st == 400 and j["error"]["param"] == "speculate_mode", "bad mode refused: %r" % (j,))


def test_draft_model(t):
    draft = os.path.join(sl.DATA, "tiny-llama-draft-f32.gguf")
    with Server(sl.TINY, "--ctx", "256", "--draft", draft, "--speculate", "none", "--spec-k", "4",
                "--no-profile") as s:
        t.check("draft model" in s.log_text(), "the draft model is announced")
        for body in ({"temperature": 0}, {"temperature": 0.8, "seed": 11}):
            req = dict(prompt=PROMPT, max_tokens=24, ignore_eos=True, **body)
            st1, spec = s.post("/v1/completions", dict(req, speculate="draft"))
            st2, plain = s.post("/v1/completions", req)  # the server's default: none
            t.check(st1 == 200 and st2 == 200, "both answered (%r %r)" % (st1, st2))
            if st1 == 200 and st2 == 200:
                t.check(spec["choices"][0]["text"] == plain["choices"][0]["text"],
                        "the draft model's text is plain's for %r" % (body,))
        m = s.metrics()
        t.check(m["hone_spec_draft_model_batches_total"] > 0, "draft model batches counted")
        t.check(m["hone_spec_draft_model_rows_total"] >= m["hone_spec_draft_model_batches_total"], "rows >= batches")
        t.check(m["hone_spec_draft_tokens_total"] > 0, "draft tokens verified")
    swap = os.path.join(sl.DATA, "tiny-llama-vocabswap-f32.gguf")
    try:
        Server(sl.TINY, "--draft", swap, "--no-profile", startup_s=30).kill()
        t.check(False, "a draft of another vocabulary was accepted")
    except RuntimeError as e:
        t.check("vocabulary" in str(e) and "token 300" in str(e), "refused naming the token: %s" % str(e)[-300:])


def main():
    global MODEL
    MODEL = sl.smollm2_path()
    if not MODEL or not os.path.isfile(sl.BIN):
        print("skipped: needs SmolLM2 (tools/find_smollm2.py) and %s" % sl.BIN, file=sys.stderr)
        return sl.SKIP
    return sl.Checks().run([test_same_text, test_self_and_distribution, test_draft_model])


if __name__ == "__main__":
    sys.exit(main())
