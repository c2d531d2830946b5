#!/usr/bin/env bash
# Regenerates docs/benchmarks.md (called by `make bench`): qevict against llama.cpp, side by side
# in one run on this machine, same GGUF file, same thread count.
#
#  1. builds llama.cpp's llama-bench (scripts/bench_llamacpp.sh; cached in third_party_build/);
#  2. ROUNDS times, for every context length in CTX, interleaved: `qevict bench` (prefill of a
#     prompt of that length, then GEN greedy decode steps), llama-bench `-p P` (prefill) and
#     llama-bench `-n GEN -d P` (decode after a prompt of P tokens); both engines report the best
#     of REPS repetitions, and the best over the rounds is kept;
#     The same with one thread each at CTX1 lengths (stage speed1);
#  3. the KV-policy table: `qevict bench` with `full` and, when `qevict run --help` offers
#     --kv-budget, every policy in KV_POLICIES at every budget in KV_BUDGETS, at KV_CTX lengths;
#  4. the memory table: one process per (context in MEM_CTX, policy in MEM_POLICIES, budget in
#     MEM_BUDGETS), `qevict bench` with MEM_GEN decode steps: the cache's ledger, what its pools
#     keep mapped, and the process's peak and final RSS, each against the full cache's;
#  5. the follow-up from the disk: `qevict bench` with qevict-recall at COLD_BUDGET and COLD_CTX,
#     the cold file kept in the page cache or dropped before the follow-up question, with and
#     without the next layer's prefetch (--kv-cold-prefetch);
#  6. profiles (when `perf` works): decode and prefill of qevict alone, per context length;
#  7. scripts/render_benchmarks.py turns the JSON into docs/benchmarks.md.
#
# The machine may be shared: before each timed command the script waits (up to QUIET_WAIT
# seconds) for a second in which at least QUIET_IDLE of the CPU time was idle, and it records
# how much CPU each command actually got (GNU time's %P) and the load average before it, which
# the page reports per engine. Before anything is timed, the 1-minute load average must fall
# below QUIET_LOAD (default: a quarter of the cores, 0.5 on 2) within QUIET_START seconds (600);
# otherwise the script refuses to write the page, unless BUSY_OK=1, which writes it marked
# unreliable at the top.
#
# Environment: BIN (default build/qevict), MODEL, THREADS (2), CTX (512,4096,8192), GEN (64), REPS (2),
# ROUNDS (3), QUIET_WAIT (30), QUIET_IDLE (0.75), KV_CTX (4096,8192), KV_POLICIES (all: every policy
# `qevict run --help` lists; or a comma list), KV_BUDGETS (0.05,0.1), KV_REPS (1), KV_ROUNDS (1: with N > 1,
# every row of the KV table runs once a round, rows interleaved, and the best round is kept, so
# that the machine drifting during the run touches every row alike), KV_SCOPE (empty; `global`:
# the KV table's budgets are of the global layers' cache, --kv-budget-scope global), KV_FLOOR_CTX (512:
# the full cache's decode at this short context bounds every policy's speed-up; 0 = skip), PROFILE (1 = when perf
# works, 0 = skip), LLAMACPP (1 = compare with llama.cpp, 0 = qevict only), OUT
# (docs/benchmarks.md), WORK (keep the raw results there instead of a temporary directory),
# Without the speed stage (STAGES=memory, or kv,memory,cold: `make bench-kv`), only the sections
# measured are re-rendered into an existing OUT, each with its own date and load average (and
# llama.cpp is not built). CTX1 (512: contexts of the one-thread comparison), MEM_CTX (2048,6144,8192: 6k is the issue 38 memory cell), MEM_POLICIES
# (qevict,snapkv,h2o,qevict-recall), MEM_BUDGETS (0.05,0.1,0.2), MEM_GEN (16), COLD_CTX (8192),
# COLD_BUDGET (0.05), COLD_REPS (3), STAGES (speed,speed1,kv,memory,cold,profile: with WORK,
# rerun some stages and keep the others' results).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-build/qevict}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
CTX=${CTX:-512,4096,8192}
GEN=${GEN:-64}
REPS=${REPS:-2}
ROUNDS=${ROUNDS:-3}
QUIET_WAIT=${QUIET_WAIT:-30}
QUIET_IDLE=${QUIET_IDLE:-0.75}
QUIET_LOAD=${QUIET_LOAD:-$(python3 -c "import os; print(os.cpu_count() / 4)")}
QUIET_START=${QUIET_START:-600}
BUSY_OK=${BUSY_OK:-0}
KV_CTX=${KV_CTX:-4096,8192}
KV_BUDGETS=${KV_BUDGETS:-0.05,0.1}
KV_POLICIES=${KV_POLICIES:-all}
KV_REPS=${KV_REPS:-1}
KV_ROUNDS=${KV_ROUNDS:-1}
KV_SCOPE=${KV_SCOPE:-}
KV_FLOOR_CTX=${KV_FLOOR_CTX:-512}
STAGES=${STAGES:-speed,speed1,kv,memory,cold,profile}
MEM_CTX=${MEM_CTX:-2048,6144,8192}
MEM_POLICIES=${MEM_POLICIES:-qevict,snapkv,h2o,qevict-recall}
MEM_BUDGETS=${MEM_BUDGETS:-0.05,0.1,0.2}
MEM_GEN=${MEM_GEN:-16}
COLD_CTX=${COLD_CTX:-8192}
COLD_BUDGET=${COLD_BUDGET:-0.05}
COLD_REPS=${COLD_REPS:-3}
CTX1=${CTX1:-512}
PROFILE=${PROFILE:-1}
LLAMACPP=${LLAMACPP:-1}
OUT=${OUT:-docs/benchmarks.md}

[ -x "$BIN" ] || { echo "bench: $BIN not found (run \`make build\` or set BIN)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "bench: $MODEL not found (run \`make setup\`)" >&2; exit 1; }
stage() { [[ ",$STAGES," == *",$1,"* ]]; }
if [ -n "${WORK:-}" ]; then
  mkdir -p "$WORK"
  stage speed && rm -f "$WORK"/speed_* "$WORK"/llama_* "$WORK"/loadavg_*
  stage speed1 && rm -f "$WORK"/speed1_* "$WORK"/llama1_*
  stage kv && rm -f "$WORK"/kv_* "$WORK"/kvfail_*
  stage memory && rm -f "$WORK"/mem_*
  stage cold && rm -f "$WORK"/cold_*
  stage profile && rm -f "$WORK"/profile_*
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
log() { echo "bench: $*" >&2; }

# Fraction of all CPU time that was idle over the next second (/proc/stat).
idle_fraction() {
  local a b
  a=$(head -1 /proc/stat)
  sleep 1
  b=$(head -1 /proc/stat)
  python3 -c '
import sys
a = [int(x) for x in sys.argv[1].split()[1:]]
b = [int(x) for x in sys.argv[2].split()[1:]]
d = [y - x for x, y in zip(a, b)]
print("%.2f" % ((d[3] + d[4]) / max(1, sum(d))))' "$a" "$b"
}

# Waits until the machine looks quiet (or QUIET_WAIT seconds have passed).
wait_quiet() {
  local waited=0 idle
  while :; do
    idle=$(idle_fraction)
    python3 -c "import sys; sys.exit(0 if $idle >= $QUIET_IDLE else 1)" && break
    waited=$((waited + 1))
    [ "$waited" -ge "$QUIET_WAIT" ] && break
  done
  echo "$idle"
}

# Runs a command after wait_quiet, stdout to $2; "peak-RSS-KiB CPU%" (GNU time) and the idle
# fraction seen before it to $1.
run_timed() {
  local res=$1 out=$2 idle
  shift 2
  idle=$(wait_quiet)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "%M %P" -o "$res" "$@" >"$out"
  else
    "$@" >"$out"
    echo "0 0%" >"$res"
  fi
  echo "idle_before $idle" >>"$res"
  echo "load_before $(cut -d' ' -f1 /proc/loadavg)" >>"$res"
}

# The 1-minute load average is below QUIET_LOAD now.
load_quiet() {
  python3 -c "import sys; sys.exit(0 if float(open('/proc/loadavg').read().split()[0]) < $QUIET_LOAD else 1)"
}

LLAMA_BENCH=""
if [ "$LLAMACPP" = 1 ] && { stage speed || stage speed1; }; then
  LLAMA_BENCH=$(scripts/bench_llamacpp.sh build)
fi

# speed OURS_PREFIX LLAMA_PREFIX THREADS CONTEXTS: ROUNDS interleaved rounds of both engines.
speed() {
  local ours=$1 theirs=$2 t=$3 L P tag round
  local -a lens
  IFS=, read -r -a lens <<<"$4"
  log "$ours: contexts $4, $GEN decode steps, best of $REPS reps x $ROUNDS rounds, $t threads"
  for round in $(seq 1 "$ROUNDS"); do
    for L in "${lens[@]}"; do
      tag="r${round}_L${L}"
      log "$ours round $round/$ROUNDS, context $L: qevict"
      run_timed "$WORK/${ours}_$tag.rss" "$WORK/${ours}_$tag.json" \
        "$BIN" bench -m "$MODEL" --ctx "$L" -t "$t" --gen "$GEN" --reps "$REPS" --json
      [ -n "$LLAMA_BENCH" ] || continue
      P=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["prompt_tokens"])' \
          "$WORK/${ours}_$tag.json")
      log "$ours round $round/$ROUNDS, context $L: llama.cpp prefill $P, decode $GEN at depth $P"
      run_timed "$WORK/${theirs}_pp_$tag.rss" "$WORK/${theirs}_pp_$tag.json" \
        "$LLAMA_BENCH" -m "$MODEL" -t "$t" -p "$P" -n 0 -r "$REPS" -o json
      run_timed "$WORK/${theirs}_tg_$tag.rss" "$WORK/${theirs}_tg_$tag.json" \
        "$LLAMA_BENCH" -m "$MODEL" -t "$t" -p 0 -n "$GEN" -d "$P" -r "$REPS" -o json
    done
  done
}

# A busy machine gives figures nobody should quote: wait for it to calm down, then refuse.
waited=0
until load_quiet; do
  if [ "$waited" -ge "$QUIET_START" ]; then
    if [ "$BUSY_OK" = 1 ]; then
      log "load average $(cut -d' ' -f1 /proc/loadavg) >= $QUIET_LOAD: measuring anyway (BUSY_OK=1); the page will be marked unreliable"
      break
    fi
    log "the machine is busy: load average $(cut -d' ' -f1 /proc/loadavg) >= $QUIET_LOAD after ${QUIET_START} s of waiting; $OUT not written. Rerun when it is quiet, or with BUSY_OK=1 for a page marked unreliable"
    exit 1
  fi
  [ "$waited" -eq 0 ] && log "waiting for the load average to fall below $QUIET_LOAD (up to ${QUIET_START} s)"
  sleep 10
  waited=$((waited + 10))
done
[ -f "$WORK/loadavg_start.txt" ] || cat /proc/loadavg >"$WORK/loadavg_start.txt"
IFS=, read -r -a ctx_list <<<"$CTX"
if stage speed; then speed speed llama "$THREADS" "$CTX"; fi
# One thread each: no thread synchronisation, so on a busy machine this compares the kernels.
if stage speed1; then speed speed1 llama1 1 "$CTX1"; fi

# KV policies: full always; the tiered policies once the binary has a --kv-budget flag.
help=$("$BIN" run --help 2>&1 || true)
policies=()
if grep -q -- "--kv-budget" <<<"$help"; then
  if [ "$KV_POLICIES" = all ]; then
    # The --kv-policy help line lists them: "cache policy: full, streaming, h2o, ...".
    # (A remark in parentheses, "recall-oracle (a diagnostic, not for use)", is not a name.)
    listed=$(grep -- "--kv-policy" <<<"$help" | sed -n 's/.*polic[a-z]*: *//p' | sed 's/([^)]*)//g' | tr -d ' ')
    IFS=, read -r -a policies <<<"${listed:-qevict}"
  else
    IFS=, read -r -a policies <<<"$KV_POLICIES"
  fi
else
  log "no --kv-budget in \`$BIN run --help\`: KV table with the full cache only"
fi
IFS=, read -r -a kv_ctx_list <<<"$KV_CTX"
IFS=, read -r -a budgets <<<"$KV_BUDGETS"
# The floor of the KV table: the full cache at KV_FLOOR_CTX tokens, where attention costs almost
# nothing, so its decode is the weights' time: no cache decodes faster at any context.
if stage kv && [ "$KV_FLOOR_CTX" != 0 ]; then
  log "kv: full at $KV_FLOOR_CTX (the weights' floor, best of 3)"
  "$BIN" bench -m "$MODEL" --ctx "$KV_FLOOR_CTX" -t "$THREADS" --gen "$GEN" --reps 3 --json \
    --bandwidth-mib 0 >"$WORK/kvfloor_L$KV_FLOOR_CTX.json"
fi
# kv_row L POLICY BUDGET FILE: one row of the KV table into FILE (JSON); a failure is noted.
kv_row() {
  local L=$1 p=$2 b=$3 file=$4
  local extra=()
  [ "$p" != full ] && extra=(--kv-policy "$p" --kv-budget "$b" ${KV_SCOPE:+--kv-budget-scope "$KV_SCOPE"})
  if ! "$BIN" bench -m "$MODEL" --ctx "$L" -t "$THREADS" --gen "$GEN" --reps "$KV_REPS" --json \
      --bandwidth-mib 0 "${extra[@]}" >"$file" 2>"$WORK/kv_${p}_${b}_L$L.err"; then
    log "kv: $p at $b failed: $(tail -1 "$WORK/kv_${p}_${b}_L$L.err")"
    rm -f "$file"
    cp "$WORK/kv_${p}_${b}_L$L.err" "$WORK/kvfail_${p}_${b}_L$L.txt"
  fi
}
for L in "${kv_ctx_list[@]}"; do
  stage kv || break
  for ((round = 1; round <= KV_ROUNDS; round++)); do
    # One round: every row once. With KV_ROUNDS > 1 the rounds' files are merged below.
    prefix=kv
    [ "$KV_ROUNDS" -gt 1 ] && prefix=kvround${round}
    log "kv: full at $L$([ "$KV_ROUNDS" -gt 1 ] && echo " (round $round of $KV_ROUNDS)")"
    kv_row "$L" full none "$WORK/${prefix}_full_none_L$L.json"
    for p in "${policies[@]}"; do
      [ "$p" = full ] && continue
      for b in "${budgets[@]}"; do
        log "kv: $p at budget $b, context $L"
        kv_row "$L" "$p" "$b" "$WORK/${prefix}_${p}_${b}_L$L.json"
      done
    done
  done
done
if stage kv && [ "$KV_ROUNDS" -gt 1 ]; then
  python3 scripts/render_benchmarks.py --work "$WORK" --merge-kv-rounds
fi

# Memory: one process per row, so that each peak RSS is that row's alone (weights included).
if stage memory; then
  IFS=, read -r -a mem_ctx <<<"$MEM_CTX"
  IFS=, read -r -a mem_policies <<<"$MEM_POLICIES"
  IFS=, read -r -a mem_budgets <<<"$MEM_BUDGETS"
  for L in "${mem_ctx[@]}"; do
    log "memory: full at $L"
    "$BIN" bench -m "$MODEL" --ctx "$L" -t "$THREADS" --gen "$MEM_GEN" --reps 1 --json \
      --bandwidth-mib 0 >"$WORK/mem_full_none_L$L.json"
    for p in "${mem_policies[@]}"; do
      for b in "${mem_budgets[@]}"; do
        log "memory: $p at budget $b, context $L"
        "$BIN" bench -m "$MODEL" --ctx "$L" -t "$THREADS" --gen "$MEM_GEN" --reps 1 --json \
          --bandwidth-mib 0 --kv-policy "$p" --kv-budget "$b" >"$WORK/mem_${p}_${b}_L$L.json" ||
          rm -f "$WORK/mem_${p}_${b}_L$L.json"
      done
    done
  done
fi

# The follow-up question from the disk: the cold file kept in the page cache, or dropped from it
# before the follow-up (its reads go to the disk), with and without the next layer's prefetch.
if stage cold; then
  for run in "kept next-layer" "dropped next-layer" "dropped off"; do
    read -r cache prefetch <<<"$run"
    log "cold: qevict-recall at $COLD_BUDGET, context $COLD_CTX, page cache $cache, prefetch $prefetch"
    run_timed "$WORK/cold_${cache}_${prefetch}.res" "$WORK/cold_${cache}_${prefetch}.json" \
      "$BIN" bench -m "$MODEL" --ctx "$COLD_CTX" -t "$THREADS" --gen 16 --reps "$COLD_REPS" --json \
      --bandwidth-mib 0 --kv-policy qevict-recall --kv-budget "$COLD_BUDGET" \
      --cold-page-cache "$cache" --kv-cold-prefetch "$prefetch" ||
      rm -f "$WORK/cold_${cache}_${prefetch}.json"
  done
fi

# Profiles of qevict alone: perf switched on around one phase by `qevict bench --perf-control`.
if ! stage profile; then
  :
elif [ "$PROFILE" = 1 ] && command -v perf >/dev/null &&
   perf record -q -e cpu-clock -o "$WORK/probe.data" -- true >/dev/null 2>&1; then
  # Each phase with THREADS threads, and decode with one thread too (no pool synchronisation:
  # what the kernels alone cost).
  for L in "${ctx_list[@]}"; do
    for run in "decode $THREADS" "prefill $THREADS" "decode 1"; do
      read -r phase t <<<"$run"
      name=$phase$([ "$t" = "$THREADS" ] || echo "-t$t")
      log "profile: $phase at $L, $t thread(s)"
      fifo="$WORK/perf_${name}_$L.ctl"
      rm -f "$fifo" && mkfifo "$fifo"
      wait_quiet >/dev/null
      perf record -q -D -1 --control "fifo:$fifo" -e cpu-clock -F 2999 \
        -o "$WORK/perf_${name}_$L.data" -- \
        "$BIN" bench -m "$MODEL" --ctx "$L" -t "$t" --gen "$GEN" --reps 1 \
        --bandwidth-mib 0 --perf-control "$fifo" --perf-phase "$phase" >/dev/null 2>&1 || true
      perf report -q -i "$WORK/perf_${name}_$L.data" --stdio --no-children --sort symbol \
        --percent-limit 0.3 2>/dev/null >"$WORK/profile_${name}_L$L.txt" || true
      rm -f "$fifo" "$WORK/perf_${name}_$L.data"
    done
  done
  rm -f "$WORK/probe.data"
else
  log "perf unavailable: no profiles"
fi
cat /proc/loadavg >"$WORK/loadavg_end.txt"

# What ran, where.
python3 - "$WORK/meta.json" <<PY
import json, os, platform, re, subprocess, sys, time
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
json.dump({
    "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    "cpu": cpu,
    "cores": os.cpu_count(),
    "cpu_flags": [f for f in flags if f.startswith(("avx", "amx", "fma", "f16c"))],
    "kernel": platform.release(),
    "mem_total_kib": next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0),
    # The revision the binary says it was built from (qevict --version); for a binary older
    # than that stamp, the repository's state now, marked as such.
    "qevict_commit": (re.findall(r"\(([^()]+)\)", sh("'$BIN' --version")) or [""])[-1] or
        sh("git rev-parse --short HEAD") + (" (uncommitted changes)" if sh("git --no-optional-locks status --porcelain --untracked-files=no") else "") + " (the repository's; the binary does not say)",
    "bin": "$BIN", "model": "$MODEL", "threads": $THREADS, "gen": $GEN, "reps": $REPS,
    "rounds": $ROUNDS, "ctx": "$CTX", "ctx1": "$CTX1", "quiet_idle": $QUIET_IDLE,
    "quiet_wait": $QUIET_WAIT, "quiet_load": $QUIET_LOAD, "kv_ctx": "$KV_CTX", "kv_budgets": "$KV_BUDGETS",
    "kv_reps": $KV_REPS, "kv_rounds": $KV_ROUNDS, "kv_scope": "$KV_SCOPE", "mem_ctx": "$MEM_CTX", "mem_budgets": "$MEM_BUDGETS",
    "mem_gen": $MEM_GEN, "cold_ctx": $COLD_CTX, "cold_budget": $COLD_BUDGET, "cold_reps": $COLD_REPS,
    "llama_bench": "$LLAMA_BENCH",
    "llama_version": sh("scripts/bench_llamacpp.sh version") if "$LLAMA_BENCH" else "",
    "llama_cmake_flags": sh("scripts/bench_llamacpp.sh flags") if "$LLAMA_BENCH" else "",
    "loadavg_start": open("$WORK/loadavg_start.txt").read().split()[:3],
    "loadavg_end": open("$WORK/loadavg_end.txt").read().split()[:3],
}, open(sys.argv[1], "w"), indent=1)
PY

if ! stage speed && [ -f "$OUT" ]; then
  # Without the speed stage (llama.cpp's comparison): the sections this run measured, each
  # spliced into the existing page with its own date and load (the KV-cache policies with the
  # follow-up from the disk; the memory table); the others stay as they were.
  if stage kv; then
    python3 scripts/render_benchmarks.py --work "$WORK" --out "$OUT" --section kv --stages "$STAGES"
  fi
  if stage memory; then
    python3 scripts/render_benchmarks.py --work "$WORK" --out "$OUT" --section memory --stages "$STAGES"
  fi
else
  python3 scripts/render_benchmarks.py --work "$WORK" --out "$OUT"
fi
log "wrote $OUT"
