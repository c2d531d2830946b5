#!/usr/bin/env bash
# `make results`: every results page and its pictures re-rendered from the rows committed under
# docs/*/runs/ (docs/results.md, results-gemma.md, results-query-agnostic-test.md,
# results-recall.md), then README.md's policy table (no model run; a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
"$PY" scripts/render_results.py --qevict "${BIN:-build/qevict}" --out docs/results.md \
  --images docs/results docs/results/runs/*
# Issue 20's score-source cells (both protocols: the renderer keeps context-only rows in tables,
# full-cache references and verdicts of their own) on a page of their own.
if compgen -G "docs/results-qa/runs/*" >/dev/null; then
  "$PY" scripts/render_results.py --qevict "${BIN:-build/qevict}" \
    --out docs/results-query-agnostic-test.md --images docs/results-qa \
    --notes scripts/results_qa_notes.md docs/results-qa/runs/*
fi
# Gemma 3 270M's first needle run (4k-32k, 3 instances a length) on a page of its own.
if compgen -G "docs/results-gemma/runs/*" >/dev/null; then
  "$PY" scripts/render_results.py --qevict "${BIN:-build/qevict}" --out docs/results-gemma.md \
    --images docs/results-gemma --notes '' docs/results-gemma/runs/*
fi
# Issue 38's cold tier and recall, context-only (scripts/eval.sh PART=recall).
if compgen -G "docs/results-recall/runs/*" >/dev/null; then
  "$PY" scripts/render_results.py --qevict "${BIN:-build/qevict}" \
    --out docs/results-recall.md --images docs/results-recall \
    --notes scripts/results_recall_notes.md --wins qevict-recall,quest --recall-targets \
    docs/results-recall/runs/*
fi
# README.md's "which policy" table: the best policy of the cells it names, from the pages above
# (last, so that it reads them as they are now).
"$PY" scripts/render_readme_policies.py --write
