#!/usr/bin/env bash
# `make results`: docs/results.md and its pictures re-rendered from the rows committed under
# docs/results/runs/ (no model run; under a minute).
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
