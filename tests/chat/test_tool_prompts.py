#!/usr/bin/env python3
"""The prompts `hone serve` renders for chat requests with tools and tool history, read from
its request log (--log-requests logs each rendered prompt), against Python's jinja2 rendering
of the same template (test_templates.py's environment, as transformers' apply_chat_template):

- templates whose own text renders tools, assistant tool_calls and tool results (Qwen 2.5 and
  3, Hermes 3, Llama 3.1 and 3.2, Mistral v0.3 and Nemo) take the OpenAI messages themselves,
  after hone's documented conversions (developer -> system, text parts joined, null content
  "", string arguments parsed, Mistral ids mapped to 9 alphanumerics): the prompt equals
  jinja2's byte for byte, and where jinja2 raises the server answers 400 with the template's
  message;
- templates without tool syntax (SmolLM2, Gemma 3) get engine/toolcall.c's fallback: the
  tools and calls written as Hermes plain messages, which the template then renders;
- a forced call (tool_choice named) comes back as tool_calls in the format the template's
  own prompt teaches, with ids its history accepts, and goes round again as history.

The tiny model (its 16k-context variant) serves; the weights do not matter for prompts.
Skips (77) without jinja2, the tiny model or the hone binary."""
import datetime
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

try:
    import jinja2  # noqa: F401
    import test_templates as tt
except (ImportError, SystemExit):
    tt = None

MODEL = os.path.join(sl.DATA, "tiny-llama-long-f32.gguf")
BOS, EOS = "<|im_start|>", "<|im_end|>"  # the tiny model's bos / eos token texts (SmolLM2's vocab)

NATIVE = {"hermes3-tool-use", "llama3.1", "llama3.2", "mistral-nemo", "mistral-v0.3", "qwen2.5", "qwen3"}
FALLBACK = {"smollm2", "gemma3"}

ALNUM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def mistral_id(s):
    """engine/toolcall.c's mapping: 9 alphanumerics stay, others become 9 from FNV-1a."""
    if len(s) == 9 and all(c in ALNUM for c in s):
        return s
    h = 1469598103934665603
    for b in s.encode():
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    out = ""
    for _ in range(9):
        out += ALNUM[h % 62]
        h //= 62
    return out


def native_messages(msgs, mistral):
    out = []
    for m in json.loads(json.dumps(msgs)):
        if m["role"] == "developer":
            m["role"] = "system"
        c = m.get("content")
        m["content"] = "" if c is None else "".join(p["text"] for p in c) if isinstance(c, list) else c
        for tc in m.get("tool_calls") or []:
            a = tc["function"].get("arguments")
            if isinstance(a, str):
                try:
                    tc["function"]["arguments"] = json.loads(a)
                except ValueError:
                    pass
            if mistral and "id" in tc:
                tc["id"] = mistral_id(tc["id"])
        if m.get("tool_calls") is None:
            m.pop("tool_calls", None)
        if mistral and "tool_call_id" in m:
            m["tool_call_id"] = mistral_id(m["tool_call_id"])
        out.append(m)
    return out


def compact(x):
    return json.dumps(x, ensure_ascii=False, separators=(",", ":"))


def hermes_tools(tools):
    return ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" +
            "".join("\n" + compact(t) for t in tools) +
            "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
            "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call>")


def variables(msgs, tools):
    return {"messages": msgs, "tools": tools, "documents": None, "add_generation_prompt": True,
            "bos_token": BOS, "eos_token": EOS}


def render(text, msgs, tools):
    tt.NOW = int(datetime.datetime.now().timestamp())  # strftime_now: the server's clock
    return tt.render_py(text, variables(msgs, tools))


class Prompts:
    """A server on one template; each chat request's logged prompt."""

    def __init__(self, srv):
        self.srv = srv

    def ask(self, msgs, tools, **kw):
        before = len(self.prompts())
        status, body = self.srv.post("/v1/chat/completions", dict(
            {"messages": msgs, "tools": tools, "max_tokens": 1, "temperature": 0}, **kw))
        got = self.prompts()
        return status, body, (got[-1] if len(got) > before else None)

    def prompts(self):
        return [json.loads(x) for x in re.findall(r"request \S+ prompt: (.*)", self.srv.log_text())]


def conversations():
    """test_templates.py's conversations with tools or tool history, and OpenAI-shaped ones:
    string arguments and null content as the official client sends them, ids of any length,
    a developer message, content parts."""
    out = [(name, msgs, tools) for name, msgs, tools, _ in tt.CONVERSATIONS
           if tools or any(m.get("tool_calls") or m["role"] == "tool" for m in msgs)]
    call = {"id": "call_5f0c1b2a9d8e7f60", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo", "unit": "celsius"})}}
    out.append(("openai client round trip", [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "text", "text": "Weather "}, {"type": "text", "text": "in Oslo?"}]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"temp": -3})}], tt.TOOLS))
    return out


def test_native(t, name, text):
    mistral = name.startswith("mistral")
    with Server(MODEL, "--chat-template", os.path.join(HERE, "templates", name + ".jinja"), "--log-requests",
                "--ctx", "16384") as s:
        p = Prompts(s)
        for cname, msgs, tools in conversations():
            want = render(text, native_messages(msgs, mistral), tools)
            status, body, got = p.ask(msgs, tools)
            if want["ok"]:
                t.check(status == 200 and got == want["out"],
                        "%s [%s]: the server's prompt is jinja2's\n  jinja2: %r\n  hone:   %r (%s)"
                        % (name, cname, want["out"][-300:], (got or "")[-300:], status))
            else:
                msg = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else ""
                t.check(status == 400 and (want["raised"] is None or want["raised"] in msg),
                        "%s [%s]: jinja2 raises %r, the server %s %r" % (name, cname, want["error"], status, msg))
        # a forced call in the format the prompt teaches, then round again as history
        zone = {"type": "function", "function": {"name": "get_time", "description": "The time in a zone", "parameters": {
            "type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}
        tools = tt.TOOLS + [zone]
        msgs = [{"role": "user", "content": "Time in Berlin?"}]
        status, body, _ = p.ask(msgs, tools, max_tokens=400, tool_choice={"type": "function", "function": {"name": "get_time"}})
        ch = body["choices"][0] if status == 200 else {}
        calls = (ch.get("message") or {}).get("tool_calls") or []
        t.check(status == 200 and ch.get("finish_reason") == "tool_calls" and len(calls) == 1 and
                calls[0]["function"]["name"] == "get_time" and
                json.loads(calls[0]["function"]["arguments"])["zone"] in ("UTC", "CET"),
                "%s: a forced call: %s %r" % (name, status, body))
        if not calls:
            return
        cid = calls[0]["id"]
        t.check(len(cid) == 9 and cid.isalnum() if mistral else cid.startswith("call_"), "%s: the call id %r" % (name, cid))
        msgs += [{"role": "assistant", "content": ch["message"].get("content"), "tool_calls": calls},
                 {"role": "tool", "tool_call_id": cid, "content": "12:00"}]
        want = render(text, native_messages(msgs, mistral), tools)
        status, body, got = p.ask(msgs, tools)
        t.check(status == 200 and want["ok"] and got == want["out"], "%s: the call as history: %s %r" % (name, status, body))


def test_fallback(t, name, text):
    """The tools and calls as Hermes plain messages (engine/toolcall.c), through the template."""
    tools = tt.TOOLS
    args = {"city": "Paris", "days": 2}
    msgs = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
            {"role": "user", "content": "And tomorrow?"}]
    plain = [{"role": "system", "content": hermes_tools(tools)},
             {"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": "<tool_call>\n" + compact({"name": "get_weather", "arguments": args}) +
              "\n</tool_call>"},
             {"role": "user", "content": "<tool_response>\n21 C\n</tool_response>"},
             {"role": "user", "content": "And tomorrow?"}]
    with Server(MODEL, "--chat-template", os.path.join(HERE, "templates", name + ".jinja"), "--log-requests",
                "--ctx", "16384") as s:
        p = Prompts(s)
        want = render(text, plain, None)
        if not want["ok"]:  # roles must alternate (Gemma 3): the fallback joins the two user turns
            t.check(name == "gemma3", "%s refuses the fallback's turns: %r" % (name, want))
            plain[3:] = [{"role": "user", "content": plain[3]["content"] + "\n\n" + plain[4]["content"]}]
            want = render(text, plain, None)
        status, body, got = p.ask(msgs, tools)
        t.check(want["ok"] and status == 200 and got == want["out"],
                "%s: the fallback prompt\n  want: %r\n  hone: %r (%s %r)" % (name, want.get("out"), got, status, body))
        t.check("<tool_call>" in (got or "") and "<tool_response>" in (got or ""), "%s: Hermes syntax in the prompt" % name)


def main():
    if tt is None:
        print("jinja2 is not installed: skipped")
        return sl.SKIP
    if not os.path.isfile(MODEL) or not os.path.isfile(sl.BIN):
        print("the tiny model or the hone binary is missing: skipped")
        return sl.SKIP
    templates = tt.load_templates()
    checks = sl.Checks()
    tests = []
    for name in sorted(NATIVE):
        tests.append(lambda t, name=name: test_native(t, name, templates[name]))
        tests[-1].__name__ = "native " + name
    for name in sorted(FALLBACK):
        tests.append(lambda t, name=name: test_fallback(t, name, templates[name]))
        tests[-1].__name__ = "fallback " + name
    return checks.run(tests)


if __name__ == "__main__":
    sys.exit(main())
