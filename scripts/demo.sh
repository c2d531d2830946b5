#!/usr/bin/env bash
# `make demo`: the headline comparison in a few minutes on 2 cores. Every policy at budgets
# 0.05 / 0.1 / 0.2 on `drift` (three questions about three needles, asked one after another in
# one session) and `niah` (one needle in prose) at 2k and 4k tokens, on the reference model,
# then the table and the pictures. The full grid is `make eval` (docs/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/qevict}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${OUT:-eval-out/demo}
THREADS=${THREADS:-$(nproc)}
"$BIN" eval -m "$MODEL" --tasks drift,niah --lengths 2048,4096 --depths 0.25,0.75 \
  --budgets 0.05,0.1,0.2 --threads "$THREADS" --seed 1 --out "$OUT"
if [ -x .venv/bin/python ] && .venv/bin/python -c "import matplotlib" 2>/dev/null; then
  .venv/bin/python scripts/plot_eval.py "$OUT"
  echo "pictures: $OUT/plots/"
else
  echo "pictures skipped: run scripts/setup.sh venv, then .venv/bin/python scripts/plot_eval.py $OUT"
fi
echo "rows: $OUT/rows.jsonl   table: $OUT/table.md   full results: docs/results.md (make eval)"
