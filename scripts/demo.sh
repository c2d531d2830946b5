#!/usr/bin/env bash
# The demo until the evaluation suite lands: real generations with the reference model on a long
# multi-question prompt, with the full fp16 KV cache and with QEvict at 10% of its bytes, with
# speed figures and per-tier KV statistics; then a short factual question.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/qevict}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
prompt=$(mktemp)
trap 'rm -f "$prompt"' EXIT
python3 - "$prompt" <<'PY'
import random, sys
rng = random.Random(7)
cities = ["Lisbon", "Oslo", "Quito", "Hanoi", "Nairobi", "Perth", "Tromso", "Cusco"]
lines = []
for i in range(150):
    c = rng.choice(cities)
    lines.append(f"Day {i + 1}: the courier left {c} at {rng.randint(5, 11)} am carrying "
                 f"{rng.randint(2, 40)} parcels and reached the depot before sunset.")
lines.insert(30, "Note: the secret access code for the north depot is 4721.")
lines.insert(100, "Note: the manager of the south depot is called Ingrid Vale.")
lines.append("\nWhat is the secret access code for the north depot?")
open(sys.argv[1], "w").write("\n".join(lines))
PY
for policy in "full" "qevict --kv-budget 0.1" "snapkv --kv-budget 0.1"; do
  echo "== qevict run: long prompt, greedy, --kv-policy $policy"
  # shellcheck disable=SC2086
  "$BIN" run -m "$MODEL" -f "$prompt" --chat -n 32 --temp 0 --kv-policy $policy --kv-stats
  echo
done
echo "== qevict run: a short factual question"
"$BIN" run -m "$MODEL" -p "What is the capital of Germany?" --chat -n 32 --temp 0
