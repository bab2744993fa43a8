#!/usr/bin/env python3
"""Replicas, one kernels repository: two `hone tune --push` on SmolLM2 run at once against the
same repository and its origin, both proposed the same candidate by a scripted endpoint
(tests/agent/fake_llm.py replying with tests/guard/good/rmsnorm_vec.c, exact tier and
compute-bound, so its acceptance does not hang on the machine's memory traffic): when both
accept it, the duplicate must come out as one branch.
Afterwards every branch either committed is there, locally and on origin at the same commit;
each candidate is one branch (a candidate both accepted too); `git fsck` is clean on both; the
work tree, index and HEAD are as they were. Then `hone review pr` for a real branch: its sections,
and its numbers equal the evidence the branch commits. Exit 77 without SmolLM2 or the hone binary."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HONE = os.environ.get("HONE_BIN", "")
SRC = os.environ.get("HONE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tools"))
from find_smollm2 import find_smollm2  # noqa: E402


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    if p.returncode:
        print("$", " ".join(cmd), "->", p.returncode, p.stdout[-2000:], p.stderr[-2000:], sep="\n", flush=True)
    return p


def out(cmd):
    p = run(cmd)
    assert p.returncode == 0, cmd
    return p.stdout.strip()


def check_pr(repo, branch):
    """The PR body's sections, and its figures formatted from the committed evidence."""
    p = run([HONE, "review", "pr", branch, "--repo", repo])
    assert p.returncode == 0, p.stderr
    title, body = p.stdout.split("\n\n", 1)
    assert title == out(["git", "-C", repo, "log", "-1", "--format=%s", branch]), title
    last = -1
    for s in ["## What changed", "## Speedup", "## Parity", "## Machine", "## How to reproduce", "## Report"]:
        at = body.find("\n" + s + "\n") if not body.startswith(s) else 0
        assert at > last, f"section {s} missing or out of order"
        last = at
    ev = json.loads(out(["git", "-C", repo, "show", f"{branch}:kernels/cpu/rmsnorm.evidence.json"]))
    sp, kp, mp = ev["speed"], ev["kernel_parity"], ev["model_parity"]
    # the seed with every digit: a decimal string in the evidence JSON
    seed = int(ev["seed"])
    want = [
        f"Median speedup **{sp['speedup_median']:.3f}x**",
        f"the gate asks for {sp['threshold']:.3f}x",
        f"Tier **{kp['tier']}**",
        f"| max abs error vs f64 oracle, candidate | {kp['candidate_max_abs_err']:.3e} |",
        f"| max abs error vs f64 oracle, incumbent | {kp['incumbent_max_abs_err']:.3e} |",
        f"| model max abs delta-logit | {mp['max_abs_dlogit']:.3e} |",
        f"| model KL per position, max | {mp['kl_max']:.3e} |",
        f"| argmax agreement | {mp['argmax_agreement'] * 100:.2f}% |",
        f"| parity prompt set | {mp['prompts']} prompts x {mp['steps']} steps |",
        f"- device: {ev['device']}",
        f"- model: {ev['model']}",
        f"- candidate: `{ev['candidate']['hash']}`",
        f"hone review verify {branch} -m MODEL.gguf -- --seed {seed}",
        f"- input seed: {seed}\n",
        f"hone review show {branch} --report DIR",
    ]
    if sp.get("ci_low") is not None and sp.get("ci_high") is not None:
        want.append(f"CI {sp['ci_low']:.3f} .. {sp['ci_high']:.3f})")
    if isinstance(sp.get("reps"), (int, float)):
        want.append(f"of {sp['reps']:.0f} repetitions each")
    if not any(isinstance(v, list) for v in list(sp.values()) + list(ev.values())):
        want.append(f"| {sp['incumbent_ns']:.1f} | {sp['candidate_ns']:.1f} | {sp['speedup_median']:.3f}x |")
    for w in want:
        assert w in body, f"PR body lacks {w!r}:\n{body}"
    git_dir = out(["git", "-C", repo, "rev-parse", "--absolute-git-dir"])
    name = branch.split("/")
    written = os.path.join(git_dir, "hone", "pr", f"{name[1]}.{name[2]}.{name[3]}.md")
    with open(written) as f:
        assert f.read() == body, "the written body differs from the printed one"
    print("PR body for", branch, "checked:", len(want), "figures and lines")


def main():
    model = find_smollm2()
    if not HONE or not os.access(HONE, os.X_OK) or not model:
        print("no hone binary or SmolLM2 not installed: skipping")
        return 77
    tmp = tempfile.mkdtemp(prefix="hone-tune-push-")
    try:
        # the shipped kernels on main, and an empty origin
        repo, bare = os.path.join(tmp, "kernels-repo"), os.path.join(tmp, "origin.git")
        shutil.copytree(os.path.join(SRC, "kernels"), os.path.join(repo, "kernels"))
        for cmd in (["init", "-q", "-b", "main", repo], ["-C", repo, "add", "-A"],
                    ["-C", repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "shipped"],
                    ["init", "-q", "--bare", "-b", "main", bare],
                    ["-C", repo, "remote", "add", "origin", "file://" + bare]):
            out(["git"] + cmd)
        head = out(["git", "-C", repo, "rev-parse", "HEAD"])

        # the scripted endpoint: the same kernel for both replicas
        with open(os.path.join(SRC, "tests", "guard", "good", "rmsnorm_vec.c")) as f:
            reply = "Four vector accumulators:\n\n```c\n" + f.read() + "```\n"
        script = os.path.join(tmp, "script.json")
        with open(script, "w") as f:
            json.dump([{"reply": reply}, {"reply": reply}], f)
        llm = subprocess.Popen([sys.executable, os.path.join(SRC, "tests", "agent", "fake_llm.py"), "--script", script,
                                "--log", os.path.join(tmp, "requests.jsonl")], stdout=subprocess.PIPE, text=True)
        port = int(llm.stdout.readline())
        # two replicas at once, each with its own candidate store, one repository and origin
        procs = [subprocess.Popen([HONE, "tune", "-m", model, "--llm", f"http://127.0.0.1:{port}/v1", "--llm-model",
                                   "scripted", "--slot", "rmsnorm", "--budget", "1", "--repo", repo, "--state-dir",
                                   os.path.join(tmp, f"state{i}"), "-t", "1", "--push"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(2)]
        logs = []
        for p in procs:
            o, e = p.communicate(timeout=1800)
            print(e[-3000:], flush=True)
            assert p.returncode == 0, "tune failed"
            logs.append(e)
        llm.kill()
        llm.wait()
        committed = set()
        accepted = []
        for e in logs:
            committed |= set(re.findall(r"committed for review: (hone/\S+)", e))
            accepted += re.findall(r"\] rmsnorm\s+([0-9a-f]{12}) .*ACCEPTED", e)
            pushes = re.findall(r"pushed to (\S+)", e)
            fails = re.findall(r"push failed: (.*)", e)
            assert not fails, fails
            assert len(pushes) == len(re.findall(r"committed for review: ", e)), "a committed branch was not pushed"
        assert accepted, "the scripted candidate was accepted by neither replica"
        assert committed, "no branch was committed"

        local = dict(ln.split() for ln in out(["git", "-C", repo, "for-each-ref", "--format=%(refname:short) %(objectname)",
                                               "refs/heads/hone"]).splitlines())
        remote = dict(ln.split() for ln in out(["git", "--git-dir", bare, "for-each-ref",
                                                "--format=%(refname:short) %(objectname)", "refs/heads/hone"]).splitlines())
        assert set(local) == committed, (local, committed)
        assert local == remote, (local, remote)
        cands = [out(["git", "-C", repo, "log", "-1", "--format=%(trailers:key=Hone-Candidate,valueonly)", b])
                 for b in local]
        assert len(set(cands)) == len(cands), f"one candidate, two branches: {cands}"
        for h in set(accepted):
            n = sum(1 for b in local if b.endswith("/" + h))
            assert n <= 1, f"candidate {h} has {n} branches"
        if len(accepted) != len(set(accepted)):
            print("both replicas accepted", [h for h in set(accepted) if accepted.count(h) > 1], "-> one branch each")
        assert run(["git", "-C", repo, "fsck", "--strict", "--no-dangling"]).returncode == 0
        assert run(["git", "--git-dir", bare, "fsck", "--strict", "--no-dangling"]).returncode == 0
        assert out(["git", "-C", repo, "rev-parse", "HEAD"]) == head
        assert out(["git", "-C", repo, "status", "--porcelain"]) == ""
        st = out([HONE, "review", "status", "--repo", repo])
        print(st)
        for b in local:
            assert re.search(re.escape(b) + r"\s+\S+\s+yes\s", st), f"status does not show {b} pushed"

        check_pr(repo, sorted(local)[0])
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
