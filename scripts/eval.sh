#!/usr/bin/env bash
# `make eval`: the published headline grid (docs/results.md) on the two reference models, then
# the page re-rendered from the rows, which are committed gzipped under docs/results/runs/.
# `make eval-extra` (PART=extra): the reported families beside it (SCBench-style turns, the
# RULER-style family, perplexity on 8 texts, ablations, 4-bit), rendered into the same page.
# `make eval-long` (PART=long): the headline cells of Gemma 3 270M at 16k and 32k tokens,
# needles and drift, in a target of their own because they cost more than the rest of the grid
# (a 32k-token prompt takes 100 s to read on 2 cores; the 32k needle run took 1 h 29 min, the
# drift run 1 h 38 min, both beside other work). `make eval` timed end to end on 2 cores:
# 1 h 41 min 56 s (2026-12-03, light work beside it), before the bounded needle run was added
# (2026-12-04: 57 min as two 1-thread shards side by side on a slower 2-core AVX2 machine, 37 s
# a bounded row; its bounded drift twin took 6 min 55 s on the faster one); the 16k runs about
# 51 + 33 min (one instance timed, x30). `make eval-quick` (QUICK=1): the headline table alone,
# with intervals, in under 15 minutes (6m36s measured on 2 cores).
#
# Every instance comes from the *test* seed 1 (SEED): nothing was tuned on it. Defaults are
# chosen on the development seeds 1000-1099 only (docs/kv-cache.md, "Seeds").
#
# Headline cells (task x length x budget) hold 30 instances each; every run below says how many
# its cells hold. Prompts are completion-style (raw text with an answer prefix): both reference
# models solve the headline tasks that way with the full cache (SmolLM2-135M-Instruct misses
# needles at 4k in its chat template, Gemma 3 270M is a base model).
#
# Memory modes (docs/evaluation.md, "Prefill modes"): the grids run in prompt-end mode (one fp16
# prefill per instance forked into every row, routed at the prompt's end: the paper's setting);
# the `bounded` runs repeat the SmolLM2 drift and needle cells at 2k and budget 0.1 with each row
# reading the prompt in 512-token chunks under the budget (what `run` and `serve` do), for the
# main policies.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/qevict}
SMOL=${SMOL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
GEMMA=${GEMMA:-models/gemma-3-270m-q4_k_m.gguf}
OUT=${OUT:-eval-out}
THREADS=${THREADS:-$(nproc)}
SEED=${SEED:-1}
QUICK=${QUICK:-0}
PART=${PART:-headline}  # headline (make eval), long (make eval-long), extra (make eval-extra), qa (make eval-qa), recall (make eval-recall), recall-gemma (make eval-recall-gemma)
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3

# Sharded runs (SHARDS=N, default 4 for PART=long, 1 otherwise): each run is N contiguous blocks
# of its instances (qevict eval --shard K/N), each into $OUT/NAME/shard-K with --resume, so a
# run that is interrupted and started again keeps every row written and loses only the instance
# in flight. With COMMIT_SHARDS=1 each finished shard's rows are committed at once (git) under
# $DEST/runs/NAME-shard-K/, so an interrupted afternoon loses one shard, not the run. The
# renderer pools the shards' rows like those of one run (same cells, same seed). FRESH=1 drops
# the shard directories of an earlier build first (published rows all come from one build).
SHARDS=${SHARDS:-1}
[ "$PART" = long ] && SHARDS=${SHARDS_LONG:-4}
# PARALLEL=P runs P shards side by side, THREADS / P threads each (the rows are the same): on 2
# cores two 1-thread shards of bounded Gemma 3 rows at 8k took 15% less time than one 2-thread
# process doing both (96 against 113 s for 4 instances, two alternated pairs, session 14): a
# process's serial parts (routing, the cold file, scoring) leave the other core idle.
PARALLEL=${PARALLEL:-1}
COMMIT_SHARDS=${COMMIT_SHARDS:-0}
FRESH=${FRESH:-0}
DEST=docs/results
[ "$PART" = qa ] && DEST=docs/results-qa
[ "$PART" = recall ] && DEST=docs/results-recall
[ "$PART" = recall-gemma ] && DEST=docs/results-recall

RUNS=()
STEP=0
TOTAL=0
# run NAME MODEL ARGS...: one qevict eval into $OUT/NAME, started over when it holds rows of an
# earlier run (--overwrite: published rows all come from one build; --resume would keep old ones);
# with SHARDS > 1, N resumable shards as above.
# ONLY=GLOB runs only the runs whose name matches it (the others are skipped, not counted).
run() {
  local name=$1 model=$2
  shift 2
  if [ -n "${ONLY:-}" ] && [[ "$name" != $ONLY ]]; then return; fi
  STEP=$((STEP + 1))
  echo "== [$STEP/$TOTAL] qevict eval: $name ($(date -u +%H:%M:%S) UTC)"
  if [ "$SHARDS" -le 1 ]; then
    "$BIN" eval -m "$model" --threads "$THREADS" --seed "$SEED" --prompt-style completion \
      --overwrite --out "$OUT/$name" "$@"
    RUNS+=("$OUT/$name")
    return
  fi
  [ "$FRESH" = 1 ] && rm -rf "${OUT:?}/$name"
  local k j dir threads failed
  for ((k = 0; k < SHARDS; k += PARALLEL)); do
    local group=() pids=()
    for ((j = k; j < k + PARALLEL && j < SHARDS; j++)); do group+=("$j"); done
    threads=$((THREADS / ${#group[@]}))
    [ "$threads" -ge 1 ] || threads=1
    for j in "${group[@]}"; do
      dir=$OUT/$name/$name-shard-$j
      echo "   shard $j/$SHARDS into $dir, $threads thread(s) ($(date -u +%H:%M:%S) UTC)"
      mkdir -p "$dir"
      if [ "${#group[@]}" -eq 1 ]; then
        "$BIN" eval -m "$model" --threads "$threads" --seed "$SEED" --prompt-style completion \
          --shard "$j/$SHARDS" --resume --out "$dir" "$@"
      else  # side by side: each one's output in its directory, its end printed below
        "$BIN" eval -m "$model" --threads "$threads" --seed "$SEED" --prompt-style completion \
          --shard "$j/$SHARDS" --resume --out "$dir" --no-progress "$@" >"$dir/eval.log" 2>&1 &
        pids+=($!)
      fi
    done
    failed=0
    for j in "${!pids[@]}"; do
      wait "${pids[$j]}" || failed=1
      tail -n 3 "$OUT/$name/$name-shard-${group[$j]}/eval.log"
    done
    [ "$failed" = 0 ] || { echo "eval.sh: a shard of $name failed (its eval.log says why)" >&2; exit 1; }
    for j in "${group[@]}"; do
      dir=$OUT/$name/$name-shard-$j
      RUNS+=("$dir")
      [ "$COMMIT_SHARDS" = 1 ] || continue
      "$PY" scripts/render_results.py --qevict "$BIN" --commit-rows "$DEST" \
        --out "$dir/results-this-shard.md" --images "$dir/results-this-shard" "$dir" >/dev/null
      git add "$DEST/runs/$(basename "$dir")"
      git commit -q -m "eval ($PART): rows of $name, shard $j of $SHARDS" -- "$DEST/runs/$(basename "$dir")" ||
        echo "   (nothing new to commit for shard $j)"
    done
  done
}
PE=(--prefill-mode prompt-end)
HEAD_BUDGETS=(--budgets 0.05,0.1,0.2)
DEPTHS10=(--depths 0.05,0.15,0.25,0.35,0.45,0.55,0.65,0.75,0.85,0.95 --samples 3)  # 30 a length

if [ "$QUICK" = 1 ]; then
  # The headline cells at 2k tokens and budget 0.1: 30 instances each, the main policies.
  TOTAL=2
  QP=(--budgets 0.1 --policies streaming,h2o,snapkv,mikv,qevict,qevict-qa --lengths 2048)
  run quick-niah "$SMOL" "${PE[@]}" "${QP[@]}" --tasks niah "${DEPTHS10[@]}"
  run quick-drift "$SMOL" "${PE[@]}" "${QP[@]}" --tasks drift --samples 30
  "$BIN" report -o "$OUT/quick" "${RUNS[@]}"
  exit 0
fi

if [ "$PART" = headline ]; then
  TOTAL=8
  # Headline: needles at 2k and 4k, drift (four questions about four parts of one prompt, in
  # one session) at 2k with the full-cache shadow (missed mass, FMM), every policy, 30 a cell.
  run smol-niah "$SMOL" "${PE[@]}" "${HEAD_BUDGETS[@]}" --tasks niah --lengths 2048,4096 "${DEPTHS10[@]}"
  run smol-drift "$SMOL" "${PE[@]}" "${HEAD_BUDGETS[@]}" --tasks drift --lengths 2048 --samples 30 --shadow
  # Both memory modes: the drift and needle cells at 2k and budget 0.1 again, each row prefilled
  # in 512-token chunks under the budget (no fp16 prompt to fork from: a prefill per row).
  BOUNDED=(--prefill-mode bounded --budgets 0.1 --lengths 2048 --policies streaming,snapkv,mikv,qevict,qevict-qa)
  run smol-bounded "$SMOL" "${BOUNDED[@]}" --tasks drift --samples 30
  run smol-bounded-niah "$SMOL" "${BOUNDED[@]}" --tasks niah "${DEPTHS10[@]}"
  # Gemma 3 270M at 8k tokens, 30 a cell. Its 15 sliding-window layers keep 7.5 MiB of rings
  # whatever the length, counted in the budget (24% of the cache at 8k): budgets from 0.3.
  run gemma-niah "$GEMMA" "${PE[@]}" --budgets 0.3,0.5 --lengths 8192 --tasks niah "${DEPTHS10[@]}"
  run gemma-niah-4k "$GEMMA" "${PE[@]}" --budgets 0.3,0.5 --lengths 4096 --tasks niah "${DEPTHS10[@]}"
  # Gemma's multi-question task (drift: four questions on four parts of one prompt, one session).
  run gemma-drift-4k "$GEMMA" "${PE[@]}" --budgets 0.3,0.5 --lengths 4096 --tasks drift --samples 30
  run gemma-drift-8k "$GEMMA" "${PE[@]}" --budgets 0.3,0.5 --lengths 8192 --tasks drift --samples 30 \
    --policies full,streaming,h2o,tova,snapkv,pyramidkv,kivi,mikv,qevict,qevict-qa
elif [ "$PART" = qa ]; then
  # Issue 20's score sources (docs/results-query-agnostic.md): reconstruction (qevict-zip,
  # kvzip), expected attention, key norm, and the cumulative and query-aware attention of
  # qevict and qevict-qa, with SnapKV and H2O, at budgets 0.05 and 0.1, 30 a cell, in both
  # protocols: context-only (every question asked after compression, the setting a
  # query-agnostic score is for) and question-in-prompt. Each run 7-18 min on 2 cores.
  TOTAL=6
  QA=(--budgets 0.05,0.1 --policies qevict,qevict-qa,snapkv,h2o,qevict-zip,kvzip,qevict-zip:score_source=key-norm,qevict-zip:score_source=expected-attention,kvzip:score_source=key-norm)
  for proto in context-only question-in-prompt; do
    short=qip
    [ "$proto" = context-only ] && short=ctx
    run "qa-smol-niah-$short" "$SMOL" "${PE[@]}" "${QA[@]}" --protocol "$proto" --tasks niah \
      --lengths 2048 "${DEPTHS10[@]}"
    run "qa-smol-niah-4k-$short" "$SMOL" "${PE[@]}" "${QA[@]}" --protocol "$proto" --tasks niah \
      --lengths 4096 "${DEPTHS10[@]}"
    run "qa-smol-drift-$short" "$SMOL" "${PE[@]}" "${QA[@]}" --protocol "$proto" --tasks drift \
      --lengths 2048 --samples 30
  done
elif [ "$PART" = recall ]; then
  # Issue 38's cold tier and recall (docs/results-recall.md): qevict-recall against the paper's
  # qevict, the query-aware policies without recall (qevict-qa, snapkv) and the Quest-style
  # anchor (everything in RAM, the top pages attended per token), context-only protocol (the
  # question after the document, as chat, server sessions and --prompt-cache use the cache),
  # 30 a cell, budgets 0.05 and 0.1. About 20 min a 2k run on 2 cores, 45 a 4k one. The
  # recall-oracle rows are a diagnostic reference (exact top windows, every token in RAM: what
  # recall could reach at the budget), shown beside each cell, never a contender.
  # RECALL_POLICIES=P,Q and RUN_SUFFIX=-S rerun only some policies into runs NAME-S, whose rows
  # replace those of the same policies in the earlier runs (the renderer keeps a later run's
  # row): how a change to one policy is measured again without rerunning the baselines.
  TOTAL=9
  POLICIES=${RECALL_POLICIES:-qevict,qevict-qa,snapkv,quest,qevict-recall,recall-oracle}
  S=${RUN_SUFFIX:-}
  RECALL=(--budgets 0.05,0.1 --protocol context-only --policies "$POLICIES")
  run "recall-smol-niah-ctx$S" "$SMOL" "${PE[@]}" "${RECALL[@]}" --tasks niah --lengths 2048 "${DEPTHS10[@]}"
  run "recall-smol-drift-ctx$S" "$SMOL" "${PE[@]}" "${RECALL[@]}" --tasks drift --lengths 2048 --samples 30
  run "recall-smol-niah-4k-ctx$S" "$SMOL" "${PE[@]}" "${RECALL[@]}" --tasks niah --lengths 4096 "${DEPTHS10[@]}"
  # The same needles with the question inside the compressed prompt (docs/results.md's protocol).
  RECALL_QIP=(--budgets 0.05,0.1 --policies "$POLICIES")
  run "recall-smol-niah-qip$S" "$SMOL" "${PE[@]}" "${RECALL_QIP[@]}" --tasks niah --lengths 2048 "${DEPTHS10[@]}"
  # The SCBench-style set (five facts, five turns in one session, each far from the last).
  run "recall-smol-scbench-ctx$S" "$SMOL" "${PE[@]}" "${RECALL[@]}" --tasks scbench --lengths 2048 --samples 30
  # Drift, needles at 4k and the SCBench-style set with the first question inside the
  # compressed prompt (the later turns of drift and scbench come after it, as in docs/results.md).
  run "recall-smol-drift-qip$S" "$SMOL" "${PE[@]}" "${RECALL_QIP[@]}" --tasks drift --lengths 2048 --samples 30
  run "recall-smol-niah-4k-qip$S" "$SMOL" "${PE[@]}" "${RECALL_QIP[@]}" --tasks niah --lengths 4096 "${DEPTHS10[@]}"
  run "recall-smol-scbench-qip$S" "$SMOL" "${PE[@]}" "${RECALL_QIP[@]}" --tasks scbench --lengths 2048 --samples 30
  # KL to the full cache (and perplexity) on the 8 texts, the policies of the grid.
  run "recall-smol-ppl$S" "$SMOL" "${PE[@]}" --budgets 0.05,0.1 --policies "$POLICIES" --tasks ppl \
    --lengths 2048 --samples 8
elif [ "$PART" = recall-gemma ]; then
  # Issue 38's cells on Gemma 3 270M, the long-context reference (docs/results-recall.md):
  # budgets of the global layers' cache (--kv-budget-scope global: the 15 sliding-window layers'
  # rings are kept and reported beside it), context-only protocol, 30 a cell. Needles at 8k and
  # 16k and drift at 8k in prompt-end mode (one fp16 prefill forked into every row); needles at
  # 8k again in bounded prefill (512-token chunks under the budget, a prefill per row) for the
  # policies a user runs that way; drift at 16k. About 16, 14, 35, 20 and 35 min on 2 cores.
  TOTAL=27
  POLICIES=${RECALL_POLICIES:-qevict,qevict-qa,snapkv,quest,qevict-recall,recall-oracle}
  S=${RUN_SUFFIX:-}
  GR=(--budgets 0.05,0.1 --kv-budget-scope global --protocol context-only)
  GQ=(--budgets 0.05,0.1 --kv-budget-scope global)  # the question in the prompt
  # One bounded-prefill cell (a prefill a row, the policies a user runs that way): TASK,
  # LABEL:TOKENS, and "" for the context-only protocol or -qip for the question in the prompt.
  bounded() {
    local task=$1 len=$2 protocol=$3 size=(--samples 30)
    [ "$task" = niah ] && size=("${DEPTHS10[@]}")
    local args=("${GR[@]}")
    [ "$protocol" = -qip ] && args=("${GQ[@]}")
    run "recall-gemma-$task-${len%%:*}-bounded$protocol$S" "$GEMMA" --prefill-mode bounded \
      "${args[@]}" --policies "${BOUNDED_POLICIES:-qevict,snapkv,qevict-recall}" --tasks "$task" \
      --lengths "${len##*:}" "${size[@]}"
  }
  run "recall-gemma-niah-8k-ctx$S" "$GEMMA" "${PE[@]}" "${GR[@]}" --policies "$POLICIES" \
    --tasks niah --lengths 8192 "${DEPTHS10[@]}"
  run "recall-gemma-drift-8k-ctx$S" "$GEMMA" "${PE[@]}" "${GR[@]}" --policies "$POLICIES" \
    --tasks drift --lengths 8192 --samples 30
  run "recall-gemma-niah-16k-ctx$S" "$GEMMA" "${PE[@]}" "${GR[@]}" --policies "$POLICIES" \
    --tasks niah --lengths 16384 "${DEPTHS10[@]}"
  bounded niah 8k:8192 ""
  # Drift at 16k (four questions on four parts of one prompt, one session), prompt-end.
  run "recall-gemma-drift-16k-ctx$S" "$GEMMA" "${PE[@]}" "${GR[@]}" --policies "$POLICIES" \
    --tasks drift --lengths 16384 --samples 30
  # Added in session 7, run in session 8: the needles at 8k with the question inside the
  # compressed prompt (9 min); drift at 8k in bounded prefill (about 50 min); the needles at 32k
  # (about 100 s of fp16 prefill an instance on 2 cores, so over an hour with every policy).
  run "recall-gemma-niah-8k-qip$S" "$GEMMA" "${PE[@]}" --budgets 0.05,0.1 \
    --kv-budget-scope global --policies "$POLICIES" --tasks niah --lengths 8192 "${DEPTHS10[@]}"
  bounded drift 8k:8192 ""
  run "recall-gemma-niah-32k-ctx$S" "$GEMMA" "${PE[@]}" "${GR[@]}" --policies "$POLICIES" \
    --tasks niah --lengths 32000 "${DEPTHS10[@]}"
  # Not run yet unless the notes of docs/results-recall.md say so (run them with ONLY and
  # SHARDS, a few a session): drift at 32k, prompt-end (about 25 min a shard of 10 with every
  # policy; run in sessions 11 and 12 with SHARDS=3); the needles and drift at 16k in bounded
  # prefill (a 16k prefill a row: a few hours a cell for the
  # three policies). Drift at 8k and the needles at 16k with the question in the prompt were run
  # in session 9 (about 10 and 18 min); the needles at 16k in bounded prefill (about 30 min a
  # shard of 10 instances alone on 2 cores, 3 shards) and drift at 16k with the question in the
  # prompt (23 min) in session 10.
  run "recall-gemma-drift-32k-ctx$S" "$GEMMA" "${PE[@]}" "${GR[@]}" --policies "$POLICIES" \
    --tasks drift --lengths 32000 --samples 30
  run "recall-gemma-drift-8k-qip$S" "$GEMMA" "${PE[@]}" --budgets 0.05,0.1 \
    --kv-budget-scope global --policies "$POLICIES" --tasks drift --lengths 8192 --samples 30
  run "recall-gemma-niah-16k-qip$S" "$GEMMA" "${PE[@]}" --budgets 0.05,0.1 \
    --kv-budget-scope global --policies "$POLICIES" --tasks niah --lengths 16384 "${DEPTHS10[@]}"
  # Added in session 10: the rest of the question-in-prompt cells (drift at 16k about 40 min;
  # the needles and drift at 32k about 16 min a shard of 10 alone, run in session 11 with
  # SHARDS=3).
  run "recall-gemma-drift-16k-qip$S" "$GEMMA" "${PE[@]}" --budgets 0.05,0.1 \
    --kv-budget-scope global --policies "$POLICIES" --tasks drift --lengths 16384 --samples 30
  run "recall-gemma-niah-32k-qip$S" "$GEMMA" "${PE[@]}" --budgets 0.05,0.1 \
    --kv-budget-scope global --policies "$POLICIES" --tasks niah --lengths 32000 "${DEPTHS10[@]}"
  run "recall-gemma-drift-32k-qip$S" "$GEMMA" "${PE[@]}" --budgets 0.05,0.1 \
    --kv-budget-scope global --policies "$POLICIES" --tasks drift --lengths 32000 --samples 30
  bounded niah 16k:16384 ""
  bounded drift 16k:16384 ""
  # Added in session 12: drift at 16k in bounded prefill (above) took about 40 min a shard of 10
  # on 2 cores beside other work (shard 0 run in session 12); the needles and drift at 32k in
  # bounded prefill, a 32k prefill a row for the three policies, about twice that a shard.
  bounded niah 32k:32000 ""
  bounded drift 32k:32000 ""
  # Added in session 13: the bounded cells with the question inside the prompt (issue 38 asks
  # for every cell in both protocols), the same policies; not run yet unless the notes of
  # docs/results-recall.md say so. A bounded prefill a row, so the times of the context-only
  # bounded cells above (8k about 50 min a cell, 16k about 40 min a shard of 10, 32k about
  # twice that a shard).
  for len in 8k:8192 16k:16384 32k:32000; do
    bounded niah "$len" -qip
    bounded drift "$len" -qip
  done
  # Added in session 16: more instances where 30 cannot decide (docs/evaluation.md, "More
  # instances where 30 cannot decide"). The needles with the question in the prompt,
  # qevict-recall against qevict-qa at 0.05: 3, 2 and 4 discordant pairs at 8k, 16k and 32k,
  # too few for any verdict. Samples 3-11 of the same depths (90 more a cell, the first 30
  # unchanged), the full cache and those two policies, into runs NAME-more; decided before any
  # ran, judged on all 120 pairs. About 30 min, 70 min and 2.5 h on 2 cores.
  MORE=(--depths 0.05,0.15,0.25,0.35,0.45,0.55,0.65,0.75,0.85,0.95 --samples 9 --first-sample 3)
  for len in 8k:8192 16k:16384 32k:32000; do
    run "recall-gemma-niah-${len%%:*}-qip-more" "$GEMMA" "${PE[@]}" "${GQ[@]}" \
      --policies qevict-recall,qevict-qa --tasks niah --lengths "${len##*:}" "${MORE[@]}"
  done
elif [ "$PART" = long ]; then
  TOTAL=4
  # At 16k tokens the rings are 14% of the cache: budgets from 0.2. Needles with every default
  # policy, the query-agnostic ones (kvzip, qevict-zip) included.
  run gemma-niah-16k "$GEMMA" "${PE[@]}" --budgets 0.2,0.3,0.5 --lengths 16384 --tasks niah "${DEPTHS10[@]}"
  run gemma-drift-16k "$GEMMA" "${PE[@]}" --budgets 0.2,0.3,0.5 --lengths 16384 --tasks drift \
    --samples 30 --policies full,streaming,h2o,tova,snapkv,pyramidkv,kivi,mikv,qevict,qevict-qa
  # Gemma 3 270M at 32k tokens (31k of prompt: the question and answer fit its 32768-token
  # context). The rings are 7% of the cache here: budgets from 0.1. The query-agnostic
  # policies are left out: their reconstruction pass would double the run (at 16k it took as
  # long as the prefill).
  LONG=(--budgets 0.1,0.2,0.3,0.5 --lengths 32000 --policies full,streaming,h2o,tova,snapkv,pyramidkv,kivi,mikv,qevict,qevict-qa)
  run gemma-niah-32k "$GEMMA" "${PE[@]}" "${LONG[@]}" --tasks niah "${DEPTHS10[@]}"
  run gemma-drift-32k "$GEMMA" "${PE[@]}" "${LONG[@]}" --tasks drift --samples 30
else
  TOTAL=5
  # SCBench-style multi-turn: five questions on five parts of one shared context, 30 a cell.
  run smol-scbench "$SMOL" "${PE[@]}" --budgets 0.1 --tasks scbench --lengths 2048 --samples 30
  # The RULER-style family (10 instances a cell: reported, not headline).
  run smol-ruler "$SMOL" "${PE[@]}" --budgets 0.1 --lengths 2048 --depths 0.5 --samples 10 \
    --tasks multikey,multivalue,multiquery,vt,cwe,fwe --policies streaming,snapkv,mikv,qevict,qevict-qa
  # Perplexity and KL to the full cache on 8 texts.
  run smol-ppl "$SMOL" "${PE[@]}" "${HEAD_BUDGETS[@]}" --tasks ppl --lengths 2048 --samples 8
  # Ablations (10 instances a cell, reported as ablations, never used to pick defaults): wider
  # question-pooling kernels, exact recovery, H2O without its recent half, SnapKV's kernel 31;
  # then the quantized tier at 4 bits for every policy that quantizes.
  ABLATION=(--tasks drift --lengths 2048 --samples 10 --budgets 0.05,0.1)
  run ablation "$SMOL" "${PE[@]}" "${ABLATION[@]}" --tag ablation \
    --policies qevict,qevict-qa,qevict-qa:query_kernel=15,qevict:recovery=exact:route_every=2,h2o:h2o_recent_share=0,snapkv:snapkv_kernel=31
  run bits4 "$SMOL" "${PE[@]}" "${ABLATION[@]}" --tag bits4 --kv-bits 4 --policies qevict,qevict-qa,mikv,kivi
fi

# This part's rows are committed under docs/results/runs/ (docs/results-qa/runs/ for the qa
# part; gzipped, with their summary.json); the pages are rendered from every committed run.
"$PY" scripts/render_results.py --qevict "$BIN" --commit-rows "$DEST" \
  --out "$OUT/results-this-part.md" --images "$OUT/results-this-part" "${RUNS[@]}"
BIN=$BIN scripts/render_results.sh
echo "rows committed under $DEST/runs/; docs/results.md and docs/results-query-agnostic-test.md regenerated"
