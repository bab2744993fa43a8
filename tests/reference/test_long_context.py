#!/usr/bin/env python3
"""Long context (issue 18): a 4099-token prefill (past the 4096 boundary of the attention
kernels' tiles and of the guard's long cases) on tiny models with a 16k trained context,
against the float64 reference: NMSE (sum (hone - ref)^2 / sum ref^2 over every position's
logits) <= 1e-11, as the architecture variants of test_logits.py; and bitwise the same logits
for other prefill chunk sizes and thread counts (each output's reduction order is fixed by the
slot contract, never by how the work is cut).

Models: tiny-llama-long-f32 (full attention) and tiny-mistral-swa-long-f32 (a 1500-key
sliding window, so chunks cross the window's edge). Environment as test_logits.py."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from hone_logits import read_logits  # noqa: E402
from reference import ReferenceModel  # noqa: E402

SKIP = 77
NMSE_MAX = 1e-11
N_PROMPT = 4099
MODELS = ["tiny-llama-long-f32", "tiny-mistral-swa-long-f32"]
# (chunk, threads): the first is the engine's default chunk (64) on 2 threads; the other must
# match it bitwise (two runs a model keep the test under a minute on a loaded 2-core machine)
RUNS = {"tiny-llama-long-f32": [(None, "2"), (257, "1")],
        "tiny-mistral-swa-long-f32": [(None, "2"), (1000, "1")]}


def run_logits(hone, model, prompt, out, chunk, threads):
    cmd = [hone, "logits", "-m", model, "--prompt-tokens", ",".join(map(str, prompt)), "--steps", "1",
           "--all-positions", "--out", out, "-t", threads]
    if chunk:
        cmd += ["--chunk", str(chunk)]
    p = subprocess.run(cmd, capture_output=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError("hone failed (rc=%d): %s" % (p.returncode, p.stderr.decode("utf-8", "replace")[-2000:]))
    return read_logits(out)


def main():
    hone = os.environ.get("HONE_BIN")
    data = os.environ.get("HONE_TEST_DATA")
    if not hone or not data:
        print("HONE_BIN and HONE_TEST_DATA must be set (ctest sets them)", file=sys.stderr)
        return SKIP
    failed = 0
    with tempfile.TemporaryDirectory(prefix="hone-longctx-") as tmp:
        for name in MODELS:
            path = os.path.join(data, name + ".gguf")
            if not os.path.isfile(path):
                print("missing %s (run the make_testdata test)" % path, file=sys.stderr)
                return SKIP
            ref_model = ReferenceModel(path)
            ctx = int(ref_model._field("%s.context_length" % ref_model.arch))
            if ctx <= N_PROMPT:
                print("FAIL %s: trained context %d is not long" % (name, ctx), file=sys.stderr)
                failed += 1
                continue
            rng = np.random.default_rng(18)
            prompt = [1] + [int(t) for t in rng.integers(3, min(ref_model.n_vocab, 512), N_PROMPT - 1)]
            dumps = []
            for i, (chunk, threads) in enumerate(RUNS[name]):
                t0 = time.time()
                dumps.append(run_logits(hone, path, prompt, os.path.join(tmp, "%s-%d.bin" % (name, i)), chunk, threads))
                print("  %s chunk %s threads %s: %.1f s" % (name, chunk or "default", threads, time.time() - t0),
                      file=sys.stderr)
            d = dumps[0]
            rows = [int(p) for p in d.row_pos]
            if sorted(rows) != list(range(N_PROMPT)):
                print("FAIL %s: rows for %d of %d prompt positions" % (name, len(set(rows)), N_PROMPT), file=sys.stderr)
                failed += 1
                continue
            for (chunk, threads), e in zip(RUNS[name][1:], dumps[1:]):
                same = (e.logits.shape == d.logits.shape and list(e.row_pos) == list(d.row_pos) and
                        e.logits.tobytes() == d.logits.tobytes())
                if not same:
                    diff = np.abs(e.logits.astype(np.float64) - d.logits).max() if e.logits.shape == d.logits.shape else -1
                    print("FAIL %s: chunk %s threads %s is not bitwise the default's (max |d| %g)"
                          % (name, chunk, threads, diff), file=sys.stderr)
                    failed += 1
            t0 = time.time()
            ref = ref_model.logits(d.tokens[:N_PROMPT])[d.row_pos]
            got = d.logits.astype(np.float64)
            nmse = float(((got - ref) ** 2).sum() / (ref ** 2).sum())
            tail = float(((got[-64:] - ref[-64:]) ** 2).sum() / (ref[-64:] ** 2).sum())
            agree = float((got.argmax(axis=1) == ref.argmax(axis=1)).mean())
            ok = nmse <= NMSE_MAX and tail <= NMSE_MAX and np.isfinite(got).all()
            failed += not ok
            print("%s %s: %d positions, NMSE %.3g (last 64: %.3g; max %g), argmax agree %.4f, reference %.1f s"
                  % ("ok  " if ok else "FAIL", name, N_PROMPT, nmse, tail, NMSE_MAX, agree, time.time() - t0),
                  file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
