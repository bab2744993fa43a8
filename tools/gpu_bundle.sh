#!/usr/bin/env bash
# Packs what the offline GPU machine lacks into .gpu-bundle/ (git-ignored; name it in the
# device tool's `carry`), on this CPU machine, with its network:
#
#   debs/       the Debian .deb files of Hone's -dev libraries (PCRE2, cJSON, libgit2,
#               libmicrohttpd, libcurl, capstone) and pkgconf, with every library they depend
#               on, but for the C library itself (libc6, libc6-dev, libgcc-s1, libstdc++6 and
#               their own dependencies), which any machine with gcc has; tests/gpu/run.sh
#               unpacks them with `dpkg -x` into a prefix
#   testdata/   the tiny test models (tools/make_tiny_model.py --all: it needs the gguf package
#               and SmolLM2's vocabulary, which the GPU machine lacks)
#   smollm2.skel.gz  SmolLM2-135M-Instruct's GGUF header without the weights
#               (tools/gguf_skeleton.py): run.sh makes random-weight models of its exact shape
#   MANIFEST.txt     what is in it, with versions and sizes
#
#   tools/gpu_bundle.sh [DIR]      (default .gpu-bundle; idempotent, re-downloads nothing)
# Fails when the bundle would exceed HONE_BUNDLE_MAX_MB (default 40: the device tool carries
# at most 64 MiB with the working tree).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
B=${1:-$ROOT/.gpu-bundle}
MAX_MB=${HONE_BUNDLE_MAX_MB:-40}
[ "$(dpkg --print-architecture)" = amd64 ] || { echo "gpu_bundle: the GPU machine is amd64; this is $(dpkg --print-architecture)" >&2; exit 2; }
mkdir -p "$B/debs"

# The packages CMakeLists.txt links (tools/setup.sh installs the same) and pkg-config itself.
ROOTS=(libpcre2-dev libcjson-dev libgit2-dev libmicrohttpd-dev libcurl4-openssl-dev libcapstone-dev pkgconf)
# The C library and what it pulls in: present wherever gcc is, and never to be shadowed.
BASE='^(libc6|libc6-dev|libc-dev-bin|libgcc-s1|gcc-[0-9]+-base|libstdc\+\+6|linux-libc-dev|libcrypt1|libcrypt-dev|libnsl2|libnsl-dev|libtirpc3|libtirpc-dev|libtirpc-common|rpcsvc-proto)$'

if ! apt-cache show "${ROOTS[0]}" >/dev/null 2>&1; then apt-get update -qq; fi
mapfile -t PKGS < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
                      --no-replaces --no-enhances "${ROOTS[@]}" | grep -v '^ ' | grep -v '^<' | sort -u | grep -Ev "$BASE")
(cd "$B/debs"
 need=()
 for p in "${PKGS[@]}"; do
   v=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
   ls "${p}_"*.deb >/dev/null 2>&1 || need+=("$p=$v")
 done
 if ((${#need[@]})); then apt-get download -q "${need[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true; fi
 # keep exactly the closure (a stale .deb from an older list would be unpacked too)
 for f in *.deb; do
   n=${f%%_*}
   printf '%s\n' "${PKGS[@]}" | grep -qx "$n" || rm -f "$f"
 done)

# The test models: made here, where gguf and SmolLM2 are (tools/setup.sh installs them).
python3 tools/make_tiny_model.py --all --out "$B/testdata" >/dev/null
S=$(python3 tools/find_smollm2.py)
python3 tools/gguf_skeleton.py extract "$S" "$B/smollm2.skel.gz"

{
  echo "Hone GPU bundle, made $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME") from commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "debs ($(ls "$B/debs" | wc -l) packages, $(du -sk "$B/debs" | cut -f1) KiB):"
  for f in "$B"/debs/*.deb; do printf '  %-70s %6d KiB\n' "$(basename "$f")" $(( $(stat -c %s "$f") / 1024 )); done
  echo "testdata: $(ls "$B/testdata" | wc -l) files, $(du -sk "$B/testdata" | cut -f1) KiB"
  echo "smollm2.skel.gz: $(( $(stat -c %s "$B/smollm2.skel.gz") / 1024 )) KiB (header of $(basename "$S"), $(stat -c %s "$S") bytes)"
} >"$B/MANIFEST.txt"
total_kb=$(du -sk "$B" | cut -f1)
echo "total: $total_kb KiB" >>"$B/MANIFEST.txt"
cat "$B/MANIFEST.txt" | sed -n '1,2p;$p'
if (( total_kb > MAX_MB * 1024 )); then
  echo "gpu_bundle: $total_kb KiB is over HONE_BUNDLE_MAX_MB=$MAX_MB" >&2; exit 1
fi
