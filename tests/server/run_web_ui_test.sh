#!/usr/bin/env bash
# CTest entry for the web page test (tests/server/test_web_ui.py): headless Chromium driven by
# Selenium from the project's venv. Skips (77) only without the model, as the other server
# tests do; a missing Chromium, chromedriver or selenium is a failure (scripts/setup.sh
# installs them).
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
if [ ! -x "$PY" ]; then
  echo "FAIL no .venv (scripts/setup.sh venv)"
  exit 1
fi
exec "$PY" "$ROOT/tests/server/test_web_ui.py" --binary "$BIN" --model "$MODEL" "$@"
