#!/usr/bin/env python3
"""The server's standing policies, checked where the kernel shows them (tiny model):
 - without --host it listens on 127.0.0.1 only (the listening socket in /proc/net/tcp is
   bound to 127.0.0.1, and there is none on tcp6 or any other address);
 - with --tune, exactly one thread runs at SCHED_IDLE, nice 19 (the tuning thread; the
   compiler and the guard's workers inherit it), every other at SCHED_OTHER: nice 0, or 5 for
   the connection threads (below the engine's, engine/server.c).
The time-limit 504 and the drain's 503 on open connections need a slower model: they are in
test_lifecycle.py (SmolLM2)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

SCHED_OTHER, SCHED_IDLE = 0, 5


def listeners(port):
    """[(family, local address hex)] of the LISTEN sockets on port."""
    out = []
    for fam in ("tcp", "tcp6"):
        try:
            with open("/proc/net/" + fam) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            addr, p = cols[1].rsplit(":", 1)
            if int(p, 16) == port and cols[3] == "0A":  # TCP_LISTEN
                out.append((fam, addr))
    return out


def threads(pid):
    """{tid: (policy, nice)} from /proc/PID/task/*/stat."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
        except OSError:
            continue  # a thread that just ended
        fields = stat[stat.rindex(")") + 2:].split()  # fields from 3 on
        out[int(tid)] = (int(fields[41 - 3]), int(fields[19 - 3]))
    return out


def test_default_bind_loopback(t):
    with Server(sl.TINY) as s:
        t.check(("listening on http://127.0.0.1:%d" % s.port) in s.log_text(), "logged 127.0.0.1")
        ls = listeners(s.port)
        t.check(ls == [("tcp", "0100007F")], "one listening socket, on 127.0.0.1: %r" % ls)
        st, _, _ = s.request("GET", "/health")
        t.check(st == 200, "answers on loopback")


def test_tuning_thread_idle_priority(t):
    # a long interval: the tuning thread sets its priority at once, then sleeps
    with Server(sl.TINY, "--tune", "--llm", "none", "--tune-interval", "3600") as s:
        sl.complete(s, "Hello", max_tokens=2)
        # the tuning thread lowers itself when it first runs, which under load can be after
        # the server answers: wait for it (10 s), then check every thread
        deadline = time.time() + 10
        while True:
            th = threads(s.proc.pid)
            idle = [tid for tid, (pol, nice) in th.items() if pol == SCHED_IDLE]
            if idle or time.time() > deadline:
                break
            time.sleep(0.05)
        t.check(len(idle) == 1, "one SCHED_IDLE thread: %r" % th)
        t.check(all(th[tid][1] == 19 for tid in idle), "the idle thread at nice 19: %r" % th)
        others = [v for tid, v in th.items() if tid not in idle]
        # (connection threads sit at nice 5, below the engine's: engine/server.c)
        t.check(len(others) >= 2 and all(v in ((SCHED_OTHER, 0), (SCHED_OTHER, 5)) for v in others),
                "serving threads at SCHED_OTHER, nice 0 (connections: 5): %r" % others)
        t.check(th.get(s.proc.pid) == (SCHED_OTHER, 0), "the main thread is not lowered")
    with Server(sl.TINY) as s:  # without --tune: no idle thread at all
        th = threads(s.proc.pid)
        t.check(all(v in ((SCHED_OTHER, 0), (SCHED_OTHER, 5)) for v in th.values()),
                "no idle thread without --tune: %r" % th)


def main():
    if not os.path.isfile(sl.BIN) or not os.path.isfile(sl.TINY):
        print("skipped: needs %s and %s" % (sl.BIN, sl.TINY), file=sys.stderr)
        return sl.SKIP
    return sl.Checks().run([test_default_bind_loopback, test_tuning_thread_idle_priority])


if __name__ == "__main__":
    sys.exit(main())
