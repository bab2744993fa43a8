#!/usr/bin/env python3
"""tools/cpu_simd.py on made-up /proc/cpuinfo files: AVX-512 F+BW+DQ+VL on every CPU is the
kernels' SIMD host; an AVX2-only CPU (this project's znver3 machines), one CPU missing a flag,
no flags line or no file are not; and the answer for this host agrees with its own flags."""
import os
import sys
import tempfile

SRC = os.environ.get("HONE_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(SRC, "tools"))
from cpu_simd import NEEDS_AVX512, has_kernel_simd  # noqa: E402

failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("CHECK failed:", what)


AVX2 = "fpu sse2 avx f16c fma avx2 bmi2"
AVX512 = AVX2 + " avx512f avx512dq avx512bw avx512vl avx512_bf16"


def judge(text):
    with tempfile.NamedTemporaryFile("w", suffix=".cpuinfo", delete=False) as f:
        f.write(text)
    try:
        return has_kernel_simd(f.name)
    finally:
        os.unlink(f.name)


def cpus(*flags):
    return "".join("processor\t: %d\nflags\t\t: %s\n\n" % (i, fl) for i, fl in enumerate(flags))


check(judge(cpus(AVX512, AVX512)) is True, "two AVX-512 CPUs")
check(judge(cpus(AVX2, AVX2)) is False, "AVX2-only CPUs")
check(judge(cpus(AVX512, AVX512.replace(" avx512vl", ""))) is False, "one CPU without avx512vl")
check(judge(cpus(AVX2 + " avx512f")) is False, "avx512f alone")
check(judge("processor\t: 0\n") is False, "no flags line")
check(has_kernel_simd("/nonexistent/cpuinfo") is False, "no cpuinfo file")
check("needs AVX-512" in NEEDS_AVX512, "the skip message")
if os.path.exists("/proc/cpuinfo"):
    with open("/proc/cpuinfo") as f:
        own = [ln for ln in f if ln.startswith("flags")]
    want = bool(own) and all({"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= set(ln.split()) for ln in own)
    check(has_kernel_simd() == want, "this host")
print("%d failed" % failed)
sys.exit(1 if failed else 0)
