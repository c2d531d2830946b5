#!/usr/bin/env bash
# Builds the tests with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs
# them (all but those labelled `slow`). Any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQEVICT_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The fp64 exact-path golden, the model-level policy sweeps, the fork-equals-fresh sweep and the
# eval reproducibility run are left to the Release run:
# under ASan they take many minutes and exercise no code the other model tests do not. The memory
# tests measure the process's RSS, which ASan's shadow memory and quarantine make meaningless.
# The prompt cache's per-policy restore sweep (PromptCachePolicyTest, PromptCacheTest: 3.5 min
# under ASan) checks state equality; its loaders' memory safety runs here through
# PromptCacheFileTest (truncated, corrupt and 120 altered files) and the kv_state fuzz seeds.
cd build-asan && ctest --output-on-failure -j"$JOBS" --timeout 1200 -LE slow \
  -E "ExactPathMatchesTransformersFp32|KvPoliciesModelTest|AttendSpeed|ForkedCachesMatchCachesThatReadThePrompt|RowsCarryTheMetricsAndReproduce|KvMemoryModelTest|PromptCachePolicyTest|PromptCacheTest\\."
