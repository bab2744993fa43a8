#!/usr/bin/env python3
"""tests/gpu/run.sh on this (GPU-less) machine, over the build ctest runs in: the versions and
slots phases against the built tests. The slot tests skip (exit 77, which ctest itself counts as
passed), and run.sh must not: it names the skip, says "NOT A GPU RUN" and exits 1, with the
versions and the phase lines in summary.txt; an unknown phase is a usage error (exit 2).
Run by ctest (HONE_SOURCE_DIR, HONE_BIN set); HONE_GPU_BUILD is the build of HONE_BIN."""
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("HONE_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
HONE = os.environ.get("HONE_BIN") or os.path.join(SRC, "build", "hone")
BUILD = os.path.dirname(os.path.abspath(HONE))
RUN = os.path.join(SRC, "tests", "gpu", "run.sh")
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("CHECK failed: %s" % what, file=sys.stderr)


def main():
    with tempfile.TemporaryDirectory(prefix="hone-runsh-") as out:
        env = dict(os.environ, OUT=out, HONE_GPU_BUILD=BUILD, HONE_GPU_DEADLINE_S="300",
                   HONE_GPU_BUNDLE=os.path.join(out, "no-bundle"))
        p = subprocess.run([RUN, "versions", "slots"], env=env, capture_output=True, text=True,
                           errors="replace", timeout=400)
        summary = open(os.path.join(out, "summary.txt")).read()
        check(p.returncode == 1, "no GPU: exit 1, not %d\n%s" % (p.returncode, summary))
        check("versions: ok" in summary and "runtime:" in summary or "not found under" in summary,
              "the versions come first: %s" % summary[:600])
        check("gpu_test_cuda_slots: skipped" in summary, "the skip is named: %s" % summary)
        check("slots: FAILED" in summary, "a phase whose test skipped fails: %s" % summary)
        check("NOT A GPU RUN" in summary and "RESULT: FAIL" in summary, "the verdict: %s" % summary[-400:])
        check(os.path.isfile(os.path.join(out, "env.txt")) and os.path.isfile(os.path.join(out, "tests.log")),
              "env.txt and tests.log are written")
        check(len(os.listdir(out)) <= 8, "at most 8 files come back from a device run: %s" % os.listdir(out))
        p = subprocess.run([RUN, "no-such-phase"], env=env, capture_output=True, text=True, errors="replace")
        check(p.returncode == 2 and "unknown phase" in p.stderr, "an unknown phase: %d %s" % (p.returncode, p.stderr))
    print("test_run_sh: %s" % ("FAILED" if failed else "ok"), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
