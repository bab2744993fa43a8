#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, a Release build with every test, then an
# AddressSanitizer + UndefinedBehaviorSanitizer build running the C tests again.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
JOBS=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"

if [ "${HONE_SKIP_SANITIZE:-0}" != 1 ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHONE_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$JOBS"
  # Under the sanitizers: the C tests of the engine, kernels, tokenizer, server, review, loader
  # and agent. Left out: the Python-driven tests (they spawn the engine many times), tests that
  # run candidates in the guard's seccomp workers (the sanitizer runtimes make system calls the
  # filters forbid), timing-based tests (an instrumented incumbent against an uninstrumented
  # candidate is not a fair race) and the search templates' bitwise test (there the baselines
  # carry the sanitizers' instrumentation, which changes how gcc forms their multiply-adds, so a
  # candidate from the one compile path cannot match their bits; the Release run checks it).
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$JOBS" \
      -E '^py_|guard_test_guard|guard_test_isolation|agent_test_tune|agent_test_slot_registry|agent_test_search$|candidates_test_store|server_test_tune_serve|profiler_test_profile'
fi
