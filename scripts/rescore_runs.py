#!/usr/bin/env python3
"""Scores the committed eval rows again with this build's answer scorer (`make rescore`).

The rows keep every turn's output, so when the scorer changes (as when the substring scorer
stopped counting "22000" for "2200") the published rows need no model run to follow it. For each
run directory (default: every docs/*/runs/*), this unpacks rows.jsonl.gz next to its
summary.json in a temporary directory, runs `qevict eval <the run's own flags> --rescore` there
(the instances regenerated from the run's seed, tasks, lengths, depths and samples; the scores
recomputed by the one implementation in src/eval/turn_scores.cc), and writes the rows back
gzipped the way render_results.py --commit-rows does (mtime 0, the same bytes for the same rows)
with the summary it recomputed. Then `make results` renders the pages from them.

  python3 scripts/rescore_runs.py [--bin build/qevict] [RUN_DIR ...]
"""
import argparse
import glob
import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

# Flags of the recorded command that say where and how much to run, not what the rows are.
DROP_WITH_VALUE = {"--out", "-o", "--shard"}
DROP = {"--resume", "--overwrite", "--no-progress"}


def rescore_flags(command):
    words = shlex.split(command)
    words = words[words.index("eval") + 1:]
    kept, i = [], 0
    while i < len(words):
        if words[i] in DROP_WITH_VALUE:
            i += 2
        elif words[i] in DROP:
            i += 1
        else:
            kept.append(words[i])
            i += 1
    return kept


def rescore(binary, run_dir):
    summary_path = os.path.join(run_dir, "summary.json")
    rows_path = os.path.join(run_dir, "rows.jsonl.gz")
    summary = json.load(open(summary_path))
    tasks_file = summary.get("tasks_file")
    if tasks_file and not os.path.exists(tasks_file):
        return f"skipped: its task file {tasks_file} is not here"
    with tempfile.TemporaryDirectory() as tmp:
        with gzip.open(rows_path, "rb") as f:
            open(os.path.join(tmp, "rows.jsonl"), "wb").write(f.read())
        shutil.copy(summary_path, tmp)
        cmd = [binary, "eval", *rescore_flags(summary["command"]), "--rescore", "--no-progress",
               "--out", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{run_dir}: {' '.join(cmd)} failed:\n{done.stderr}")
        data = open(os.path.join(tmp, "rows.jsonl"), "rb").read()
        new_summary = open(os.path.join(tmp, "summary.json"), "rb").read()
    packed = gzip.compress(data, compresslevel=9, mtime=0)
    if packed != open(rows_path, "rb").read():
        open(rows_path, "wb").write(packed)
        open(summary_path, "wb").write(new_summary)
    r = json.loads(new_summary)["rescored"]
    return f"{r['rows']} question rows, {r['changed_turns']} turns and {r['changed_rows']} rows changed"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/qevict")
    ap.add_argument("runs", nargs="*")
    args = ap.parse_args()
    runs = args.runs or sorted(os.path.dirname(p) for p in glob.glob("docs/*/runs/*/summary.json"))
    for run_dir in runs:
        print(f"{run_dir}: {rescore(args.bin, run_dir)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
