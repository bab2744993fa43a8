#!/usr/bin/env python3
"""SIGTERM cancels a running tuning guard: `hone serve --tune --llm none` on the tiny model
guards search candidates back to back (--tune-interval 0); a SIGTERM while the tuner is
"guarding" ends the process, exit 0, within a bound (the guard's workers and compiler are
killed through hone_guard_opts.cancel instead of running to their verdict, ~25 s before), and
leaves nothing half-written: every candidate in the state directory is whole (meta.json parses,
no temp files or private compile directories), the cancelled one has no verdict or evidence, and
the review repository has no branch, no lock file and passes `git fsck`.
All traffic is to 127.0.0.1; every wait is bounded."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

# Generous against a loaded CI machine: the point is that nothing waits for a verdict (before
# the cancel hook a SIGTERM mid-guard took ~24.5 s); this measures the whole drain and exit.
EXIT_BOUND_S = 3.0


def tuning(s):
    st, _, body = s.request("GET", "/v1/hone/tuning", timeout=10)
    return json.loads(body) if st == 200 else {}


def make_repo(d):
    subprocess.run(["git", "init", "-q", d], check=True)
    subprocess.run(["git", "-C", d, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "base"], check=True)


def check_state_dir(t, state):
    cands = os.path.join(state, "candidates")
    names = os.listdir(cands) if os.path.isdir(cands) else []
    t.check(len(names) >= 1, "the guarded candidate is in the store (%d)" % len(names))
    stray = []
    unjudged = 0
    for root, dirs, files in os.walk(state):
        for n in dirs + files:
            if ".tmp." in n or n.startswith(".hone-cc."):
                stray.append(os.path.join(root, n))
    for h in names:
        d = os.path.join(cands, h)
        try:
            with open(os.path.join(d, "meta.json")) as f:
                meta = json.load(f)
        except (OSError, ValueError) as e:
            t.check(False, "candidate %s has a whole meta.json: %s" % (h[:12], e))
            continue
        verdict = meta.get("state") in ("accepted", "rejected")
        t.check(verdict == os.path.exists(os.path.join(d, "evidence.json")),
                "candidate %s: evidence.json exactly when it has a verdict (%s)" % (h[:12], meta.get("state")))
        unjudged += not verdict
    t.check(not stray, "no temp files or compile directories left: %r" % stray[:5])
    t.check(unjudged >= 1, "the cancelled candidate is kept without a verdict")


def check_repo(t, repo):
    branches = subprocess.run(["git", "-C", repo, "branch", "--list", "hone/*"], capture_output=True,
                              text=True).stdout.strip()
    t.check(branches == "", "no review branch from a cancelled guard: %r" % branches)
    locks = [os.path.join(r, n) for r, _, fs in os.walk(os.path.join(repo, ".git")) for n in fs
             if n.endswith(".lock")]
    t.check(not locks, "no lock files in the repository: %r" % locks)
    fsck = subprocess.run(["git", "-C", repo, "fsck", "--strict", "--no-progress"], capture_output=True, text=True)
    t.check(fsck.returncode == 0, "git fsck passes: %s" % fsck.stderr[-300:])
    st = subprocess.run(["git", "-C", repo, "status", "--porcelain"], capture_output=True, text=True).stdout
    t.check(st == "", "the working tree is untouched: %r" % st)


def test_sigterm_cancels_guard(t):
    tmp = tempfile.mkdtemp(prefix="hone-tune-cancel-")
    repo, state = os.path.join(tmp, "repo"), os.path.join(tmp, "state")
    make_repo(repo)
    s = Server(sl.TINY, "--tune", "--llm", "none", "--tune-interval", "0", "--tune-budget", "20",
               "--tune-repo", repo, "--tune-state-dir", state)
    try:
        # traffic until the tuner has a profile and starts guarding its first candidate
        guarding, j = False, {}
        deadline = time.time() + 120
        while time.time() < deadline and not guarding:
            sl.complete(s, "Once upon a time", max_tokens=8)
            j = tuning(s)
            guarding = j.get("state") == "guarding"
        t.check(guarding, "the tuner reached a guard: %r" % j.get("state"))
        if not guarding:
            return
        proposed = j.get("candidates", {}).get("proposed")
        time.sleep(0.5)  # inside the guard: its compile or a gate's worker
        j = tuning(s)
        t.check(j.get("state") == "guarding" and j.get("candidates", {}).get("proposed") == proposed,
                "still guarding the same candidate before the signal: %r" % j.get("state"))
        t0 = time.time()
        code = s.terminate(timeout=60)
        dt = time.time() - t0
        print("  exit %.2f s after SIGTERM, mid-guard" % dt, file=sys.stderr)
        log = s.log_text()
        t.check(code == 0, "exit code %r" % code)
        t.check(dt < EXIT_BOUND_S, "exited %.2f s after SIGTERM (bound %.1f s)" % (dt, EXIT_BOUND_S))
        t.check("tune: cancelled" in log, "the tuner logged the cancelled guard")
        t.check("hone serve: stopped" in log, "logged the stop")
        t.check("tune: accepted" not in log and "tune: rejected" not in log.split("tune: cancelled")[-1],
                "no verdict recorded after the cancel")
        check_state_dir(t, state)
        check_repo(t, repo)
    finally:
        s.kill()
        subprocess.run(["rm", "-rf", tmp])


def main():
    if not os.path.isfile(sl.BIN) or not os.path.isfile(sl.TINY):
        print("skipped: needs %s and %s" % (sl.BIN, sl.TINY), file=sys.stderr)
        return sl.SKIP
    return sl.Checks().run([test_sigterm_cancels_guard])


if __name__ == "__main__":
    sys.exit(main())
