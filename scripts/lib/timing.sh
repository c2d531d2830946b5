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
