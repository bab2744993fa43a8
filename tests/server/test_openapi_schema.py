#!/usr/bin/env python3
"""Every response shape `hone serve` gives, validated against OpenAI's published OpenAPI
specification: the schemas of github.com/openai/openai-openapi's openapi.yaml that Hone serves,
vendored in tests/server/openapi/openai-openapi-subset.json (its x-source says from where and
what was left out; nothing is downloaded at test time), checked with jsonschema. Covers chat
and completions (plain, logprobs, n, echo, streamed chunks with usage), embeddings, models and
errors. Skips (77) without the `jsonschema` package (tools/setup.sh installs it)."""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

try:
    import jsonschema
except ImportError:
    jsonschema = None

SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openapi", "openai-openapi-subset.json")


def to_json_schema(node, schemas):
    """OpenAPI 3.0 schema -> JSON Schema: $refs inlined, nullable as a "null" type (and None in an enum)."""
    if isinstance(node, list):
        return [to_json_schema(x, schemas) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return to_json_schema(schemas[node["$ref"].rsplit("/", 1)[1]], schemas)
    out = {k: to_json_schema(v, schemas) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = out["enum"] + [None]
    return out


class Spec:
    def __init__(self):
        with open(SPEC) as f:
            doc = json.load(f)
        self.schemas = doc["components"]["schemas"]
        self.n = 0

    def validate(self, t, name, obj, what):
        schema = to_json_schema(self.schemas[name], self.schemas)
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.path))
        self.n += 1
        t.check(not errors, "%s is a %s: %s" % (what, name, "; ".join(
            "%s: %s" % ("/".join(map(str, e.path)), e.message) for e in errors[:3])))


def sse(raw):
    return [json.loads(line[6:]) for line in raw.decode().splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def without_echo_nulls(body):
    """The echo gap of the spec (see x-source): the first prompt token's null entries dropped."""
    body = copy.deepcopy(body)
    for ch in body["choices"]:
        lp = ch.get("logprobs")
        if lp and lp["token_logprobs"] and lp["token_logprobs"][0] is None:
            for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
                lp[k] = lp[k][1:]
    return body


def test_responses_match_the_spec(t):
    spec = Spec()
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    with Server(sl.TINY, "--api-key", "k", "--model-alias", "alias") as s:
        auth = {"Authorization": "Bearer k"}

        def post(path, body):
            st, _, raw = s.request("POST", path, body, auth)
            return st, raw

        for body, what in ((chat, "chat"), (dict(chat, logprobs=True, top_logprobs=3), "chat logprobs"),
                           (dict(chat, n=3, seed=1), "chat n=3"),
                           (dict(chat, presence_penalty=1, frequency_penalty=0.5, logit_bias={"5": -100}),
                            "chat penalties")):
            st, raw = post("/v1/chat/completions", body)
            t.check(st == 200, what)
            spec.validate(t, "CreateChatCompletionResponse", json.loads(raw), what)
        broken = json.loads(raw)  # the validator does reject: a choice without its required logprobs
        del broken["choices"][0]["logprobs"]
        schema = to_json_schema(spec.schemas["CreateChatCompletionResponse"], spec.schemas)
        t.check(not jsonschema.Draft7Validator(schema).is_valid(broken), "a choice without logprobs is refused")
        st, raw = post("/v1/chat/completions", dict(chat, stream=True, logprobs=True, top_logprobs=2, n=2,
                                                    stream_options={"include_usage": True}))
        chunks = sse(raw)
        t.check(st == 200 and len(chunks) >= 4 and chunks[-1]["usage"], "chat stream")
        for i, ch in enumerate(chunks):
            spec.validate(t, "CreateChatCompletionStreamResponse", ch, "chat chunk %d" % i)
        prompt = {"prompt": "Once upon a time", "max_tokens": 4, "ignore_eos": True}
        for body, what in ((prompt, "completion"), (dict(prompt, logprobs=3), "completion logprobs"),
                           (dict(prompt, prompt=["a", "b"], n=2), "completion batch x n"),
                           (dict(prompt, prompt=[1, 2, 3]), "completion from ids")):
            st, raw = post("/v1/completions", body)
            t.check(st == 200, what)
            spec.validate(t, "CreateCompletionResponse", json.loads(raw), what)
        st, raw = post("/v1/completions", dict(prompt, echo=True, logprobs=2, max_tokens=0))
        echo = json.loads(raw)
        t.check(st == 200 and echo["choices"][0]["logprobs"]["token_logprobs"][0] is None, "echo: null first")
        spec.validate(t, "CreateCompletionResponse", without_echo_nulls(echo), "echo (first entry aside)")
        st, raw = post("/v1/completions", dict(prompt, stream=True, logprobs=1, echo=True,
                                               stream_options={"include_usage": True}))
        chunks = sse(raw)
        t.check(st == 200 and chunks[-1]["usage"]["completion_tokens"] == 4, "completion stream")
        for i, ch in enumerate(chunks):
            ch = without_echo_nulls(ch)
            for c in ch["choices"]:  # the streaming gap of the spec (see x-source)
                if c["finish_reason"] is None:
                    c["finish_reason"] = "length"
            spec.validate(t, "CreateCompletionResponse", ch, "completion chunk %d" % i)
        st, raw = post("/v1/embeddings", {"input": ["a b c", "d"], "model": "alias"})
        t.check(st == 200, "embeddings")
        spec.validate(t, "CreateEmbeddingResponse", json.loads(raw), "embeddings")
        st, _, raw = s.request("GET", "/v1/models", None, auth)
        spec.validate(t, "ListModelsResponse", json.loads(raw), "models")
        st, _, raw = s.request("GET", "/v1/models/alias", None, auth)
        spec.validate(t, "Model", json.loads(raw), "models/alias")
        for method, path, body, headers, status in (
                ("POST", "/v1/chat/completions", {"messages": []}, auth, 400),
                ("POST", "/v1/completions", {"prompt": "x", "model": "gpt-9"}, auth, 404),
                ("GET", "/v1/models/gpt-9", None, auth, 404),
                ("POST", "/v1/embeddings", {"input": "x", "encoding_format": "hex"}, auth, 400),
                ("GET", "/v1/models", None, {}, 401),
                ("GET", "/v1/chat/completions", None, auth, 405),
                ("GET", "/nope", None, auth, 404)):
            st, _, raw = s.request(method, path, body, headers)
            t.check(st == status, "%s %s -> %d" % (method, path, st))
            spec.validate(t, "ErrorResponse", json.loads(raw), "%s %s error" % (method, path))
    t.check(spec.n >= 25, "validated %d responses" % spec.n)


def main():
    if jsonschema is None:
        print("the jsonschema package is not installed (tools/setup.sh: python3-jsonschema): skipped",
              file=sys.stderr)
        return sl.SKIP
    if not os.path.isfile(sl.TINY) or not os.path.isfile(sl.BIN):
        return sl.SKIP
    return sl.Checks().run([test_responses_match_the_spec])


if __name__ == "__main__":
    sys.exit(main())
