#!/usr/bin/env python3
"""Scale-out behind HAProxy with docs/haproxy.cfg as it is: three `hone serve` replicas (tiny
model, loopback ports) and haproxy in front of them.
 1. cache-aware routing: every request that shares a prompt prefix (HONE_LB_KEY_BYTES bytes)
    or an X-Session-Id lands on one replica, and that replica alone counts the prefix-cache
    hits (hone_prefix_cache_hits_total in each replica's /metrics); different prefixes spread
    over the replicas;
 2. failover: under steady traffic from four clients, one replica is killed (SIGKILL): no
    request fails (retries, redispatch, health checks on /health), haproxy marks it DOWN, and
    its keys are answered by the others.
Skips (77) only when haproxy is not installed (tools/setup.sh installs it)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

CFG = os.path.join(sl.SRC, "docs", "haproxy.cfg")
KEY_BYTES = 128
# prompts that share their first KEY_BYTES bytes and more than one 16-token KV block
PREFIXES = ["Prefix %d: " % i + " ".join("w%d_%d" % (i, k) for k in range(40)) for i in range(6)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Balancer:
    def __init__(self, replicas, tmp):
        self.port = free_port()
        self.stats = os.path.join(tmp, "haproxy.sock")
        env = dict(os.environ, HONE_LB_BIND="127.0.0.1:%d" % self.port, HONE_LB_STATS=self.stats,
                   HONE_LB_KEY_BYTES=str(KEY_BYTES))
        for i, r in enumerate(replicas):
            env["HONE_REPLICA_%d" % (i + 1)] = "127.0.0.1:%d" % r.port
        self.log = open(os.path.join(tmp, "haproxy.log"), "w+")
        self.proc = subprocess.Popen([shutil.which("haproxy") or "/usr/sbin/haproxy", "-db", "-f", CFG],
                                     env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def admin(self, cmd):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.stats)
            s.sendall((cmd + "\n").encode())
            out = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        return out.decode()

    def backend_row(self):
        lines = self.admin("show stat").splitlines()
        head = lines[0].lstrip("# ").split(",")
        for ln in lines[1:]:
            row = dict(zip(head, ln.split(",")))
            if row.get("pxname") == "hone_replicas" and row.get("svname") == "BACKEND":
                return row
        return {}

    def states(self):
        """{server name: status} of the replicas' backend ("UP", "DOWN", ...)."""
        lines = self.admin("show stat").splitlines()
        head = lines[0].lstrip("# ").split(",")
        out = {}
        for ln in lines[1:]:
            row = dict(zip(head, ln.split(",")))
            if row.get("pxname") == "hone_replicas" and row.get("svname") not in ("BACKEND", "FRONTEND"):
                out[row["svname"]] = row["status"]
        return out

    def wait_states(self, pred, timeout=20):
        deadline = time.time() + timeout
        st = {}
        while time.time() < deadline:
            try:
                st = self.states()
                if pred(st):
                    return st
            except OSError:
                pass
            time.sleep(0.1)
        return st

    def post(self, body, headers=None, timeout=30):
        """-> (status, replica name, JSON or None)."""
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            c.request("POST", "/v1/completions", body=json.dumps(body), headers=h)
            r = c.getresponse()
            data = r.read()
            try:
                j = json.loads(data)
            except ValueError:
                j = None
            return r.status, r.getheader("X-Hone-Replica"), j
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.seek(0)
        return self.log.read()


def hits(replicas):
    return [r.metrics()["hone_prefix_cache_hits_total"] if r.proc.poll() is None else None for r in replicas]


def complete(lb, prompt, **kw):
    body = {"prompt": prompt, "max_tokens": 2, "temperature": 0}
    body.update(kw.pop("body", {}))
    return lb.post(body, **kw)


def test_prefix_affinity_and_failover(t):
    tmp = tempfile.mkdtemp(prefix="hone-scale-out-")
    replicas, lb = [], None
    try:
        replicas = [Server(sl.TINY) for _ in range(3)]
        names = {"r%d" % (i + 1): r for i, r in enumerate(replicas)}
        lb = Balancer(replicas, tmp)
        st = lb.wait_states(lambda s: len(s) == 3 and all(v == "UP" for v in s.values()))
        t.check(st == {"r1": "UP", "r2": "UP", "r3": "UP"}, "haproxy sees three healthy replicas: %r" % st)

        # 1. prefix affinity: each prefix's requests (different tails) on one replica, whose
        # prefix-cache hits grow while the others' stay
        owner = {}
        for i, p in enumerate(PREFIXES):
            h0 = hits(replicas)
            served = set()
            for k in range(4):
                status, who, _ = complete(lb, p + " tail %d" % k)
                t.check(status == 200, "prefix %d request %d: %d" % (i, k, status))
                served.add(who)
            h1 = hits(replicas)
            t.check(len(served) == 1, "prefix %d stays on one replica: %r" % (i, served))
            who = served.pop()
            owner[i] = who
            idx = int(who[1:]) - 1
            t.check(h1[idx] - h0[idx] >= 3 * 2,
                    "prefix %d: its replica %s hit the prefix cache (+%d blocks)" % (i, who, h1[idx] - h0[idx]))
            t.check(all(h1[j] == h0[j] for j in range(3) if j != idx),
                    "prefix %d: no other replica saw it (%r -> %r)" % (i, h0, h1))
        t.check(len(set(owner.values())) >= 2, "different prefixes use different replicas: %r" % owner)
        # a session id wins over the body: one replica for different prompts
        sess = set(complete(lb, "session prompt %d" % k, headers={"X-Session-Id": "user-42"})[1] for k in range(5))
        t.check(len(sess) == 1, "one session, one replica: %r" % sess)

        # 2. failover under traffic: kill the replica that owns prefix 0
        victim = owner[0]
        results, stop = [], threading.Event()

        def client(c):
            k = 0
            while not stop.is_set():
                p = PREFIXES[(c + k) % len(PREFIXES)]
                t0 = time.time()
                try:
                    status, who, _ = complete(lb, p + " more %d" % k)
                except Exception as e:  # a reset reaching the client is a failure too
                    status, who = repr(e), None
                results.append((t0, p, status, who, time.time()))
                k += 1

        threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for th in threads:
            th.start()
        time.sleep(1.0)
        t_kill = time.time()
        names[victim].proc.kill()
        st = lb.wait_states(lambda s: s.get(victim, "").startswith("DOWN"), timeout=10)
        t_down = time.time()
        time.sleep(1.5)
        stop.set()
        for th in threads:
            th.join(30)
        be = lb.backend_row()
        retried = int(be.get("wretr") or 0) + int(be.get("wredis") or 0)
        failed = [r for r in results if r[2] != 200]
        # by when each request was sent and answered: one sent before DOWN may have been retried
        # and redispatched (option redispatch picks any survivor), so "after" starts at DOWN
        before = [r for r in results if r[4] < t_kill]
        after = [r for r in results if r[0] > t_down]
        print("  %d requests (%d before the kill, %d after DOWN), %d failed, %d retried or redispatched; "
              "%s DOWN %.2f s after the kill" % (len(results), len(before), len(after), len(failed), retried,
                                                 victim, t_down - t_kill), file=sys.stderr)
        t.check(retried >= 1, "requests sent to the dead replica before its health check failed were retried "
                "on the others (%d)" % retried)
        t.check(st.get(victim, "").startswith("DOWN"), "haproxy marked %s down: %r" % (victim, st))
        t.check(len(before) >= 8 and len(after) >= 8, "traffic before and after (%d, %d)" % (len(before), len(after)))
        t.check(not failed, "no failed request: %r" % failed[:5])
        t.check(any(r[3] == victim for r in before), "the victim served before the kill")
        t.check(all(r[3] != victim for r in after), "nothing reaches the killed replica after it is down")
        moved = set(r[3] for r in after if r[1] == PREFIXES[0])
        t.check(moved and victim not in moved, "its prefix is answered by another replica: %r" % moved)
        # and by one survivor: the consistent hash moves the dead replica's keys, each to one other
        t.check(len(moved) == 1, "the moved prefix sticks to one survivor: %r" % moved)
    finally:
        log = lb.stop() if lb else ""
        if t.failed:
            print(log[-3000:], file=sys.stderr)
        for r in replicas:
            r.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if not (shutil.which("haproxy") or os.path.exists("/usr/sbin/haproxy")):
        print("skipped: haproxy is not installed (tools/setup.sh installs the Debian package)", file=sys.stderr)
        return sl.SKIP
    if not os.path.isfile(sl.BIN) or not os.path.isfile(sl.TINY):
        print("skipped: needs %s and %s" % (sl.BIN, sl.TINY), file=sys.stderr)
        return sl.SKIP
    return sl.Checks().run([test_prefix_affinity_and_failover])


if __name__ == "__main__":
    sys.exit(main())
