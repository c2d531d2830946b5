#!/usr/bin/env bash
# CTest entry for the HTTP server tests: runs tests/server/test_server.py with the project's
# venv (scripts/setup.sh venv). Exits 77 (skipped) when the venv or the model is missing.
set -u
BIN=$1
shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=${QEVICT_MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PY=$ROOT/.venv/bin/python
if [ ! -f "$MODEL" ]; then
  echo "skipped: no model at $MODEL (scripts/setup.sh model)"
  exit 77
fi
if [ ! -x "$PY" ] || ! "$PY" -c "import openai" 2>/dev/null; then
  echo "skipped: no .venv with the openai package (scripts/setup.sh venv)"
  exit 77
fi
exec "$PY" "$ROOT/tests/server/test_server.py" --binary "$BIN" --model "$MODEL" "$@"
