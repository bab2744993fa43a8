#!/usr/bin/env bash
# The benchmark peer for bench/peer.py: llama.cpp through the llama-cpp-python package, built
# from source for this CPU (GGML_NATIVE). A benchmark-only dependency: the engine and the test
# suite never need it. Takes several minutes on 2 cores.
set -euo pipefail
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
if python3 -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null; then
  echo "setup_peer: llama-cpp-python $version already installed"; exit 0
fi
args="-DGGML_NATIVE=ON"
# On CPUs with AMX (Sapphire Rapids and later) this version's AMX path segfaults on every
# quantised file in a 64-token batch (seen here on q8_0, q4_0 and SmolLM2's Q4_1); built without
# AMX, ggml uses its AVX-512 VNNI kernels and runs them all.
if grep -q -m1 -w amx_int8 /proc/cpuinfo 2>/dev/null; then
  flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  args="$args \"-DCMAKE_C_FLAGS=$flags\" \"-DCMAKE_CXX_FLAGS=$flags\""
fi
CMAKE_ARGS="$args" python3 -m pip install --no-cache-dir "llama-cpp-python==$version"
