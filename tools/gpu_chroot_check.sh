#!/usr/bin/env bash
# Proves that tests/gpu/run.sh works on a bare, offline machine (not run in CI; needs root).
#
#   tools/gpu_chroot_check.sh [--build-only] [--keep-build] [CHROOT]   (default: /work/chroot-gpu)
#
# 1. Makes CHROOT once with debootstrap (Debian bookworm, minbase) plus only what the GPU image
#    is said to have besides CUDA: cmake, gcc, make, python3 with numpy. No pkg-config, no git,
#    none of Hone's -dev libraries. (Network is used here, for this step only.)
# 2. Copies the working tree (with the bundle of tools/gpu_bundle.sh, which must exist) into
#    CHROOT/hone, bind-mounts the CUDA toolkit read-only when this machine has one (there is no
#    driver and no GPU; `CUDA_DIR= tools/gpu_chroot_check.sh` leaves it out), and runs tests/gpu/run.sh inside the chroot in a new network namespace
#    (`unshare -n`: no network at all).
# 3. Passes when run.sh built Hone from the bundle, ran the CPU smoke, and then refused to call
#    the run a GPU run: it must exit non-zero and say "NOT A GPU RUN" in its summary. The summary
#    is printed and copied to $OUT (default /tmp/gpu-chroot-out).
# This machine has 2 cores, not the GPU machine's 16: the budgets are scaled by 6 and the
# deadline is 3000 s (HONE_GPU_BUDGET_SCALE, HONE_GPU_DEADLINE_S).
# The chroot stays outside the repository and is reused by later runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_ONLY=0 KEEP=0
while [ $# -gt 0 ]; do
  case $1 in --build-only) BUILD_ONLY=1 ;; --keep-build) KEEP=1 ;; *) break ;; esac
  shift
done
CH=${1:-/work/chroot-gpu}
OUT=${OUT:-/tmp/gpu-chroot-out}
CUDA_DIR=${CUDA_DIR-$(readlink -f /usr/local/cuda 2>/dev/null || true)}  # CUDA_DIR= : no toolkit
[ "$(id -u)" = 0 ] || { echo "gpu_chroot_check: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
case "$(readlink -f "$CH")" in "$ROOT"/*) echo "gpu_chroot_check: keep the chroot outside the repository" >&2; exit 2;; esac

if [ ! -x "$CH/usr/bin/cmake" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
  debootstrap --variant=minbase bookworm "$CH" http://deb.debian.org/debian
  chroot "$CH" apt-get update -qq
  chroot "$CH" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    cmake gcc libc6-dev make python3 python3-numpy
  chroot "$CH" apt-get clean
fi
for p in pkg-config pkgconf libpcre2-dev libcjson-dev libgit2-dev libmicrohttpd-dev libcurl4-openssl-dev \
         libcapstone-dev git; do
  if chroot "$CH" dpkg -s "$p" >/dev/null 2>&1; then echo "gpu_chroot_check: $p is in the chroot" >&2; exit 2; fi
done
[ "$BUILD_ONLY" = 1 ] && { echo "chroot ready: $CH"; exit 0; }
[ -d "$ROOT/.gpu-bundle/debs" ] || { echo "gpu_chroot_check: no bundle: run tools/gpu_bundle.sh first" >&2; exit 2; }

# The tree as the device tool would send it: tracked and untracked-not-ignored files, plus the
# carried bundle. The build inside the chroot (and the prefix in it) starts clean unless
# --keep-build, so the proof builds from the bundle from nothing.
[ "$KEEP" = 1 ] || rm -rf "$CH/hone"
mkdir -p "$CH/hone"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$CH/hone"
rm -rf "$CH/hone/.gpu-bundle"; cp -a "$ROOT/.gpu-bundle" "$CH/hone/.gpu-bundle"

mounts=()
cleanup() { for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
bind() { mkdir -p "$2"; mount --bind "$1" "$2"; mounts+=("$2"); [ "${3:-}" = ro ] && mount -o remount,bind,ro "$2"; return 0; }
bind /proc "$CH/proc"
bind /dev "$CH/dev"
if [ -n "$CUDA_DIR" ] && [ -d "$CUDA_DIR" ]; then
  bind "$CUDA_DIR" "$CH/usr/local/cuda" ro
  echo "CUDA toolkit bind-mounted read-only from $CUDA_DIR (no driver, no GPU)"
fi

rm -rf "$OUT"; mkdir -p "$OUT" "$CH/out"; rm -rf "$CH/out"/*
set +e
unshare -n chroot "$CH" /usr/bin/env -i HOME=/root PATH=/usr/local/cuda/bin:/usr/bin:/bin OUT=/out \
  HONE_GPU_DEADLINE_S="${HONE_GPU_DEADLINE_S:-3000}" HONE_GPU_BUDGET_SCALE="${HONE_GPU_BUDGET_SCALE:-6}" bash -c 'cd /hone && if getent hosts deb.debian.org >/dev/null; then echo "network reachable: not a proof"; exit 3; fi &&
    echo "network: none (deb.debian.org does not resolve)" && tests/gpu/run.sh'
rc=$?
set -e
cp -a "$CH/out/." "$OUT/"
echo "---- $OUT/summary.txt ----"; cat "$OUT/summary.txt" 2>/dev/null
echo "run.sh exit status inside the chroot: $rc"
if [ "$rc" -ne 0 ] && grep -q "NOT A GPU RUN" "$OUT/summary.txt" && grep -q "^build: ok" "$OUT/summary.txt" &&
   grep -q "^smoke: ok" "$OUT/summary.txt"; then
  echo "gpu_chroot_check: PASS (built offline from the bundle, CPU smoke ran, no GPU: refused to pass)"
else
  echo "gpu_chroot_check: FAIL"; exit 1
fi
