#!/usr/bin/env python3
"""scripts/recall_targets.py (render_results.py --recall-targets) on synthetic rows, with the
statistics of the real `qevict report` (the binary is argv[1]).

Cells (SmolLM2's names, context-only protocol, 30 instances unless said):
- niah @ 2048: full 30/30; qevict-recall 30/30 at 0.1 and 27/30 at 0.05; snapkv 3/30 at 0.05.
  Every part met. A later run ("run-v2") replaces qevict-recall's rows of instances 0-9, which
  name a build: the sources say so, row for row.
- drift @ 2048 (two shards of one run, named once): qevict-recall 10/30 at 0.05 (a third of the
  full cache): missed; qevict-qa 8/30 at 0.05, the same 8: level, and 2 discordant pairs are
  too few for the test to decide.
- niah @ 4096: 10 instances: every part clears its threshold, the cell is not established.
- SCBench, the question-in-prompt cells, KL and every Gemma cell: not run (30 of 33).
Exit 77 (skipped) without the binary or without .venv/bin/python with matplotlib.
"""
import os
import subprocess
import sys
import tempfile

from synthetic_runs import write_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(ROOT, ".venv", "bin", "python")
MODEL = "SmolLM2-135M-Instruct.Q4_1"


def row(task, length, i, policy, budget, correct, build=None):
    r = {"task": task, "id": f"{task}-L{length}-s{i}", "kind": "questions", "policy": policy,
         "budget": budget, "target_tokens": length, "depth": None, "prompt_tokens": length - 40,
         "total_tokens": length, "prompt_style": "completion", "protocol": "context-only",
         "prefill_mode": "full" if policy == "full" else "prompt-end", "infeasible": False,
         "note": "", "accuracy": 1.0 if correct else 0.0, "scorer": "substring",
         "kv": {"infeasible": False}, "turns": [], "wall_s": 0.1, "model": MODEL, "seed": 1}
    if build:
        r["build"] = build
    return r


def cell(task, length, n, recall_01, recall_005, snapkv_005, qa_005=None):
    rows = []
    for i in range(n):
        rows.append(row(task, length, i, "full", 1.0, True))
        rows.append(row(task, length, i, "qevict-recall", 0.1, i < recall_01))
        rows.append(row(task, length, i, "qevict-recall", 0.05, i < recall_005))
        rows.append(row(task, length, i, "snapkv", 0.05, i < snapkv_005))
        if qa_005 is not None:
            rows.append(row(task, length, i, "qevict-qa", 0.05, i < qa_005))
    return rows


def write(tmp, name, rows):
    return write_run(os.path.join(tmp, name), rows,
                     {"command": "qevict eval (synthetic)", "model": MODEL + ".gguf", "seed": 1})


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "qevict")
    if not os.access(binary, os.X_OK):
        print("SKIP: no qevict binary at " + binary)
        return 77
    if not os.access(PY, os.X_OK) or subprocess.run([PY, "-c", "import matplotlib"]).returncode:
        print("SKIP: needs .venv/bin/python with matplotlib (scripts/setup.sh venv)")
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        first = cell("niah", 2048, 30, 30, 27, 3) + cell("niah", 4096, 10, 10, 10, 0)
        drift = cell("drift", 2048, 30, 30, 10, 3, 8)  # in two shards of one run
        later = [row("niah", 2048, i, "qevict-recall", b, True, build="abc123def456")
                 for i in range(10) for b in (0.1, 0.05)]
        dirs = [write(tmp, "run-a", first), write(tmp, "run-b-shard-0", drift[:75]),
                write(tmp, "run-b-shard-1", drift[75:]), write(tmp, "run-v2", later)]
        out = os.path.join(tmp, "page.md")
        env = dict(os.environ, MPLCONFIGDIR=os.path.join(tmp, "mpl"))
        r = subprocess.run([PY, os.path.join(ROOT, "scripts", "render_results.py"), "--qevict",
                            binary, "--notes", "", "--out", out, "--images",
                            os.path.join(tmp, "img"), "--wins", "qevict-recall",
                            "--recall-targets"] + dirs, capture_output=True, text=True, env=env)
        if r.returncode:
            print("FAIL render_results.py exited %d: %s" % (r.returncode, r.stderr))
            return 1
        page = open(out, encoding="utf-8").read()
        section = page.split("## Issue 38's targets", 1)[-1].split("\n## ", 1)[0]
        context_only = section.split("### Question in prompt", 1)[0]

        def has(text, where=section):
            if text not in where:
                failures.append("lacks: " + text)

        has(f"- **MET** {MODEL}: niah @ 2048, prompt-end, n = 30; rows from `run-a` (40 rows), "
            "`run-v2` (20 rows); builds abc123def456:", context_only)
        has("  - **MET** budget 0.1: 1.00 vs full 1.00", context_only)
        has("  - **MET** budget 0.05: 0.90 vs full 1.00", context_only)
        has("  - **MET** budget 0.05: ahead of snapkv", context_only)
        has(f"- **MISSED** {MODEL}: drift @ 2048, prompt-end, n = 30; rows from `run-b` (60 rows, "
            "2 shards):", context_only)
        has("  - **MISSED** budget 0.05: 0.33 vs full 1.00", context_only)
        # 10 against 8 correct, the 8 among the 10: 2 discordant pairs, too few for any verdict.
        has("level with qevict-qa +6.7 points", context_only)
        has("(2 only qevict-recall answered, 0 only qevict-qa: McNemar p = 0.5; 2 discordant "
            "pairs cannot reach p < 0.05 whichever way they fall, which takes 6 all one way: "
            "undecidable at n = 30)", context_only)
        has(f"- **NOT ESTABLISHED** {MODEL}: niah @ 4096, prompt-end, n = 10 (below the 30 a "
            "headline cell needs)", context_only)
        has(f"- **NOT RUN** {MODEL}: scbench @ 2048, prompt-end", context_only)
        has("- **NOT RUN** gemma-3-270m-q4_k_m: drift @ 32000, bounded", context_only)
        has(f"- **NOT RUN** {MODEL}: niah @ 2048, prompt-end", section.split("### Question", 1)[1])
        has("In all: 33 cells; 30 not run, 1 met, 1 missed, 1 not established.")
        runs = page.split("## Runs", 1)[1].split("\n## ", 1)[0]
        has("run `run-v2`", runs)
        has("; built from abc123def456", runs)  # the run whose rows name their build
        if runs.count("built from") != 1:
            failures.append("a run whose rows name no build says it was built from one")
        if "--recall-targets" not in page.split("## Runs", 1)[0]:
            failures.append("the regenerate command lacks --recall-targets")
        if failures:
            print(section)
    for f in failures:
        print("FAIL " + f)
    print("recall_targets: %d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
