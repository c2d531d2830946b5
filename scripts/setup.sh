#!/usr/bin/env bash
# Installs what building and testing qevict needs, skipping whatever is already there:
# Debian packages (when run as root or with sudo) and the reference model.
#   scripts/setup.sh            packages + model
#   scripts/setup.sh packages   packages only
#   scripts/setup.sh model      model only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake g++ make python3 python3-venv googletest libgtest-dev libgmock-dev
          libbenchmark-dev nlohmann-json3-dev libcli11-dev libfmt-dev libcpp-httplib-dev)

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

case "${1:-all}" in
  packages) install_packages ;;
  model) scripts/fetch_model.sh ;;
  all) install_packages; scripts/fetch_model.sh ;;
  *) echo "usage: $0 [all|packages|model]" >&2; exit 2 ;;
esac
