#!/usr/bin/env bash
# Runs scripts/eval.sh's cells one after another from a queue file, for the evaluations that take
# more than a session (hours a cell on 2 cores): each line holds the environment of one eval.sh
# run (e.g. "PART=recall-gemma ONLY=recall-gemma-niah-32k-bounded"; `#` starts a comment), in the
# order to run them, with SHARDS=6 PARALLEL=2 COMMIT_SHARDS=1 unless the line says otherwise:
# shards of 5 instances (of 30), two side by side (eval.sh's PARALLEL: 15% less time on 2 cores
# than one process with both threads), each one's rows committed as it ends.
#
# A line whose shards are all committed (DEST/runs/NAME-shard-K/summary.json for every K) is
# skipped; any other line runs, and eval.sh resumes what an earlier session left in eval-out/.
# With DEADLINE=HH:MM (UTC, today), no line starts within STOP_BEFORE minutes (default 20) of it,
# and the evaluation in flight is stopped at it: its finished instances stay in eval-out/ and the
# same line resumes them next time (only the instance in flight is lost).
#
# Usage: BIN=<a copy of the binary> DEADLINE=19:30 scripts/eval_queue.sh scripts/eval_queue_recall.txt
set -uo pipefail
cd "$(dirname "$0")/.."
QUEUE=${1:?usage: eval_queue.sh QUEUE_FILE}
[ -r "$QUEUE" ] || { echo "eval_queue: cannot read '$QUEUE'" >&2; exit 1; }
[ -x "${BIN:-build/qevict}" ] || { echo "eval_queue: no binary at ${BIN:-build/qevict} (set BIN)" >&2; exit 1; }
STOP_BEFORE=${STOP_BEFORE:-20}
deadline=0
if [ -n "${DEADLINE:-}" ]; then
  deadline=$(date -u -d "$DEADLINE" +%s) || { echo "eval_queue: bad DEADLINE '$DEADLINE' (HH:MM UTC)" >&2; exit 1; }
fi
log() { echo "eval_queue: $* ($(date -u +%H:%M:%S) UTC)"; }

# done_line VARS...: true when the line's every shard is committed.
done_line() {
  local only="" shards=6 dest=docs/results-recall part="" kv
  for kv in "$@"; do
    case $kv in
      ONLY=*) only=${kv#ONLY=} ;;
      SHARDS=*) shards=${kv#SHARDS=} ;;
      PART=*) part=${kv#PART=} ;;
    esac
  done
  case $part in recall | recall-gemma) ;; qa) dest=docs/results-qa ;; *) dest=docs/results ;; esac
  [ -n "$only" ] || return 1
  local k
  for ((k = 0; k < shards; k++)); do
    [ -f "$dest/runs/$only-shard-$k/summary.json" ] || return 1
  done
}

while read -r line; do
  line=${line%%#*}
  read -r -a vars <<<"$line"
  [ ${#vars[@]} -gt 0 ] || continue
  if done_line "${vars[@]}"; then
    log "done already: ${vars[*]}"
    continue
  fi
  if [ "$deadline" -gt 0 ] && [ $(($(date +%s) + STOP_BEFORE * 60)) -ge "$deadline" ]; then
    log "stopping: less than $STOP_BEFORE min to the deadline $DEADLINE; next: ${vars[*]}"
    exit 0
  fi
  log "start: ${vars[*]}"
  env SHARDS=6 PARALLEL=2 COMMIT_SHARDS=1 "${vars[@]}" scripts/eval.sh </dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$deadline" -gt 0 ] && [ "$(date +%s)" -ge "$deadline" ]; then
      # Stop the evaluation (not eval.sh between commits): the rows written so far stay.
      log "deadline $DEADLINE: stopping the evaluation in flight"
      pkill -TERM -P "$pid" -x qevict
      wait "$pid"
      exit 0
    fi
    sleep 20
  done
  wait "$pid" || log "eval.sh exited $? on: ${vars[*]}"
done <"$QUEUE"
log "queue finished"
