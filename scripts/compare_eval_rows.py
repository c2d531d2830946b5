#!/usr/bin/env python3
"""Same bits across a change: compares the eval rows of two runs of the same grid.

    scripts/compare_eval_rows.py BEFORE AFTER

BEFORE and AFTER are `qevict eval -o` directories (or directories of them, compared by name),
run by the binary before and after a change on the same task file and options. Rows are keyed by
instance, policy, budget, prefill mode and protocol; every field must be equal except those that
measure time or the process (throughput, wall time, RSS, the seconds a score source took), and a
field only one side has must be empty or zero there. Prints each differing row and exits 1 when
any differs or a row is missing. How it was used: the closing note of issue 37 and
docs/testing.md ("Same bits").
"""
import json
import os
import sys

VOLATILE = {"decode_tok_s", "prefill_s", "prefill_tok_s", "wall_s", "reconstruction_s",
            "reconstruction_scratch_bytes"}
KV_VOLATILE = {"peak_rss_bytes", "rss_bytes", "prior_seconds", "prior_s",
               "external_score_seconds", "external_score_s"}


def load(path):
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            rows[(r["id"], r["policy"], r["budget"], r.get("prefill_mode"), r.get("protocol"))] = r
    return rows


def stable(row):
    out = {k: v for k, v in row.items() if k not in VOLATILE}
    out["kv"] = {k: v for k, v in out.get("kv", {}).items() if k not in KV_VOLATILE}
    # Rows written before --kv-budget-scope existed have no scope: the default, "all".
    for fields in (out, out["kv"]):
        if fields.get("budget_scope") == "all":
            del fields["budget_scope"]
    return out


def compare(a_path, b_path, name):
    a, b = load(a_path), load(b_path)
    differ = 0
    for key in sorted(set(a) | set(b), key=str):
        if key not in a or key not in b:
            print("%s %s: only in %s" % (name, key, "after" if key in b else "before"))
            differ += 1
            continue
        ra, rb = stable(a[key]), stable(b[key])
        for side, other in ((ra, rb), (rb, ra)):
            for k in list(side["kv"]):
                if k not in other["kv"] and side["kv"][k] in (0, None):
                    del side["kv"][k]
        if ra != rb:
            fields = sorted(k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k) and k != "kv")
            kv = sorted(k for k in set(ra["kv"]) | set(rb["kv"])
                        if ra["kv"].get(k) != rb["kv"].get(k))
            print("%s %s: %s %s" % (name, key, fields, ["kv." + k for k in kv]))
            differ += 1
    return len(set(a) | set(b)), differ


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    before, after = sys.argv[1], sys.argv[2]
    if os.path.exists(os.path.join(before, "rows.jsonl")):
        pairs = [("", os.path.join(before, "rows.jsonl"), os.path.join(after, "rows.jsonl"))]
    else:
        pairs = [(d, os.path.join(before, d, "rows.jsonl"), os.path.join(after, d, "rows.jsonl"))
                 for d in sorted(os.listdir(before))
                 if os.path.exists(os.path.join(before, d, "rows.jsonl"))]
    total = differ = 0
    for name, a, b in pairs:
        if not os.path.exists(b):
            print("%s: no rows in %s" % (name, b))
            differ += 1
            continue
        t, d = compare(a, b, name)
        total, differ = total + t, differ + d
    print("%d rows compared, %d differ" % (total, differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
