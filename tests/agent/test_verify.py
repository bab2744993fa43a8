#!/usr/bin/env python3
"""`hone verify` end to end.

1. Same function: SmolLM2 Q4_1 against its exact f32 dequantisation (tools/convert_gguf.py):
   KL 0 at every position, top-1 agreement 100%, max |dlogit| 0, p = 0, every greedy output
   identical. A tiny model against a lossy re-quantisation of itself: KL > 0, and the summary's
   figures are consistent (p = 1 - agreement, survival = (1-p)^n, the report's files written).
2. A scripted endpoint: an OpenAI-style /v1/completions (echo + logprobs, and greedy) that
   serves SmolLM2's logits from `hone logits` plus a known bias on a few tokens. The KL hone
   verify measures at each position equals the KL this test computes from the same logits and
   the bias over the same partition (the endpoint's top-k, the rest lumped), top-1 agreement
   equals the positions where the bias moves the argmax, and the first free-running divergence
   is where the biased greedy decode leaves the reference's.
3. Hone against its own server (`hone serve`, the model named from its /v1/models): KL 0 to the
   precision of the f32 logprobs the API reports (< 1e-10), top-1 agreement 100%, p = 0, every
   free-running output identical.
4. Bad input: an unreachable endpoint and a prompts file that is not JSONL are clear errors.
5. Agentic checks (tool prompts): SmolLM2's file against its own server: trigger F1 1, the same
   tools and arguments wherever both call, the same schema-valid rate; against a scripted chat
   endpoint that forwards to that server and then drops one call, corrupts one call's
   arguments and adds a call where the reference answered: tp/fp/fn/tn, precision, recall, F1,
   name and argument agreement and the schema-valid rates are exactly what the edits imply.
Exit 77 without the hone binary or SmolLM2."""
import http.server
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from hone_logits import read_logits  # noqa: E402

HONE = os.environ.get("HONE_BIN", "")
SRC = os.environ.get("HONE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.environ.get("HONE_TEST_DATA", os.path.join(SRC, "build", "testdata"))
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(cmd, timeout=900):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        print("$", " ".join(cmd), "\n", p.stdout[-3000:], p.stderr[-3000:], flush=True)
    return p


def verify(tmp, ref, cand, *extra):
    out = os.path.join(tmp, "v.json")
    p = run([HONE, "verify", "--reference", ref, "--candidate", cand, "--json", out, "--quiet", *extra])
    if p.returncode:
        return None, p
    with open(out) as f:
        return json.load(f), p


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class Model:
    """SmolLM2 through the hone CLI: ids, pieces, logits."""

    def __init__(self, path):
        import gguf
        self.path = path
        r = gguf.GGUFReader(path)
        f = r.fields["tokenizer.ggml.tokens"]
        types = r.fields["tokenizer.ggml.token_type"].contents()
        dec = byte_decoder()
        self.pieces = []
        for i, idx in enumerate(f.data):
            t = bytes(f.parts[idx]).decode()
            if types[i] in (3, 4):  # control / user-defined: their text
                self.pieces.append(t)
            else:
                self.pieces.append(bytes(dec[c] for c in t).decode("utf-8", errors="replace"))
        self.eog = {0, 2}

    def tokenize(self, text):
        p = run([HONE, "tokenize", "-m", self.path, "-p", text])
        return [int(x) for x in p.stdout.split()]

    def logits(self, ids, tmp):
        out = os.path.join(tmp, "l.bin")
        run([HONE, "logits", "-m", self.path, "-t", "2", "--prompt-tokens", ",".join(map(str, ids)), "--steps", "1",
             "--all-positions", "--out", out])
        return read_logits(out).logits.astype(np.float64)  # row j predicts token j + 1


def log_softmax(x):
    m = x.max()
    return x - (m + math.log(np.exp(x - m).sum()))


def send_json(handler, obj, status=200):
    data = json.dumps(obj).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def serve(handler_class):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def scripted_endpoint(model, bias, top_k, tmp, log):
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.path == "/v1/completions", self.path
            text = req["prompt"]
            ids = model.tokenize(text)
            if req.get("echo"):
                L = model.logits(ids, tmp) + bias
                toks, tlp, top, off, at = [], [], [], [], 0
                for j, t in enumerate(ids):
                    toks.append(model.pieces[t])
                    off.append(at)
                    at += len(model.pieces[t])
                    if j == 0:
                        tlp.append(None)
                        top.append(None)
                        continue
                    lp = log_softmax(L[j - 1])
                    tlp.append(float(lp[t]))
                    best = np.argsort(-lp, kind="stable")[:top_k]
                    top.append({model.pieces[b]: float(lp[b]) for b in best})
                log.append({"text": text, "ids": ids})
                lps = {"tokens": toks, "token_logprobs": tlp, "top_logprobs": top, "text_offset": off}
            else:
                out = []
                seq = list(ids)
                for _ in range(req["max_tokens"]):
                    nxt = int(np.argmax(model.logits(seq, tmp)[-1] + bias))
                    if nxt in model.eog:
                        break
                    out.append(nxt)
                    seq.append(nxt)
                lps = {"tokens": [model.pieces[t] for t in out]}
            send_json(self, {"object": "text_completion", "choices": [{"index": 0, "text": "".join(lps["tokens"]),
                                                                    "logprobs": lps, "finish_reason": "stop"}]})

    return serve(H)


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
                                          "parameters": {"type": "object",
                                                         "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]}},
                                                         "required": ["city"], "additionalProperties": False}}}
CALC = {"type": "function", "function": {"name": "calculate", "description": "Evaluate an arithmetic expression",
                                       "parameters": {"type": "object",
                                                      "properties": {"expression": {"enum": ["12 * 7", "1 + 1"]}},
                                                      "required": ["expression"]}}}
# the marker word in each user message tells the scripted endpoint what to do to the reply; the
# schemas are enums so that a forced call of the small model ends well
# within --tool-tokens (free strings can run on)
TOOL_PROMPTS = [("keep", "What is the weather in Paris? (keep)", "required", "call"),
                ("drop", "What is the weather in Rome? (drop)", "required", "call"),
                ("corrupt", "Compute 12 * 7 with the calculator. (corrupt)", "required", "call"),
                ("plain", "Say hello. (plain)", "none", "answer"),
                ("add", "Tell me a joke. (add)", "none", "answer"),
                ("refuse", "Say goodbye. (refuse)", "none", "answer")]


def tool_endpoint(upstream):
    """A chat endpoint that forwards to upstream (a hone server) and edits the reply by marker."""
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.path == "/v1/chat/completions", self.path
            if "(refuse)" in req["messages"][-1]["content"]:
                send_json(self, {"error": {"message": "scripted refusal", "type": "invalid_request_error"}}, 400)
                return
            req["model"] = upstream.model_id
            status, reply = upstream.post("/v1/chat/completions", req, timeout=600)
            assert status == 200, reply
            text = req["messages"][-1]["content"]
            msg = reply["choices"][0]["message"]
            if "(drop)" in text:
                msg.pop("tool_calls", None)
                msg["content"] = "I cannot check that."
            elif "(corrupt)" in text:
                msg["tool_calls"][0]["function"]["arguments"] = '{"expression": 84, "x": 1}'
            elif "(add)" in text:
                msg["tool_calls"] = [{"id": "call_x", "type": "function",
                                      "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]
            send_json(self, reply)

    return serve(H)


def tool_checks(tmp, smol, srv):
    prompts = os.path.join(tmp, "tools.jsonl")
    with open(prompts, "w") as f:
        for pid, text, choice, expect in TOOL_PROMPTS:
            f.write(json.dumps({"id": pid, "set": "tools", "messages": [{"role": "user", "content": text}],
                                "tools": [WEATHER, CALC], "tool_choice": choice, "expect": expect}) + "\n")
    r, _ = verify(tmp, smol, srv.url + "/v1", "--prompts", prompts, "--tool-tokens", "48")
    check(r is not None and "tools" in r, "verify with tool prompts: file vs its own server ran")
    if r:
        t = r["tools"]["summary"]
        by = {p["id"]: p for p in r["tools"]["prompts"]}
        check(t["prompts"] == 6 and r["summary"]["prompts"] == 0, "six tool prompts, no text prompts")
        check(t["fp"] == 0 and t["fn"] == 0 and t["f1"] == 1, f"same stack: trigger F1 1 (tp {t['tp']}, tn {t['tn']})")
        called = [pid for pid in by if by[pid]["reference"]["called"]]
        check(sorted(called) == ["corrupt", "drop", "keep"], f"tool_choice required calls, none answers ({called})")
        check(t["name_agreement"] == 1 and t["arguments_agreement"] == 1, "the same tools and arguments where both call")
        check(t["schema_valid_reference"] == t["schema_valid_candidate"] == 1,
              "forced calls' arguments valid on both sides")
        check(t["labelled"] == 6 and t["reference_vs_label"]["f1"] == 1, "the reference against the labels: F1 1")
        check(all(c["name"] in ("get_weather", "calculate") for p in by.values() for c in p["reference"]["calls"]),
              "calls name offered tools")
    # the scripted edits
    srv.model_id = json.loads(srv.request("GET", "/v1/models")[2])["data"][0]["id"]
    ep = tool_endpoint(srv)
    rep = os.path.join(tmp, "tool-report")
    r, p = verify(tmp, smol, f"http://127.0.0.1:{ep.server_address[1]}/v1", "--prompts", prompts, "--tool-tokens", "48",
                  "--model", "scripted", "--report", rep)
    ep.shutdown()
    check(r is not None, "verify file vs the scripted tool endpoint ran")
    if r:
        t = r["tools"]["summary"]
        by = {p["id"]: p for p in r["tools"]["prompts"]}
        check((t["tp"], t["fp"], t["fn"], t["tn"]) == (2, 1, 1, 1),
              f"tp 2 (keep, corrupt), fp 1 (add), fn 1 (drop), tn 1 (plain): {t['tp'], t['fp'], t['fn'], t['tn']}")
        check(abs(t["precision"] - 2 / 3) < 1e-12 and abs(t["recall"] - 2 / 3) < 1e-12 and abs(t["f1"] - 2 / 3) < 1e-12,
              f"precision, recall, F1 2/3 ({t['precision']:.4f}, {t['recall']:.4f}, {t['f1']:.4f})")
        check(t["name_agreement"] == 1 and t["arguments_agreement"] == 0.5,
              f"both call on keep and corrupt: same tools, arguments agree on keep only ({t['arguments_agreement']})")
        bad = by["corrupt"]["candidate"]["calls"][0]
        check(bad["schema_valid"] is False and "expression" in bad.get("why", ""),
              f"the corrupted arguments fail the schema, named: {bad.get('why')}")
        check(abs(t["schema_valid_candidate"] - 2 / 3) < 1e-12 and t["schema_valid_reference"] == 1,
              f"candidate's calls 2/3 schema-valid (keep, add), reference's all ({t['schema_valid_candidate']})")
        check(by["add"]["trigger_agree"] is False and by["drop"]["trigger_agree"] is False, "the edited triggers disagree")
        check(t["refused_by_candidate"] == 1 and t["refused_by_reference"] == 0 and t["prompts"] == 5 and
              by["refuse"]["candidate"].get("http_status") == 400 and "trigger_agree" not in by["refuse"],
              "a prompt the candidate refuses (400) is recorded and left out of the scores")
        lab = t["candidate_vs_label"]
        check(abs(lab["precision"] - 2 / 3) < 1e-12 and abs(lab["recall"] - 2 / 3) < 1e-12,
              "the candidate against the labels: precision and recall 2/3")
        check("tool calls" in p.stdout and "F1 0.667" in p.stdout, "the terminal table has the tool-call section")
        html = open(os.path.join(rep, "index.html")).read()
        check("<h2>Tool calls</h2>" in html and "invalid" in html, "the report page lists the calls and the invalid one")


def main():
    if not HONE or not os.access(HONE, os.X_OK):
        return 77
    found = run([sys.executable, os.path.join(SRC, "tools", "find_smollm2.py")])
    if found.returncode != 0:
        print("SmolLM2 not installed: skipping")
        return 77
    smol = found.stdout.strip()
    tmp = tempfile.mkdtemp(prefix="hone-verify-")
    try:
        # 1. the same function
        f32 = os.path.join(tmp, "smol.f32.gguf")
        run([sys.executable, os.path.join(SRC, "tools", "convert_gguf.py"), smol, f32, "--dtype", "f32"])
        r, _ = verify(tmp, smol, f32, "--steps", "8", "--max-prompts", "3")
        check(r is not None, "verify Q4_1 vs f32 ran")
        if r:
            s = r["summary"]
            check(r["exact"] is True, "both files: exact KL")
            check(s["positions"] > 0 and all(k == 0 for p in r["prompts"] for k in p["kl"]),
                  f"Q4_1 vs its f32 dequantisation: KL 0 at all {s['positions']} positions")
            check(s["top1_agreement"] == 1 and s["flip_rate"] == 0 and s["max_abs_dlogit"] == 0,
                  "agreement 100%, p = 0, max |dlogit| 0")
            check(s["greedy_identical"] == s["prompts"] == 3, "every free-running output identical")
            check(s["survival_model"]["100"] == 1, "(1-p)^100 = 1")
        tiny = os.path.join(DATA, "tiny-llama-f32.gguf")
        lossy = os.path.join(tmp, "tiny.q4_0.gguf")
        run([sys.executable, os.path.join(SRC, "tools", "convert_gguf.py"), tiny, lossy, "--dtype", "q4_0"])
        rep = os.path.join(tmp, "report")
        r, _ = verify(tmp, tiny, lossy, "--steps", "8", "--max-prompts", "4", "--report", rep)
        check(r is not None, "verify tiny f32 vs q4_0 ran")
        if r:
            s = r["summary"]
            check(s["kl_mean"] > 0, f"lossy re-quantisation: KL mean {s['kl_mean']:.3g} > 0")
            check(abs(s["flip_rate"] - (1 - s["top1_agreement"])) < 1e-12, "p = 1 - top-1 agreement")
            check(abs(s["survival_model"]["50"] - (1 - s["flip_rate"]) ** 50) < 1e-12, "survival = (1-p)^50")
            kls = [k for p in r["prompts"] for k in p["kl"]]
            check(abs(s["kl_mean"] - sum(kls) / len(kls)) < 1e-12 and abs(s["kl_max"] - max(kls)) == 0,
                  "summary KL mean and max over the per-position values")
            check(len(r["greedy_survival"]) == 8 and all(0 <= x <= 1 for x in r["greedy_survival"]),
                  "measured survival per step")
            check(os.path.exists(os.path.join(rep, "index.html")) and os.path.exists(os.path.join(rep, "verify.json")),
                  "report page and JSON written")
            if shutil.which("gnuplot"):
                check(all(open(os.path.join(rep, n), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
                          for n in ("kl.png", "flips.png", "survival.png")), "three charts drawn")

        # 2. the scripted endpoint
        model = Model(smol)
        bias = np.zeros(len(model.pieces))
        for piece in (" the", ",", ".", " a", " is"):
            if piece in model.pieces:
                bias[model.pieces.index(piece)] = 2.5
        k = 5
        log = []
        srv = scripted_endpoint(model, bias, k, tmp, log)
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        prompts = os.path.join(tmp, "p.jsonl")
        texts = ["The capital of France is", "Water boils at a temperature of"]
        with open(prompts, "w") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"id": f"p{i}", "set": "t", "prompt": t}) + "\n")
        r, _ = verify(tmp, smol, url, "--steps", "6", "--prompts", prompts, "--top-k", str(k), "--model", "scripted")
        srv.shutdown()
        check(r is not None, "verify file vs scripted endpoint ran")
        if r:
            check(r["exact"] is False and "lower bound" in r["kl_kind"], "an endpoint side: KL stated as a lower bound")
            for i, t in enumerate(texts):
                pr = r["prompts"][i]
                echo = next(e for e in log if e["text"].startswith(t))
                n_p = len(model.tokenize(t))
                L = model.logits(echo["ids"], tmp)
                want_kl, want_top1 = [], []
                for j in range(n_p, len(echo["ids"])):
                    lp, lq = log_softmax(L[j - 1]), log_softmax(L[j - 1] + bias)
                    S = set(np.argsort(-lq, kind="stable")[:k].tolist()) | {echo["ids"][j]}
                    kl = sum(math.exp(lp[s]) * (lp[s] - lq[s]) for s in S)
                    rp = 1 - sum(math.exp(lp[s]) for s in S)
                    rq = 1 - sum(math.exp(lq[s]) for s in S)
                    if rp > 1e-12:
                        kl += rp * (math.log(rp) - math.log(max(rq, 1e-300)))
                    want_kl.append(max(kl, 0.0))
                    want_top1.append(int(np.argmax(L[j - 1]) == np.argmax(L[j - 1] + bias)))
                got = pr["kl"]
                check(len(got) == len(want_kl) and all(abs(a - b) <= 1e-9 + 1e-6 * abs(b) for a, b in zip(got, want_kl)),
                      f"{pr['id']}: KL per position matches the bias ({[round(x, 5) for x in got]} vs "
                      f"{[round(x, 5) for x in want_kl]})")
                check(pr["top1"] == want_top1, f"{pr['id']}: top-1 agreement where the bias keeps the argmax "
                      f"({pr['top1']} vs {want_top1})")
                # free-running: the biased greedy decode against the reference's continuation
                ref_ids = echo["ids"][n_p:]
                seq, div = model.tokenize(t), -1
                for step in range(len(ref_ids)):
                    nxt = int(np.argmax(model.logits(seq, tmp)[-1] + bias))
                    if nxt != ref_ids[step]:
                        div = step
                        break
                    seq.append(nxt)
                check(pr["first_divergence"] == div, f"{pr['id']}: first divergence {pr['first_divergence']} "
                      f"(expected {div})")
            flips = sum(1 - x for p in r["prompts"] for x in p["top1"])
            n = sum(len(p["top1"]) for p in r["prompts"])
            check(abs(r["summary"]["flip_rate"] - flips / n) < 1e-12, "p from the flipped positions")

        # 3. Hone against its own server
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "server"))
        import serverlib  # noqa: E402
        with serverlib.Server(smol, "--no-profile") as srv:
            r, _ = verify(tmp, smol, srv.url + "/v1", "--steps", "8", "--max-prompts", "4")
        check(r is not None, "verify file vs its own server ran")
        if r:
            s = r["summary"]
            check(s["kl_max"] < 1e-10, f"file vs its own server: KL max {s['kl_max']:.3g} (f32 logprobs)")
            check(s["top1_agreement"] == 1 and s["flip_rate"] == 0, "agreement 100%, p = 0")
            check(s["greedy_identical"] == s["prompts"], "every free-running output identical")
            check("SmolLM2" in r["candidate"]["description"], "the model named from /v1/models")

        # 5. agentic checks
        with serverlib.Server(smol, "--no-profile") as srv:
            tool_checks(tmp, smol, srv)

        # 4. bad input
        p = run([HONE, "verify", "--reference", smol, "--candidate", "http://127.0.0.1:9/v1", "--max-prompts", "1",
                 "--timeout-ms", "2000", "--quiet"])
        check(p.returncode == 1 and "unreachable" in p.stderr, "an unreachable endpoint is a clear error")
        bad = os.path.join(tmp, "bad.jsonl")
        with open(bad, "w") as f:
            f.write("not json\n")
        p = run([HONE, "verify", "--reference", smol, "--candidate", smol, "--prompts", bad, "--quiet"])
        check(p.returncode == 1 and "bad.jsonl:1" in p.stderr, "a prompts file that is not JSONL names its line")
        with open(bad, "w") as f:
            f.write(json.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}) + "\n")
        p = run([HONE, "verify", "--reference", smol, "--candidate", smol, "--prompts", bad, "--quiet"])
        check(p.returncode == 1 and "bad.jsonl:1" in p.stderr and "each tool" in p.stderr,
              "a tool prompt with a malformed tool names its line")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
