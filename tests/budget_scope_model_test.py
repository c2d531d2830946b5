#!/usr/bin/env python3
"""`qevict run --kv-budget 0.1 --kv-budget-scope global` on Gemma 3 270M (15 of its 18 layers keep
a 512-token ring, 7.5 MiB): the budget is 0.1 of the 3 global layers' fp16 cache, feasible on a
1.2k-token prompt where 0.1 of the whole cache is less than the rings alone. Checks from
`--kv-stats --json` that the global layers hold no more than their budget, that the rings are
reported beside it and paid on top, and that the summary says so. The same for qevict-recall
(issue 38's cold tier in the global layers' cache of the interleaved one): what its global
layers evict goes cold (on disk, nothing dropped), its digests are charged in the budget, and the
stats and summary report the cold tier; with the fixed fp16 share (--kv-recall-split-error 0),
under which this prompt's end ranks some cold windows into fp16, that they are recalled. (The
default least-loss split gives this prompt's broad attention more 2-bit windows and fewer fp16
ones, all of them resident, so whether it recalls is the prompt's matter, not the test's.)

    budget_scope_model_test.py BIN

Exits 77 (skipped) without the model.
"""
import json
import math
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.environ.get("QEVICT_GEMMA", os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
PROMPT = os.path.join(ROOT, "data", "haystack", "animals_and_neighbors.txt")
NEW_TOKENS = 8
GLOBAL_LAYERS, SLIDING_LAYERS, WINDOW = 3, 15, 512
TOKEN_BYTES = 2 * 256 * 2  # K and V of one 256-dim KV head in fp16, one layer
MIB = 1024.0 * 1024.0


COLD_BLOCK_BYTES = 8 * TOKEN_BYTES  # one window of one global layer, on disk


def check_policy(binary, policy, extra=()):
    cmd = [binary, "run", "-m", MODEL, "-f", PROMPT, "-n", str(NEW_TOKENS), "--threads", "2",
           "--kv-policy", policy, "--kv-budget", "0.1", "--kv-budget-scope", "global",
           "--kv-stats", "--json"] + list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    err = proc.stderr
    failures = []

    def check(ok, what):
        if not ok:
            failures.append("%s: %s" % (policy, what))

    check(proc.returncode == 0, "exit code %d" % proc.returncode)
    stats = json.loads([line for line in err.splitlines() if line.startswith("{")][-1])
    prompt = int(re.search(r"prompt: (\d+) tokens", err).group(1))
    run = prompt + NEW_TOKENS
    check(prompt > WINDOW, "the prompt (%d tokens) must fill the rings" % prompt)

    rings = SLIDING_LAYERS * WINDOW * TOKEN_BYTES  # 7.5 MiB
    global_budget = math.floor(0.1 * GLOBAL_LAYERS * TOKEN_BYTES * run)
    global_resident = stats["resident_bytes"] - stats["sliding_bytes"]
    check(stats["budget_scope"] == "global", "budget_scope %r" % stats["budget_scope"])
    check(not stats["infeasible"], "infeasible: %s" % stats.get("note"))
    check("cannot be met" not in err, "a warning that the budget cannot be met")
    check(stats["global_budget_bytes"] == global_budget,
          "global_budget_bytes %d, want %d" % (stats["global_budget_bytes"], global_budget))
    check(stats["sliding_layers"] == SLIDING_LAYERS and stats["sliding_window"] == WINDOW,
          "sliding layers %s of %s tokens" % (stats["sliding_layers"], stats["sliding_window"]))
    check(stats["sliding_bytes"] == rings, "sliding_bytes %d, want %d" % (stats["sliding_bytes"],
                                                                        rings))
    check(stats["budget_bytes"] == global_budget + rings,
          "budget_bytes %d, want the global budget plus the rings %d" %
          (stats["budget_bytes"], global_budget + rings))
    if policy == "qevict-recall":
        check(stats["evicted_windows"] == 0, "%d windows dropped" % stats["evicted_windows"])
        check(stats["cold_windows"] > 0, "nothing went cold: %s" % stats)
        check(stats["cold_bytes"] >= stats["cold_windows"] * COLD_BLOCK_BYTES,
              "cold_bytes %d for %d cold windows" % (stats["cold_bytes"], stats["cold_windows"]))
        check(0 < stats["cold_ram_bytes"] <= stats["meta_bytes"],
              "cold_ram_bytes %d, meta_bytes %d" % (stats["cold_ram_bytes"], stats["meta_bytes"]))
        check(stats["cold_read_bytes"] > 0, "the cold tier was never read to rank it")
        if extra:
            check(stats["recalls"] > 0, "nothing recalled")
        check("cold tier: %d windows on disk" % stats["cold_windows"] in err,
              "the summary's cold tier line")
    check(stats["routing_steps"] > 0 and
          stats["evicted_windows"] + stats.get("cold_windows", 0) + stats["quant_windows"] > 0,
          "nothing was compressed: %s" % stats)
    check(0 < global_resident <= global_budget,
          "global layers hold %d bytes, budget %d" % (global_resident, global_budget))
    check(not stats["over_budget"], "over_budget")
    # The summary says the scope and shows the rings beside the global layers' budget.
    check("budget scope global: %.2f MiB for the 3 global layers" % (global_budget / MIB) in err,
          "the summary's scope line")
    check("plus 7.50 MiB for the 15 sliding-window layers' rings, paid on top" in err,
          "the summary's rings")
    check("global layers resident %.2f MiB (their budget %.2f MiB), rings 7.50 MiB" %
          (global_resident / MIB, global_budget / MIB) in err, "the summary's resident line")

    for f in failures:
        print("FAIL:", f)
    if failures:
        print(err)
        return False
    print("ok: %s, %d-token prompt, global layers %d of %d bytes, rings %d bytes, cold %d bytes, "
          "peak RSS %.1f MiB" % (policy, prompt, global_resident, global_budget,
                                 stats["sliding_bytes"], stats.get("cold_bytes", 0),
                                 stats["peak_rss_bytes"] / MIB))
    return True


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if not os.path.exists(MODEL):
        print("skipped: no %s (scripts/fetch_model.sh gemma3)" % MODEL)
        return 77
    ok = [check_policy(sys.argv[1], policy) for policy in ("qevict", "qevict-recall")]
    ok.append(check_policy(sys.argv[1], "qevict-recall", ["--kv-recall-split-error", "0"]))
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
