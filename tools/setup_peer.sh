#!/usr/bin/env bash
# The benchmark peer for bench/peer.py: llama.cpp through the llama-cpp-python package, built
# from source for this CPU (GGML_NATIVE). A benchmark-only dependency: the engine and the test
# suite never need it. Takes several minutes on 2 cores.
set -euo pipefail
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
if python3 -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null; then
  echo "setup_peer: llama-cpp-python $version already installed"; exit 0
fi
CMAKE_ARGS="-DGGML_NATIVE=ON" python3 -m pip install --no-cache-dir "llama-cpp-python==$version"
