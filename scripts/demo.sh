#!/usr/bin/env bash
# `make demo`: the headline comparison in about ten minutes on 2 cores, on the reference model
# whose full cache solves the task: Gemma 3 270M (base model, completion prompts) finds a needle
# in 8k tokens of prose (SmolLM2-135M's headline cells are 2k and 4k: `make eval-quick`, `make
# eval`). Every policy at budgets 0.05 and 0.1 on `niah` at 8k tokens in prompt-end mode (one
# fp16 prefill per instance forked into every row, as in the paper). The budgets are of the
# global layers (--kv-budget-scope global): Gemma's 15 sliding-window layers keep 7.5 MiB of
# rings whatever the length, paid on top of the budget and reported beside it; counted in it
# (the default scope) they are 24% of the cache at 8k and fractions below 0.3 are infeasible
# (docs/kv-cache.md, "Budget"). Then the main policies at 0.1 in bounded mode (each row reads
# the prompt in 512-token chunks, routing between them, as `run` and `serve` do with a budget),
# with the memory the process actually held; then the table and the pictures. The full grid is
# `make eval` (docs/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/qevict}
MODEL=${MODEL:-models/gemma-3-270m-q4_k_m.gguf}
OUT=${OUT:-eval-out/demo}
THREADS=${THREADS:-$(nproc)}
COMMON=(--tasks niah --lengths 8192 --prompt-style completion --threads "$THREADS" --seed 1
        --kv-budget-scope global)
"$BIN" eval -m "$MODEL" "${COMMON[@]}" --depths 0.25,0.75 --budgets 0.05,0.1 \
  --prefill-mode prompt-end --overwrite --out "$OUT"
"$BIN" eval -m "$MODEL" "${COMMON[@]}" --depths 0.5 --budgets 0.1 \
  --policies qevict,qevict-qa,snapkv,h2o --prefill-mode bounded \
  --overwrite --out "$OUT-bounded" --no-progress >/dev/null
python3 - "$OUT-bounded/summary.json" <<'PY'
import json, sys
# Pooled cells (summary format 2: docs/evaluation.md, "Summary").
cells = [c for c in json.load(open(sys.argv[1]))["cells"] if c["length"] is None]
mib = lambda v: "-" if v is None else "%.1f MiB" % (v / 2**20)
print("\nBounded prefill, niah at 8k tokens (budget 0.1 of the global layers for the compressed")
print("rows, the 7.5 MiB of sliding-window rings on top): the process's peak RSS and the cache's")
print("peak, rings included, per policy (means over instances)")
print("%-10s %8s %14s %14s %10s" % ("policy", "accuracy", "peak RSS", "KV peak", "mapped"))
for c in cells:
    kv = c["kv"]
    print("%-10s %8.2f %14s %14s %10s" % (c["policy"], c["metrics"]["accuracy"]["mean"],
                                           mib(kv["peak_rss_bytes"]), mib(kv["peak_bytes"]),
                                           mib(kv["peak_reserved_bytes"])))
PY
if [ -x .venv/bin/python ] && .venv/bin/python -c "import matplotlib" 2>/dev/null; then
  .venv/bin/python scripts/plot_eval.py "$OUT"
  echo "pictures: $OUT/plots/"
else
  echo "pictures skipped: run scripts/setup.sh venv, then .venv/bin/python scripts/plot_eval.py $OUT"
fi
echo "rows: $OUT/rows.jsonl   table: $OUT/table.md   full results: docs/results.md (make eval)"
