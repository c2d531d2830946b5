#!/usr/bin/env bash
# `make results`: docs/results.md and its pictures re-rendered from the rows committed under
# docs/results/runs/ (no model run; under a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
exec "$PY" scripts/render_results.py --qevict "${BIN:-build/qevict}" --out docs/results.md \
  --images docs/results docs/results/runs/*
