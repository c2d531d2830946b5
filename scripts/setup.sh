#!/usr/bin/env bash
# Installs what building and testing qevict needs, skipping whatever is already there:
# Debian packages (when run as root or with sudo), the Python test environment (.venv with the
# official `openai` client and selenium, used by tests/server/, and matplotlib, used by
# scripts/plot_eval.py and scripts/render_results.py) and the reference models
# (SmolLM2-135M-Instruct, Gemma 3 270M).
#   scripts/setup.sh            packages + venv + model
#   scripts/setup.sh packages   packages only
#   scripts/setup.sh venv       Python test environment only
#   scripts/setup.sh model      models only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake g++ make python3 python3-venv googletest libgtest-dev libgmock-dev
          libbenchmark-dev nlohmann-json3-dev libcli11-dev libfmt-dev libcpp-httplib-dev pkg-config
          zlib1g-dev libhwy-dev curl ninja-build ccache chromium chromium-driver)

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: Debian packages present"
    return
  fi
  echo "setup: installing ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# .venv with the Python packages the tests drive the server with (openai; selenium drives
# Debian's chromium through chromium-driver for the web page's test) and the eval pictures are
# drawn with (matplotlib); skipped when every one of them already imports.
PYTHON_TEST_PACKAGES=(openai matplotlib selenium)
PYTHON_TEST_IMPORTS="import openai, matplotlib, selenium"
install_venv() {
  if [ -x .venv/bin/python ] && .venv/bin/python -c "$PYTHON_TEST_IMPORTS" 2>/dev/null; then
    echo "setup: Python test environment present (.venv)"
    return
  fi
  echo "setup: creating .venv with ${PYTHON_TEST_PACKAGES[*]}"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check "${PYTHON_TEST_PACKAGES[@]}"
}

case "${1:-all}" in
  packages) install_packages ;;
  venv) install_venv ;;
  model) scripts/fetch_model.sh all ;;
  all) install_packages; install_venv; scripts/fetch_model.sh all ;;
  *) echo "usage: $0 [all|packages|venv|model]" >&2; exit 2 ;;
esac
