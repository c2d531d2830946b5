#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UndefinedBehaviorSanitizer) in
# build-fuzz/ and runs each one for FUZZ_SECONDS on its corpus, then prints a summary. Exits
# non-zero on any finding: a crash, a sanitizer report, a leak, a hang (-timeout), an allocation
# over -malloc_limit_mb or memory over -rss_limit_mb. See docs/security.md.
#
# Usage: scripts/fuzz.sh [TARGET...]      (default: every fuzz/targets/<name>.h)
#   FUZZ_SECONDS  seconds per target (default 180)
#   FUZZ_JOBS     build parallelism (default 2)
#   FUZZ_FRESH=1  start from the committed seeds only, dropping the corpus grown by earlier runs
#   FUZZ_ARGS     extra libFuzzer flags, e.g. "-max_len=65536"
# Each target runs in fuzz/corpus-work/<target>/ (git-ignored): corpus/ starts as a copy of
# fuzz/corpus/<target>/ and keeps what the fuzzer adds; artifacts/ receives crash inputs;
# fuzz.log is libFuzzer's output. A finding's input belongs in tests/fuzz_regressions/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SECONDS_PER_TARGET=${FUZZ_SECONDS:-180}
JOBS=${FUZZ_JOBS:-2}
BUILD=${FUZZ_BUILD:-build-fuzz}
WORK=$ROOT/fuzz/corpus-work

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for header in fuzz/targets/*.h; do targets+=("$(basename "$header" .h)"); done
fi

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$BUILD" -DQEVICT_FUZZ=ON -DQEVICT_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
else
  cmake "$BUILD" >/dev/null  # pick up targets added since the last configure
fi
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]/%/_fuzzer}"

# abort_on_error: a report ends the process at once (libFuzzer keeps the input);
# allocator_may_return_null=0: an impossible allocation is a finding, not a nullptr.
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

summary=()
failed=0
for target in "${targets[@]}"; do
  dir=$WORK/$target
  [ "${FUZZ_FRESH:-0}" = 1 ] && rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  if [ -d "fuzz/corpus/$target" ]; then cp -n "fuzz/corpus/$target"/* "$dir/corpus/" 2>/dev/null || true; fi
  before=$(find "$dir/artifacts" -type f | wc -l)
  dict=()
  [ -f "fuzz/dict/$target.dict" ] && dict=("-dict=fuzz/dict/$target.dict")
  echo "== $target: ${SECONDS_PER_TARGET}s (log: $dir/fuzz.log)"
  rc=0
  # shellcheck disable=SC2086
  "$BUILD/fuzz/${target}_fuzzer" "$dir/corpus" "${dict[@]}" \
    -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -artifact_prefix="$dir/artifacts/" -print_final_stats=1 ${FUZZ_ARGS:-} \
    >"$dir/fuzz.log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz.log" | tail -1)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  found=$(($(find "$dir/artifacts" -type f | wc -l) - before))
  status=ok
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    status="FINDING (exit $rc)"
    failed=1
    grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*Test unit written|.*ERROR: libFuzzer)" \
      "$dir/fuzz.log" | head -8 || true
  fi
  summary+=("$(printf '%-16s %12s execs %6s corpus %4s findings  %s' "$target" "${execs:-?}" \
    "$corpus" "$found" "$status")")
done

echo
echo "fuzz summary (${SECONDS_PER_TARGET}s per target; artifacts in $WORK/<target>/artifacts):"
printf '  %s\n' "${summary[@]}"
exit $failed
