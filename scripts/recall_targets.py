"""Issue 38's accuracy targets for the recall tier, judged from a results page's paired comparisons.

`render_results.py --recall-targets` adds this section to docs/results-recall.md: for every cell
the issue names (the needles, drift and the SCBench-style set on SmolLM2; the needles and drift at
8k, 16k and 32k on Gemma 3 in prompt-end and bounded prefill; each in both protocols; KL on the
perplexity texts), whether `qevict-recall` meets its targets, from `qevict report`'s paired
comparisons on the same instances, with the runs its rows come from. A cell without rows says
"not run", so the page itself lists what is left.

Targets (issue 38, "What it must reach"):
- at budget 0.1, `qevict-recall` >= 90% of the full cache's accuracy;
- at budget 0.05, >= 70% of the full cache's, and ahead of every policy without recall by the
  paired test (`quest`, which keeps every token in RAM, and the diagnostic `recall-oracle` are not
  policies without recall: they are shown, not judged against);
- KL to the full cache on the perplexity texts at 0.05 and 0.1 below every policy without recall.
A threshold is **MET** when the whole 95% interval of the paired difference clears it, **MISSED**
when the whole interval falls short, **NOT ESTABLISHED** otherwise; "ahead" is the report's
verdict (interval and, for 0/1 scores, McNemar).
"""
import collections
import re

import render_results as rr

POLICY = "qevict-recall"
NOT_WITHOUT_RECALL = ("quest",)  # every token in RAM: the query-aware anchor, not a contender here
HEADLINE_N = 30
SMOL = "SmolLM2-135M-Instruct.Q4_1"
GEMMA = "gemma-3-270m-q4_k_m"
PROTOCOLS = (("context-only", "|context-only"), ("question in prompt", ""))
# (model, task, length, prefill mode) of every accuracy cell the issue names, in both protocols.
CELLS = ([(SMOL, "niah", 2048, "prompt-end"), (SMOL, "niah", 4096, "prompt-end"),
          (SMOL, "drift", 2048, "prompt-end"), (SMOL, "scbench", 2048, "prompt-end")] +
         [(GEMMA, task, length, mode) for mode in ("prompt-end", "bounded")
          for task in ("niah", "drift") for length in (8192, 16384, 32000)])
KL_CELLS = [(SMOL, "ppl", 2048, "prompt-end")]
FRACTION_OF_FULL = {0.1: 0.9, 0.05: 0.7}
AHEAD_AT = 0.05


def plain(policy):
    """The policy without the report's scope label: "snapkv (global)" -> "snapkv"."""
    return rr.base_policy(policy.split(" (", 1)[0])


def without_recall(policy):
    return (not rr.is_full(policy) and not rr.is_diagnostic(plain(policy))
            and plain(policy) not in (POLICY,) + NOT_WITHOUT_RECALL)


def recall_cell(page, key, length, budget):
    """qevict-recall's cell (under whichever scope label the report gave it), or None."""
    model, task, style, mode = key
    return next((c for c in page.report.cells
                 if (c["model"], c["task"], c["prompt_style"], c["prefill_mode"], c["length"])
                 == (model, task, style, mode, length) and c.get("depth") is None
                 and rr.pe.rnd(c["budget"]) == budget
                 and c["policy"].split(" (", 1)[0] == POLICY), None)


def comparisons_of(page, key, length, budget):
    """{other policy: comparison seen by qevict-recall} at a key, length and budget."""
    model, task, style, mode = key
    out = {}
    for c in page.comparisons():
        mine = next((p for p in (c["a"], c["b"]) if p.split(" (", 1)[0] == POLICY), None)
        if ((c["model"], c["task"], c["prompt_style"], c["prefill_mode"], c["length"])
                == (model, task, style, mode, length) and rr.pe.rnd(c["budget"]) == budget
                and mine is not None):
            v = rr.seen_by(c, mine)
            out[v["other"]] = (c, v)
    return out


def row_sources(page, key, length):
    """"run (n rows), ..." of the runs the cell's qevict-recall rows come from (a later run's row
    replaces an earlier one of the same instance and budget, as in `qevict report`), with the
    builds the rows name."""
    model, task, style, mode = key
    kept = {}
    for run in page.runs:
        for r in run.rows:
            protocol = "|context-only" if r.get("protocol") == "context-only" else ""
            if (r.get("policy") == POLICY and r["_model"] == model and r.get("task") == task
                    and (r.get("prompt_style") or "chat") + protocol == style
                    and r.get("prefill_mode") == mode and r.get("target_tokens") == length):
                kept[(r.get("id"), rr.pe.rnd(r.get("budget")))] = (run.name, r.get("build"))
    # Shards of one run are named once: "NAME (K shards)".
    runs = collections.Counter(re.sub(r"-shard-\d+$", "", name) for name, _ in kept.values())
    shards = collections.defaultdict(set)
    for name, _ in kept.values():
        shards[re.sub(r"-shard-\d+$", "", name)].add(name)
    builds = sorted({b for _, b in kept.values() if b})
    text = ", ".join(f"`{name}` ({n} rows" + (f", {len(shards[name])} shards)" if
                                               len(shards[name]) > 1 else ")")
                     for name, n in sorted(runs.items()))
    return text + (f"; builds {', '.join(builds)}" if builds else "")


def fraction_part(page, key, length, budget, comps):
    """(status, text) of qevict-recall >= FRACTION_OF_FULL[budget] of the full cache."""
    fraction = FRACTION_OF_FULL[budget]
    full = next((cv for other, cv in comps.items() if rr.is_full(other)), None)
    if full is None:
        return "**NOT EVALUATED**", "no paired full-cache rows"
    c, v = full
    threshold = -(1 - fraction) * v["theirs"]
    status = rr.goal_status(v["lo"], v["hi"], threshold)
    if page.unequal_bytes(c):
        status = "**MISSED**"
    return status, (f"{v['mine']:.2f} vs full {v['theirs']:.2f}: "
                    f"{rr.fmt_diff(v['metric'], v['diff'], v['lo'], v['hi'])}, needs ≥ "
                    f"{threshold * 100:+.1f} ({fraction:.0%})")


def combine(statuses):
    """A cell's status from its parts': the worst of them (a cell with no rows: not run)."""
    statuses = [s for s in statuses if s.startswith("**")]
    if statuses and all(s == "**NOT RUN**" for s in statuses):
        return "**NOT RUN**"
    for word in ("**MISSED**", "**NOT ESTABLISHED**", "**NOT EVALUATED**", "**NOT RUN**"):
        if word in statuses:
            return word
    return "**MET**" if statuses else "**NOT EVALUATED**"


# The fewest discordant pairs, all one way, with which McNemar's exact two-sided test can give
# p < 0.05 (2 x 0.5^6 = 0.031; 5 give 0.0625).
MIN_DECIDING_DISCORDANT = 6


def discordant_note(other, v):
    """For a 0/1 comparison the test left undecided: the discordant pairs behind it and, where
    there are too few for any split to be significant, that this n cannot decide it."""
    if v.get("mine_only") is None or v.get("p") is None:
        return ""
    mine, theirs = v["mine_only"], v["theirs_only"]
    note = (f" ({mine} only {POLICY} answered, {theirs} only {plain(other)}: McNemar p = "
            f"{v['p']:.2g}")
    if mine + theirs < MIN_DECIDING_DISCORDANT:
        note += (f"; {mine + theirs} discordant pairs cannot reach p < 0.05 whichever way they "
                 f"fall, which takes {MIN_DECIDING_DISCORDANT} all one way: undecidable at n = "
                 f"{v['n']}")
    return note + ")"


def ahead_part(comps, lower_is_better=False):
    """(status, text) of qevict-recall ahead of every policy without recall at this budget."""
    statuses, texts = [], []
    for other, (c, v) in sorted(comps.items()):
        if not without_recall(other):
            continue
        word = {"win": "ahead of", "loss": "behind"}.get(v["outcome"], "level with")
        statuses.append({"win": "**MET**", "loss": "**MISSED**"}.get(v["outcome"],
                                                                      "**NOT ESTABLISHED**"))
        texts.append(f"{word} {plain(other)} {rr.fmt_diff(v['metric'], v['diff'], v['lo'], v['hi'])}"
                     + (discordant_note(other, v) if v["outcome"] == "none" else ""))
    if not statuses:
        return "**NOT EVALUATED**", "no policy without recall in the cell"
    return combine(statuses), "; ".join(texts)


def cell_block(page, key, length, label):
    """Markdown lines of one accuracy cell."""
    model, task, style, mode = key
    where = f"{label}: {task} @ {rr.fmt_length(length)}, {mode}"
    have = {b: recall_cell(page, key, length, b) for b in FRACTION_OF_FULL}
    if not any(have.values()):
        return "**NOT RUN**", [f"- **NOT RUN** {where}"]
    why = page.excluded(model, task, style, length)
    if why:
        return "(excluded)", [f"- excluded: {where}: {why}."]
    parts = []
    for budget in sorted(FRACTION_OF_FULL, reverse=True):
        if not have[budget]:
            parts.append(("**NOT RUN**", f"budget {rr.pe.fmt_budget(budget)}: no rows"))
            continue
        comps = comparisons_of(page, key, length, budget)
        s, t = fraction_part(page, key, length, budget, comps)
        parts.append((s, f"budget {rr.pe.fmt_budget(budget)}: {t}"))
        if budget == AHEAD_AT:
            s, t = ahead_part(comps)
            parts.append((s, f"budget {rr.pe.fmt_budget(budget)}: {t}"))
    n = min(c["n"] for c in have.values() if c)
    short = f" (below the {HEADLINE_N} a headline cell needs)" if n < HEADLINE_N else ""
    status = combine([s for s, _ in parts])
    if short and status == "**MET**":
        status = "**NOT ESTABLISHED**"
    return status, ([f"- {status} {where}, n = {n}{short}; rows from {row_sources(page, key, length)}:"]
                    + [f"  - {s} {t}" for s, t in parts])


def kl_block(page, key, length):
    model, task, style, mode = key
    where = f"KL to the full cache: {task} @ {rr.fmt_length(length)} ({model})"
    parts = []
    for budget in sorted(FRACTION_OF_FULL):
        if not recall_cell(page, key, length, budget):
            parts.append(("**NOT RUN**", f"budget {rr.pe.fmt_budget(budget)}: no rows"))
            continue
        s, t = ahead_part(comparisons_of(page, key, length, budget))
        parts.append((s, f"budget {rr.pe.fmt_budget(budget)}: {t}"))
    status = combine([s for s, _ in parts])
    return status, [f"- {status} {where}:"] + [f"  - {s} {t}" for s, t in parts]


def section(page):
    out = ["## Issue 38's targets for the recall tier", "",
           f"Generated from the paired comparisons of this page (`scripts/recall_targets.py`). "
           f"Per cell: at 0.1 `{POLICY}` ≥ 90% of the full cache's accuracy; at 0.05 ≥ 70% of "
           "it and ahead of every policy without recall (the report's paired verdict; `quest`, "
           "every token in RAM, and `recall-oracle` are shown elsewhere, not judged against); "
           "KL on the perplexity texts below every policy without recall. **MET** when the "
           "whole 95% interval clears the threshold, **MISSED** when it all falls short, **NOT "
           f"ESTABLISHED** otherwise (and for cells below {HEADLINE_N} instances); **NOT RUN**: "
           "no rows yet. Points are x100.", ""]
    tally = collections.Counter()
    for protocol, suffix in PROTOCOLS:
        out += [f"### {protocol[0].upper() + protocol[1:]}", ""]
        for model, task, length, mode in CELLS:
            key = (model, task, "completion" + suffix, mode)
            status, lines = cell_block(page, key, length, model)
            tally[status] += 1
            out += lines
        out.append("")
    out += ["### KL on the perplexity texts", ""]
    for model, task, length, mode in KL_CELLS:
        status, lines = kl_block(page, (model, task, "completion", mode), length)
        tally[status] += 1
        out += lines
    total = sum(tally.values())
    out += ["", f"In all: {total} cells; " + ", ".join(
        f"{n} {s.strip('*').lower()}" for s, n in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))
        + ".", ""]
    return out
