"""Helpers for the `hone serve` tests: start a server on a free port of 127.0.0.1 (--port 0,
the bound port read from its log), talk HTTP with http.client, read /metrics, and always
kill the servers a test started (at exit too). Every wait here is bounded in time.

Environment (set by ctest): HONE_BIN, HONE_TEST_DATA, HONE_SOURCE_DIR; optional HONE_SMOLLM2.
"""
import atexit
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("HONE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("HONE_BIN") or os.path.join(SRC, "build", "hone")
DATA = os.environ.get("HONE_TEST_DATA") or os.path.join(SRC, "build", "testdata")
TINY = os.path.join(DATA, "tiny-llama-f32.gguf")

_live = []


def smollm2_path():
    p = os.environ.get("HONE_SMOLLM2")
    if p and os.path.isfile(p):
        return p
    sys.path.insert(0, os.path.join(SRC, "tools"))
    try:
        from find_smollm2 import find_smollm2
        return find_smollm2()
    except Exception:
        return None


def _kill_all():
    for s in list(_live):
        s.kill()


atexit.register(_kill_all)


class Server:
    """A `hone serve` child process. Use as a context manager; kill() is idempotent."""

    def __init__(self, model=TINY, *args, startup_s=60):
        self.log = tempfile.NamedTemporaryFile(prefix="hone-serve-", suffix=".log", delete=False)
        cmd = [BIN, "serve", "-m", model, "--port", "0", "-t", os.environ.get("HONE_SERVE_TEST_THREADS", "1"), *args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log)
        _live.append(self)
        self.port = None
        deadline = time.time() + startup_s
        while time.time() < deadline:
            m = re.search(r"listening on http://[^ ]*:(\d+)", self.log_text())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        text = self.log_text()
        self.kill()
        raise RuntimeError("server did not start: " + text[-2000:])

    def log_text(self):
        with open(self.log.name, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, needle, timeout=5.0):
        """The log once it contains needle (a request is logged after its response is sent,
        so a test reading the log at once can race it), or as it is after timeout."""
        deadline = time.time() + timeout
        while True:
            text = self.log_text()
            if needle in text or time.time() > deadline:
                return text
            time.sleep(0.05)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self in _live:
            _live.remove(self)
            try:
                os.unlink(self.log.name)
            except OSError:
                pass

    def terminate(self, timeout=60):
        """SIGTERM, then the exit code (None if it did not exit in time; then it is killed)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """-> (status, headers dict, body bytes). body: bytes, str, or a JSON-able object."""
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def post(self, path, obj, headers=None, timeout=60):
        status, _, body = self.request("POST", path, obj, headers, timeout)
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body

    def stream(self, path, obj, timeout=60):
        """A streamed request: -> (status, [event dicts], saw_done)."""
        c = self.conn(timeout)
        try:
            c.request("POST", path, body=json.dumps(obj), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                return r.status, [json.loads(r.read())], False
            events, done = [], False
            for raw in r:
                line = raw.decode().strip()
                if not line:
                    continue
                assert line.startswith("data: "), line
                if line == "data: [DONE]":
                    done = True
                    break
                events.append(json.loads(line[6:]))
            return r.status, events, done
        finally:
            c.close()

    def metrics(self):
        """{'name' or 'name{labels}': value} from /metrics."""
        status, _, body = self.request("GET", "/metrics")
        assert status == 200, status
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def wait_metric(self, pred, timeout=15):
        """Polls /metrics until pred(metrics) holds; returns the last metrics."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if pred(m) or time.time() > deadline:
                return m
            time.sleep(0.05)


def complete(srv, prompt, max_tokens=12, **kw):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    body.update(kw)
    status, j = srv.post("/v1/completions", body)
    assert status == 200, (status, j)
    return j


def chat(srv, content, max_tokens=12, **kw):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0}
    body.update(kw)
    status, j = srv.post("/v1/chat/completions", body)
    assert status == 200, (status, j)
    return j


class Checks:
    """Counts failures and keeps going, like tests/harness.h."""

    def __init__(self):
        self.failed = 0
        self.n = 0

    def check(self, cond, what):
        self.n += 1
        if not cond:
            self.failed += 1
            print("CHECK failed: %s" % what, file=sys.stderr)
        return cond

    def run(self, tests):
        only = sys.argv[1] if len(sys.argv) > 1 else ""
        for t in tests:
            if only not in t.__name__:
                continue
            before = self.failed
            t0 = time.time()
            try:
                t(self)
            except Exception as e:  # a failing test must not stop the others
                import traceback
                traceback.print_exc()
                self.failed += 1
                print("%s raised %r" % (t.__name__, e), file=sys.stderr)
            print("%-44s %s (%.1fs)" % (t.__name__, "ok" if self.failed == before else "FAILED",
                                        time.time() - t0), file=sys.stderr)
        _kill_all()
        print("%d checks, %d failed" % (self.n, self.failed), file=sys.stderr)
        return 1 if self.failed else 0
