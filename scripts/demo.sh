#!/usr/bin/env bash
# `make demo`: the headline comparison in a few minutes on 2 cores. Every policy at budgets
# 0.05 / 0.1 / 0.2 on `drift` (three questions about three needles, asked one after another in
# one session) and `niah` (one needle in prose) at 2k and 4k tokens, on the reference model, in
# prompt-end mode (one fp16 prefill per instance forked into every row, as in the paper); then
# the main policies at 0.1 in bounded mode (each row reads the prompt in 512-token chunks,
# routing between them, as `run` and `serve` do with a budget), with the memory the process
# actually held; then the table and the pictures. The full grid is `make eval`
# (docs/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/qevict}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${OUT:-eval-out/demo}
THREADS=${THREADS:-$(nproc)}
"$BIN" eval -m "$MODEL" --tasks drift,niah --lengths 2048,4096 --depths 0.25,0.75 \
  --budgets 0.05,0.1,0.2 --threads "$THREADS" --seed 1 --prefill-mode prompt-end --out "$OUT"
"$BIN" eval -m "$MODEL" --tasks niah --lengths 4096 --depths 0.25,0.75 --budgets 0.1 \
  --policies qevict,qevict-qa,snapkv,h2o --threads "$THREADS" --seed 1 --prefill-mode bounded \
  --out "$OUT-bounded" --no-progress >/dev/null
python3 - "$OUT-bounded/summary.json" <<'PY'
import json, sys
groups = json.load(open(sys.argv[1]))["groups"]
mib = lambda v: "-" if v is None else "%.1f MiB" % (v / 2**20)
print("\nBounded prefill, niah at 4k tokens (budget 0.1 for the compressed rows): the process's")
print("peak RSS and the cache's peak, per policy (means over instances)")
print("%-10s %8s %14s %14s %10s" % ("policy", "accuracy", "peak RSS", "KV peak", "mapped"))
for g in groups:
    print("%-10s %8.2f %14s %14s %10s" % (g["policy"], g["accuracy"], mib(g.get("peak_rss_bytes")),
                                           mib(g.get("peak_bytes")), mib(g.get("peak_reserved_bytes"))))
PY
if [ -x .venv/bin/python ] && .venv/bin/python -c "import matplotlib" 2>/dev/null; then
  .venv/bin/python scripts/plot_eval.py "$OUT"
  echo "pictures: $OUT/plots/"
else
  echo "pictures skipped: run scripts/setup.sh venv, then .venv/bin/python scripts/plot_eval.py $OUT"
fi
echo "rows: $OUT/rows.jsonl   table: $OUT/table.md   full results: docs/results.md (make eval)"
