#!/usr/bin/env bash
# `make test`: everything a submission must pass, on a fresh clone, and where the time went.
#
#   setup          Debian packages, the Python test environment, the reference models
#   build          the Release tree (build/): engine, tools, every test binary
#   test           its CTest suite but the `long` label: unit, model and server tests
#   build-asan     the ASan+UBSan tree (build-asan/)            } scripts/test_sanitized.sh
#   test-asan      the unit tests and the parsers of outside input }
#   build-arm      the core libraries and their tests for aarch64  } scripts/test_arm.sh
#   test-arm       those tests under qemu-user (where it can run)  }
#
# Each stage's wall time, each label's summed test time and the slowest tests are printed at
# the end (scripts/test_timings.py), also when a stage fails; the figures stay in
# $BUILD/test-timings/. What does not fit here is in `make test-long` (docs/testing.md).
# JOBS (default: the core count) and BUILD (default build) as in the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build}
export JOBS
# shellcheck source=scripts/lib/timing.sh
. scripts/lib/timing.sh

summary_extra() {
  if command -v ccache >/dev/null; then
    echo "== ccache: $(ccache --print-stats 2>/dev/null | awk -F'\t' '
      $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hits += $2 }
      $1 == "cache_miss" { misses = $2 }
      END { printf "%d hits, %d misses (all time)", hits, misses }')"
  fi
  echo "== not run here: make test-long (the server soak, the model-level tests and server"
  echo "   groups under ASan+UBSan, the aarch64 test executables, fuzzing; over an hour on 2"
  echo "   cores): run it before a submission that touches what it covers (docs/testing.md)"
}
begin_timed_run "make test" "$BUILD/test-timings"

stage setup scripts/setup.sh all
stage build bash -c "scripts/configure.sh '$BUILD' -DCMAKE_BUILD_TYPE=Release && cmake --build '$BUILD' -j$JOBS"
stage test ctest_run release "$BUILD" -j"$JOBS" --timeout 900 -LE long
scripts/test_sanitized.sh
scripts/test_arm.sh
