"""The loop finds the speed: a suite of deliberately naive but correct incumbents (bitwise the
shipped results, tests/agent/naive/<slot>.c) is served as an approved kernels tree, and
`hone tune --kernels TREE --llm none` must find an accepted faster kernel for every one of them
on SmolLM2 (the search proposer's templates, through every gate of the guard, against the naive
kernel as the incumbent). Prints fast_1.0 (the share of slots with an accepted faster kernel)
and the geometric-mean speedup as JSON on stdout.

Exit 77 without SmolLM2 or the hone binary, or without AVX-512: the templates' fast paths are
under HONE_CPU_SIMD (AVX-512 only), so on an AVX2 host a point renders the generic path and
whether that beats a naive incumbent is not what this suite measures.

Environment (set by ctest): HONE_BIN, HONE_SOURCE_DIR; SmolLM2 from tools/find_smollm2.py.
HONE_NAIVE_SLOTS=slot,slot,... runs a subset.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("HONE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("HONE_BIN") or os.path.join(SRC, "build", "hone")
NAIVE = os.path.join(HERE, "naive")  # a kernels tree: naive/cpu/<slot>.c
SKIP = 77


def smollm2():
    sys.path.insert(0, os.path.join(SRC, "tools"))
    try:
        from find_smollm2 import find_smollm2
        return find_smollm2()
    except Exception:
        return None


def main():
    model = smollm2()
    if not model or not os.path.isfile(model) or not os.path.isfile(BIN):
        print("skipped: needs SmolLM2 (tools/find_smollm2.py) and %s" % BIN, file=sys.stderr)
        return SKIP
    sys.path.insert(0, os.path.join(SRC, "tools"))
    from cpu_simd import NEEDS_AVX512, has_kernel_simd
    if not has_kernel_simd():
        print(NEEDS_AVX512, file=sys.stderr)
        return SKIP
    slots = sorted(f[:-2] for f in os.listdir(os.path.join(NAIVE, "cpu")) if f.endswith(".c"))
    only = os.environ.get("HONE_NAIVE_SLOTS")
    if only:
        slots = [s for s in slots if s in only.split(",")]
    failed = 0
    work = tempfile.mkdtemp(prefix="hone-naive-")
    results = {}
    try:
        tree = os.path.join(work, "kernels")
        os.makedirs(os.path.join(tree, "cpu"))
        for s in slots:
            shutil.copy(os.path.join(NAIVE, "cpu", s + ".c"), os.path.join(tree, "cpu", s + ".c"))
        for s in slots:
            cmd = [BIN, "tune", "-m", model, "--kernels", tree, "--llm", "none", "--slot", s,
                   "--budget", "1", "--screen", "12", "--no-commit", "--state-dir", os.path.join(work, "state")]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            out = p.stdout + p.stderr
            sys.stderr.write("$ %s\n%s\n" % (" ".join(cmd), out))
            served = re.search(r"serving .*: (\d+) approved kernel\(s\) installed, (\d+) refused", out)
            ok_served = served is not None and int(served.group(1)) == len(slots) and served.group(2) == "0"
            m = re.search(r"tune: %s\s+\d+\s+(\d+)\s+([\d.]+)x (exact|faithful)" % re.escape(s), out)
            speedup = float(m.group(2)) if m and int(m.group(1)) > 0 else None
            results[s] = speedup
            if p.returncode != 0 or not ok_served or speedup is None or speedup <= 1.0:
                failed += 1
                print("CHECK failed: %s: rc %d, served %s, speedup %s" % (s, p.returncode, ok_served, speedup),
                      file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    fast = [v for v in results.values() if v]
    summary = {
        "model": os.path.basename(model),
        "slots": results,
        "fast_1.0": len(fast) / len(results) if results else 0.0,
        "geomean_speedup": math.exp(sum(math.log(v) for v in fast) / len(fast)) if fast else None,
    }
    print(json.dumps(summary, indent=2))
    print("%d slots, %d failed" % (len(slots), failed), file=sys.stderr)
    return 1 if failed or not slots else 0


if __name__ == "__main__":
    sys.exit(main())
