#!/usr/bin/env bash
# `make test-arm`: the core libraries (util, quant, gguf, kernels, kv, policy) and their unit
# tests cross-built for 64-bit ARM Linux in build-arm/ (QEVICT_CORE_ONLY, cmake/aarch64-linux-gnu.cmake):
# every Highway kernel is compiled for NEON, SVE and SVE2, the x86-only files are left out, and
# nothing x86-specific may leak into the portable code. Then the tests run under qemu-user.
#
# Installs what it needs (root or sudo): g++-aarch64-linux-gnu, qemu-user and the arm64 builds of
# libhwy-dev and libgtest-dev through Debian's multiarch. Where the machine cannot (no arm64
# packages from the mirror), it says so and stops without failing: the x86 suite is the gate.
#
# Where qemu-user cannot start a thread on this host (qemu 7.2 spins forever in a program's
# first pthread_create on some kernels, 6.18 among them: a three-line program shows it), the
# tests are not run, and the script says so: the cross-build is the check that remains.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD_ARM:-build-arm}
# shellcheck source=scripts/lib/timing.sh
. scripts/lib/timing.sh

sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then sudo="sudo"; fi
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
PACKAGES=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64)
missing=()
for p in "${PACKAGES[@]}"; do have "$p" || missing+=("$p"); done
install_arm_packages() {
  echo "test-arm: installing ${missing[*]}"
  $sudo dpkg --add-architecture arm64 &&
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
if [ ${#missing[@]} -gt 0 ] && ! stage arm-packages install_arm_packages; then
  echo "test-arm: NOT RUN: this machine cannot install ${missing[*]} (arm64 packages of Debian's multiarch)"
  exit 0
fi

# Can the emulator start a thread here? (The tests' thread pools need it.) A thread starts in
# milliseconds under qemu where it works; where it does not, qemu spins until the timeout.
mkdir -p "$BUILD"
probe=$BUILD/thread_probe
printf '#include <thread>\nint main() { std::thread t([] {}); t.join(); return 0; }\n' > "$probe.cc"
aarch64-linux-gnu-g++ -std=c++20 -pthread "$probe.cc" -o "$probe"
qemu_runs=1
timeout 10 qemu-aarch64 -L /usr/aarch64-linux-gnu "$probe" || qemu_runs=0

# Where the tests can run, everything is built and they run. Where they cannot, the libraries
# alone are built: every Highway kernel for NEON, SVE and SVE2 and the portable code, which is
# what the cross-build checks (the tests' own code is the same C++ the x86 build compiles;
# ARM_BUILD_TESTS=1, as `make test-long` sets it, builds them all the same).
CORE_LIBS=(qevict_util qevict_quant qevict_gguf qevict_kernels qevict_kv qevict_policy_archive)
targets=()
[ "$qemu_runs" = 1 ] || [ "${ARM_BUILD_TESTS:-0}" = 1 ] || targets=(--target "${CORE_LIBS[@]}")
stage build-arm bash -c "scripts/configure.sh '$BUILD' -DCMAKE_TOOLCHAIN_FILE='$PWD/cmake/aarch64-linux-gnu.cmake' \
                           -DQEVICT_CORE_ONLY=ON -DQEVICT_UNITY=OFF -DCMAKE_BUILD_TYPE=Release &&
                         cmake --build '$BUILD' -j$JOBS ${targets[*]}"
if [ "$qemu_runs" = 0 ]; then
  built="so they are not built either (ARM_BUILD_TESTS=1 builds them)"
  [ "${ARM_BUILD_TESTS:-0}" = 1 ] && built="they are built (ARM_BUILD_TESTS=1)"
  echo "test-arm: the core libraries build for aarch64; their tests NOT RUN: qemu-aarch64"
  echo "          ($(qemu-aarch64 --version | head -1)) does not start a thread on this host"
  echo "          (kernel $(uname -r)); $built"
  exit 0
fi
echo "test-arm: the core libraries and their tests build for aarch64"
stage test-arm ctest_run arm "$BUILD" -j"$JOBS" --timeout 1800
