#!/usr/bin/env bash
# scripts/plot_eval.py and scripts/render_results.py on a small synthetic `qevict eval` output:
# 2 tasks (niah, ppl), 3 policies (full, snapkv, qevict), 2 budgets, one infeasible row,
# missed_mass_steps in some rows. Checks the pictures and docs-style page appear, the page has
# its Goals with MET / MISSED verdicts, and a second render gives the same bytes. Then the same
# niah rows as a completion-style run merged with the first: the runs list says each run's prompt
# style, and the completion rows get their own "niah (completion)" table and pictures.
# Exit 77 (skipped) without .venv/bin/python or matplotlib in it (scripts/setup.sh venv).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=$ROOT/.venv/bin/python
if [ ! -x "$PY" ] || ! "$PY" -c "import matplotlib" 2>/dev/null; then
  echo "SKIP: needs .venv/bin/python with matplotlib (scripts/setup.sh venv)"
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export MPLCONFIGDIR=$TMP/mpl
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

"$PY" - "$TMP/run" <<'PYEOF' || { echo "FAIL: could not write the synthetic rows"; exit 1; }
import json, os, sys
out = sys.argv[1]
os.makedirs(out)
skill = {"full": 1.0, "snapkv": 0.3, "qevict": 0.8}
rows = []

def row(task, iid, kind, policy, budget, length, depth):
    full_bytes = length * 23040
    bb = full_bytes * budget
    return {"task": task, "id": iid, "kind": kind, "policy": policy, "budget": budget,
            "target_tokens": length, "depth": depth, "prompt_tokens": length - 5,
            "total_tokens": length + 16, "accuracy": 0.0, "turns": [], "agreement": None,
            "edit_similarity": None, "nll": None, "ppl": None, "delta_ppl": None, "kl": None,
            "top1_agreement": None, "infeasible": False, "note": "",
            "prompt_style": "chat", "prefill_mode": "full" if policy == "full" else "bounded",
            "prefill_chunk": 0 if policy == "full" else 512,
            "kv": {"budget_bytes": bb, "peak_bytes": full_bytes if policy == "full" else bb,
                   "mean_resident_bytes": bb * 0.9, "peak_fp16_bytes": bb / 2,
                   "peak_quant_bytes": bb / 2, "mean_fp16_bytes": bb / 2.2,
                   "mean_quant_bytes": bb / 2.2, "prefill_peak_bytes": full_bytes,
                   "full_fp16_bytes": full_bytes,
                   "promotions": 3 if policy == "qevict" else 0, "demotions": 2,
                   "evictions": 0 if policy == "full" else 7, "routing_steps": 4,
                   "fp16_windows": 2, "quant_windows": 2, "evicted_windows": 1,
                   "cold_peak_bytes": 0, "tokens_seen": length + 16},
            "missed_mass": None, "fmm": None, "prefill_tok_s": 900.0, "decode_tok_s": 40.0,
            "wall_s": 0.5}

for length in (1024, 2048):
    for depth in (0.0, 0.5, 1.0):
        iid = f"niah-{length}-{depth}"
        for policy, budgets in (("full", [1.0]), ("snapkv", [0.05, 0.2]), ("qevict", [0.05, 0.2])):
            for b in budgets:
                r = row("niah", iid, "questions", policy, b, length, depth)
                ok = (depth * 7 + length / 1024 + b * 10) % 1.0 < skill[policy] + b
                r["accuracy"] = 1.0 if ok else 0.0
                r["agreement"] = 1.0 if policy == "full" else 0.5 + b
                r["turns"] = [{"question": "What is the magic number?", "output": "4211" if ok
                               else "I do not know", "correct": ok}]
                if policy != "full":
                    steps = [round((1 - skill[policy]) * (1 - b) * (1 + 0.1 * (i % 3)), 4)
                             for i in range(12)]
                    r["missed_mass_steps"] = steps
                    r["missed_mass"] = sum(steps) / len(steps)
                    r["fmm"] = r["missed_mass"] * 1.1
                rows.append(r)
for policy, budgets in (("full", [1.0]), ("snapkv", [0.05, 0.2]), ("qevict", [0.05, 0.2])):
    for b in budgets:
        r = row("ppl", "ppl-0", "ppl", policy, b, 2048, None)
        kl = 0.0 if policy == "full" else (1 - skill[policy]) * (1 - b) * 0.2
        r.update(nll=2.0 + kl, ppl=7.4 * (1 + kl), delta_ppl=7.4 * kl, kl=kl,
                 top1_agreement=1 - kl)
        if policy == "snapkv" and b == 0.05:
            r["infeasible"] = True
            r["note"] = "budget below the fp16 floor"
        rows.append(r)
with open(os.path.join(out, "rows.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
summary = {"command": "build/qevict eval -m models/test.gguf --tasks niah,ppl --out " + out,
           "model": "models/test.gguf", "seed": 7, "threads": 2,
           "started": "2026-12-01T10:00:00Z", "wall_s": 42.0, "groups": []}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f)
# The niah rows again, from a completion-style run of a base model.
comp = out + "_completion"
os.makedirs(comp)
with open(os.path.join(comp, "rows.jsonl"), "w") as f:
    for r in rows:
        if r["task"] == "niah":
            f.write(json.dumps(dict(r, prompt_style="completion")) + "\n")
summary = dict(summary, command="build/qevict eval -m models/base.gguf --tasks niah "
               "--prompt-style completion --out " + comp, model="models/base.gguf",
               prompt_style="completion")
with open(os.path.join(comp, "summary.json"), "w") as f:
    json.dump(summary, f)
# The same completion rows as if the first run's model had made them (one model, two styles).
same = out + "_same_model"
os.makedirs(same)
with open(os.path.join(comp, "rows.jsonl")) as src, open(os.path.join(same, "rows.jsonl"), "w") as f:
    f.write(src.read())
with open(os.path.join(same, "summary.json"), "w") as f:
    json.dump(dict(summary, model="models/test.gguf"), f)
PYEOF

# plot_eval.py alone, default output directory DIR/plots
"$PY" "$ROOT/scripts/plot_eval.py" "$TMP/run" >"$TMP/plot.log" 2>&1 \
  || fail "plot_eval.py exited $?: $(cat "$TMP/plot.log")"
for f in needle_full.png needle_snapkv.png needle_qevict.png accuracy_niah.png kl_ppl.png \
         resident_bytes.png fmm_steps.png; do
  [ -s "$TMP/run/plots/$f" ] || fail "plot_eval.py did not write plots/$f"
done
[ ! -e "$TMP/run/plots/passkey_qevict.png" ] || fail "passkey heatmap drawn without passkey rows"

# render_results.py, twice: the same bytes both times
for n in 1 2; do
  (cd "$TMP" && "$PY" "$ROOT/scripts/render_results.py" --out "docs$n/results.md" \
      --images "docs$n/results" run >"render$n.log" 2>&1) \
    || fail "render_results.py exited $?: $(cat "$TMP/render$n.log")"
done
MD=$TMP/docs1/results.md
[ -s "$MD" ] || fail "no results.md"
for f in needle_qevict.png accuracy_niah.png kl_ppl.png resident_bytes.png fmm_steps.png; do
  [ -s "$TMP/docs1/results/$f" ] || fail "render_results.py did not write results/$f"
  grep -qF "](results/$f)" "$MD" || fail "results.md does not link results/$f"
done
grep -q "^## Goals" "$MD" || fail "results.md has no Goals section"
grep -qE "^- \*\*(MET|MISSED)\*\*" "$MD" || fail "results.md has no MET/MISSED line"
grep -qF -- "--tasks niah,ppl" "$MD" || fail "results.md lacks the run's command line"
grep -qF "(inf.)" "$MD" || fail "results.md does not mark the infeasible cell"
grep -q "^## How the full cache does" "$MD" || fail "results.md lacks the full-cache section"
grep -q "^## Where QEvict wins and where it loses" "$MD" || fail "results.md lacks wins/losses"
grep -q "^## Diagnostics" "$MD" || fail "results.md lacks diagnostics"
sed 's#docs2/#docs1/#g' "$TMP/docs2/results.md" | cmp -s - "$MD" \
  || fail "results.md differs between two renders"
for f in "$TMP"/docs1/results/*.png; do
  cmp -s "$f" "$TMP/docs2/results/$(basename "$f")" \
    || fail "$(basename "$f") differs between two renders"
done

grep -qF "prompt style chat; prefill modes" "$MD" || fail "results.md does not say the prompt style"
grep -qF "(completion)" "$MD" && fail "results.md labels rows of a single prompt style"

# A chat run and a completion run of the same model merged: the completion rows are their own
# task.
(cd "$TMP" && "$PY" "$ROOT/scripts/render_results.py" --out docs3/results.md \
    --images docs3/results run run_same_model >render3.log 2>&1) \
  || fail "render_results.py on mixed prompt styles exited $?: $(cat "$TMP/render3.log")"
MD3=$TMP/docs3/results.md
grep -qF "prompt style completion; prefill modes" "$MD3" || fail "mixed: no completion run listed"
grep -q "^### niah (completion)$" "$MD3" || fail "mixed: no niah (completion) table"
grep -q "^### niah$" "$MD3" || fail "mixed: the chat niah table is gone"
grep -qF "](<results/accuracy_niah (completion).png>)" "$MD3" \
  || fail "mixed: no link to the completion accuracy picture"
[ -s "$TMP/docs3/results/accuracy_niah (completion).png" ] || fail "mixed: no completion picture"

# Runs of two models (a chat model and a base model): the second model's rows are its own task.
(cd "$TMP" && "$PY" "$ROOT/scripts/render_results.py" --out docs4/results.md \
    --images docs4/results run run_completion >render4.log 2>&1) \
  || fail "render_results.py on two models exited $?: $(cat "$TMP/render4.log")"
MD4=$TMP/docs4/results.md
grep -q "^### niah \[base\]$" "$MD4" || fail "two models: no niah [base] table"
grep -q "^### niah$" "$MD4" || fail "two models: the first model's niah table is gone"
grep -qF "(completion)" "$MD4" && fail "two models: a single-style model's rows are style-labelled"
[ -s "$TMP/docs4/results/accuracy_niah [base].png" ] || fail "two models: no picture of [base]"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "eval_render_test: all checks passed"
