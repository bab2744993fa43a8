#!/usr/bin/env python3
"""Structured output and tool calls through `hone serve` with the official `openai` client
on SmolLM2: a json_schema answer that parses and validates (jsonschema) on 50 seeds, sent
8 at a time so that constrained requests share batches; json_object; a refused schema
feature; a tool-call round trip (call, tool result, final answer), streamed tool-call deltas,
tool_choice named and none; LangChain's bind_tools / with_structured_output and litellm when
those packages are installed (each skips with a message otherwise). Skips (77) without the
`openai` or `jsonschema` package or SmolLM2."""
import concurrent.futures
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

try:
    import openai
    import jsonschema
except ImportError:
    openai = None

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16},
        "age": {"type": "integer"},
        "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "role", "tags", "active"],
    "additionalProperties": False,
}

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}},
                   "required": ["city"], "additionalProperties": False}}}]


def client(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_json_schema_50_seeds(t, srv):
    c = client(srv)
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}

    def one(seed):
        r = c.chat.completions.create(model="smollm2", max_tokens=300, seed=seed, temperature=1.0,
                                      messages=[{"role": "user", "content": "Describe a user of a web site."}],
                                      response_format=fmt)
        return seed, r.choices[0].message.content, r.choices[0].finish_reason

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(one, range(50)))
    bad = []
    for seed, text, finish in results:
        try:
            jsonschema.validate(json.loads(text), PERSON)
            if finish != "stop":
                bad.append((seed, finish, text))
        except Exception as e:  # noqa: BLE001
            bad.append((seed, repr(e), text))
    t.check(not bad, "json_schema outputs that failed: %r" % bad[:3])
    t.check(len({text for _, text, _ in results}) > 10, "seeds give different outputs")
    # the same seed again gives the same output (constrained sampling is deterministic)
    t.check(one(7)[1] == results[7][1], "seed 7 reproduces")
    # greedy, and with top_k / top_p / min_p: still valid
    for kw in ({"temperature": 0}, {"extra_body": {"top_k": 5, "min_p": 0.05}, "top_p": 0.9}):
        r = c.chat.completions.create(model="smollm2", max_tokens=150, seed=1, response_format=fmt,
                                      messages=[{"role": "user", "content": "A user, please."}], **kw)
        jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_json_object_and_refusal(t, srv):
    c = client(srv)
    r = c.chat.completions.create(model="smollm2", max_tokens=120, seed=2, response_format={"type": "json_object"},
                                  messages=[{"role": "user", "content": "Reply in JSON: the capital of France."}])
    text = r.choices[0].message.content
    if r.choices[0].finish_reason == "stop":
        t.check(isinstance(json.loads(text), dict), "json_object gives an object: %r" % text)
    else:
        t.check(text.lstrip().startswith("{"), "json_object starts an object: %r" % text)
    try:
        c.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "x"}],
                                  response_format={"type": "json_schema", "json_schema": {
                                      "name": "s", "schema": {"type": "string", "format": "email"}}})
        t.check(False, "an unsupported keyword must be refused")
    except openai.BadRequestError as e:
        t.check("'format'" in e.body["message"], "the 400 names the keyword: %r" % e.body)


def test_tool_round_trip(t, srv):
    c = client(srv)
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = c.chat.completions.create(model="smollm2", max_tokens=60, seed=1, messages=msgs, tools=WEATHER,
                                  tool_choice="required")
    ch = r.choices[0]
    t.check(ch.finish_reason == "tool_calls" and ch.message.tool_calls, "a tool call: %r" % ch)
    if not ch.message.tool_calls:
        return
    call = ch.message.tool_calls[0]
    args = json.loads(call.function.arguments)
    t.check(call.type == "function" and call.function.name == "get_weather" and isinstance(args.get("city"), str)
            and call.id.startswith("call_"), "the call: %r" % call)
    msgs.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.function.name,
                                                         "arguments": call.function.arguments}}]})
    msgs.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 21, "sky": "clear"})})
    r2 = c.chat.completions.create(model="smollm2", max_tokens=40, seed=1, messages=msgs, tools=WEATHER,
                                   tool_choice="none")
    t.check(r2.choices[0].message.content and not r2.choices[0].message.tool_calls and
            r2.choices[0].finish_reason in ("stop", "length"), "final answer: %r" % r2.choices[0])
    # auto: whatever the model does, the reply is well formed
    r3 = c.chat.completions.create(model="smollm2", max_tokens=60, seed=3, messages=msgs[:1], tools=WEATHER)
    m3 = r3.choices[0]
    t.check((m3.finish_reason == "tool_calls") == bool(m3.message.tool_calls), "auto: %r" % m3)
    # streamed, the same answer: the same content, or the same calls
    content, calls, finish = "", {}, None
    for chunk in c.chat.completions.create(model="smollm2", max_tokens=60, seed=3, messages=msgs[:1], tools=WEATHER,
                                           stream=True):
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            content += choice.delta.content or ""
            for d in choice.delta.tool_calls or []:
                e = calls.setdefault(d.index, {"name": "", "args": ""})
                e["name"] += (d.function.name or "") if d.function else ""
                e["args"] += (d.function.arguments or "") if d.function else ""
    t.check(finish == m3.finish_reason, "stream finish %r vs %r" % (finish, m3.finish_reason))
    if m3.message.tool_calls:
        t.check([(e["name"], json.loads(e["args"])) for _, e in sorted(calls.items())] ==
                [(x.function.name, json.loads(x.function.arguments)) for x in m3.message.tool_calls],
                "streamed calls: %r" % calls)
    else:
        t.check(content == (m3.message.content or "") and not calls, "streamed content: %r" % content)


def test_tool_stream_and_named(t, srv):
    c = client(srv)
    two = WEATHER + [{"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}]
    stream = c.chat.completions.create(model="smollm2", max_tokens=60, seed=4, stream=True, tools=two,
                                       tool_choice={"type": "function", "function": {"name": "get_time"}},
                                       messages=[{"role": "user", "content": "What time is it in Berlin?"}])
    first, args, finish, names, pieces = None, "", None, [], 0
    for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for d in choice.delta.tool_calls or []:
                if first is None:
                    first = d
                if d.function and d.function.name:
                    names.append(d.function.name)
                piece = (d.function.arguments or "") if d.function else ""
                pieces += piece != ""
                args += piece
    t.check(first is not None and first.id and first.type == "function" and names == ["get_time"],
            "first delta names the call: %r" % first)
    t.check(json.loads(args).get("zone") in ("UTC", "CET"), "streamed arguments: %r" % args)
    t.check(pieces >= 2, "the arguments stream in pieces as they are written (%d)" % pieces)
    t.check(finish == "tool_calls", "stream finish_reason: %r" % finish)


def test_langchain(t, srv):
    try:
        from langchain_openai import ChatOpenAI
        from pydantic import BaseModel, Field
    except ImportError:
        print("langchain-openai not installed: LangChain checks skipped", file=sys.stderr)
        return
    llm = ChatOpenAI(base_url=srv.url + "/v1", api_key="unused", model="smollm2", temperature=0, max_tokens=100,
                     max_retries=0)

    def get_weather(city: str) -> str:
        """Get the current weather of a city."""
        return "sunny"

    msg = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("Weather in Rome?")
    t.check(msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather" and "city" in msg.tool_calls[0]["args"],
            "bind_tools: %r" % msg)

    class City(BaseModel):  # bounded strings: a small greedy model may never close a free one
        name: str = Field(max_length=24)
        country: str = Field(max_length=24)

    out = llm.with_structured_output(City, method="json_schema").invoke("Name a city in Italy.")
    t.check(isinstance(out, City) and out.name, "with_structured_output(json_schema): %r" % out)
    out = llm.with_structured_output(City).invoke("Name a city in Spain.")
    t.check(isinstance(out, City), "with_structured_output (default method): %r" % out)


def test_litellm(t, srv):
    # litellm fetches a model price list from the network at import unless told to use its own copy
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    try:
        import litellm
    except ImportError:
        print("litellm not installed: litellm checks skipped", file=sys.stderr)
        return
    r = litellm.completion(model="openai/smollm2", api_base=srv.url + "/v1", api_key="unused", max_tokens=60,
                           messages=[{"role": "user", "content": "Weather in Oslo?"}], tools=WEATHER,
                           tool_choice="required", seed=2)
    calls = r.choices[0].message.tool_calls
    t.check(calls and calls[0].function.name == "get_weather", "litellm tool call: %r" % r.choices[0])
    r = litellm.completion(model="openai/smollm2", api_base=srv.url + "/v1", api_key="unused", max_tokens=150,
                           messages=[{"role": "user", "content": "A user."}], seed=2,
                           response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_with_openai_features(t, srv):
    """response_format and tools together with logprobs and n (engine/server.c's merge of the two)."""
    c = client(srv)
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    msgs = [{"role": "user", "content": "Describe a user of a web site."}]
    # logprobs are the model's before the grammar mask: the first position's top 5 equal an
    # unconstrained request's (the same prompt, the same logits)
    r = c.chat.completions.create(model="smollm2", max_tokens=150, temperature=0, messages=msgs, response_format=fmt,
                                  logprobs=True, top_logprobs=5)
    free = c.chat.completions.create(model="smollm2", max_tokens=1, temperature=0, messages=msgs, logprobs=True,
                                     top_logprobs=5)
    ch = r.choices[0]
    jsonschema.validate(json.loads(ch.message.content), PERSON)
    lp = ch.logprobs.content
    t.check("".join(e.token for e in lp) == ch.message.content, "logprob tokens spell the content")
    top_c = [(x.token, x.logprob) for x in lp[0].top_logprobs]
    top_f = [(x.token, x.logprob) for x in free.choices[0].logprobs.content[0].top_logprobs]
    t.check(len(top_c) == 5 and top_c == top_f, "raw top logprobs under the mask: %r vs %r" % (top_c, top_f))
    t.check(all(e.logprob <= e.top_logprobs[0].logprob + 1e-6 for e in lp), "no token above its top alternative")
    # speculation asked for: a constrained request does not speculate (its drafts would skip
    # the mask), its answer is the one without
    outs = [c.chat.completions.create(model="smollm2", max_tokens=150, seed=3, temperature=1.0, messages=msgs,
                                      response_format=fmt, extra_body={"speculate": sp}).choices[0].message.content
            for sp in ("lookup", "none")]
    jsonschema.validate(json.loads(outs[0]), PERSON)
    t.check(outs[0] == outs[1], "speculate lookup vs none under a schema: %r" % outs)
    # n > 1 with response_format: every choice is a sentence of the schema (and streamed)
    r = c.chat.completions.create(model="smollm2", max_tokens=150, seed=5, temperature=1.0, n=3, messages=msgs,
                                  response_format=fmt)
    t.check(sorted(x.index for x in r.choices) == [0, 1, 2], "three choices")
    for x in r.choices:
        jsonschema.validate(json.loads(x.message.content), PERSON)
    texts, finish, lps = {}, {}, {}
    for chunk in c.chat.completions.create(model="smollm2", max_tokens=150, seed=6, temperature=1.0, n=2,
                                           messages=msgs, response_format=fmt, stream=True, logprobs=True):
        for x in chunk.choices:
            texts[x.index] = texts.get(x.index, "") + (x.delta.content or "")
            finish[x.index] = x.finish_reason or finish.get(x.index)
            lps[x.index] = lps.get(x.index, 0) + len((x.logprobs.content or []) if x.logprobs else [])
    t.check(sorted(texts) == [0, 1] and all(finish[i] == "stop" for i in texts), "streamed n=2: %r" % finish)
    for i in texts:
        jsonschema.validate(json.loads(texts[i]), PERSON)
        t.check(lps[i] > 0, "streamed logprobs of choice %d" % i)
    # tools, not streamed, with logprobs: the call, and the logprobs of the tokens that wrote it
    r = c.chat.completions.create(model="smollm2", max_tokens=60, seed=1, tools=WEATHER, tool_choice="required",
                                  messages=[{"role": "user", "content": "Weather in Paris?"}], logprobs=True)
    ch = r.choices[0]
    n_lp = len(ch.logprobs.content) if ch.logprobs and ch.logprobs.content else 0
    t.check(ch.finish_reason == "tool_calls" and ch.message.tool_calls and  # an end-of-generation token has none
            n_lp in (r.usage.completion_tokens - 1, r.usage.completion_tokens), "tools with logprobs: %r" % ch)
    # refused: n > 1 with tools, logprobs with streamed tools (docs/structured-output.md)
    for kw, param in (({"n": 2}, "n"), ({"stream": True, "logprobs": True}, "logprobs")):
        try:
            c.chat.completions.create(model="smollm2", max_tokens=8, tools=WEATHER,
                                      messages=[{"role": "user", "content": "x"}], **kw)
            t.check(False, "%r with tools must be refused" % kw)
        except openai.BadRequestError as e:
            t.check(e.status_code == 400 and e.body.get("param") == param, "the 400 names %r: %r" % (param, e.body))


def main():
    if openai is None:
        print("skipped: the openai or jsonschema package is not installed (tools/setup.sh)", file=sys.stderr)
        return sl.SKIP
    path = sl.smollm2_path()
    if not path or not os.path.isfile(sl.BIN):
        print("skipped: SmolLM2 or the hone binary is missing", file=sys.stderr)
        return sl.SKIP
    checks = sl.Checks()
    with Server(path, "--ctx", "1024", "--model-name", "smollm2") as srv:
        tests = [test_json_schema_50_seeds, test_json_object_and_refusal, test_tool_round_trip,
                 test_tool_stream_and_named, test_with_openai_features, test_langchain, test_litellm]
        wrapped = []
        for fn in tests:
            def run(tt, fn=fn):
                return fn(tt, srv)
            run.__name__ = fn.__name__
            wrapped.append(run)
        return checks.run(wrapped)


if __name__ == "__main__":
    sys.exit(main())
