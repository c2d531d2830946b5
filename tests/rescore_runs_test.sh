#!/usr/bin/env bash
# scripts/rescore_runs.py on a committed-style run directory (rows.jsonl.gz and summary.json):
# a row that counted a needle followed by one more digit is scored 0 again, a right one stays 1,
# the summary records the rescoring, and a second pass changes no byte. The binary is $1
# (default build/qevict). Exit 77 (skipped) without it or without SmolLM2's GGUF.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QEVICT=${1:-$ROOT/build/qevict}
MODEL=${QEVICT_MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -x "$QEVICT" ] || [ ! -f "$MODEL" ]; then
  echo "SKIP: needs $QEVICT and $MODEL"
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
RUN=$TMP/runs/smol-niah
mkdir -p "$RUN"
FLAGS="-m $MODEL --seed 1 --prompt-style completion --tasks niah --lengths 512 --depths 0.5 --samples 2"
"$QEVICT" eval $FLAGS --export-tasks "$TMP/tasks.jsonl" 2>/dev/null || { echo "FAIL: export"; exit 1; }
python3 - "$TMP/tasks.jsonl" "$RUN" "$FLAGS" <<'PY' || { echo "FAIL: building the run"; exit 1; }
import gzip, json, sys
tasks = [json.loads(l) for l in open(sys.argv[1])]
run, flags = sys.argv[2], sys.argv[3]
rows = []
for k, task in enumerate(tasks):
    answer = task["turns"][0]["answers"][0]
    # Instance 0 answered with one digit too many (counted right before numbers were whole).
    output = " %s7." % answer if k == 0 else " %s." % answer
    rows.append({"id": task["id"], "kind": "questions", "task": "niah", "policy": "full",
                 "budget": 1.0, "model": "SmolLM2-135M-Instruct.Q4_1", "seed": 1,
                 "prompt_style": "completion", "protocol": "question-in-prompt",
                 "scorer": "substring", "prefill_mode": "prompt-end", "accuracy": 1.0,
                 "turns": [{"question": "q", "output": output, "score": 1.0, "correct": True}]})
data = "".join(json.dumps(r) + "\n" for r in rows).encode()
open(run + "/rows.jsonl.gz", "wb").write(gzip.compress(data, compresslevel=9, mtime=0))
json.dump({"command": "qevict eval " + flags + " --shard 0/1 --resume --out somewhere",
           "tasks": ["niah"], "scorer": "substring", "tasks_file": ""},
          open(run + "/summary.json", "w"))
PY
out=$(cd "$ROOT" && python3 scripts/rescore_runs.py --bin "$QEVICT" "$RUN" 2>&1)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
grep -q "2 question rows, 1 turns and 1 rows changed" <<<"$out" || fail "first pass: $out"
python3 - "$RUN" <<'PY' || fail "the rows or the summary after the first pass"
import gzip, json, sys
run = sys.argv[1]
rows = [json.loads(l) for l in gzip.open(run + "/rows.jsonl.gz", "rt")]
assert [r["accuracy"] for r in rows] == [0.0, 1.0], [r["accuracy"] for r in rows]
assert rows[0]["turns"][0]["correct"] is False and rows[1]["turns"][0]["score"] == 1.0
summary = json.load(open(run + "/summary.json"))
assert summary["rescored"]["changed_rows"] == 1 and summary["rows"] == 2, summary.get("rescored")
assert summary["command"].endswith("--out somewhere")  # the run's own command is kept
PY
before=$(sha256sum "$RUN/rows.jsonl.gz" "$RUN/summary.json")
out=$(cd "$ROOT" && python3 scripts/rescore_runs.py --bin "$QEVICT" "$RUN" 2>&1)
grep -q "0 turns and 0 rows changed" <<<"$out" || fail "second pass: $out"
[ "$before" = "$(sha256sum "$RUN/rows.jsonl.gz" "$RUN/summary.json")" ] || fail "a second pass changed bytes"
[ "$failures" = 0 ] && echo "rescore_runs: every check passed"
exit $((failures > 0))
