#!/usr/bin/env python3
"""The chat-template wiring of the hone command: `hone info` names the template that renders
(the GGUF's, a --chat-template file, or the builtin ChatML only for a file without one);
`generate --chat` and `serve` render with --chat-template FILE; a template that raises or
uses an unsupported construct is an error that says so."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
import serverlib  # noqa: E402

BIN, TINY = serverlib.BIN, serverlib.TINY


def hone(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)


def info_line(*args):
    r = hone("info", *args)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("chat template")]
    assert len(lines) == 1, r.stdout
    return lines[0]


def main():
    if not os.path.exists(TINY):
        print("tiny model missing: skipped")
        return serverlib.SKIP
    tmp = tempfile.mkdtemp(prefix="hone-chat-cli-")
    try:
        # the GGUF's own template
        line = info_line("-m", TINY)
        assert line.startswith("chat template the GGUF's tokenizer.chat_template (") and "chatml-like" in line, line

        # a file overrides it
        gemma = os.path.join(HERE, "templates", "gemma3.jinja")
        line = info_line("-m", TINY, "--chat-template", gemma)
        assert line == "chat template file %s (%d bytes, other-like)" % (gemma, os.path.getsize(gemma)), line

        # a model without a template (the key renamed in a copy): the builtin ChatML, said so
        bare = os.path.join(tmp, "no-template.gguf")
        data = open(TINY, "rb").read()
        assert data.count(b"tokenizer.chat_template") == 1
        open(bare, "wb").write(data.replace(b"tokenizer.chat_template", b"tokenizer.chat_templatX"))
        line = info_line("-m", bare)
        assert line == "chat template builtin ChatML (the model file has no tokenizer.chat_template)", line

        # a template outside the subset: info says why, generate fails naming construct and line
        bad = os.path.join(tmp, "bad.jinja")
        open(bad, "w").write("{% for m in messages %}\n{{ m.content|wordwrap(20) }}{% endfor %}")
        line = info_line("-m", TINY, "--chat-template", bad)
        assert "unusable" in line and "line 2: unsupported filter 'wordwrap'" in line, line
        r = hone("generate", "-m", TINY, "--chat", "--chat-template", bad, "-p", "Hi", "-n", "1")
        assert r.returncode == 1 and "unsupported filter 'wordwrap'" in r.stderr, (r.returncode, r.stderr)

        # generate renders through the file: its raise_exception reaches the user
        raising = os.path.join(tmp, "raise.jinja")
        open(raising, "w").write("{% if messages[0].role != 'system' %}{{ raise_exception('a system turn first, "
                                 "please') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}")
        r = hone("generate", "-m", TINY, "--chat", "--chat-template", raising, "-p", "Hi", "-n", "1")
        assert r.returncode == 1 and "a system turn first, please" in r.stderr, (r.returncode, r.stderr)
        r = hone("generate", "-m", TINY, "--chat", "--chat-template", raising, "--system", "S", "-p", "Hi", "-n", "1")
        assert r.returncode == 0, r.stderr

        # serve renders chat requests through the file: the prompt is exactly the template's output
        plain = os.path.join(tmp, "plain.jinja")
        open(plain, "w").write("{% for m in messages %}{{ m.content }}{% endfor %}")
        with serverlib.Server(TINY, "--chat-template", plain) as srv:
            j = serverlib.chat(srv, "Hello there, model", max_tokens=1)
            c = serverlib.complete(srv, "Hello there, model", max_tokens=1)
            assert j["usage"]["prompt_tokens"] == c["usage"]["prompt_tokens"], (j["usage"], c["usage"])
        with serverlib.Server(TINY, "--chat-template", raising) as srv:
            status, j = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                          "max_tokens": 1})
            assert status == 400 and "a system turn first, please" in str(j), (status, j)
        print("ok")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
