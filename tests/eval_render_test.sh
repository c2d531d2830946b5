#!/usr/bin/env bash
# scripts/render_results.py and scripts/plot_eval.py on synthetic `qevict eval` output, with the
# statistics of the real `qevict report` (the binary is $1, default build/qevict).
#
# Run "run" (model test, chat, bounded mode, 36 instances per length): niah at 1024 tokens,
# where qevict (and qevict-qa) answer every instance and snapkv a third of them at budget 0.05
# (a clear difference: one verdict each), and mikv misses 2 instances qevict answers (a small
# difference: no verdict); niah at 2048 tokens, where the full cache answers only half (so it is
# excluded from every verdict although qevict beats snapkv there too); ppl with KL, qevict
# lowest, snapkv infeasible at 0.05; ablation variants of qevict and of the baselines (a
# variant option, a tagged run: never a verdict or a tally entry); shadow metrics and per-step missed
# mass. Run "run_base" (model base, completion prompts, rows written before rows carried their
# model or seed) holds the same instance ids: its rows must stay its own. Run "run_ctx" (the
# context-only protocol) has recall-oracle rows: a diagnostic shown beside each cell and in its
# own section, never a verdict, a tally entry or an ablation.
#
# Checks: the verdict lines and tallies, no verdict for the small difference, the failing cell
# excluded and said so, intervals printed, the goals restated, the pictures, the same bytes on a
# second render, and --commit-rows: deterministic gzipped copies under DEST/runs/NAME/ that
# render the same page.
# Exit 77 (skipped) without the qevict binary or without .venv/bin/python with matplotlib.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QEVICT=${1:-$ROOT/build/qevict}
PY=$ROOT/.venv/bin/python
if [ ! -x "$QEVICT" ]; then
  echo "SKIP: no qevict binary at $QEVICT (cmake --build build --target qevict)"
  exit 77
fi
if [ ! -x "$PY" ] || ! "$PY" -c "import matplotlib" 2>/dev/null; then
  echo "SKIP: needs .venv/bin/python with matplotlib (scripts/setup.sh venv)"
  exit 77
fi
QEVICT=$(cd "$(dirname "$QEVICT")" && pwd)/$(basename "$QEVICT")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export MPLCONFIGDIR=$TMP/mpl
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$(basename "$1") lacks: $2"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$(basename "$1") should not have: $2"; }

"$PY" - "$TMP" "$ROOT/tests" <<'PYEOF' || { echo "FAIL: could not write the synthetic rows"; exit 1; }
import json, os, sys
tmp = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from synthetic_runs import write_run

def kv(policy, length, budget):
    full_bytes = length * 23040
    b = full_bytes * (budget or 1.0)
    return {"budget_bytes": b, "peak_bytes": full_bytes if policy == "full" else b,
            "mean_resident_bytes": 0 if policy == "full" else 0.9 * b,
            "prefill_peak_bytes": full_bytes, "reserved_bytes": b * 1.02,
            "peak_reserved_bytes": b * 1.05, "rss_bytes": 2e8 + b, "peak_rss_bytes": 2.1e8 + b,
            "promotions": 3 if policy.startswith("qevict") else 0, "demotions": 2,
            "evictions": 0 if policy == "full" else 7, "infeasible": False}

def row(task, iid, policy, budget, length, depth, extra):
    mode = "full" if policy == "full" else "bounded"
    r = {"task": task, "id": iid, "kind": "ppl" if task == "ppl" else "questions",
         "policy": policy, "budget": 1.0 if policy == "full" else budget,
         "target_tokens": length, "depth": depth, "prompt_tokens": length - 40,
         "total_tokens": length + 10, "prompt_style": "chat", "prefill_mode": mode,
         "prefill_chunk": 0 if policy == "full" else 512, "infeasible": False, "note": "",
         "accuracy": None, "agreement": None, "edit_similarity": None, "kl": None,
         "delta_ppl": None, "top1_agreement": None, "nll": None, "ppl": None,
         "missed_mass": None, "fmm": None, "kv": kv(policy, length, budget), "turns": [],
         "wall_s": 0.5, "model": "test", "seed": 1}
    r.update(extra)
    return r

POLICIES = ["snapkv", "mikv", "qevict", "qevict-qa", "qevict:recovery=exact",
            "snapkv:snapkv_kernel=31", "mikv[bits4]"]

def correct(policy, length, budget, i):
    """Who answers instance i: the full cache all at 1024 and half at 2048; qevict and its
    variants all; snapkv a third at budget 0.05 and all at 0.2; mikv all but i = 0, 1."""
    if policy == "full":
        return length == 1024 or i % 2 == 0
    if policy.startswith("snapkv"):
        return budget > 0.1 or i % 3 == 0
    if policy.startswith("mikv"):
        return i >= 2
    return True

rows = []
for length in (1024, 2048):
    for i in range(36):
        depth = (0.1, 0.5, 0.9)[i % 3]
        iid = f"niah-L{length}-d{depth:.2f}-s{i}"
        for policy, budget in [("full", None)] + [(p, b) for p in POLICIES for b in (0.05, 0.2)]:
            ok = correct(policy, length, budget or 1.0, i)
            extra = {"accuracy": 1.0 if ok else 0.0,
                     "turns": [{"question": "What is the magic number?", "correct": ok,
                                "output": "4211" if ok else "I do not know"}]}
            if policy != "full":
                steps = [round(0.3 * (1 - budget) * (1 + 0.1 * (s % 3)), 4) for s in range(12)]
                extra.update(missed_mass_steps=steps, missed_mass=sum(steps) / 12,
                             fmm=0.2 + 0.01 * (i % 5), fmm_cumulative=0.3 + 0.01 * (i % 5),
                             quantized_mass=0.1 + 0.01 * (i % 4))
            rows.append(row("niah", iid, policy, budget, length, depth, extra))
for i in range(12):
    for policy, budget in [("full", None)] + [(p, b) for p in ("snapkv", "mikv", "qevict")
                                              for b in (0.05, 0.2)]:
        base = {"full": 0.0, "qevict": 0.01, "mikv": 0.03, "snapkv": 0.06}[policy]
        kl = base * (1 + 0.05 * (i % 4)) * (1.5 if budget == 0.05 else 1.0)
        r = row("ppl", f"ppl-L2048-s{i}", policy, budget, 2048, None,
                {"kl": kl, "delta_ppl": 7.4 * kl, "nll": 2.0 + kl, "ppl": 7.4 * (1 + kl),
                 "top1_agreement": 1 - kl, "accuracy": 1 - kl})
        if policy == "snapkv" and budget == 0.05:
            r["infeasible"] = r["kv"]["infeasible"] = True
            r["note"] = "budget below the fp16 floor"
        rows.append(r)

def write(name, rows, summary):
    write_run(os.path.join(tmp, name), rows, summary)

summary = {"command": "build/qevict eval -m models/test.gguf --tasks niah,ppl --out run",
           "model": "models/test.gguf", "seed": 1, "threads": 2,
           "started": "2026-12-01T10:00:00Z", "wall_s": 42.0, "prefill_modes": ["bounded"],
           "prompt_style": "chat"}
write("run", rows, summary)
# The base model's rows: same ids, completion prompts, no "model" or "seed" in the rows.
old = []
for r in rows:
    if r["task"] == "niah" and r["target_tokens"] == 1024 and r["policy"] in ("full", "snapkv",
                                                                              "qevict"):
        r = {k: v for k, v in r.items() if k not in ("model", "seed")}
        old.append(dict(r, prompt_style="completion"))
write("run_base", old, dict(summary, command="build/qevict eval -m models/base.gguf "
                            "--prompt-style completion --tasks niah --out run_base",
                            model="models/base.gguf", seed=1042, prompt_style="completion"))
# The same model and instances in the context-only protocol (questions asked after compression):
# the full cache and snapkv answer every one, qevict none. Its cells, full-cache reference and
# verdicts are its own: the question-in-prompt verdicts above must not change.
ctx = []
for r in rows:
    if r["task"] == "niah" and r["target_tokens"] == 1024 and r["policy"] in ("full", "snapkv",
                                                                              "qevict"):
        ok = r["policy"] != "qevict"
        ctx.append(dict(r, protocol="context-only", accuracy=1.0 if ok else 0.0,
                        turns=[dict(r["turns"][0], correct=ok)]))
        if r["policy"] == "full":  # the recall-oracle diagnostic answers every one
            for b in (0.05, 0.2):
                ctx.append(row("niah", r["id"], "recall-oracle", b, 1024, r["depth"],
                               {"protocol": "context-only", "accuracy": 1.0,
                                "turns": [dict(r["turns"][0], correct=True)]}))
write("run_ctx", ctx, dict(summary, command="build/qevict eval -m models/test.gguf "
                           "--protocol context-only --tasks niah --out run_ctx"))
PYEOF

render() {  # render NAME ARGS...: render_results.py in $TMP, log in NAME.log
  local name=$1
  shift
  (cd "$TMP" && "$PY" "$ROOT/scripts/render_results.py" --qevict "$QEVICT" --notes '' "$@" \
      >"$name.log" 2>&1) || fail "render_results.py ($name) exited $?: $(cat "$TMP/$name.log")"
}

# plot_eval.py alone: pictures into DIR/plots
"$PY" "$ROOT/scripts/plot_eval.py" --qevict "$QEVICT" "$TMP/run" >"$TMP/plot.log" 2>&1 \
  || fail "plot_eval.py exited $?: $(cat "$TMP/plot.log")"
for f in budget_test_niah_chat_bounded.png budget_test_ppl_chat_bounded.png \
         heatmap_test_niah_chat_bounded_qevict.png heatmap_test_niah_chat_bounded_full.png \
         memory_test_niah_chat_bounded.png steps_test_niah_chat_bounded.png; do
  [ -s "$TMP/run/plots/$f" ] || fail "plot_eval.py did not write plots/$f"
done
ls "$TMP/run/plots" | grep -q "recovery" && fail "plot_eval.py drew an ablation variant"

# Two renders with --commit-rows, then one from the committed rows alone: the same page.
render r1 --out docs/results.md --images docs/results --commit-rows docs/results run run_base \
  run_ctx
cp -r "$TMP/docs" "$TMP/docs1"
render r2 --out docs/results.md --images docs/results --commit-rows docs/results run run_base \
  run_ctx
render r3 --out docs/results.md --images docs/results docs/results/runs/run \
  docs/results/runs/run_base docs/results/runs/run_ctx
MD=$TMP/docs1/results.md
[ -s "$MD" ] || fail "no results.md"
for f in "$TMP"/docs1/results/*.png "$TMP"/docs1/results/runs/*/*; do
  rel=${f#"$TMP/docs1/"}
  cmp -s "$f" "$TMP/docs/$rel" || fail "$rel differs between renders"
done
cmp -s "$MD" "$TMP/docs/results.md" \
  || fail "the page from the committed rows differs: $(diff "$MD" "$TMP/docs/results.md" | head)"
for run in run run_base run_ctx; do
  [ -s "$TMP/docs1/results/runs/$run/rows.jsonl.gz" ] || fail "no committed rows of $run"
  cmp -s "$TMP/$run/summary.json" "$TMP/docs1/results/runs/$run/summary.json" \
    || fail "committed summary.json of $run differs"
  gzip -dc "$TMP/docs1/results/runs/$run/rows.jsonl.gz" | cmp -s - "$TMP/$run/rows.jsonl" \
    || fail "committed rows of $run differ from the run's"
done
[ -e "$TMP/docs1/results/runs/run/rows.jsonl" ] && fail "committed a plain rows.jsonl too"

# The sections, the runs list and the regenerate command (naming the committed rows).
for s in "## Runs" "## How to read this page" "## How the full cache does" "## Goals" \
         "## Results" "## Memory" "## Where qevict wins and where it loses" \
         "## Where qevict-qa wins and where it loses" "## Ablations" "## Diagnostics" \
         "## Pictures"; do
  grep -qxF "$s" "$MD" || fail "results.md lacks the section $s"
done
has "$MD" "--tasks niah,ppl"
has "$MD" "seed 1 (the test seed)"
has "$MD" "seed 1042 (a development seed"
has "$MD" "bounded: prefilled in 512-token chunks under the budget"
has "$MD" " docs/results/runs/run docs/results/runs/run_base docs/results/runs/run_ctx"
has "$MD" "merged $((36 * 15 * 2 + 12 * 7 + 36 * 5 + 36 * 7)) rows"

# The verdicts: one clear win each, nothing for the small difference, nothing where the full
# cache fails.
has "$MD" "- qevict beats snapkv on niah @ 1024, budget 0.05: +66.7 points ["
has "$MD" "- qevict-qa beats snapkv on niah @ 1024, budget 0.05: +66.7 points ["
has "$MD" "36 pairs, McNemar p < 0.001 (qevict alone right on 24, snapkv alone on 0)"
lacks "$MD" "qevict beats mikv on niah"
# A baseline's variant or tagged run is an ablation: never a verdict or a tally entry.
lacks "$MD" "beats snapkv:snapkv_kernel=31"
lacks "$MD" "beats mikv[bits4]"
has "$MD" "| niah | 1024 | 0.05 | snapkv | snapkv:snapkv_kernel=31 |"
# Ablation pairs change one thing: a variant against its own policy, not against a sibling's.
lacks "$MD" "| niah | 1024 | 0.05 | qevict-qa | qevict:recovery=exact |"
has "$MD" "| niah | 1024 | 0.05 | qevict | qevict-qa |"
lacks "$MD" "qevict loses to mikv on niah"
grep -E "^- qevict(-qa)? (beats|loses to) " "$MD" | grep -q "on niah @ 2048" \
  && fail "a verdict where the full cache fails (niah @ 2048)"
# qevict at 0.05: wins against snapkv on niah and mikv on ppl; none against mikv on niah.
has "$MD" "| 0.05 | 2 | 0 | 1 |"
has "$MD" "- qevict beats mikv on ppl @ 2048, budget 0.05: KL -"
has "$MD" "Not counted: 1 comparison with infeasible rows"
has "$MD" "Not counted, the full cache failing there: niah @ 2048 (the full cache fails)"
has "$MD" "**Excluded from every verdict: niah @ 2048 (test, chat prompts): the full cache fails, accuracy 0.50 ["
grep -qE "^\| test \| niah \| chat \| 2048 \| 0\.50 \[0\.[0-9]+, 0\.[0-9]+\] \| 36 \| \*\*fails\*\*" "$MD" \
  || fail "the full-cache table does not say niah @ 2048 fails, with its interval"
# Base-model rows stay their own (36 instances in test's table, 12 x 3 = 36 rows of base's).
has "$MD" "### base · niah @ 1024 tokens · completion prompts"
has "$MD" "### test · niah @ 1024 tokens · chat prompts"
has "$MD" "- qevict beats snapkv on niah @ 1024, budget 0.05: +66.7 points"
# The context-only protocol: its own table, full-cache reference, goal line and verdicts; the
# question-in-prompt ones above are unchanged by its rows.
CTX="context-only protocol (questions asked after compression)"
has "$MD" "### test · niah @ 1024 tokens · chat prompts · $CTX · bounded"
has "$MD" "### test · chat prompts · $CTX · bounded"
has "$MD" "- qevict loses to snapkv on niah @ 1024, budget 0.05: -100.0 points ["
has "$MD" "- **MISSED** niah @ 1024 (test, bounded, context-only):"
grep -qE "^\| test \| niah \| chat, context-only protocol \| 1024 \| 1\.00 \[0\.[89][0-9], 1\.00\] \| 36 \| passes" "$MD" \
  || fail "the full-cache table lacks the context-only protocol's own reference"
has "$MD" "protocol context-only; prefill mode"
# The recall oracle: a reference row in the table and its own section, never a contender.
has "$MD" "| recall-oracle (diagnostic) | 1.00 ["
has "$MD" "## Against the recall oracle"
has "$MD" "| niah | 1024 | 0.05 | qevict | 0.00 | 1.00 | -100.0 points [-100.0, -100.0] | 36 |"
has "$MD" "| niah | 1024 | 0.05 | snapkv | 1.00 | 1.00 | +0.0 points ["
lacks "$MD" "loses to recall-oracle"
lacks "$MD" "beats recall-oracle"
lacks "$MD" "| recall-oracle | qevict |"
lacks "$MD" "| qevict | recall-oracle |"
# Intervals in the tables; infeasible marked.
grep -qE "^\| \*\*qevict\*\* \| 1\.00 \[0\.[89][0-9], 1\.00\] \| 1\.00 \[0\.[89][0-9], 1\.00\] \|$" "$MD" \
  || fail "no qevict row with intervals in the niah tables"
has "$MD" "n = 36 instances per cell"
grep -qE "^\| snapkv \| [0-9.e-]+ \[[0-9.e-]+, [0-9.e-]+\] \(inf\.\) \|" "$MD" \
  || fail "the infeasible ppl cell is not marked (inf.)"
# Goals restated with the paired statistics.
has "$MD" "- **MET** niah @ 1024 (test, bounded):"
has "$MD" "- excluded: niah @ 2048 (test, bounded): the full cache fails."
has "$MD" "budget 0.05: no detectable difference: +5.6 points ["
has "$MD" "- **MET** ppl @ 2048, budget 0.05 (test, bounded): lower KL than each other policy, qevict minus: mikv KL -"
has "$MD" "(snapkv: infeasible rows, left out)"
# Ablations and diagnostics.
has "$MD" "| niah | 1024 | 0.05 | qevict | qevict:recovery=exact |"
lacks "$MD" "WIN_POINTS"
has "$MD" "does **not** count quantization error"
grep -qE "^\| 0\.05 \| qevict \| 72 \| 3\.0 \| 2\.0 \| 7\.0 \| 0\.[0-9]+ \[" "$MD" \
  || fail "no diagnostics row of qevict with promotions and missed mass"
for f in budget_test_niah_chat_bounded.png heatmap_test_niah_chat_bounded_qevict.png \
         memory_test_niah_chat_bounded.png steps_test_niah_chat_bounded.png \
         budget_base_niah_completion_bounded.png; do
  [ -s "$TMP/docs1/results/$f" ] || fail "render_results.py did not write results/$f"
  has "$MD" "](results/$f)"
done

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "eval_render_test: all checks passed"
