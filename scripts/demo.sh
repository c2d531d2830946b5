#!/usr/bin/env bash
# The headline demo: a real generation with the reference model on a long prompt, with speed
# figures and KV-cache statistics.
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
for i in range(120):
    c = rng.choice(cities)
    lines.append(f"Day {i + 1}: the courier left {c} at {rng.randint(5, 11)} am carrying "
                 f"{rng.randint(2, 40)} parcels and reached the depot before sunset.")
lines.insert(57, "Note: the secret access code for the north depot is 4721.")
lines.append("\nWhat is the secret access code for the north depot?")
open(sys.argv[1], "w").write("\n".join(lines))
PY
echo "== qevict run: long prompt ($(wc -w < "$prompt") words), greedy, full KV cache"
"$BIN" run -m "$MODEL" -f "$prompt" --chat -n 48 --temp 0 --kv-stats
echo
echo "== qevict run: a short factual question"
"$BIN" run -m "$MODEL" -p "What is the capital of France?" --chat -n 32 --temp 0
