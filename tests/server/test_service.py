"""`hone serve` as a service (issue 22): bad input refused with OpenAI-shaped JSON errors (a FIFO
as the model, trailing JSON, NUL inside strings and headers, over-long URIs and headers), the
command line (--version, --help on every subcommand, invalid values, port in use, the
beyond-loopback warning), request ids and logs, and /metrics parsed with prometheus_client."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402


def error_of(raw):
    try:
        e = json.loads(raw)["error"]
        return e if isinstance(e, dict) else {}
    except Exception:
        return {}


def is_openai_error(headers, raw):
    e = error_of(raw)
    return (headers.get("Content-Type", "").startswith("application/json") and isinstance(e.get("message"), str)
            and isinstance(e.get("type"), str) and "param" in e and "code" in e)


def raw_http(port, data, timeout=10):
    """Sends raw bytes, returns everything the server answers before closing (or timeout)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        sock.close()


def split_response(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().title()] = v.strip()
    return status, headers, body


def test_fifo_model(t):
    d = tempfile.mkdtemp()
    fifo = os.path.join(d, "model.gguf")
    os.mkfifo(fifo)
    try:
        for cmd in (["info", "-m", fifo], ["generate", "-m", fifo, "-p", "hi", "-n", "1"],
                    ["tokenize", "-m", fifo, "-p", "hi"]):
            t0 = time.time()
            try:
                r = subprocess.run([sl.BIN] + cmd, capture_output=True, text=True, timeout=20)
                rc, err = r.returncode, r.stderr
            except subprocess.TimeoutExpired:
                rc, err = None, "timed out"
            t.check(rc not in (0, None) and "not a regular file (a FIFO)" in err,
                    "%s on a FIFO: rc %r, %r (%.1fs)" % (cmd[0], rc, err[-200:], time.time() - t0))
        p = subprocess.Popen([sl.BIN, "serve", "-m", fifo, "--port", "0"], stderr=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, text=True)
        try:
            rc = p.wait(20)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "hung, ignored SIGTERM"
        err = p.stderr.read()
        t.check(rc not in (0, None) and "a FIFO" in err, "serve on a FIFO: rc %r, %r" % (rc, err[-200:]))
    finally:
        os.unlink(fifo)
        os.rmdir(d)


BAD_JSON = [
    ("trailing garbage", b'{"prompt": "hi", "max_tokens": 1} xyz', "invalid_json"),
    ("two values", b'{"prompt": "hi"}{"prompt": "again"}', "invalid_json"),
    ("raw NUL byte", b'{"prompt": "hi\x00there"}', "invalid_json"),
    ("NUL in prompt", b'{"prompt": "hi\\u0000 the tail", "max_tokens": 1}', "invalid_value"),
    ("NUL in stop", b'{"prompt": "hi", "max_tokens": 1, "stop": "a\\u0000b"}', "invalid_value"),
    ("NUL in model", b'{"prompt": "hi", "max_tokens": 1, "model": "hone\\u0000x"}', "invalid_value"),
]
BAD_CHAT = [
    ("NUL in role", b'{"messages": [{"role": "user\\u0000x", "content": "hi"}], "max_tokens": 1}', "invalid_value"),
    ("NUL in content", b'{"messages": [{"role": "user", "content": "hi\\u0000tail"}], "max_tokens": 1}',
     "invalid_value"),
    ("trailing chat", b'{"messages": [{"role": "user", "content": "hi"}]},', "invalid_json"),
]


def test_bad_json(t):
    with Server() as s:
        for path, cases in (("/v1/completions", BAD_JSON), ("/v1/chat/completions", BAD_CHAT)):
            for name, body, code in cases:
                st, h, raw = s.request("POST", path, body)
                t.check(st == 400 and is_openai_error(h, raw) and error_of(raw).get("code") == code,
                        "%s: %d %r" % (name, st, raw[:200]))
        # the good neighbours still pass: an escaped backslash before u0000 is text, whitespace trails
        st, _, raw = s.request("POST", "/v1/completions", b'{"prompt": "a\\\\u0000b", "max_tokens": 1}\r\n \n')
        t.check(st == 200, "escaped backslash + trailing whitespace accepted: %d %r" % (st, raw[:200]))


def test_bad_http(t):
    with Server(sl.TINY, "--api-key", "k3y") as s:
        # a NUL inside the Authorization header: the key never matches through it (libmicrohttpd
        # 0.9.75 cuts the value at the NUL before the server sees it, so "k3\0y" arrives as "k3")
        for key in (b"k3\x00y", b"\x00k3y", b"k\x003y"):
            resp = raw_http(s.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
                            b"\r\nConnection: close\r\n\r\n")
            st, h, body = split_response(resp)
            t.check(st in (400, 401), "NUL in Authorization %r refused: %r" % (key, resp[:120]))
            if st == 401:
                t.check(is_openai_error(h, body), "401 is OpenAI JSON: %r" % resp[:300])
        st, h, raw = s.request("GET", "/v1/models", headers={"Authorization": "Bearer k3y"})
        t.check(st == 200, "the right key still works")
        long_uri = "/v1/models?" + "a" * 10000
        st, h, raw = s.request("GET", long_uri, headers={"Authorization": "Bearer k3y"})
        t.check(st == 414 and is_openai_error(h, raw), "414 JSON: %d %r" % (st, raw[:200]))
        big = {"X-Filler-%d" % i: "v" * 1000 for i in range(20)}
        big["Authorization"] = "Bearer k3y"
        st, h, raw = s.request("GET", "/v1/models", headers=big)
        t.check(st == 431 and is_openai_error(h, raw), "431 JSON: %d %r" % (st, raw[:200]))
        st, h, raw = s.request("POST", "/v1/completions", b'{"prompt": "' + b"x" * (2 << 20) + b'"}',
                               headers={"Authorization": "Bearer k3y"})
        t.check(st == 413 and is_openai_error(h, raw), "413 JSON: %d %r" % (st, raw[:200]))
        st, h, raw = s.request("GET", "/nope", headers={"Authorization": "Bearer k3y"})
        t.check(st == 404 and is_openai_error(h, raw), "404 JSON")
        st, h, raw = s.request("GET", "/v1/models")
        t.check(st == 401 and is_openai_error(h, raw), "401 JSON")
        t.check(s.proc.poll() is None, "alive after the bad requests")


def run(args, timeout=60):
    r = subprocess.run([sl.BIN] + args, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def test_cli(t):
    rc, out, err = run(["--version"])
    t.check(rc == 0 and out.startswith("hone ") and "commit" in out and "cuda" in out and "threads" in out,
            "--version: %d %r" % (rc, out))
    for cmd in ("generate", "info", "tokenize", "logits", "profile", "guard", "tune", "serve", "review"):
        rc, out, err = run([cmd, "--help"])
        t.check(rc == 0 and "usage" in out and "unknown option" not in err, "%s --help: %d %r" % (cmd, rc, err[-200:]))
    m = sl.TINY
    for args, needle in ((["generate", "-m", m, "-p", "x", "--temp", "-1"], "--temp is -1"),
                         (["generate", "-m", m, "-p", "x", "--top-p", "0"], "--top-p is 0"),
                         (["generate", "-m", m, "-p", "x", "--top-p", "nan"], "--top-p expects a number"),
                         (["generate", "-m", m, "-p", "x", "-n", "-3"], "-n is -3"),
                         (["generate", "-m", m, "-p", "x", "--repeat-penalty", "0"], "--repeat-penalty is 0"),
                         (["generate", "-m", m, "-p", "x", "-t", "5000"], "-t is 5000"),
                         (["logits", "-m", m, "-p", "x", "--steps", "0", "--out", "/dev/null"], "--steps is 0"),
                         (["generate", "-m", m, "--bogus"], "unknown option: --bogus"),
                         (["info", "-m", m, "stray"], "unexpected argument: stray"),
                         (["serve", "-m", m, "--tune-margin", "abc"], "--tune-margin expects a number"),
                         (["serve", "-m", m, "--port", "70000"], "--port expects an integer")):
        rc, out, err = run(args)
        t.check(rc == 2 and needle in err, "%s: %d %r" % (" ".join(args[:1] + args[-2:]), rc, err[-200:]))
    # valid values still work, in either spelling
    rc, out, err = run(["generate", "-m", m, "-p", "hi", "-n", "2", "--temp=0.5", "--top-p", "0.9", "-t1"])
    t.check(rc == 0 and "generated" in err, "valid options: %d %r" % (rc, err[-200:]))


def test_listen_errors(t):
    with Server() as s:
        rc, out, err = run(["serve", "-m", sl.TINY, "--port", str(s.port), "-t", "1"], timeout=60)
        lines = [ln for ln in err.splitlines() if "listen" in ln]
        t.check(rc == 1 and len(lines) == 1 and "Address already in use" in lines[0] and ".c:" not in err
                and "`" not in err, "port in use: one clear line: %d %r" % (rc, err[-400:]))
    with Server(sl.TINY, "--host", "0.0.0.0") as s:
        t.check("warn hone serve: listening on 0.0.0.0 beyond loopback without an API key" in s.log_text(), "warning")
    with Server(sl.TINY, "--host", "0.0.0.0", "--api-key", "k") as s:
        t.check("beyond loopback" not in s.log_text(), "no warning with a key")
    with Server() as s:
        t.check("beyond loopback" not in s.log_text(), "no warning on loopback")


FAMILIES = {  # name (as prometheus_client reports it) -> type
    "hone_requests": "counter", "hone_prompt_tokens": "counter", "hone_generated_tokens": "counter",
    "hone_time_to_first_token_seconds": "histogram", "hone_inter_token_latency_seconds": "histogram",
    "hone_e2e_request_latency_seconds": "histogram", "hone_request_queue_time_seconds": "histogram",
    "hone_request_prefill_time_seconds": "histogram", "hone_request_decode_time_seconds": "histogram",
    "hone_request_prompt_tokens": "histogram", "hone_request_generation_tokens": "histogram",
    "hone_request_success": "counter", "hone_request_failure": "counter",
    "hone_kv_cache_usage_ratio": "gauge", "hone_kv_cache_blocks": "gauge", "hone_requests_running": "gauge",
    "hone_requests_queued": "gauge", "hone_build_info": "gauge",
    "process_cpu_seconds": "counter", "process_resident_memory_bytes": "gauge",
    "process_start_time_seconds": "gauge", "process_open_fds": "gauge",
}


def test_metrics(t):
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        t.check(False, "prometheus_client is needed (pip install prometheus_client; tools/setup.sh)")
        return
    with Server(sl.TINY, "--api-key", "k", "--metrics-no-auth") as s:
        st, h, raw = s.request("GET", "/metrics")
        t.check(st == 200 and h.get("X-Request-Id"), "/metrics open without the key, with a request id")
        st, h, raw = s.request("GET", "/v1/models")
        t.check(st == 401, "the rest still needs the key")
        key = {"Authorization": "Bearer k"}
        for i in range(3):
            st, h, raw = s.request("POST", "/v1/completions", {"prompt": "hello %d" % i, "max_tokens": 4,
                                                               "temperature": 0, "ignore_eos": True}, headers=key)
            t.check(st == 200 and h.get("X-Request-Id", "").startswith("req-"), "completion %d: %d %r" % (i, st, h))
        st, h, raw = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1},
                               headers={"Authorization": "Bearer k", "X-Request-Id": "lb-42.a"})
        t.check(h.get("X-Request-Id") == "lb-42.a", "a sane client id is kept: %r" % h.get("X-Request-Id"))
        st, h, raw = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1},
                               headers={"Authorization": "Bearer k", "X-Request-Id": "bad id\twith junk"})
        t.check(h.get("X-Request-Id", "").startswith("req-"), "an odd client id is replaced")
        last_id = h.get("X-Request-Id", "lb-42.a")
        st, h, raw = s.request("GET", "/metrics")
        fams = {f.name: f for f in text_string_to_metric_families(raw.decode())}
        for name, typ in FAMILIES.items():
            f = fams.get(name)
            t.check(f is not None and f.type == typ, "family %s (%s): %r" % (name, typ, f and f.type))
        t.check("hone_kv_cache_blocks_total" not in raw.decode(), "the gauge lost its counter suffix")

        def value(fam, sample, **labels):
            for smp in fams[fam].samples if fam in fams else []:
                if smp.name == sample and all(smp.labels.get(k) == v for k, v in labels.items()):
                    return smp.value
            return None
        t.check(value("hone_e2e_request_latency_seconds", "hone_e2e_request_latency_seconds_count") == 5,
                "5 finished requests in the e2e histogram")
        t.check(value("hone_request_generation_tokens", "hone_request_generation_tokens_sum") >= 12,
                "generation lengths summed")
        t.check(value("hone_request_success", "hone_request_success_total", finished_reason="length") >= 3,
                "finish reason 'length' counted")
        t.check(value("hone_request_prompt_tokens", "hone_request_prompt_tokens_count") == 5, "prompt lengths")
        r = value("hone_kv_cache_usage_ratio", "hone_kv_cache_usage_ratio")
        t.check(r is not None and 0 <= r <= 1, "usage ratio in [0, 1]: %r" % r)
        t.check(value("process_resident_memory_bytes", "process_resident_memory_bytes") > 1 << 20, "rss")
        t.check(abs(value("process_start_time_seconds", "process_start_time_seconds") - time.time()) < 600,
                "start time is recent")
        bi = [x for x in fams["hone_build_info"].samples] if "hone_build_info" in fams else []
        t.check(bi and bi[0].labels.get("model") == "tiny-llama-f32" and bi[0].labels.get("version"),
                "build info labels: %r" % (bi and bi[0].labels))
        s.wait_log("lb-42.a")
        log = s.wait_log(" %s " % last_id)  # the last completion's line (each is logged after its response)
        lines = [ln for ln in log.splitlines() if " request " in ln and "/v1/completions 200" in ln]
        t.check(len(lines) == 5, "one log line per completion (%d)" % len(lines))
        import re
        t.check(all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info hone serve: request \S+ POST", ln)
                    for ln in lines), "timestamp, level and request id: %r" % lines[:1])
        t.check(any(" lb-42.a " in ln for ln in lines), "the client's id is in the log")


def start_loading(delay_s):
    """A serve whose loading state lasts delay_s more (test hook); -> (proc, port, log path)."""
    log = tempfile.NamedTemporaryFile(prefix="hone-load-", suffix=".log", delete=False)
    env = dict(os.environ, HONE_SERVE_TEST_LOAD_DELAY_S=str(delay_s))
    p = subprocess.Popen([sl.BIN, "serve", "-m", sl.TINY, "--port", "0", "-t", "1"], stderr=log,
                         stdout=subprocess.DEVNULL, env=env)
    import re
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(log.name) as f:
            m = re.search(r"port (\d+) open; loading", f.read())
        if m:
            return p, int(m.group(1)), log.name
        time.sleep(0.02)
    p.kill()
    raise RuntimeError("no early port line")


def get(port, path, body=None):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("POST" if body is not None else "GET", path, body=body,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def test_loading(t):
    p, port, logname = start_loading(4)
    try:
        st, h, raw = get(port, "/health")
        j = json.loads(raw)
        t.check(st == 503 and j.get("status") == "loading" and 0 <= j.get("progress", -1) < 1 and j.get("stage"),
                "/health while loading: %d %r" % (st, raw))
        st, h, raw = get(port, "/v1/completions", json.dumps({"prompt": "hi", "max_tokens": 1}))
        t.check(st == 503 and is_openai_error(h, raw) and error_of(raw).get("code") == "loading",
                "a request while loading: %d %r" % (st, raw))
        deadline, st = time.time() + 30, 0
        while time.time() < deadline and st != 200:
            st, h, raw = get(port, "/health")
            time.sleep(0.1)
        t.check(st == 200 and json.loads(raw)["status"] == "ok", "ready: %d %r" % (st, raw))
        st, h, raw = get(port, "/v1/completions", json.dumps({"prompt": "hi", "max_tokens": 2}))
        t.check(st == 200, "serves once ready: %d" % st)
        with open(logname) as f:
            log = f.read()
        t.check(" info hone serve: loading: model (5%)" in log and "loading: ready (100%)" in log,
                "load progress in the log: %r" % log[-400:])
    finally:
        p.kill()
        p.wait()
        os.unlink(logname)
    # SIGTERM while loading ends it at once
    p, port, logname = start_loading(60)
    try:
        t0 = time.time()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(10)
        except subprocess.TimeoutExpired:
            rc = None
        t.check(rc == 0 and time.time() - t0 < 2, "SIGTERM while loading: rc %r in %.2fs" % (rc, time.time() - t0))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.unlink(logname)


def main():
    if not os.path.isfile(sl.TINY) or not os.path.isfile(sl.BIN):
        print("skipped: needs %s and %s" % (sl.TINY, sl.BIN), file=sys.stderr)
        return sl.SKIP
    return sl.Checks().run([test_fifo_model, test_bad_json, test_bad_http, test_cli, test_listen_errors, test_metrics, test_loading])


if __name__ == "__main__":
    sys.exit(main())
