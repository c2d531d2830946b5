#!/usr/bin/env bash
# The CLI fails cleanly on bad input (one "qevict: error: ..." line on stderr, exit code 1, no
# crash), command-line mistakes included: every malformed GGUF fixture, a missing file, bad
# flags, a context beyond the model's window. --help and --version succeed; llama.cpp's GPU
# flags are accepted with a note.
set -u
BIN=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${QEVICT_MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
failures=0
passes=0

# expect_clean_failure NAME EXPECTED_SUBSTRING CMD...
expect_clean_failure() {
  local name=$1 want=$2
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  # Exit 1 and the README's "qevict: error:" line, for qevict's own errors and CLI11's parse
  # errors alike.
  if [ $rc -ne 1 ]; then
    echo "FAIL $name: exit code $rc (want 1); stderr: $err"
    failures=$((failures + 1))
  elif ! grep -q "^qevict: error: " <<<"$err"; then
    echo "FAIL $name: stderr lacks a 'qevict: error: ' line: $err"
    failures=$((failures + 1))
  elif [ -n "$want" ] && ! grep -qiF -- "$want" <<<"$err"; then
    echo "FAIL $name: stderr lacks '$want': $err"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

expect_clean_failure missing_model "cannot open" "$BIN" info -m /nonexistent/model.gguf
expect_clean_failure missing_model_fix "run \`make setup\` (or scripts/fetch_model.sh)" \
  "$BIN" info -m /nonexistent/model.gguf
expect_clean_failure directory_model "not a regular file" "$BIN" info -m "$ROOT"
expect_clean_failure directory_model_fix "give -m one .gguf file in it" "$BIN" info -m "$ROOT"
# Every message says what to do: a damaged file, a GGUF that is not a model qevict runs.
expect_clean_failure bad_gguf_fix "if it should be a model, re-download it" \
  "$BIN" info -m "$ROOT/tests/fixtures/gguf/bad_magic.gguf"
expect_clean_failure bad_model_fix "as llama.cpp's converter writes them" \
  "$BIN" info -m "$ROOT/tests/fixtures/gguf/semantic/missing_tensor.gguf"
expect_clean_failure bad_model_names_file "model '$ROOT/tests/fixtures/gguf/semantic/missing_tensor.gguf'" \
  "$BIN" info -m "$ROOT/tests/fixtures/gguf/semantic/missing_tensor.gguf"
expect_clean_failure no_subcommand "A subcommand is required; see 'qevict --help'" "$BIN"
expect_clean_failure unknown_flag "--no-such-flag; see 'qevict run --help' for the options" \
  "$BIN" run -m "$MODEL" -p hi --no-such-flag
expect_clean_failure missing_value "--temp" "$BIN" run -m "$MODEL" -p hi --temp
expect_clean_failure bad_number "--top-k" "$BIN" run -m "$MODEL" -p hi --top-k many
expect_clean_failure serve_bad_parallel "--slots: Value 0 not in range 1 to 256" \
  "$BIN" serve -m "$MODEL" -np 0

# expect_success NAME EXPECTED_STDOUT_OR_STDERR_SUBSTRING CMD...: exit 0, the text present.
expect_success() {
  local name=$1 want=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL $name: exit code $rc (want 0): $out"
    failures=$((failures + 1))
  elif ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL $name: output lacks '$want': $out"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}
expect_success help "Subcommands:" "$BIN" --help
expect_success run_help "--kv-policy" "$BIN" run --help
expect_success version "qevict 0.1.0" "$BIN" --version
# --version names the commit the binary was built from (cmake/build_revision.cmake), so that eval
# rows, bench pages and /props say which code made them: in a git checkout, a commit of this
# repository (HEAD when the build is fresh; an earlier one when commits came after it).
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  revision=$("$BIN" --version | sed -n 's/^qevict [0-9.]* (\([0-9a-f]\{12\}\)\(-dirty\)\{0,1\})$/\1/p')
  if [ -z "$revision" ] || ! git -C "$ROOT" cat-file -e "$revision^{commit}" 2>/dev/null; then
    echo "FAIL version_names_the_commit: '$("$BIN" --version)' names no commit of $ROOT"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
fi
# llama-server's spellings parse on serve: the run fails on the model, after parsing.
expect_clean_failure serve_llama_flags "cannot open model file" "$BIN" serve -m /nonexistent.gguf \
  --ctx-size 2048 --batch-size 512 -np 2 -ngl 99
expect_clean_failure serve_parallel "cannot open model file" "$BIN" serve -m /nonexistent.gguf --parallel 2

while IFS= read -r line; do
  [ -z "$line" ] && continue
  case "$line" in \#*) continue ;; esac
  file=${line%% *}
  want=${line#* }
  expect_clean_failure "fixture:$file" "$want" "$BIN" info -m "$ROOT/tests/fixtures/gguf/$file"
done < "$ROOT/tests/fixtures/gguf/expected.txt"

# Broken models of the families beyond llama (scripts/gen_arch_golden.py, malformed_fixtures).
while read -r file want; do
  [ -z "$file" ] || [ "${file:0:1}" = "#" ] && continue
  expect_clean_failure "arch:$file" "$want" "$BIN" info -m "$ROOT/tests/fixtures/gguf/arch/$file"
done < "$ROOT/tests/fixtures/gguf/arch/expected.txt"

if [ -f "$ROOT/tests/fixtures/gguf/semantic/expected.txt" ]; then
  while IFS= read -r line; do
    [ -z "$line" ] && continue
    case "$line" in \#*) continue ;; esac
    file=${line%% *}
    want=${line#* }
    expect_clean_failure "semantic:$file" "$want" "$BIN" info -m "$ROOT/tests/fixtures/gguf/semantic/$file"
  done < "$ROOT/tests/fixtures/gguf/semantic/expected.txt"
fi

# qevict report: a missing input, a malformed line (named FILE:LINE), an input without rows.
rep=$(mktemp -d)
expect_clean_failure report_no_input "" "$BIN" report
expect_clean_failure report_missing "no such file" "$BIN" report "$rep/none.jsonl"
expect_clean_failure report_empty_dir "holds no rows.jsonl" "$BIN" report "$rep"
printf '{"task": "niah", "id": "a", "policy": "full", "budget": 1.0, "accuracy": 1}\n{"task"\n' \
  >"$rep/rows.jsonl"
expect_clean_failure report_malformed "$rep/rows.jsonl:2: not JSON" "$BIN" report "$rep"
printf '\n' >"$rep/blank.jsonl"
expect_clean_failure report_no_row "holds no row" "$BIN" report -o "$rep/out" "$rep/blank.jsonl"
rm -rf "$rep"

if [ -f "$MODEL" ]; then
  expect_clean_failure prompt_and_file "exactly one" "$BIN" run -m "$MODEL" -p a -f /etc/hostname
  expect_clean_failure missing_prompt_file "cannot read" "$BIN" run -m "$MODEL" -f /nonexistent
  expect_clean_failure context_too_long "exceed the context" "$BIN" run -m "$MODEL" -p hi -n 9000
  expect_clean_failure no_prompt "no prompt: give -p PROMPT or -f FILE" "$BIN" run -m "$MODEL"
  expect_clean_failure missing_prompt_file_fix "check the path given to -f" \
    "$BIN" run -m "$MODEL" -f /nonexistent
  expect_clean_failure negative_n "-n -5: give the tokens to generate (>= 0), or -1" \
    "$BIN" run -m "$MODEL" -p hi -n -5
  expect_clean_failure bad_top_p "--top-p 0: must be in (0, 1] (1 turns it off)" \
    "$BIN" run -m "$MODEL" -p hi --temp 1 --top-p 0
  expect_clean_failure bad_temp "--temp -1: the temperature must be a number >= 0" \
    "$BIN" run -m "$MODEL" -p hi --temp -1
  expect_clean_failure bad_min_p "--min-p 2: must be in [0, 1]" "$BIN" run -m "$MODEL" -p hi --min-p 2
  expect_clean_failure bad_repeat_penalty "--repeat-penalty 0: must be finite and non-zero (1 turns it off" \
    "$BIN" run -m "$MODEL" -p hi --repeat-penalty 0
  expect_clean_failure bad_repeat_last_n "--repeat-last-n -2: must be >= 0, or -1 for every token" \
    "$BIN" run -m "$MODEL" -p hi --repeat-last-n -2
  expect_clean_failure bad_kv_ratio "--kv-ratio 1: must be in [0, 1)" \
    "$BIN" run -m "$MODEL" -p hi --kv-policy qevict --kv-ratio 1
  # qevict bench and serve: flags named with their value and the accepted range.
  expect_clean_failure bench_bad_ctx "--ctx '512,x': give positive token counts" \
    "$BIN" bench -m "$MODEL" --ctx 512,x
  expect_clean_failure bench_bad_gen "--gen 0: give >= 1" "$BIN" bench -m "$MODEL" --gen 0
  expect_clean_failure serve_bad_slots "--slots: Value 0 not in range 1 to 256" \
    "$BIN" serve -m "$MODEL" --slots 0
  expect_clean_failure serve_bad_threads "-t -1: give a thread count >= 1, or 0 for every core" \
    "$BIN" serve -m "$MODEL" -t -1
  expect_clean_failure serve_bad_max_body "--max-body 10: give at least 1024 bytes" \
    "$BIN" serve -m "$MODEL" --max-body 10
  # --chat-template: a name or a recognized Jinja file, else a clear error.
  expect_clean_failure chat_template_name "neither a template name" "$BIN" run -m "$MODEL" -p hi --chat --chat-template vicuna
  expect_clean_failure chat_template_file "not one qevict can render" "$BIN" run -m "$MODEL" -p hi --chat --chat-template /etc/hostname
  if ! "$BIN" run -m "$MODEL" -p hi --chat-template chatml --system "Be brief." -n 2 --temp 0 >/dev/null 2>&1; then
    echo "FAIL chat_template_chatml: --chat-template chatml with --system did not run"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
  # llama.cpp's GPU offload flag: accepted on every command, one note that it changes nothing.
  expect_success run_ngl "qevict: note: -ngl is ignored: qevict is a CPU engine" \
    "$BIN" run -m "$MODEL" -p hi -n 1 --temp 0 -ngl 99
  expect_success info_ngl "qevict: note: -ngl is ignored" "$BIN" info -m "$MODEL" --n-gpu-layers 0
  # qevict chat: a missing document, no room to answer, a conversation beyond the context.
  expect_clean_failure chat_missing_document "cannot read" "$BIN" chat -m "$MODEL" -f /nonexistent
  # --prompt-cache without -f starts from the document the file holds: none there is an error.
  expect_clean_failure chat_prompt_cache_without_document "does not exist: give the document with -f" \
    "$BIN" chat -m "$MODEL" --prompt-cache /tmp/qevict-no-document.qpc </dev/null
  expect_clean_failure chat_prompt_cache_system_without_document "holds its system message" \
    "$BIN" chat -m "$MODEL" --system "Be brief." --prompt-cache /tmp/qevict-no-document.qpc </dev/null
  expect_clean_failure chat_prompt_cache_ro_alone "--prompt-cache" \
    "$BIN" chat -m "$MODEL" --prompt-cache-ro </dev/null
  expect_clean_failure chat_zero_n "-n 0: -n must be >= 1 for chat" "$BIN" chat -m "$MODEL" -n 0 </dev/null
  expect_clean_failure chat_context_full "start a new chat" \
    bash -c 'echo hello | "$0" chat -m "$1" -c 64 -n 60 --temp 0' "$BIN" "$MODEL"
  # qevict eval: a missing or empty task file, bad grids; malformed lines alone are skipped.
  out=$(mktemp -d)
  expect_clean_failure eval_missing_tasks "does not exist: check the path given to --tasks" \
    "$BIN" eval -m "$MODEL" --tasks /nonexistent.jsonl --out "$out"
  expect_clean_failure eval_no_valid_task "no valid task" "$BIN" eval -m "$MODEL" --no-progress \
    --tasks <(grep -v '"turns": \[{' "$ROOT/tests/fixtures/tasks/malformed.jsonl") --out "$out"
  expect_clean_failure eval_no_valid_task_fix "fix them as docs/evaluation.md" "$BIN" eval \
    -m "$MODEL" --no-progress \
    --tasks <(grep -v '"turns": \[{' "$ROOT/tests/fixtures/tasks/malformed.jsonl") --out "$out"
  expect_clean_failure eval_bad_budget "outside (0, 1]: give fractions of the fp16 cache" \
    "$BIN" eval -m "$MODEL" --budgets 2 --out "$out"
  expect_clean_failure eval_bad_policy "nosuch" "$BIN" eval -m "$MODEL" --policies nosuch --out "$out"
  expect_clean_failure eval_bad_task "unknown evaluation task" "$BIN" eval -m "$MODEL" --tasks nosuch --out "$out"
  expect_clean_failure eval_bad_shard "expected K/N" "$BIN" eval -m "$MODEL" --shard 1-2 --out "$out"
  expect_clean_failure eval_shard_range "need 0 <= K < N, e.g. --shard 0/2" "$BIN" eval -m "$MODEL" --shard 2/2 --out "$out"
  expect_clean_failure eval_export_ppl "only question tasks" "$BIN" eval -m "$MODEL" --tasks ppl \
    --lengths 512 --export-tasks "$out/ppl.jsonl"
  expect_clean_failure eval_export_unwritable "cannot write" "$BIN" eval -m "$MODEL" --tasks niah \
    --lengths 512 --depths 0.5 --export-tasks /nonexistent-dir/tasks.jsonl
  expect_clean_failure eval_kv_policy "--kv-policy" "$BIN" eval -m "$MODEL" --kv-policy qevict --out "$out"
  expect_clean_failure eval_bad_depth "--depths: needle depth 1.5 is outside [0, 1] (0 the start" \
    "$BIN" eval -m "$MODEL" --tasks niah --depths 1.5 --out "$out"
  expect_clean_failure eval_bad_prompt_style "prompt-style" "$BIN" eval -m "$MODEL" --prompt-style raw --out "$out"
  expect_clean_failure eval_bad_protocol "--protocol" "$BIN" eval -m "$MODEL" --protocol context --out "$out"
  expect_clean_failure eval_bad_scorer "--scorer" "$BIN" eval -m "$MODEL" --scorer em --out "$out"
  # An --out whose rows.jsonl holds rows: refused, naming the file and both ways out.
  printf '{"task": "niah", "id": "a", "policy": "full", "budget": 1.0}\n' >"$out/rows.jsonl"
  expect_clean_failure eval_out_has_rows "'$out/rows.jsonl' already holds rows" \
    "$BIN" eval -m "$MODEL" --no-progress --out "$out"
  expect_clean_failure eval_out_overwrite_hint "--overwrite to start over" \
    "$BIN" eval -m "$MODEL" --no-progress --out "$out"
  expect_clean_failure eval_out_resume_hint "--resume to keep them" \
    "$BIN" eval -m "$MODEL" --no-progress --out "$out"
  expect_clean_failure eval_overwrite_and_resume "exclude each other" \
    "$BIN" eval -m "$MODEL" --overwrite --resume --out "$out"
  printf '{"task": "niah"\n{"task": "niah", "id": "a", "policy": "full", "budget": 1.0}\n' \
    >"$out/rows.jsonl"
  expect_clean_failure eval_resume_bad_row "$out/rows.jsonl:1: not JSON" \
    "$BIN" eval -m "$MODEL" --no-progress --resume --out "$out"
  # --rescore: rows scored again from their outputs, against the instances of the flags given.
  NIAH1=(--tasks niah --lengths 512 --depths 0.5 --samples 1)
  expect_clean_failure eval_rescore_and_resume "neither --overwrite, --resume" \
    "$BIN" eval -m "$MODEL" --rescore --resume --out "$out"
  rm -f "$out/rows.jsonl"
  expect_clean_failure eval_rescore_no_rows "--rescore: no rows in '$out/rows.jsonl'" \
    "$BIN" eval -m "$MODEL" --no-progress "${NIAH1[@]}" --rescore --out "$out"
  printf '{"task": "niah", "kind": "questions", "id": "zzz", "policy": "full", "budget": 1.0, "turns": [{"output": "1", "score": 1.0}], "accuracy": 1.0}\n' \
    >"$out/rows.jsonl"
  expect_clean_failure eval_rescore_other_task "row of task zzz (policy full)" \
    "$BIN" eval -m "$MODEL" --no-progress "${NIAH1[@]}" --rescore --out "$out"
  # A row that claimed a needle it did not name: scored 0 again, the file rewritten.
  printf '{"task": "niah", "kind": "questions", "id": "niah-L512-d0.50-s0", "policy": "full", "budget": 1.0, "turns": [{"output": "no number", "score": 1.0}], "accuracy": 1.0}\n' \
    >"$out/rows.jsonl"
  expect_success eval_rescore "1 turns and 1 rows changed" \
    "$BIN" eval -m "$MODEL" --no-progress "${NIAH1[@]}" --rescore --out "$out"
  if ! grep -q '"accuracy":0.0' "$out/rows.jsonl"; then
    echo "FAIL eval_rescore_rows: the row was not scored again: $(cat "$out/rows.jsonl")"
    failures=$((failures + 1))
  fi
  rm -rf "$out"
fi

# --prompt-cache: flags that need it, and files that are not a prompt cache of this model and
# these options (each refused with what to do, nothing overwritten).
if [ -f "$MODEL" ]; then
  pc=$(mktemp -d)
  expect_clean_failure prompt_cache_ro_alone "--prompt-cache" \
    "$BIN" run -m "$MODEL" -p hi --prompt-cache-ro
  printf 'not a cache' >"$pc/garbage.qpc"
  expect_clean_failure prompt_cache_not_ours "not a qevict prompt cache" \
    "$BIN" run -m "$MODEL" -p hi -n 1 --prompt-cache "$pc/garbage.qpc"
  [ "$(cat "$pc/garbage.qpc")" = "not a cache" ] || { echo "FAIL prompt_cache_not_ours: the file was overwritten"; failures=$((failures + 1)); }
  "$BIN" run -m "$MODEL" -p "Some text to keep." -n 0 --kv-policy qevict --kv-budget 0.5 \
    --prompt-cache "$pc/doc.qpc" >/dev/null 2>&1
  expect_clean_failure prompt_cache_other_options "--kv-policy qevict --kv-budget 0.5" \
    "$BIN" run -m "$MODEL" -p "Some text to keep. More" -n 1 --prompt-cache "$pc/doc.qpc"
  head -c 100 "$pc/doc.qpc" >"$pc/short.qpc"
  expect_clean_failure prompt_cache_truncated "delete the file" \
    "$BIN" run -m "$MODEL" -p "Some text to keep. More" -n 1 --kv-policy qevict --kv-budget 0.5 \
    --prompt-cache "$pc/short.qpc"
  rm -rf "$pc"
fi

# The cold tier's faults (qevict-recall; docs/kv-cache.md, "Cold tier and recall"): each is one
# error line naming the cold file's directory and the way out, exit 1, and the run or chat ends
# there, nothing left in the directory. A small budget sends most of harbor.txt's windows cold.
if [ -f "$MODEL" ]; then
  cold=$(mktemp -d)
  doc="$ROOT/data/examples/harbor.txt"
  recall=(--kv-policy qevict-recall --kv-budget 0.1 --temp 0 -n 4)
  expect_clean_failure cold_dir_missing "'$cold/missing': No such file or directory (pass --kv-cold-dir" \
    "$BIN" run -m "$MODEL" -f "$doc" "${recall[@]}" --kv-cold-dir "$cold/missing"
  expect_clean_failure cold_disk_limit "(--kv-cold-disk-limit) would be passed" \
    "$BIN" run -m "$MODEL" -f "$doc" "${recall[@]}" --kv-cold-dir "$cold" --kv-cold-disk-limit 1k
  expect_clean_failure cold_disk_limit_names_file "cold store $cold/qevict-cold-" \
    "$BIN" run -m "$MODEL" -f "$doc" "${recall[@]}" --kv-cold-dir "$cold" --kv-cold-disk-limit 1k
  # A write the kernel refuses, as on a full disk: past the file size limit (ulimit -f 0) with
  # SIGXFSZ ignored, pwrite fails with EFBIG.
  expect_clean_failure cold_write_fault "File too large after 0 of" \
    bash -c 'trap "" XFSZ; ulimit -f 0; exec "$@"' _ \
    "$BIN" run -m "$MODEL" -f "$doc" "${recall[@]}" --kv-cold-dir "$cold"
  expect_clean_failure cold_write_fault_way_out "free space in $cold or pass --kv-cold-dir" \
    bash -c 'trap "" XFSZ; ulimit -f 0; exec "$@"' _ \
    "$BIN" run -m "$MODEL" -f "$doc" "${recall[@]}" --kv-cold-dir "$cold"
  # chat: the document turn fails the same way, before any question is read.
  expect_clean_failure cold_chat_disk_limit "raise --kv-cold-disk-limit" \
    bash -c 'echo "What is the secret code?" | "$@"' _ \
    "$BIN" chat -m "$MODEL" -f "$doc" "${recall[@]}" --kv-cold-dir "$cold" --kv-cold-disk-limit 1k
  if [ -n "$(ls -A "$cold")" ]; then
    echo "FAIL cold_dir_left_empty: $(ls -A "$cold")"
    failures=$((failures + 1))
  fi
  rm -rf "$cold"
fi

echo "$passes passed, $failures failed"
[ $failures -eq 0 ]
