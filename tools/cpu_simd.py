"""Whether this host builds the kernels' SIMD paths: kernels/cpu/common.h defines HONE_CPU_SIMD
only with AVX-512 F, BW, DQ and VL, and candidates are compiled with -march=native, so on an
AVX2-only host the search proposer's templates render the generic path (the incumbent's own
code) and a search there cannot find a faster kernel. Tests that need that speedup skip (exit
77) with NEEDS_AVX512."""

NEEDS_AVX512 = "skipped: needs AVX-512: the kernels' SIMD paths are AVX-512 only"

_FLAGS = ("avx512f", "avx512bw", "avx512dq", "avx512vl")


def has_kernel_simd(cpuinfo="/proc/cpuinfo"):
    """True when every CPU's flags line lists AVX-512 F, BW, DQ and VL."""
    try:
        with open(cpuinfo) as f:
            lines = [ln for ln in f if ln.startswith("flags")]
    except OSError:
        return False
    return bool(lines) and all(set(_FLAGS) <= set(ln.split(":", 1)[1].split()) for ln in lines)


if __name__ == "__main__":
    print("kernel SIMD (AVX-512):", "yes" if has_kernel_simd() else "no")
