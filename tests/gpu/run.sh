#!/usr/bin/env bash
# All GPU work in one go, on a machine with a GPU (sized for an H200, under 10 minutes):
# a clean Release build, the NVRTC compile test, every ctest labelled gpu, then
# bench/decode --device cuda. Logs and results go under $OUT (default ./gpu-out):
#   summary.txt  build.log  ctest.log  bench_decode_cuda.json  bench.log  nvidia-smi.txt
# Exit status: 0 when the build and every test passed (the bench is reported, not judged).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${HONE_GPU_BUILD:-$ROOT/build-gpu}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
T0=$(date +%s)
status=0

say "hone GPU run: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if command -v nvidia-smi >/dev/null; then nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1; fi
say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"

# Set-up only when something is missing (the machine may have no network).
if ! python3 -c "import numpy, gguf" 2>/dev/null || ! pkg-config --exists libpcre2-8 libcjson; then
  timeout 300 ./tools/setup.sh >"$OUT/setup.log" 2>&1 || say "warning: tools/setup.sh failed (see setup.log)"
fi

# The cubin cache stays with the build tree, so a re-run compiles nothing.
export XDG_CACHE_HOME=$BUILD/cache
export HONE_BENCH_DIR=$BUILD/bench-models

rm -rf "$BUILD"
if timeout 300 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
   timeout 300 cmake --build "$BUILD" -j"$(nproc)" >>"$OUT/build.log" 2>&1; then
  say "build: ok ($(( $(date +%s) - T0 )) s)"
else
  say "build: FAILED (see build.log)"; tail -30 "$OUT/build.log" >>"$SUMMARY"; exit 1
fi
grep -q "CUDA toolkit      TRUE" "$OUT/build.log" || say "warning: CMake did not find the CUDA toolkit"

# gpu-labelled tests plus the NVRTC compile test (the testdata fixture is pulled in by ctest).
if timeout 540 ctest --test-dir "$BUILD" -R '^(gpu_|cuda_)' --output-on-failure --timeout 300 \
     >"$OUT/ctest.log" 2>&1; then
  say "ctest gpu: ok"
else
  say "ctest gpu: FAILED (see ctest.log)"; status=1
fi
grep -E "tests passed|Passed|Failed|Not Run|Skipped|\*\*\*" "$OUT/ctest.log" | tail -20 >>"$SUMMARY"
grep -E "^(tests/|  |device:)|max \|dlogit\|" "$OUT/ctest.log" | head -80 >"$OUT/ctest_details.txt" || true
if grep -q "Skipped" "$OUT/ctest.log"; then say "warning: some GPU tests were skipped (no device?)"; fi

# The decode benchmark: SmolLM2-135M Q4_1, f16, f32 on the GPU.
if timeout 240 "$BUILD/bench/decode" --device cuda --prompt 64 --tokens 128 --reps 5 \
     >"$OUT/bench_decode_cuda.json" 2>"$OUT/bench.log"; then
  say "bench decode --device cuda: ok"
else
  say "bench decode --device cuda: FAILED (see bench.log)"
fi
cat "$OUT/bench.log" >>"$SUMMARY"
python3 - "$OUT/bench_decode_cuda.json" >>"$SUMMARY" 2>/dev/null <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
for x in r.get("results", []):
    print(f"  {x['dtype']:5} decode {x['decode_tok_s']['median']:8.1f} tok/s, prefill "
          f"{x['prefill_tok_s']['median']:8.1f} tok/s, {100 * x['roofline_fraction']:.1f}% of HBM peak")
PY
say "total: $(( $(date +%s) - T0 )) s, status $status"
exit $status
