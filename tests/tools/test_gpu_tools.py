#!/usr/bin/env python3
"""The CPU-side tools of the GPU run, on the CPU machine:

- tools/gguf_skeleton.py: the skeleton of a tiny test model keeps its header only (smaller than
  the model); the model made from it has the source's metadata, tensor names, shapes and types
  ("native"), or every 2-D tensor f16 / f32 and 1-D f32 with general.file_type to match; the
  same seed gives the same bytes; its Q4_1 / Q8_0 blocks dequantise (gguf's reader) to within
  half a quantisation step (and the f16 rounding of the block scales) of the random weights the f32 model holds; and `hone info` and
  `hone generate` load and run it.
- tests/gpu/ctest_verdict.py: a JUnit file where every named test passed is a pass; a skip
  (exit 77), a failure, or a named test absent from the run is a failure, and says which.
Skipped (exit 77) without the gguf package."""
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("HONE_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.environ.get("HONE_TEST_DATA") or os.path.join(SRC, "build", "testdata")
HONE = os.environ.get("HONE_BIN") or os.path.join(SRC, "build", "hone")
SKEL = os.path.join(SRC, "tools", "gguf_skeleton.py")
VERDICT = os.path.join(SRC, "tests", "gpu", "ctest_verdict.py")
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("CHECK failed: %s" % what, file=sys.stderr)


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout + p.stderr


def fields(r):
    out = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        out[k] = [bytes(f.parts[i]) for i in f.data]
    return out


def test_skeleton(tmp):
    import gguf
    import numpy as np
    from gguf.quants import dequantize

    src = os.path.join(DATA, "tiny-llama-q4_1.gguf")
    skel = os.path.join(tmp, "tiny.skel.gz")
    rc, out = run(sys.executable, SKEL, "extract", src, skel)
    check(rc == 0, "extract: %s" % out)
    check(os.path.getsize(skel) < os.path.getsize(src) // 4, "the skeleton holds no weights")
    made = {}
    for dt in ("native", "f16", "f32"):
        made[dt] = os.path.join(tmp, "tiny-%s.gguf" % dt)
        rc, out = run(sys.executable, SKEL, "make", skel, made[dt], "--dtype", dt, "--seed", "7")
        check(rc == 0, "make %s: %s" % (dt, out))
    again = os.path.join(tmp, "again.gguf")
    run(sys.executable, SKEL, "make", skel, again, "--dtype", "native", "--seed", "7")
    check(open(again, "rb").read() == open(made["native"], "rb").read(), "same seed, same bytes")
    other = os.path.join(tmp, "other.gguf")
    run(sys.executable, SKEL, "make", skel, other, "--dtype", "native", "--seed", "8")
    check(open(other, "rb").read() != open(made["native"], "rb").read(), "another seed, other weights")

    a = gguf.GGUFReader(src)
    n = gguf.GGUFReader(made["native"])
    h = gguf.GGUFReader(made["f16"])
    f = gguf.GGUFReader(made["f32"])
    check(os.path.getsize(made["native"]) == os.path.getsize(src), "native: the source's size")
    check([(t.name, list(t.shape), t.tensor_type) for t in a.tensors] ==
          [(t.name, list(t.shape), t.tensor_type) for t in n.tensors], "native: names, shapes, types")
    check(fields(a) == fields(n), "native: the metadata verbatim")
    fa, fh = fields(a), fields(h)
    check(all(fa[k] == fh[k] for k in fa if k != "general.file_type"), "f16: the metadata but the file type")
    check(int(h.fields["general.file_type"].parts[-1][0]) == 1, "f16: general.file_type MOSTLY_F16")
    check(int(f.fields["general.file_type"].parts[-1][0]) == 0, "f32: general.file_type ALL_F32")
    for t in h.tensors:
        want = gguf.GGMLQuantizationType.F16 if len(t.shape) >= 2 else gguf.GGMLQuantizationType.F32
        check(t.tensor_type == want, "f16: %s is %s" % (t.name, t.tensor_type.name))
    # the quantised blocks hold the f32 model's weights (the same per-tensor random stream)
    f32 = {t.name: np.asarray(t.data, np.float32).reshape(-1) for t in f.tensors}
    seen = set()
    for t in n.tensors:
        if t.tensor_type.name not in ("Q4_1", "Q8_0", "Q4_0"):
            continue
        seen.add(t.tensor_type.name)
        x = f32[t.name].reshape(-1, 32)
        d = dequantize(t.data, t.tensor_type).astype(np.float64).reshape(-1, 32)
        span = (x.max(axis=1) - x.min(axis=1)) if t.tensor_type.name == "Q4_1" else 2 * np.abs(x).max(axis=1)
        step = span / (15.0 if t.tensor_type.name != "Q8_0" else 254.0)
        err = np.abs(d - x).max(axis=1)
        # half a step, plus the f16 rounding of the block's scale (and minimum): 2^-11 relative
        bound = 0.5 * step + 2.0 ** -10 * (np.abs(x).max(axis=1) + 16 * step) + 1e-7
        check(bool(np.all(err <= bound)),
              "%s (%s): max error %.3g over half a step %.3g" % (t.name, t.tensor_type.name, err.max(),
                                                             0.5 * step.max()))
    check("Q4_1" in seen, "the tiny Q4_1 model has Q4_1 tensors: %s" % sorted(seen))
    for dt, path in made.items():
        rc, out = run(HONE, "info", "-m", path)
        check(rc == 0, "hone info on the %s model: %s" % (dt, out[-400:]))
        rc, out = run(HONE, "generate", "-m", path, "-p", "hello", "-n", "4", "--temp", "0", "--device", "cpu", "-t", "1")
        check(rc == 0 and "generated 4 tokens" in out, "hone generate on the %s model: %s" % (dt, out[-400:]))


def junit(path, cases):
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="t" tests="%d">\n' % len(cases))
        for name, status in cases:
            if status == "skipped":
                f.write('<testcase name="%s" classname="%s" time="0.01" status="notrun">'
                        '<skipped message="SKIP_RETURN_CODE=77"/></testcase>\n' % (name, name))
            elif status == "failed":
                f.write('<testcase name="%s" classname="%s" time="0.5" status="fail">'
                        '<failure message="Failed"/></testcase>\n' % (name, name))
            else:
                f.write('<testcase name="%s" classname="%s" time="1.5" status="run"/>\n' % (name, name))
        f.write("</testsuite>\n")


def test_verdict(tmp):
    x = os.path.join(tmp, "j.xml")
    junit(x, [("gpu_a", "passed"), ("gpu_b", "passed")])
    rc, out = run(sys.executable, VERDICT, x, "gpu_a", "gpu_b")
    check(rc == 0 and "2 passed, 0 failed, 0 skipped, 0 absent" in out, "all passed: %d %s" % (rc, out))
    junit(x, [("gpu_a", "passed"), ("gpu_b", "skipped")])
    rc, out = run(sys.executable, VERDICT, x, "gpu_a", "gpu_b")
    check(rc == 1 and "gpu_b: skipped" in out and "SKIP_RETURN_CODE=77" in out, "a skip fails: %d %s" % (rc, out))
    junit(x, [("gpu_a", "failed")])
    rc, out = run(sys.executable, VERDICT, x, "gpu_a", "gpu_c")
    check(rc == 1 and "gpu_a: failed" in out and "gpu_c: absent" in out, "failed and absent: %d %s" % (rc, out))
    log = os.path.join(tmp, "ctest.log")
    with open(log, "w") as f:
        f.write("1/2 Test #5: gpu_a ..............   Passed    1.20 sec\n"
                "2/2 Test #6: gpu_b ..............***Skipped   0.01 sec\n")
    rc, out = run(sys.executable, VERDICT, log, "gpu_a", "gpu_b")
    check(rc == 1 and "gpu_a: passed" in out and "gpu_b: skipped" in out, "from a ctest log: %d %s" % (rc, out))


def main():
    try:
        import gguf  # noqa: F401
    except ImportError:
        print("skipped: the gguf package is not installed", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory(prefix="hone-gputools-") as tmp:
        test_skeleton(tmp)
        test_verdict(tmp)
    print("test_gpu_tools: %s" % ("FAILED" if failed else "ok"), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
