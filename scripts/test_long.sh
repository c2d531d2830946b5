#!/usr/bin/env bash
# `make test-long`: the checks that do not fit in `make test`'s 30 minutes, each named in
# docs/testing.md with its duration and what it guards. Run it before a submission that touches
# what it covers (the server, the engine's forward pass under the sanitizers, the parsers of
# outside input, Gemma 3).
#
#   long            the Release tests labelled `long` (the server soak)
#   build-asan      the ASan+UBSan tree, as in make test (nothing to do when it is current)
#   asan-model      every model-level test and server group under ASan+UBSan that make test
#                   leaves to the Release run (goldens, policy sweeps, forks, memory, eval
#                   runs, the kv and sessions server groups, the soak)
#   build-arm       the aarch64 cross-build with every test executable (make test builds them
#                   only where qemu can run them)
#   fuzz            every libFuzzer target for FUZZ_SECONDS (default 60) on its corpus
#
# Timings are printed at the end, as in make test. JOBS, BUILD as in the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build}
# shellcheck source=scripts/lib/timing.sh
. scripts/lib/timing.sh
# shellcheck source=scripts/lib/sanitized_tests.sh
. scripts/lib/sanitized_tests.sh
begin_timed_run "make test-long" "$BUILD/test-long-timings"

stage long ctest_run release-long "$BUILD" -j"$JOBS" --timeout 1800 -L long
build_sanitized_tree
stage asan-model ctest_run asan-model-long build-asan -j"$JOBS" --timeout 3600 -L model -E "$SANITIZED_IN_MAKE_TEST"
ARM_BUILD_TESTS=1 scripts/test_arm.sh
if command -v clang++ >/dev/null; then
  stage fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-60}" FUZZ_JOBS="$JOBS" scripts/fuzz.sh
else
  echo "test-long: fuzz NOT RUN: clang++ is missing (apt-get install clang)" >&2
  exit 1
fi
