#!/usr/bin/env python3
"""Renders docs/results.md from `qevict eval` runs and the statistics of `qevict report`.

    scripts/render_results.py --out docs/results.md --images docs/results \\
        [--commit-rows docs/results] [--qevict build/qevict] [--notes FILE] DIR [DIR ...]

Each DIR is a `qevict eval` output directory: rows.jsonl or rows.jsonl.gz, and summary.json (the
run's command, model, seed, threads, date, wall time, prefill modes). `qevict report` (--qevict,
default build/qevict of this checkout) merges the runs' rows (a later run's row replaces an
earlier one of the same instance, policy, budget and mode) and computes every aggregate on the
page: each mean with its 95% interval, and the paired comparisons of the policies with their
verdicts. This script computes none; it arranges those statistics, and every verdict on the
page is one the report gave (the paired 95% interval of a difference excluding zero). Rows are
read only for what is not an aggregate: the row counts of the runs list and one instance's
per-step missed mass. The runs of each model go to `qevict report` on their own, since rows
written before rows carried their model cannot be told apart otherwise.

--commit-rows DEST copies each run's rows, gzipped deterministically (mtime 0), and its
summary.json into DEST/runs/NAME/ (NAME: the run directory's name) and renders from those copies,
so that the page re-renders from the committed rows alone and gives the same bytes. The page is
never edited by hand: sentences of interpretation go in scripts/results_notes.md (or --notes
FILE), included verbatim in a clearly marked section when it has visible text.

Sections: runs; how to read the page; how the full cache does (per model, task and length; a
cell it fails is excluded from every verdict); goals, restated with the paired statistics;
notes; the tables (policies x budgets per model, task, length and prefill mode, each cell
"mean [95% interval]"); memory (KV ledger bytes next to pool-reserved bytes and process RSS);
where qevict wins and loses, and where qevict-qa does (verdicts and tallies per budget, against
other families only); ablations (comparisons within a family, no tallies); diagnostics (tier
moves, missed and quantized attention mass, FMM); pictures (drawn by plot_eval.py from the same
report).
"""
import argparse
import glob
import gzip
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_eval as pe  # noqa: E402

ROOT = pe.ROOT
DEFAULT_NOTES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_notes.md")

FULL_FAILS_BELOW = 0.8   # a cell the full cache fails says nothing about compression
TEST_SEED = 1
DEV_SEEDS = range(1000, 1100)
GOAL_A_TASKS = ("drift", "niah")
GOAL_A_BUDGET = 0.05
GOAL_A_FRACTION_OF_FULL = 0.9
GOAL_A_POINTS_OVER_KEEP_OR_DROP = 20.0
GOAL_C_MAX_BUDGET = 0.2
MAIN_POLICIES = ("qevict", "qevict-qa")
# Diagnostics, not policies to use: shown beside each cell as references (like the full cache),
# never a contender in verdicts, tallies, goals or ablations. recall-oracle: every token in RAM,
# the windows of largest exact attention attended (docs/kv-cache.md, "Recall oracle").
DIAGNOSTIC_POLICIES = ("recall-oracle",)
ORACLE = "recall-oracle"
DIAG_POLICIES = ("qevict", "qevict-qa", "mikv", "snapkv", "h2o")
POINT_METRICS = pe.PROPORTIONS + ("missed_mass", "quantized_mass", "fmm", "fmm_cumulative")
MODE_TITLES = {
    "prompt-end": "prompt-end: prompt held in fp16, routed at its end (the paper's setting)",
    "bounded": "bounded: prefilled in 512-token chunks under the budget",
}
DIAG_METRICS = (
    ("missed_mass", "missed mass"),
    ("quantized_mass", "quantized mass"),
    ("fmm", "FMM (per step, the paper's)"),
    ("fmm_cumulative", "cumulative FMM"),
)
DASH = "–"
EPS = 1e-9


# ----------------------------------------------------------------------------- formatting
def fmt_stat(s, spec="{:.2f}"):
    """"mean [lo, hi]" of a metric's statistics, or a dash."""
    if not s:
        return DASH
    return f"{spec.format(s['mean'])} [{spec.format(s['lo'])}, {spec.format(s['hi'])}]"


def metric_spec(metric):
    return "{:.2f}" if metric in POINT_METRICS else "{:.3g}"


def signed(v, spec):
    """v with its sign, "+0" rather than "-0" when it rounds to zero."""
    text = spec.format(v)
    return "+" + text[1:] if text.startswith("-") and float(text) == 0 else text


def fmt_diff(metric, d, lo, hi):
    """A difference and its interval: points (x100) of a [0, 1] score, else the raw number."""
    if metric in POINT_METRICS:
        d, lo, hi = (signed(v * 100, "{:+.1f}") for v in (d, lo, hi))
        return f"{d} points [{lo}, {hi}]"
    name = {"kl": "KL", "delta_ppl": "ΔPPL"}.get(metric, metric)
    d, lo, hi = (signed(v, "{:+.3g}") for v in (d, lo, hi))
    return f"{name} {d} [{lo}, {hi}]"


def fmt_p(p):
    if p is None:
        return "paired bootstrap (not 0/1 scores: no McNemar test)"
    return "McNemar p < 0.001" if p < 0.001 else f"McNemar p = {p:.2g}"


def fmt_mib(v, spec="{:.1f}"):
    return DASH if v is None else spec.format(v / pe.MIB)


def fmt_duration(s):
    if s is None:
        return DASH
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h} h {m:02d} min" if h else (f"{m} min {sec:02d} s" if m else f"{sec} s")


def fmt_length(length):
    return "all lengths" if length is None else f"{length}"


def md_code(text):
    """Inline code that survives backticks in the text."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def md_table(header, rows):
    def esc(c):
        return str(c).replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return lines


def seed_text(seed):
    if seed == TEST_SEED:
        return f"seed {seed} (the test seed)"
    if isinstance(seed, int) and seed in DEV_SEEDS:
        return f"seed {seed} (a development seed, 1000-1099: not a published result)"
    if seed is None:
        return "seed unknown"
    return (f"seed {seed} (neither the test seed {TEST_SEED} nor a development seed "
            "1000-1099)")


def where_mode(style, mode):
    """The prefill mode of a goal line, with the protocol when it is the context-only one."""
    protocol = pe.split_style(style)[1]
    return f"{mode}, {protocol}" if protocol else mode


def key_title(key):
    """Heading of a (model, task, style, mode) key."""
    model, task, style, mode = key
    return f"{model} · {task} · {pe.style_text(style)} · {MODE_TITLES.get(mode, mode)}"


# ----------------------------------------------------------------------------- runs
class Run:
    def __init__(self, directory):
        self.dir = os.path.normpath(directory)
        self.name = os.path.basename(os.path.abspath(directory))
        self.summary = pe.load_summary(directory) or {}
        self.rows = pe.load_rows(directory)
        for r in self.rows:
            r["_model"] = r.get("model") or pe.model_name(self.summary.get("model"))


def gzip_bytes(data):
    """gzip of data with no name and mtime 0: the same bytes every time."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def commit_run(directory, dest):
    """Copies DIR's rows (gzipped) and summary.json into DEST/runs/NAME/; returns that path."""
    name = os.path.basename(os.path.abspath(directory))
    target = os.path.join(dest, "runs", name)
    src_rows = pe.rows_path(directory)
    opener = gzip.open if src_rows.endswith(".gz") else open
    with opener(src_rows, "rb") as f:
        data = f.read()
    summary = os.path.join(directory, "summary.json")
    with open(summary, "rb") as f:
        summary_bytes = f.read()
    os.makedirs(target, exist_ok=True)
    plain = os.path.join(target, "rows.jsonl")
    if os.path.exists(plain):
        os.remove(plain)  # the committed copy is the gzipped one
    with open(plain + ".gz", "wb") as f:
        f.write(gzip_bytes(data))
    with open(os.path.join(target, "summary.json"), "wb") as f:
        f.write(summary_bytes)
    return os.path.normpath(target)


# ----------------------------------------------------------------------------- judging
class Page:
    """The report, the runs, and which (model, task, style, length) cells can carry a verdict."""

    def __init__(self, report, runs):
        self.report = report
        self.runs = runs
        self.rows = [r for run in runs for r in run.rows]
        self.full = {}  # (model, task, style, length) -> (status, metric, full cell)
        for model, task, style in report.tasks():
            metric = report.metric(model, task, style)
            for length in report.lengths(model, task, style):
                cell = report.full_cell(model, task, style, length)
                self.full[(model, task, style, length)] = (full_status(cell, metric), metric,
                                                          cell)
        levels = judged_levels(report.comparisons)
        self.judged = [c for c in report.comparisons
                       if (c["length"] is None) == (comparison_group(c) not in levels)]

    def excluded(self, model, task, style, length):
        """Why a cell cannot carry a verdict ("the full cache fails", ...), or None."""
        status = self.full.get((model, task, style, length), ("no full-cache rows",))[0]
        return None if status in ("passes", "reference") else status

    def comparisons(self):
        """The comparisons at the level the page judges: per length where the task has lengths,
        pooled where it has none."""
        return self.judged

    def infeasible(self, c, policy):
        cell = self.report.cell(c["model"], c["task"], c["prompt_style"],
                                "full" if is_full(policy) else c["prefill_mode"], policy,
                                1.0 if is_full(policy) else c["budget"], c["length"])
        return bool(cell and cell["infeasible_n"])

    def unequal_bytes(self, c):
        """True when a side holds rows that could not meet the budget."""
        return self.infeasible(c, c["a"]) or self.infeasible(c, c["b"])

    def find(self, key, length, budget, a, b):
        """The comparison of a and b (either order) at a key, length and budget, or None."""
        model, task, style, mode = key
        for c in self.comparisons():
            if ((c["model"], c["task"], c["prompt_style"], c["prefill_mode"], c["length"])
                    == (model, task, style, mode, length) and pe.rnd(c["budget"]) == budget
                    and {c["a"], c["b"]} == {a, b}):
                return c
        return None


def is_full(policy):
    return policy == "full" or policy.startswith("full[")


def base_policy(policy):
    """The shipped policy a variant or tagged run starts from: "qevict-qa:query_kernel=15[x]"
    -> "qevict-qa"."""
    return policy.split("[", 1)[0].split(":", 1)[0]


def is_diagnostic(policy):
    return base_policy(policy) in DIAGNOSTIC_POLICIES


def as_shipped(policy):
    """A policy as the engine ships it (not pe.is_variant) and not a diagnostic: the only
    baselines a verdict or a goal is counted against."""
    return not pe.is_variant(policy) and not is_diagnostic(policy)


def full_status(cell, metric):
    if metric != "accuracy":
        return "reference"  # KL, edit similarity: measured against the full cache itself
    s = pe.stat(cell, "accuracy")
    if s is None:
        return "no full-cache rows"
    return "passes" if s["mean"] >= FULL_FAILS_BELOW - EPS else "the full cache fails"


def comparison_group(c):
    return (c["model"], c["task"], c["prompt_style"], c["prefill_mode"])


def judged_levels(comparisons):
    """Groups that have per-length comparisons (judged per length, not pooled)."""
    return {comparison_group(c) for c in comparisons if c["length"] is not None}


def seen_by(c, policy):
    """The comparison from `policy`'s side: the other policy, the difference (policy minus
    other) with its interval, the discordant counts, and "win" / "loss" / "none"."""
    flip = c["b"] == policy
    out = {"other": c["a"] if flip else c["b"], "n": c["n"], "p": c["p"], "metric": c["metric"],
           "mine": c["mean_b"] if flip else c["mean_a"],
           "theirs": c["mean_a"] if flip else c["mean_b"],
           "diff": -c["diff"] if flip else c["diff"],
           "lo": -c["hi"] if flip else c["lo"], "hi": -c["lo"] if flip else c["hi"],
           "mine_only": c["b_only"] if flip else c["a_only"],
           "theirs_only": c["a_only"] if flip else c["b_only"]}
    mine, theirs = ("b", "a") if flip else ("a", "b")
    out["outcome"] = {mine: "win", theirs: "loss"}.get(c["verdict"], "none")
    return out


# ----------------------------------------------------------------------------- header, runs
def section_header(cmd, notes):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    notes_text = f"`{os.path.relpath(notes, root)}`" if notes else "a notes file (none here)"
    return ["# Results", "",
            "Generated by `scripts/render_results.py` from the rows of the `qevict eval` runs "
            "below. Every mean, interval and paired comparison on this page was computed by "
            "`qevict report` from those rows (committed under `runs/`), and every verdict is one "
            "of its paired comparisons. Do not edit by hand: interpretation goes in "
            f"{notes_text}, which is included verbatim.", "",
            "Regenerate the page with:", "", "```", cmd, "```", ""]


def run_line(i, run):
    s = run.summary
    modes = s.get("prefill_modes") or sorted({r.get("prefill_mode", "prompt-end")
                                              for r in run.rows} - {"full"})
    style = s.get("prompt_style") or ", ".join(sorted({r.get("prompt_style") or "chat"
                                                       for r in run.rows}))
    protocols = sorted({r.get("protocol") for r in run.rows} - {None})
    mode_text = "; ".join(MODE_TITLES.get(m, m) for m in modes)
    return [f"{i}. {md_code(str(s.get('command', '(no summary.json)')))}",
            f"   - run `{run.name}`, {len(run.rows)} rows; model "
            f"{md_code(str(s.get('model', '?')))}; {seed_text(s.get('seed'))}; threads "
            f"{s.get('threads', '?')}; started {s.get('started', '?')}; wall time "
            f"{fmt_duration(pe.num(s.get('wall_s')))}; prompt style {style or 'chat'}; "
            f"{'protocol ' + ', '.join(protocols) + '; ' if protocols else ''}prefill "
            f"mode{'s' if len(modes) > 1 else ''} {mode_text or '?'}{build_text(run)}"
            f"{rescored_text(s)}"]


def build_text(run):
    """The builds that made a run's rows (`qevict --version`'s revision), where they say."""
    builds = sorted({r["build"] for r in run.rows if r.get("build")})
    return f"; built from {', '.join(builds)}" if builds else ""


def rescored_text(summary):
    """What `qevict eval --rescore` changed in a run's rows, when it did."""
    r = summary.get("rescored")
    if not r:
        return ""
    return (f"; scored again {str(r.get('at', '?'))[:10]} by `qevict eval --rescore` (the "
            f"outputs as generated, the scorer of that day, docs/evaluation.md): "
            f"{r.get('changed_rows', '?')} of {r.get('rows', '?')} question rows changed")


def section_runs(page):
    out = ["## Runs", ""]
    total = 0.0
    for i, run in enumerate(page.runs, 1):
        out += run_line(i, run)
        total += pe.num(run.summary.get("wall_s")) or 0.0
    rep = page.report
    out += ["", f"Total wall time {fmt_duration(total)}. `qevict report` merged {rep.rows} rows"
            + (f" ({rep.replaced} replaced by a later run's row of the same instance, policy, "
               "budget and mode)" if rep.replaced else "") + ".", ""]
    return out


def section_reading():
    return ["## How to read this page", "",
            f"- Every mean carries its 95% interval, \"mean [lo, hi]\": Wilson for scores that "
            "are 0 or 1 (accuracy of one-question tasks), bootstrap otherwise; n is the number "
            "of instances.",
            "- \"A beats B\" comes only from `qevict report`'s paired comparison on the same "
            "instances (matched by seed and id): the paired bootstrap 95% interval of the "
            "difference A − B excludes zero and, for 0/1 scores, the exact McNemar test agrees "
            "(p < 0.05). Otherwise the page says \"no detectable difference\". There is no "
            "threshold of points.",
            f"- A (model, task, length) on which the full cache scores below "
            f"{FULL_FAILS_BELOW:g} says nothing about compression: it is excluded from every "
            "verdict, and said so.",
            "- A cell with rows that could not meet the budget (\"inf.\": kivi at small budgets, "
            "or a budget below the fp16 floor) is not an equal-bytes comparison: its "
            "comparisons carry no verdict here.",
            "- Differences of [0, 1] scores are in points (x100); KL and ΔPPL are lower-is-"
            "better raw numbers.", ""]


# ----------------------------------------------------------------------------- the full cache
def section_full(page):
    out = ["## How the full cache does", "",
           f"Full-cache accuracy per model, task and length, with its 95% interval. Below "
           f"{FULL_FAILS_BELOW:g} the full cache **fails**: compressing that cache says "
           "nothing, so the cell is excluded from every verdict. KL and edit similarity are "
           "measured against the full cache itself, which is their reference.", ""]
    body, failing = [], []
    for (model, task, style, length), (status, metric, cell) in page.full.items():
        s = pe.stat(cell, "accuracy")
        verdict = {"passes": "passes", "reference": "reference",
                   "the full cache fails": f"**fails** (< {FULL_FAILS_BELOW:g}): excluded",
                   }.get(status, f"{status}: excluded")
        value = fmt_stat(s) if metric == "accuracy" else f"reference for {metric}"
        body.append([model, task, pe.style_short(style), fmt_length(length), value,
                     str(cell["n"]) if cell else "0", verdict])
        if status not in ("passes", "reference"):
            failing.append((model, task, style, length, s, status))
    out += md_table(["model", "task", "prompt style", "length", "full-cache accuracy [95%]", "n",
                     "verdict"], body) + [""]
    for model, task, style, length, s, status in failing:
        what = f"{task} @ {fmt_length(length)} ({model}, {pe.style_text(style)})"
        out += [f"**Excluded from every verdict: {what}: {status}"
                + (f", accuracy {fmt_stat(s)}, n = {s['n']}" if s else "") + ".**", ""]
    return out


# ----------------------------------------------------------------------------- goals
def goal_status(lo, hi, threshold):
    """MET when the whole interval clears the threshold, MISSED when it all falls short."""
    if lo >= threshold - EPS:
        return "**MET**"
    if hi < threshold - EPS:
        return "**MISSED**"
    return "**NOT ESTABLISHED**"


def goal_a_parts(page, key, length):
    """[(status, text)] of goal (a) at one key and length, or None without qevict rows."""
    budget = pe.rnd(GOAL_A_BUDGET)
    model, task, style, mode = key
    qcell = page.report.cell(model, task, style, mode, "qevict", budget, length)
    if qcell is None:
        return None
    if qcell["infeasible_n"]:
        return [("**MISSED**", f"qevict cannot meet the budget on {qcell['infeasible_n']} of "
                 f"{qcell['n']} instances")]
    parts = []
    full = page.find(key, length, budget, "qevict", "full") or next(
        (c for c in page.comparisons() if comparison_group(c) == key and c["length"] == length
         and pe.rnd(c["budget"]) == budget and "qevict" in (c["a"], c["b"])
         and is_full(c["b"] if c["a"] == "qevict" else c["a"])), None)
    if full is None:
        parts.append(("**NOT EVALUATED**", "no full-cache rows on these instances"))
    else:
        v = seen_by(full, "qevict")
        threshold = -(1 - GOAL_A_FRACTION_OF_FULL) * v["theirs"]
        parts.append((goal_status(v["lo"], v["hi"], threshold),
                      f"qevict − full {fmt_diff(v['metric'], v['diff'], v['lo'], v['hi'])}, "
                      f"needs ≥ {threshold * 100:+.1f} points ({GOAL_A_FRACTION_OF_FULL:.0%} "
                      f"of full {v['theirs']:.2f}), {v['n']} pairs"))
    for other in pe.KEEP_OR_DROP:
        c = page.find(key, length, budget, "qevict", other)
        if c is None:
            continue
        v = seen_by(c, "qevict")
        if page.unequal_bytes(c):
            parts.append(("(left out)", f"vs {other}: infeasible rows, not at equal bytes"))
            continue
        threshold = GOAL_A_POINTS_OVER_KEEP_OR_DROP / 100
        parts.append((goal_status(v["lo"], v["hi"], threshold),
                      f"qevict − {other} {fmt_diff(v['metric'], v['diff'], v['lo'], v['hi'])}, "
                      f"needs ≥ +{GOAL_A_POINTS_OVER_KEEP_OR_DROP:g} points"))
    return parts


def overall(statuses):
    statuses = [s for s in statuses if s.startswith("**")]
    for word in ("**MISSED**", "**NOT ESTABLISHED**", "**NOT EVALUATED**"):
        if word in statuses:
            return word
    return "**MET**" if statuses else "**NOT EVALUATED**"


def goal_a(page):
    out = [f"### (a) {' and '.join(GOAL_A_TASKS)} at budget {pe.fmt_budget(GOAL_A_BUDGET)}: "
           f"qevict ≥ {GOAL_A_FRACTION_OF_FULL:.0%} of the full cache and ≥ every keep-or-drop "
           f"baseline + {GOAL_A_POINTS_OVER_KEEP_OR_DROP:g} points", "",
           "Each part from the paired comparison on the same instances: **MET** when the whole "
           "95% interval of the difference clears the threshold, **MISSED** when the whole "
           "interval falls short of it, **NOT ESTABLISHED** when the interval straddles it. "
           "Keep-or-drop baselines: " + ", ".join(pe.KEEP_OR_DROP) + ".", ""]
    found = False
    for key in page.report.tables():
        model, task, style, mode = key
        if task not in GOAL_A_TASKS:
            continue
        for length in page.report.lengths(model, task, style):
            parts = goal_a_parts(page, key, length)
            if parts is None:
                continue
            found = True
            where = f"{task} @ {fmt_length(length)} ({model}, {where_mode(style, mode)})"
            why = page.excluded(model, task, style, length)
            if why:
                out.append(f"- excluded: {where}: {why}.")
                continue
            out.append(f"- {overall([s for s, _ in parts])} {where}:")
            out += [f"  - {s} {text}" for s, text in parts]
    if not found:
        out.append(f"- **NOT EVALUATED**: no qevict rows at budget "
                   f"{pe.fmt_budget(GOAL_A_BUDGET)} on {' or '.join(GOAL_A_TASKS)}.")
    return out + [""]


def goal_b_line(page, c):
    """(label, text) of qevict vs mikv at one budget."""
    v = seen_by(c, "qevict")
    text = (f"{fmt_diff(v['metric'], v['diff'], v['lo'], v['hi'])}, {v['n']} pairs, "
            f"{fmt_p(v['p'])}")
    if page.unequal_bytes(c):
        return "not at equal bytes", text + " (infeasible rows: no verdict)"
    return {"win": "**MET** (better)", "loss": "**MISSED**"}.get(
        v["outcome"], "no detectable difference"), text


def goal_b(page):
    out = ["### (b) qevict ≥ mikv at every budget", "",
           "MiKV keeps the same tiers without promotion. Per budget: **MISSED** only where the "
           "paired comparison favours mikv, **MET** (better) where it favours qevict, \"no "
           "detectable difference\" otherwise (consistent with the goal, not a proof of it).",
           ""]
    found = False
    for key in page.report.tables():
        model, task, style, mode = key
        for length in page.report.lengths(model, task, style):
            cs = sorted((c for c in page.comparisons() if comparison_group(c) == key
                         and c["length"] == length and {c["a"], c["b"]} == {"qevict", "mikv"}),
                        key=lambda c: c["budget"])
            if not cs:
                continue
            found = True
            where = f"{task} @ {fmt_length(length)} ({model}, {where_mode(style, mode)})"
            why = page.excluded(model, task, style, length)
            if why:
                out.append(f"- excluded: {where}: {why}.")
                continue
            lines = [(c, *goal_b_line(page, c)) for c in cs]
            labels = [lab for _, lab, _ in lines]
            counts = ", ".join(f"{lab} at {labels.count(lab)}" for lab in dict.fromkeys(labels))
            out.append(f"- {where}: {counts} of {len(cs)} budgets")
            out += [f"  - budget {pe.fmt_budget(c['budget'])}: {lab}: {text}"
                    for c, lab, text in lines]
    if not found:
        out.append("- **NOT EVALUATED**: no comparison of qevict with mikv.")
    return out + [""]


def goal_c_line(page, key, length, budget):
    """(label, text) of qevict's KL against every other family at one budget."""
    cs = [c for c in page.comparisons() if comparison_group(c) == key and c["length"] == length
          and pe.rnd(c["budget"]) == budget and "qevict" in (c["a"], c["b"])
          and not c["same_family"] and not is_full(c["a"]) and not is_full(c["b"])
          and as_shipped(c["a"]) and as_shipped(c["b"])]
    seen = [(seen_by(c, "qevict"), page.unequal_bytes(c)) for c in cs]
    equal = [v for v, bad in seen if not bad]
    left_out = sorted(v["other"] for v, bad in seen if bad)
    losses = [v for v in equal if v["outcome"] == "loss"]
    ties = [v for v in equal if v["outcome"] == "none"]
    if not equal:
        return "**NOT EVALUATED**", "no comparison at equal bytes"
    label = "**MISSED**" if losses else ("**NOT ESTABLISHED**" if ties else "**MET**")
    shown = losses or ties or equal
    text = "; ".join(f"{v['other']} {fmt_diff('kl', v['diff'], v['lo'], v['hi'])}"
                     for v in shown)
    what = {"**MISSED**": "higher KL than", "**NOT ESTABLISHED**": "no detectable difference "
            "from", "**MET**": "lower KL than each other policy"}[label]
    note = f" ({', '.join(left_out)}: infeasible rows, left out)" if left_out else ""
    return label, f"{what}, qevict minus: {text}{note}"


def goal_c(page):
    out = [f"### (c) ppl: qevict has the lowest KL among the policies at every budget ≤ "
           f"{pe.fmt_budget(GOAL_C_MAX_BUDGET)}", "",
           "**MET** where the paired comparison favours qevict against every other policy, "
           "**MISSED** where one favours another policy, **NOT ESTABLISHED** where some show no "
           "detectable difference.", ""]
    found = False
    for key in page.report.tables():
        model, task, style, mode = key
        if page.report.metric(model, task, style) != "kl":
            continue
        for length in page.report.lengths(model, task, style):
            budgets = sorted({pe.rnd(c["budget"]) for c in page.report.of(model, task, style,
                                                                            mode)
                              if c["policy"] == "qevict" and c["length"] == length
                              and c["budget"] <= GOAL_C_MAX_BUDGET + EPS})
            for b in budgets:
                found = True
                label, text = goal_c_line(page, key, length, b)
                out.append(f"- {label} {task} @ {fmt_length(length)}, budget "
                           f"{pe.fmt_budget(b)} ({model}, {where_mode(style, mode)}): {text}.")
    if not found:
        out.append("- **NOT EVALUATED**: no ppl rows of qevict.")
    return out + [""]


def section_goals(page):
    return ["## Goals", ""] + goal_a(page) + goal_b(page) + goal_c(page)


# ----------------------------------------------------------------------------- notes
def section_notes(path):
    if not path or not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        text = f.read().rstrip("\n")
    visible = re.sub(r"<!--.*?-->", "", text, flags=re.S).strip()
    rel = os.path.relpath(os.path.abspath(path), ROOT).replace(os.sep, "/")
    out = [f"<!-- BEGIN {rel}: written by hand, included verbatim -->"]
    if visible:
        out = ["## Interpretation", "", f"*Written by hand in `{rel}`; everything else on "
               "this page is generated.*", ""] + out
    return out + [text, f"<!-- END {rel} -->", ""]


# ----------------------------------------------------------------------------- tables
def table_metrics(metric):
    """The metrics tabulated for a task compared by `metric`."""
    return {"kl": ["kl", "delta_ppl", "top1_agreement"],
            "edit_similarity": ["edit_similarity", "agreement"]}.get(metric, [metric])


def inf_mark(cell):
    """" (inf.)" when every row of the cell was infeasible, " (inf. k/n)" when some were."""
    k, n = cell["infeasible_n"], cell["n"]
    return "" if not k else (" (inf.)" if k == n else f" (inf. {k}/{n})")


def cell_text(cell, metric, typical_n):
    s = pe.stat(cell, metric)
    if not s:
        return DASH
    text = fmt_stat(s, metric_spec(metric)) + inf_mark(cell)
    if s["n"] != typical_n:
        text += f" (n={s['n']})"
    return text


def typical(values):
    values = list(values)
    return max(sorted(set(values)), key=values.count) if values else 0


def policy_label(policy):
    if is_diagnostic(policy):
        return f"{policy} (diagnostic)"
    return f"**{policy}**" if policy == "qevict" else policy


def metric_table(page, key, length, metric):
    """Caption and table of one metric: policies x budgets, "mean [lo, hi]" per cell."""
    model, task, style, mode = key
    cells = [c for c in page.report.of(model, task, style, mode)
             if c["length"] == length and c["depth"] is None and pe.stat(c, metric)]
    if not cells:
        return []
    budgets = sorted({pe.rnd(c["budget"]) for c in cells})
    policies = pe.ordered_policies({c["policy"] for c in cells})
    n = typical(pe.stat(c, metric)["n"] for c in cells)
    full = page.report.full_cell(model, task, style, length)
    fs = pe.stat(full, metric)
    full_text = (f"full cache {fmt_stat(fs, metric_spec(metric))} (n = {fs['n']})" if fs
                 else "no full-cache value")
    why = page.excluded(model, task, style, length)
    caption = (f"{pe.metric_label(metric)[0].upper() + pe.metric_label(metric)[1:]}, mean [95% "
               f"interval]; {pe.style_text(style)}; {full_text}; n = {n} instances per cell unless "
               "noted." + (f" **Excluded from every verdict: {why}.**" if why else ""))
    body = [[policy_label(p)] + [cell_text(page.report.cell(model, task, style, mode, p, b,
                                                            length), metric, n)
                                 for b in budgets] for p in policies]
    return [caption, ""] + md_table(["policy \\ budget"] + [pe.fmt_budget(b) for b in budgets],
                                    body) + [""]


def section_tables(page):
    out = ["## Results", "",
           "Per model, task, context length and prefill mode: each policy at each budget, mean "
           "[95% interval] over the instances. \"(inf.)\": the rows could not meet the budget, "
           "so the value is not an equal-bytes comparison (\"inf. k/n\" when only some could "
           "not). Which differences are real is in \"Where qevict wins and loses\".", ""]
    for key in page.report.tables():
        model, task, style, _ = key
        metric = page.report.metric(model, task, style)
        for length in page.report.lengths(model, task, style):
            body = []
            for m in table_metrics(metric):
                body += metric_table(page, key, length, m)
            if body:
                out += [f"### {table_title(key, length)}", ""] + body
    return out


def table_title(key, length):
    """Heading of one table: model, task @ length, prompt style, prefill mode."""
    model, task, style, mode = key
    where = task if length is None else f"{task} @ {length} tokens"
    return f"{model} · {where} · {pe.style_text(style)} · {MODE_TITLES.get(mode, mode)}"


# ----------------------------------------------------------------------------- memory
MEMORY_KEYS = ("mean_resident_bytes", "peak_bytes", "peak_reserved_bytes", "peak_rss_bytes")


def memory_text(cell, keys=MEMORY_KEYS):
    """The cell's byte means in MiB, "a / b / ..." in the order of keys."""
    if cell is None:
        return DASH
    return " / ".join(fmt_mib(pe.kv_mean(cell, k), "{:.0f}" if k.endswith("rss_bytes")
                              else "{:.1f}") for k in keys) + inf_mark(cell)


def memory_table(page, key, length):
    model, task, style, mode = key
    cells = [c for c in page.report.of(model, task, style, mode)
             if c["length"] == length and c["depth"] is None
             and pe.kv_mean(c, "peak_bytes") is not None]
    if not cells:
        return []
    budgets = sorted({pe.rnd(c["budget"]) for c in cells})
    policies = pe.ordered_policies({c["policy"] for c in cells})
    full = page.report.full_cell(model, task, style, length)
    body = [[policy_label(p)] + [memory_text(page.report.cell(model, task, style, mode, p, b,
                                                              length)) for b in budgets]
            for p in policies]
    return [f"Full cache (never routed, so no routed mean): KV ledger peak / pool-reserved peak "
            f"/ process peak RSS {memory_text(full, MEMORY_KEYS[1:])} MiB.", ""] + md_table(
        ["policy \\ budget"] + [pe.fmt_budget(b) for b in budgets], body) + [""]


def section_memory(page):
    out = ["## Memory", "",
           "Per cell, in MiB, means over the instances of each row's figure: **KV ledger mean "
           "resident / KV ledger peak / pool-reserved peak / process peak RSS**. The ledger is "
           "what the cache accounts for (the budget bounds it from the first routing step); "
           "reserved is what its pools and buffers hold from the OS; RSS is the whole process "
           "(weights included). In prompt-end rows the ledger peak includes the whole prompt "
           "held in fp16 before routing; bounded rows read it in chunks under the budget.", ""]
    for key in page.report.tables():
        model, task, style, _ = key
        for length in page.report.lengths(model, task, style):
            body = memory_table(page, key, length)
            if body:
                out += [f"### {table_title(key, length)}", ""] + body
    return out


# ----------------------------------------------------------------------------- wins and losses
def verdict_line(c, v, policy):
    verb = {"win": "beats", "loss": "loses to"}[v["outcome"]]
    extra = ""
    if v["mine_only"] is not None:
        extra = f" ({policy} alone right on {v['mine_only']}, {v['other']} alone on " \
                f"{v['theirs_only']})"
    return (f"- {policy} {verb} {v['other']} on {c['task']} @ {fmt_length(c['length'])}, "
            f"budget {pe.fmt_budget(c['budget'])}: "
            f"{fmt_diff(v['metric'], v['diff'], v['lo'], v['hi'])}, {v['n']} pairs, "
            f"{fmt_p(v['p'])}{extra}")


def tally_table(tally):
    body = [[pe.fmt_budget(b), t["win"], t["loss"], t["none"]]
            for b, t in sorted(tally.items())]
    return md_table(["budget", "wins", "losses", "no detectable difference"], body)


def wins_block(page, policy, group, cs):
    """Verdict lines and the tally per budget of one (model, style, mode)."""
    lines, tally, skipped = [], {}, {"excluded": [], "unequal": 0}
    for c in sorted(cs, key=lambda c: (c["task"], c["length"] or 0, c["budget"])):
        why = page.excluded(c["model"], c["task"], c["prompt_style"], c["length"])
        if why:
            skipped["excluded"].append(f"{c['task']} @ {fmt_length(c['length'])} ({why})")
            continue
        if page.unequal_bytes(c):
            skipped["unequal"] += 1
            continue
        v = seen_by(c, policy)
        t = tally.setdefault(pe.rnd(c["budget"]), {"win": 0, "loss": 0, "none": 0})
        t[v["outcome"]] += 1
        if v["outcome"] != "none":
            lines.append(verdict_line(c, v, policy))
    model, style, mode = group
    out = [f"### {model} · {pe.style_text(style)} · {MODE_TITLES.get(mode, mode)}", ""]
    out += lines or [f"No comparison of {policy} has a verdict here: no detectable "
                     "difference anywhere."]
    out += [""] + (tally_table(tally) if tally else ["Nothing to tally."]) + [""]
    excluded = sorted(set(skipped["excluded"]))
    if excluded:
        out += ["Not counted, the full cache failing there: " + "; ".join(excluded) + ".", ""]
    if skipped["unequal"]:
        k = skipped["unequal"]
        out += [f"Not counted: {k} comparison{'s' if k > 1 else ''} with infeasible rows (not "
                "at equal bytes).", ""]
    return out


def section_wins(page, policy):
    out = [f"## Where {policy} wins and where it loses", "",
           f"Every paired comparison of `{policy}` (exactly that policy) with a policy of "
           "another family as the engine ships it, on the same instances, per task, length "
           "and budget. Variants (\"policy:key=value\") and tagged runs (\"policy[tag]\") "
           "are ablations (next section), of qevict's family or a baseline's, and never "
           "counted here; the full cache is the reference, "
           "judged under Goals. Listed: every comparison with a verdict, as "
           f"{policy} minus the other policy with its paired 95% interval; the tally counts "
           "wins, losses and comparisons with no detectable difference per budget.", ""]
    groups = {}
    for c in page.comparisons():
        if policy in (c["a"], c["b"]) and not c["same_family"] \
                and not is_full(c["a"]) and not is_full(c["b"]) \
                and as_shipped(c["a"]) and as_shipped(c["b"]):
            groups.setdefault((c["model"], c["prompt_style"], c["prefill_mode"]), []).append(c)
    if not groups:
        return out + [f"No comparison of {policy} with another family.", ""]
    for group, cs in groups.items():
        out += wins_block(page, policy, group, cs)
    return out


# ----------------------------------------------------------------------------- oracle
def oracle_row(page, c):
    mine = c["b"] if c["a"] == ORACLE else c["a"]
    v = seen_by(c, mine)
    verdict = {"win": f"{mine} better", "loss": f"{ORACLE} better"}.get(
        v["outcome"], "no detectable difference")
    if page.unequal_bytes(c):
        verdict = "not at equal bytes (infeasible rows)"
    spec = metric_spec(v["metric"])
    p = DASH if c["p"] is None else (f"{c['p']:.2g}" if c["p"] >= 0.001 else "< 0.001")
    return [c["task"], fmt_length(c["length"]), pe.fmt_budget(c["budget"]), mine,
            spec.format(v["mine"]), spec.format(v["theirs"]),
            fmt_diff(v["metric"], v["diff"], v["lo"], v["hi"]), v["n"], p, verdict]


def section_oracle(page):
    """How far each policy is from the recall oracle, per cell; only on pages with its rows."""
    cs = [c for c in page.comparisons() if ORACLE in (c["a"], c["b"])
          and not is_full(c["a"]) and not is_full(c["b"])
          and not pe.is_variant(c["a"]) and not pe.is_variant(c["b"])]
    if not cs:
        return []
    out = ["## Against the recall oracle", "",
           f"`{ORACLE}` is a diagnostic, not a policy: every token stays in RAM in fp16 (the "
           "full cache's bytes) and, after the context, every query (the question's tokens and "
           "each generated token) attends per KV head the sinks, the recent windows and the "
           "windows of largest *exact* attention mass, as many as the budget's fp16 tokens "
           "allow (docs/kv-cache.md, \"Recall oracle\"). Its row in each table is what recall "
           "could reach at that budget; never counted as a win or a loss above. Here each "
           "policy minus the oracle on the same instances, with its paired 95% interval and "
           "the report's verdict.", ""]
    groups = {}
    for c in cs:
        groups.setdefault((c["model"], c["prompt_style"], c["prefill_mode"]), []).append(c)
    for (model, style, mode), group in groups.items():
        group = sorted(group, key=lambda c: (c["task"], c["length"] or 0, c["budget"],
                                             c["b"] if c["a"] == ORACLE else c["a"]))
        out += [f"### {model} · {pe.style_text(style)} · {MODE_TITLES.get(mode, mode)}", ""]
        out += md_table(["task", "length", "budget", "policy", "its mean", "oracle's mean",
                         "policy − oracle [95%]", "pairs", "McNemar p", "verdict"],
                        [oracle_row(page, c) for c in group]) + [""]
    return out


# ----------------------------------------------------------------------------- ablations
def ablation_row(page, c):
    verdict = {"a": f"{c['a']} better", "b": f"{c['b']} better"}.get(
        c["verdict"], "no detectable difference")
    if page.unequal_bytes(c):
        verdict = "not at equal bytes (infeasible rows)"
    p = DASH if c["p"] is None else (f"{c['p']:.2g}" if c["p"] >= 0.001 else "< 0.001")
    return [c["task"], fmt_length(c["length"]), pe.fmt_budget(c["budget"]), c["a"], c["b"],
            fmt_diff(c["metric"], c["diff"], c["lo"], c["hi"]), c["n"], p, verdict]


def section_ablations(page):
    out = ["## Ablations", "",
           "Comparisons within one family: a policy against its own variants (\"policy:key="
           "value\") and tagged runs (\"policy[tag]\"), and the shipped policies of one "
           "family against each other (qevict, qevict-qa, qevict-zip). They say what a "
           "setting changes; they are ablations, not results against baselines, and are never "
           "tallied. Paired on the same instances; a − b with its 95% interval.", ""]
    groups = {}
    for c in page.comparisons():
        one_setting = base_policy(c["a"]) == base_policy(c["b"]) \
            or (as_shipped(c["a"]) and as_shipped(c["b"]))
        if c["same_family"] and one_setting and not is_full(c["a"]):
            if page.excluded(c["model"], c["task"], c["prompt_style"], c["length"]):
                continue
            groups.setdefault((c["model"], c["prompt_style"], c["prefill_mode"]), []).append(c)
    if not groups:
        return out + ["No comparison within a family.", ""]
    for (model, style, mode), cs in groups.items():
        cs = sorted(cs, key=lambda c: (c["task"], c["length"] or 0, c["budget"], c["a"],
                                       c["b"]))
        out += [f"### {model} · {pe.style_text(style)} · {MODE_TITLES.get(mode, mode)}", ""]
        out += md_table(["task", "length", "budget", "a", "b", "a − b [95%]", "pairs",
                         "McNemar p", "verdict"], [ablation_row(page, c) for c in cs]) + [""]
    return out


# ----------------------------------------------------------------------------- diagnostics
def diag_row(cell, metrics):
    row = [pe.fmt_budget(cell["budget"]), cell["policy"] + inf_mark(cell), str(cell["n"])]
    row += [DASH if pe.kv_mean(cell, k) is None else f"{pe.kv_mean(cell, k):.1f}"
            for k in ("promotions", "demotions", "evictions")]
    return row + [fmt_stat(pe.stat(cell, m), "{:.3f}") for m, _ in metrics]


def section_diagnostics(page):
    out = ["## Diagnostics", "",
           "Pooled over lengths, per model, task and prefill mode, for the main policies. Tier "
           "moves are means per row. With a shadow run (`--shadow`), each with its 95% "
           "interval:",
           "- **missed mass**: the share of the full cache's attention, per decode step, on "
           "tokens the policy had evicted. It does **not** count quantization error: windows "
           "held at 2 bits are attended, so they are never missed;",
           "- **quantized mass**: the share of the full cache's attention on windows the policy "
           "held at 2 bits: the attention that quantization could have changed (by how much is "
           "not measured);",
           "- **FMM** (the paper's, per routing step): over the next decode steps, the share of "
           "the full cache's attention on windows dropped at that step; **cumulative FMM**: the "
           "same with every window gone by then.", ""]
    for key in page.report.tables():
        model, task, style, mode = key
        cells = [c for c in page.report.of(model, task, style, mode)
                 if c["length"] is None and c["depth"] is None
                 and c["policy"] in DIAG_POLICIES]
        if not cells:
            continue
        metrics = [(m, label) for m, label in DIAG_METRICS
                   if any(pe.stat(c, m) for c in cells)]
        cells.sort(key=lambda c: (c["budget"], DIAG_POLICIES.index(c["policy"])))
        header = ["budget", "policy", "n", "promotions", "demotions", "evictions"] \
            + [label for _, label in metrics]
        out += [f"### {key_title(key)}", ""] + md_table(header, [diag_row(c, metrics)
                                                                 for c in cells])
        if not metrics:
            out += ["", "No shadow run: missed mass and FMM were not measured."]
        out.append("")
    return out


# ----------------------------------------------------------------------------- pictures
def clear_stale_pictures(images):
    for pattern in pe.OUTPUT_PATTERNS:
        for path in sorted(glob.glob(os.path.join(images, pattern))):
            os.remove(path)


def section_pictures(page, images, out_path):
    clear_stale_pictures(images)
    pictures = pe.render_all(page.report, page.rows, images)
    out = ["## Pictures", "",
           "Drawn by `scripts/plot_eval.py` from the same report: means with their 95% interval "
           "bands; the full cache dashed. Policy variants and tagged runs are in the tables "
           "only.", ""]
    if not pictures:
        return out + ["No pictures: the report holds nothing to draw.", ""]
    base = os.path.dirname(os.path.abspath(out_path))
    section = None
    for path, caption, group in pictures:
        if group != section:
            out += [f"### {group}", ""]
            section = group
        rel = os.path.relpath(os.path.abspath(path), base).replace(os.sep, "/")
        out += [f"![{caption}]({rel})", "", f"*{caption}*", ""]
    return out


# ----------------------------------------------------------------------------- main
def regenerate_command(out, images, notes, dirs, wins=MAIN_POLICIES, recall_targets=False):
    cmd = ["python3", "scripts/render_results.py", "--out", out, "--images", images]
    if notes != DEFAULT_NOTES:
        cmd += ["--notes", notes]
    if tuple(wins) != MAIN_POLICIES:
        cmd += ["--wins", ",".join(wins)]
    if recall_targets:
        cmd += ["--recall-targets"]
    return shlex.join(cmd + dirs)


def render(dirs, out_path, images, notes, qevict, wins=MAIN_POLICIES, recall_targets=False):
    runs = [Run(d) for d in dirs]
    if not any(run.rows for run in runs):
        raise SystemExit("render_results: no rows in " + ", ".join(dirs))
    report = pe.run_report(qevict, [run.dir for run in runs], [run.summary for run in runs])
    page = Page(report, runs)
    md = section_header(regenerate_command(out_path, images, notes, [r.dir for r in runs], wins,
                                           recall_targets), notes)
    md += section_runs(page) + section_reading() + section_full(page) + section_goals(page)
    if recall_targets:
        import recall_targets as targets  # it imports this module's helpers
        md += targets.section(page)
    md += section_notes(notes) + section_tables(page) + section_oracle(page) + section_memory(page)
    for policy in wins:
        md += section_wins(page, policy)
    md += section_ablations(page) + section_diagnostics(page)
    md += section_pictures(page, images, out_path)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(md).rstrip("\n") + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", metavar="DIR", help="`qevict eval` output directories")
    ap.add_argument("--out", default="docs/results.md", help="Markdown file to write")
    ap.add_argument("--wins", default=",".join(MAIN_POLICIES),
                    help="policies with a 'Where POLICY wins and where it loses' section "
                         "(comma-separated; default %(default)s)")
    ap.add_argument("--images", default="docs/results", help="directory for the pictures")
    ap.add_argument("--notes", default=DEFAULT_NOTES,
                    help="hand-written interpretation included verbatim (default "
                         "scripts/results_notes.md; '' for none)")
    ap.add_argument("--qevict", default=pe.DEFAULT_QEVICT,
                    help="the qevict binary whose `report` computes the statistics (default "
                         "build/qevict)")
    ap.add_argument("--recall-targets", action="store_true",
                    help="add issue 38's targets for qevict-recall, cell by cell "
                         "(scripts/recall_targets.py)")
    ap.add_argument("--commit-rows", metavar="DEST",
                    help="copy each run's rows (gzipped) and summary.json into DEST/runs/NAME/ "
                         "and render from the copies")
    args = ap.parse_args()
    dirs = [os.path.normpath(d) for d in args.dirs]
    try:
        if args.commit_rows:
            dirs = [commit_run(d, args.commit_rows) for d in dirs]
        render(dirs, args.out, args.images, args.notes, args.qevict, tuple(args.wins.split(",")),
               args.recall_targets)
    except OSError as e:
        print(f"render_results: {e}", file=sys.stderr)
        return 1
    print(f"render_results: wrote {args.out} and pictures in {args.images}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
