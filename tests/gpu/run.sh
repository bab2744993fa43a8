#!/usr/bin/env bash
# All GPU work in one command that cannot lie and fits the device machine (one H200, bare and
# offline, a 10-minute command, 64 MiB carried): docs/gpu.md says how to call it.
#
#   tests/gpu/run.sh [PHASE...]      default: every phase, in this order
#
#   phase     budget  what
#   versions    20 s  OS, compilers, driver / runtime / NVRTC versions, devices (tests/gpu/versions.py)
#   prefix      60 s  the bundle's .deb files unpacked into a prefix when the system lacks a library
#   build      300 s  configure and build only the targets the phases run (kept across reruns)
#   smoke       90 s  CPU: engine and kernel tests, `hone generate` on a SmolLM2-shaped Q4_1 model
#   slots       90 s  NVRTC compile test and the CUDA slot tests
#   models     150 s  SmolLM2-shaped f16 / f32 models made with numpy; the CUDA debug-path and
#                     model tests
#   guard      120 s  the CUDA guard test
#   profile     90 s  the CUPTI profiler test; `hone profile --device cuda` on the SmolLM2 shape
#   bench      150 s  bench/decode --device cuda (reported, not judged)
#   sanitize   200 s  compute-sanitizer: memcheck on the slot tests, racecheck once
# A budget is a cap; the whole run stops starting phases HONE_GPU_DEADLINE_S (default 560) after
# its start (HONE_GPU_BUDGET_SCALE=N multiplies the budgets on a slower machine), and a phase that cannot have 15 s is "not reached". Rerun on a warm machine with
# the phases that are left (`tests/gpu/run.sh bench sanitize`): the build, the prefix, the models
# and the cubin cache are kept under $HONE_GPU_BUILD.
#
# Verdict: exit 0 only when a GPU was seen, every phase asked for ran and passed, and no test
# labelled gpu was skipped (ctest counts exit 77 as a pass; tests/gpu/ctest_verdict.py reads the
# JUnit file instead). Without a GPU the run still builds and runs the CPU smoke, then says
# "NOT A GPU RUN" and exits 1.
# Output under $OUT (default ./gpu-out), at most 8 files as the device tool returns them:
#   summary.txt (appended after every phase)  env.txt  build.log  tests.log  profile.json
#   bench.json  sanitizer.log
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${HONE_GPU_BUILD:-$ROOT/build-gpu}
BUNDLE=${HONE_GPU_BUNDLE:-$ROOT/.gpu-bundle}
DEADLINE=${HONE_GPU_DEADLINE_S:-560}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export CUDA_HOME
mkdir -p "$OUT" "$BUILD"
SUMMARY=$OUT/summary.txt
T0=$(date +%s)
say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - T0 )); }

ALL_PHASES=(versions prefix build smoke slots models guard profile bench sanitize)
declare -A BUDGET=([versions]=20 [prefix]=60 [build]=300 [smoke]=90 [slots]=90 [models]=150 [guard]=120
                   [profile]=90 [bench]=150 [sanitize]=200)
# a slower machine (the 2-core CPU machine of tools/gpu_chroot_check.sh) scales every budget
SCALE=${HONE_GPU_BUDGET_SCALE:-1}
for p in "${!BUDGET[@]}"; do BUDGET[$p]=$(( BUDGET[$p] * SCALE )); done
PHASES=("$@")
((${#PHASES[@]})) || PHASES=("${ALL_PHASES[@]}")
for p in "${PHASES[@]}"; do
  [ -n "${BUDGET[$p]:-}" ] || { echo "run.sh: unknown phase '$p' (phases: ${ALL_PHASES[*]})" >&2; exit 2; }
done

: >"$SUMMARY"
for f in env.txt build.log tests.log sanitizer.log; do : >"$OUT/$f"; done
say "hone GPU run: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '(no git)'), phases: ${PHASES[*]}, deadline ${DEADLINE} s"

# ---- helpers ----
PHASE_END=0
# t CMD...: runs CMD with what is left of the phase's budget (exit 124 when it runs out).
t() {
  local left=$(( PHASE_END - $(date +%s) ))
  (( left > 0 )) || return 124
  timeout -k 5 "$left" "$@"
}
# ctest_phase NAME TEST...: runs exactly these tests, the verdict from the JUnit file.
ctest_phase() {
  local name=$1; shift
  local regex="^($(IFS='|'; echo "$*"))\$" junit=$BUILD/junit-$name.xml left
  left=$(( PHASE_END - $(date +%s) ))
  rm -f "$junit"
  echo "==== $name: ctest $* ($(date -u +%T))" >>"$OUT/tests.log"
  t ctest --test-dir "$BUILD" -R "$regex" "${FIXTURE_ARGS[@]}" --output-on-failure --timeout "$left" \
    --output-junit "$junit" >>"$OUT/tests.log" 2>&1
  local src=$junit
  [ -f "$junit" ] || src=$OUT/tests.log # ctest before 3.21: no JUnit, read the log
  python3 "$ROOT/tests/gpu/ctest_verdict.py" "$src" "$@" >"$BUILD/verdict-$name.txt"
  local v=$?
  cat "$BUILD/verdict-$name.txt" >>"$SUMMARY"
  cat "$BUILD/verdict-$name.txt" >>"$OUT/tests.log"
  return $v
}

HAVE_GPU=0
GPU_WHY="not probed (versions phase not run)"
# The tiny test models: the bundle's copy where it has one (make_tiny_model.py needs the gguf
# package and SmolLM2, which the GPU machine lacks), so ctest's make_testdata fixture is skipped.
FIXTURE_ARGS=()
[ -d "$BUNDLE/testdata" ] && FIXTURE_ARGS=(-FS testdata)
FAILED=()
SMOL_DIR=$BUILD/bench-models
export XDG_CACHE_HOME=$BUILD/cache  # the cubin cache: kept, so a rerun compiles nothing
export HONE_BENCH_DIR=$SMOL_DIR

# The SmolLM2 model the model, profile and bench phases use: the real one when installed, else
# one of its exact shape (tools/gguf_skeleton.py, from the bundle's skeleton), random weights.
smollm2_q41() {
  local real
  if real=$(python3 "$ROOT/tools/find_smollm2.py" 2>/dev/null) && [ -f "$real" ]; then echo "$real"; return 0; fi
  local q=$SMOL_DIR/SmolLM2-shaped.Q4_1.gguf
  if [ ! -f "$q" ]; then
    [ -f "$BUNDLE/smollm2.skel.gz" ] || { echo "no SmolLM2 and no $BUNDLE/smollm2.skel.gz (tools/gpu_bundle.sh)" >&2; return 1; }
    mkdir -p "$SMOL_DIR"
    python3 "$ROOT/tools/gguf_skeleton.py" make "$BUNDLE/smollm2.skel.gz" "$q" --dtype native || return 1
  fi
  echo "$q"
}
# The f16 / f32 models bench/decode and the model test look for in $HONE_BENCH_DIR.
smollm2_float() {
  local q dt
  q=$(smollm2_q41) || return 1
  for dt in f16 f32; do
    local f=$SMOL_DIR/SmolLM2-135M-Instruct.$dt.gguf
    [ -f "$f" ] && continue
    if python3 -c "import gguf" 2>/dev/null; then
      python3 "$ROOT/tools/convert_gguf.py" "$q" "$f" --dtype "$dt" || return 1
    else
      python3 "$ROOT/tools/gguf_skeleton.py" make "$BUNDLE/smollm2.skel.gz" "$f" --dtype "$dt" || return 1
    fi
  done
}

# NVRTC dlopens libnvrtc-builtins at compile time, and the tests find cudart and CUPTI at run
# time: the toolkit's library folders go on LD_LIBRARY_PATH when the loader does not know them.
cuda_env() {
  local d
  for d in "$CUDA_HOME/lib64" "$CUDA_HOME/targets/x86_64-linux/lib" "$CUDA_HOME/extras/CUPTI/lib64"; do
    [ -d "$d" ] || continue
    case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) continue ;; esac
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
  done
}
cuda_env

# ---- phases ----
phase_versions() {
  {
    echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") ($(uname -srm))"
    echo "glibc: $(ldd --version 2>/dev/null | head -1)"
    echo "gcc: $(gcc --version 2>/dev/null | head -1)"
    echo "cmake: $(cmake --version 2>/dev/null | head -1)"
    echo "python: $(python3 -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"
    echo "nvcc: $("$CUDA_HOME/bin/nvcc" --version 2>/dev/null | tail -2 | head -1 || echo none)"
    echo "compute-sanitizer: $(command -v compute-sanitizer || ls "$CUDA_HOME/bin/compute-sanitizer" 2>/dev/null || echo none)"
    echo "cpus: $(nproc)"
  } >"$OUT/env.txt"
  if command -v nvidia-smi >/dev/null; then
    echo "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1)" >>"$OUT/env.txt"
  else
    echo "nvidia-smi: not found" >>"$OUT/env.txt"
  fi
  t python3 "$ROOT/tests/gpu/versions.py" >>"$OUT/env.txt" 2>&1
  local v=$?
  sed 's/^/  /' "$OUT/env.txt" >>"$SUMMARY"
  case $v in
    0) HAVE_GPU=1; GPU_WHY="" ;;
    3) GPU_WHY=$(grep -E '^(devices|driver|device [0-9]+):' "$OUT/env.txt" | grep -E 'none|cannot' | head -1) ;;
    *) GPU_WHY="the CUDA toolkit's libraries were not found under $CUDA_HOME" ;;
  esac
  [ $HAVE_GPU = 1 ] || say "  NO GPU: ${GPU_WHY:-none seen}"
  return 0 # the versions are the record; a missing GPU is judged at the end
}

PREFIX=$BUILD/prefix
phase_prefix() {
  local sys_ok=1 m
  for m in libpcre2-8 libcjson libgit2 libcurl libmicrohttpd capstone; do
    pkg-config --exists "$m" 2>/dev/null || sys_ok=0
  done
  if [ $sys_ok = 1 ] && [ "${HONE_GPU_FORCE_BUNDLE:-0}" != 1 ]; then
    say "  the system has every library (pkg-config): no prefix"; return 0
  fi
  [ -d "$BUNDLE/debs" ] || { say "  the system lacks Hone's libraries and there is no bundle at $BUNDLE (run tools/gpu_bundle.sh on the CPU machine and carry .gpu-bundle)"; return 1; }
  local stamp
  stamp=$(ls -l "$BUNDLE/debs" | md5sum | cut -c1-16)
  if [ "$(cat "$PREFIX/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$PREFIX"; mkdir -p "$PREFIX"
    local f n=0
    for f in "$BUNDLE"/debs/*.deb; do
      if command -v dpkg-deb >/dev/null; then t dpkg-deb -x "$f" "$PREFIX" || return 1
      else (cd "$PREFIX" && ar p "$f" "$(ar t "$f" | grep '^data\.tar')" | tar -xaf - 2>/dev/null ||
              ar p "$f" "$(ar t "$f" | grep '^data\.tar')" | tar -xJf -) || return 1
      fi
      n=$((n + 1))
    done
    echo "$stamp" >"$PREFIX/.stamp"
    say "  unpacked $n packages into $PREFIX"
  fi
  # Libraries the system already has (by soname) stay the system's: only the missing ones go on
  # LD_LIBRARY_PATH, so no system program runs with an older bundled copy.
  local rt=$PREFIX/runtime-libs so base missing=0
  rm -rf "$rt"; mkdir -p "$rt"
  for so in "$PREFIX"/usr/lib/x86_64-linux-gnu/lib*.so.* "$PREFIX"/lib/x86_64-linux-gnu/lib*.so.*; do
    [ -e "$so" ] || continue
    base=$(basename "$so")
    if ! ldconfig -p 2>/dev/null | grep -q " $base "; then ln -sf "$so" "$rt/$base"; missing=$((missing + 1)); fi
  done
  say "  $missing bundled libraries not on the system go on LD_LIBRARY_PATH"
  return 0
}

# Applies the prefix (when phase_prefix made one) to this shell: pkg-config, CMake, the loader.
use_prefix() {
  [ -f "$PREFIX/.stamp" ] || return 0
  export LD_LIBRARY_PATH=$PREFIX/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_SYSROOT_DIR=$PREFIX
  export PKG_CONFIG_LIBDIR=$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig:$PREFIX/usr/lib/pkgconfig
  export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
  if ! command -v pkg-config >/dev/null; then
    mkdir -p "$PREFIX/bin"
    ln -sf "$PREFIX/usr/bin/pkgconf" "$PREFIX/bin/pkg-config"
    export PATH=$PREFIX/bin:$PATH
  fi
}

# the tests labelled gpu that the phases below run (the build phase checks it is all of them)
GPU_TESTS=(gpu_test_cuda_slots gpu_test_cuda_debug gpu_test_cuda_model gpu_test_guard_cuda gpu_test_profile_gpu)
TARGETS=(hone bench_decode gpu_test_cuda_slots gpu_test_cuda_debug gpu_test_cuda_model gpu_test_guard_cuda gpu_test_profile_gpu
         cuda_test_nvrtc_compile engine_test_forward engine_test_gguf kernels_test_cpu_slots)
phase_build() {
  local cuda_args=()
  [ -d "$CUDA_HOME" ] && cuda_args=(-DCUDAToolkit_ROOT="$CUDA_HOME")
  [ -x "$CUDA_HOME/bin/nvcc" ] && export PATH=$CUDA_HOME/bin:$PATH
  echo "==== configure ($(date -u +%T))" >>"$OUT/build.log"
  t cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" >>"$OUT/build.log" 2>&1 ||
    { tail -25 "$OUT/build.log" | sed 's/^/  | /' >>"$SUMMARY"; return 1; }
  grep -E "^-- +(CUDA toolkit|PCRE2|cJSON|libgit2|libmicrohttpd|capstone) " "$OUT/build.log" | tail -6 | sed 's/^-- /  /' >>"$SUMMARY"
  echo "==== build ($(date -u +%T))" >>"$OUT/build.log"
  t cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" >>"$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -20 | sed 's/^/  | /' >>"$SUMMARY"; return 1; }
  if ((${#FIXTURE_ARGS[@]})); then mkdir -p "$BUILD/testdata" && cp -a "$BUNDLE/testdata/." "$BUILD/testdata/"; fi
  # every test labelled gpu must be in a phase: one added to tests/gpu/ but not here is never run
  local t_name
  for t_name in $(ctest --test-dir "$BUILD" -N -L '^gpu$' -FA '.*' 2>/dev/null | awk '/Test +#/ {print $3}'); do
    [[ " ${GPU_TESTS[*]} " == *" $t_name "* ]] && continue
    say "  $t_name is labelled gpu but no phase of run.sh runs it: add it to one"
    FAILED+=("$t_name never run")
  done
  return 0
}

phase_smoke() {
  local q
  q=$(smollm2_q41 2>>"$OUT/tests.log") || { say "  cannot make the SmolLM2-shaped model"; return 1; }
  ctest_phase smoke engine_test_gguf engine_test_forward kernels_test_cpu_slots || return 1
  echo "==== smoke: hone generate on $q ($(date -u +%T))" >>"$OUT/tests.log"
  t "$BUILD/hone" generate -m "$q" -p "The GPU machine is" -n 8 --temp 0 --device cpu -t "$(nproc)" \
    >>"$OUT/tests.log" 2>&1 || { say "  hone generate on the CPU failed (tests.log)"; return 1; }
  say "  hone generate --device cpu on $(basename "$q"): $(grep -o 'generated [0-9]* tokens in [0-9.]* s ([0-9.]* tok/s)' "$OUT/tests.log" | tail -1)"
}

phase_slots() { ctest_phase slots cuda_test_nvrtc_compile gpu_test_cuda_slots; }

phase_models() {
  smollm2_float >>"$OUT/tests.log" 2>&1 || { say "  cannot make the SmolLM2-shaped f16 / f32 models"; return 1; }
  HONE_SMOLLM2=$(smollm2_q41) || return 1
  export HONE_SMOLLM2
  ctest_phase models gpu_test_cuda_debug gpu_test_cuda_model
}

phase_guard() { ctest_phase guard gpu_test_guard_cuda; }

phase_profile() {
  ctest_phase profile gpu_test_profile_gpu || return 1
  [ $HAVE_GPU = 1 ] || { say "  hone profile --device cuda: not run (no GPU)"; return 1; }
  local q
  q=$(smollm2_q41) || return 1
  t "$BUILD/hone" profile -m "$q" --device cuda --prompt 64 --tokens 64 --json >"$OUT/profile.json" 2>>"$OUT/tests.log" ||
    { say "  hone profile --device cuda failed (tests.log)"; return 1; }
  python3 - "$OUT/profile.json" >>"$SUMMARY" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("summary", {})
print(f"  profile: {s.get('steps')} steps, {s.get('step_ms', 0):.2f} ms, kernels {s.get('slot_ms', 0):.2f} ms, "
      f"peak {s.get('peak_gbps', 0):.0f} GB/s; decode {r.get('decode_tokens_per_s', 0):.1f} tok/s, "
      f"prefill {r.get('prefill_tokens_per_s', 0):.1f} tok/s")
for x in r.get("rows", [])[:8]:
    print(f"    {str(x.get('slot', '?')):24} {100 * x.get('share', 0):5.1f}%  {x.get('calls', 0):6} calls  "
          f"{100 * max(x.get('roofline', 0), 0):5.1f}% of roofline  {x.get('shape', '')}")
PY
}

phase_bench() {
  [ $HAVE_GPU = 1 ] || { say "  not run: no GPU"; return 1; }
  smollm2_float >>"$OUT/tests.log" 2>&1 || { say "  cannot make the bench models"; return 1; }
  HONE_SMOLLM2=$(smollm2_q41) || return 1
  export HONE_SMOLLM2
  echo "==== bench ($(date -u +%T))" >>"$OUT/tests.log"
  t "$BUILD/bench/decode" --device cuda --prompt 64 --tokens 128 --reps 5 \
    >"$OUT/bench.json" 2>>"$OUT/tests.log" || { say "  bench/decode --device cuda failed (tests.log)"; return 1; }
  python3 - "$OUT/bench.json" >>"$SUMMARY" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r.get("results", []):
    print(f"  {x['dtype']:5} decode {x['decode_tok_s']['median']:8.1f} tok/s, prefill "
          f"{x['prefill_tok_s']['median']:8.1f} tok/s, {100 * x['roofline_fraction']:.1f}% of HBM peak")
PY
}

phase_sanitize() {
  local cs
  cs=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
  [ -x "$cs" ] || { say "  not run: compute-sanitizer not found"; return 1; }
  [ $HAVE_GPU = 1 ] || { say "  not run: no GPU"; return 1; }
  local exe=$BUILD/tests/gpu_test_cuda_slots ok=0 keep=$PHASE_END
  echo "==== memcheck: $exe ($(date -u +%T))" >>"$OUT/sanitizer.log"
  PHASE_END=$(( $(date +%s) + (keep - $(date +%s)) * 2 / 3 )) # racecheck keeps a third
  t "$cs" --tool memcheck --error-exitcode 99 --leak-check full "$exe" >>"$OUT/sanitizer.log" 2>&1 || ok=1
  say "  memcheck (slot tests): $([ $ok = 0 ] && echo clean || echo "FAILED: $(grep -m1 -E 'ERROR SUMMARY|Invalid|error' "$OUT/sanitizer.log")")"
  local rc=0
  PHASE_END=$keep
  echo "==== racecheck: $exe ($(date -u +%T))" >>"$OUT/sanitizer.log"
  t "$cs" --tool racecheck --error-exitcode 99 "$exe" >>"$OUT/sanitizer.log" 2>&1 || rc=1
  say "  racecheck (slot tests): $([ $rc = 0 ] && echo clean || echo "FAILED: $(grep -E 'RACECHECK SUMMARY|hazard|ERROR' "$OUT/sanitizer.log" | tail -1)")"
  return $(( ok | rc ))
}

# ---- the run ----
# the versions phase decides whether this is a GPU run; a rerun without it probes quietly
if [[ " ${PHASES[*]} " != *" versions "* ]]; then
  if python3 "$ROOT/tests/gpu/versions.py" >/dev/null 2>&1; then HAVE_GPU=1; GPU_WHY=""
  else GPU_WHY="tests/gpu/versions.py found no usable device"; fi
fi
for p in "${PHASES[@]}"; do
  left=$(( DEADLINE - $(elapsed) ))
  b=${BUDGET[$p]}
  (( b > left )) && b=$left
  if (( b < 15 )); then
    say "$p: NOT REACHED (deadline: $(elapsed) s of $DEADLINE s used)"; FAILED+=("$p (not reached)"); continue
  fi
  say "$p: started at +$(elapsed) s, budget $b s"
  PHASE_END=$(( $(date +%s) + b ))
  ps=$(date +%s)
  [ "$p" != versions ] && [ "$p" != prefix ] && use_prefix
  "phase_$p"
  rc=$?
  took=$(( $(date +%s) - ps ))
  if [ $rc = 0 ]; then say "$p: ok ($took s)"
  elif (( $(date +%s) >= PHASE_END )); then say "$p: FAILED: out of its $b s budget ($took s)"; FAILED+=("$p (timeout)")
  else say "$p: FAILED ($took s)"; FAILED+=("$p")
  fi
  # nothing after a failed build can run
  if [ "$p" = build ] && [ $rc != 0 ]; then break; fi
  if [ "$p" = prefix ] && [ $rc != 0 ]; then break; fi
done

say "total: $(elapsed) s"
if [ $HAVE_GPU = 0 ]; then
  say "NOT A GPU RUN: ${GPU_WHY:-no usable GPU}. The gpu tests above skipped; this run proves nothing about the GPU."
  FAILED+=("no GPU")
fi
if ((${#FAILED[@]})); then say "RESULT: FAIL (${FAILED[*]})"; exit 1; fi
say "RESULT: PASS"
exit 0
