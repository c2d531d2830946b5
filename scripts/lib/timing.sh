# Sourced by the test scripts: timed stages and CTest runs whose durations scripts/test.sh
# prints at the end of `make test` (scripts/test_timings.py). Where QEVICT_TIMINGS is unset
# (a script run by hand) nothing is recorded and everything runs the same.

# stage NAME CMD...: runs CMD; appends "NAME<TAB>seconds<TAB>exit status" to
# $QEVICT_TIMINGS/stages.tsv. Returns CMD's status.
stage() {
  local name=$1
  shift
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  echo "== $name ($(date -u +%H:%M:%S) UTC)"
  "$@" || rc=$?
  t1=$(date +%s.%N)
  if [ -n "${QEVICT_TIMINGS:-}" ]; then
    mkdir -p "$QEVICT_TIMINGS"
    awk -v n="$name" -v a="$t0" -v b="$t1" -v rc="$rc" 'BEGIN { printf "%s\t%.1f\t%d\n", n, b - a, rc }' \
      >> "$QEVICT_TIMINGS/stages.tsv"
  fi
  return $rc
}

# ctest_run RUN BUILD_DIR CTEST_ARGS...: ctest in BUILD_DIR; with QEVICT_TIMINGS set, each test's
# time goes to $QEVICT_TIMINGS/RUN.junit.xml and the labels of the tests to RUN.tests.json.
ctest_run() {
  local run=$1 dir=$2
  shift 2
  local extra=()
  if [ -n "${QEVICT_TIMINGS:-}" ]; then
    mkdir -p "$QEVICT_TIMINGS"
    local timings
    timings=$(cd "$QEVICT_TIMINGS" && pwd)
    extra=(--output-junit "$timings/$run.junit.xml")
    (cd "$dir" && ctest --show-only=json-v1 "$@" > "$timings/$run.tests.json")
  fi
  (cd "$dir" && ctest --output-on-failure "${extra[@]}" "$@")
}

# begin_timed_run NAME DIR: records this run's stages and CTest runs in DIR (emptied first; an
# earlier QEVICT_TIMINGS wins) and, at exit, prints where the time went, then the lines of a
# function `summary_extra` where the script defines one, then "NAME: passed" or "NAME: FAILED".
begin_timed_run() {
  TIMED_RUN_NAME=$1
  export QEVICT_TIMINGS=${QEVICT_TIMINGS:-$2}
  rm -rf "$QEVICT_TIMINGS"
  mkdir -p "$QEVICT_TIMINGS"
  trap print_timed_run_summary EXIT
}

print_timed_run_summary() {
  local rc=$?
  echo
  python3 scripts/test_timings.py "$QEVICT_TIMINGS" || true
  if declare -F summary_extra >/dev/null; then summary_extra; fi
  if [ "$rc" -eq 0 ]; then echo "$TIMED_RUN_NAME: passed"; else echo "$TIMED_RUN_NAME: FAILED (exit $rc)"; fi
}
