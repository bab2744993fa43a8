#!/usr/bin/env python3
"""`hone serve` through the official `openai` Python client: models, completions, chat,
streaming with usage, errors mapped to the client's exception classes, the API key; and,
when SmolLM2 is installed, one real chat answer. Skips (77) without the `openai` package."""
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


def main():
    if openai is None:
        print("skipped: the openai package is not installed (tools/setup.sh)", file=sys.stderr)
        return sl.SKIP
    if not os.path.isfile(sl.TINY) or not os.path.isfile(sl.BIN):
        return sl.SKIP
    return sl.Checks().run([test_client_basics, test_client_api_key, test_smollm2_answers])


if __name__ == "__main__":
    sys.exit(main())
