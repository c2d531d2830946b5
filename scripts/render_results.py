#!/usr/bin/env python3
"""Renders docs/results.md from the rows of one or more `qevict eval` output directories.

    scripts/render_results.py --out docs/results.md --images docs/results DIR [DIR ...]

Every number and every verdict on the page is computed here from DIR/rows.jsonl and
DIR/summary.json (rows of several runs are merged: a headline run and a ppl run, say; when the
same task instance x policy x budget appears twice, the later DIR wins). The page is never
edited by hand. Sentences of interpretation go in scripts/results_notes.md (or --notes FILE),
which is included verbatim in a clearly marked section when it has visible text.

Sections: runs (exact commands, model, seed, threads, date, wall time), how the full cache does,
goals (MET / MISSED with margins), notes, per-task tables (policies x budgets), where QEvict wins
and loses, diagnostics (tiers, promotions, missed mass), pictures (drawn by plot_eval.py).
"""
import argparse
import glob
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_eval as pe  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FULL_FAILS_BELOW = 0.8          # a task the full cache fails says nothing about compression
WIN_POINTS = 5.0                # |qevict - baseline| >= 5 accuracy points is a win / loss
GOAL_A_TASKS = ("drift", "niah")
GOAL_A_BUDGET = 0.05
GOAL_A_FRACTION_OF_FULL = 0.9
GOAL_A_POINTS_OVER_KEEP_OR_DROP = 20.0
GOAL_C_MAX_BUDGET = 0.2
DIAG_POLICIES = ("qevict", "qevict-qa", "mikv", "snapkv", "h2o")
EPS = 1e-9
DASH = "–"


# ----------------------------------------------------------------------------- data
def load_runs(dirs):
    """[(dir, summary or None, rows)] for each DIR, in order."""
    runs = []
    for d in dirs:
        rows = pe.load_rows(d)
        for r in rows:
            r["_run"] = d
            # A tagged ablation run's reference ("full[tag]") is the same full cache.
            if str(r.get("policy", "")).startswith("full["):
                r["policy"] = "full"
            # Prompt-end rows (one fp16 prefill forked into every row) are their own policy
            # rows; bounded rows (each row prefills in chunks, routing between them) are not
            # labelled. Same rule as PolicyLabel in src/eval/eval_report.cc.
            # Rows written before the modes existed were all prompt-end rows.
            mode = r.get("prefill_mode", "full" if r["policy"] == "full" else "prompt-end")
            if mode == "prompt-end":
                r["policy"] = r["policy"] + " (prompt-end)"
        runs.append((d, pe.load_summary(d), rows))
    label_prompt_styles(runs)
    label_models(runs)
    return runs


def model_of(summary):
    """The model file's name without its directory and .gguf, or "?"."""
    path = str((summary or {}).get("model", "?"))
    return os.path.basename(path).removesuffix(".gguf")


def label_models(runs):
    """Runs of several models (SmolLM2 and Gemma 3 270M): the first run's model is the page's
    reference and its tasks are not labelled; every other model's tasks become
    "task [model]", so each model gets its own tables, compared with its own full cache."""
    models = [model_of(summ) for _, summ, _ in runs]
    if len(set(models)) < 2:
        return
    for model, (_, _, rows) in zip(models, runs):
        if model == models[0]:
            continue
        for r in rows:
            r["task"] = f"{r['task']} [{model}]"


def prompt_style_of(row):
    """The row's prompt style; rows written before the styles existed were all chat."""
    return row.get("prompt_style") or "chat"


def label_prompt_styles(runs):
    """Rows of one prompt style are not labelled (the runs list says which). When the runs of one
    model mix styles, its completion rows' task becomes "task (completion)": each style gets its
    own tables and is compared with its own full cache. Same rule as TaskLabel in
    src/eval/eval_report.cc. (Runs of different models are told apart by label_models.)"""
    by_model = {}
    for _, summ, rows in runs:
        by_model.setdefault(model_of(summ), []).append(rows)
    for model_rows in by_model.values():
        styles = {prompt_style_of(r) for rows in model_rows for r in rows}
        if len(styles) < 2:
            continue
        for rows in model_rows:
            for r in rows:
                style = prompt_style_of(r)
                if style != "chat":
                    r["task"] = f"{r['task']} ({style})"


def merge_rows(runs):
    """All rows, one per (task, id, policy, budget): later runs replace earlier ones."""
    merged = {}
    for _, _, rows in runs:
        for r in rows:
            merged[(r["task"], str(r.get("id")), r["policy"], pe.budget_of(r))] = r
    return list(merged.values()), sum(len(rows) for _, _, rows in runs) - len(merged)


class Table:
    """Rows of one task, indexed by (policy, budget)."""

    def __init__(self, rows, task):
        self.task = task
        self.rows = [r for r in rows if r["task"] == task]
        self.kind = pe.task_kind(rows, task)
        self.cells = pe.group(self.rows, lambda r: (r["policy"], pe.budget_of(r)))
        self.policies = pe.ordered_policies({r["policy"] for r in self.rows})
        self.budgets = pe.compressed_budgets(self.rows)

    def cell(self, policy, budget):
        return self.cells.get((policy, round(budget, 6)), [])

    def full_rows(self):
        return [r for r in self.rows if r["policy"] == "full"]


def feasible(rows):
    return [r for r in rows if not pe.is_infeasible(r)]


def values_by_id(rows, key):
    out = {}
    for r in rows:
        v = pe.num(r.get(key))
        if v is not None:
            out[str(r.get("id"))] = v
    return out


def paired(rows_a, rows_b, key):
    """(mean a, mean b, n) over the instances both have a value for, or None."""
    a, b = values_by_id(rows_a, key), values_by_id(rows_b, key)
    common = sorted(set(a) & set(b))
    if not common:
        return None
    return (sum(a[i] for i in common) / len(common), sum(b[i] for i in common) / len(common),
            len(common))


def comparison_metric(kind):
    """(key, label) of the [0,1] number wins and losses are counted in, in points x100."""
    if kind == "longgen":
        return "agreement", "token agreement with the full cache"
    if kind == "ppl":
        return "top1_agreement", "top-1 agreement with the full cache"
    return "accuracy", "accuracy"


def table_metrics(kind):
    """[(key, label, format, higher is better)] tabulated for a task of this kind."""
    if kind == "ppl":
        return [("kl", "mean KL to the full cache (lower is better)", "{:.3g}", False),
                ("delta_ppl", "ΔPPL vs the full cache (lower is better)", "{:.3g}", False),
                ("top1_agreement", "top-1 agreement with the full cache", "{:.3f}", True)]
    if kind == "longgen":
        return [("agreement", "token agreement with the full cache's output", "{:.2f}", True),
                ("edit_similarity", "edit similarity with the full cache's output", "{:.2f}",
                 True)]
    return [("accuracy", "mean accuracy", "{:.2f}", True)]


# ----------------------------------------------------------------------------- formatting
def fmt(v, spec="{:.2f}"):
    return DASH if v is None else spec.format(v)


def fmt_points(d):
    return f"{d:+.0f} points"


def fmt_mib(v):
    return DASH if v is None else f"{v / pe.MIB:.2f}"


def fmt_duration(s):
    if s is None:
        return DASH
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h} h {m:02d} min" if h else (f"{m} min {sec:02d} s" if m else f"{sec} s")


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


def status(ok):
    return "**MET**" if ok else "**MISSED**"


# ----------------------------------------------------------------------------- sections
def section_header(runs, rows, duplicates, argv):
    out = ["# Results", "",
           "Generated by `scripts/render_results.py` from the rows of the `qevict eval` runs "
           "below; every number and verdict on this page is computed from those rows. Do not "
           "edit by hand: interpretation goes in `scripts/results_notes.md`, which is included "
           "verbatim.", "",
           "Regenerate the page with:", "", "```",
           "python3 scripts/render_results.py " + shlex.join(argv), "```", "", "## Runs", ""]
    total_wall = 0.0
    for i, (d, summ, rrows) in enumerate(runs, 1):
        summ = summ or {}
        wall = pe.num(summ.get("wall_s"))
        style = summ.get("prompt_style") or ", ".join(sorted({prompt_style_of(r) for r in rrows}))
        total_wall += wall or 0.0
        out.append(f"{i}. {md_code(str(summ.get('command', '(no summary.json)')))}")
        out.append(f"   - output `{d}`, {len(rrows)} rows; model "
                   f"{md_code(str(summ.get('model', '?')))}, seed {summ.get('seed', '?')}, "
                   f"threads {summ.get('threads', '?')}, started {summ.get('started', '?')}, "
                   f"wall time {fmt_duration(wall)}; prompt style {style or 'chat'}; prefill modes "
                   f"{', '.join(summ.get('prefill_modes', ['prompt-end']))}"
                   + (f" (chunks of {summ['prefill_chunk']} tokens)"
                      if summ.get("prefill_chunk") else ""))
    out += ["", f"Total wall time {fmt_duration(total_wall)}; {len(rows)} rows after merging"
            + (f" ({duplicates} rows replaced by a later run)" if duplicates else "") + ".", ""]
    return out


def section_full(tables):
    out = ["## How the full cache does", "",
           "A task on which the full cache fails says nothing about compression.", ""]
    body, failing = [], []
    for t in tables:
        full = t.full_rows()
        if not full:
            body.append([t.task, t.kind, DASH, "0", "no full-cache rows: the compressed results "
                         "cannot be judged"])
            continue
        if t.kind == "ppl":
            ppl, nll = pe.mean(r.get("ppl") for r in full), pe.mean(r.get("nll") for r in full)
            body.append([t.task, t.kind, f"PPL {fmt(ppl)}, NLL {fmt(nll, '{:.3f}')}",
                         str(len(full)), "reference for KL / ΔPPL"])
        elif t.kind == "longgen":
            body.append([t.task, t.kind, "reference output", str(len(full)),
                         "agreement is measured against it (1 by definition)"])
        else:
            acc = pe.mean(r.get("accuracy") for r in full)
            ok = acc is not None and acc >= FULL_FAILS_BELOW
            if not ok:
                failing.append((t.task, acc))
            body.append([t.task, t.kind, f"accuracy {fmt(acc)}", str(len(full)),
                         "ok" if ok else f"**fails** (< {FULL_FAILS_BELOW:g})"])
    out += md_table(["task", "kind", "full cache", "n", "verdict"], body) + [""]
    for task, acc in failing:
        out.append(f"**The full cache fails on {task} (accuracy {fmt(acc)} < "
                   f"{FULL_FAILS_BELOW:g}): its compressed results say nothing about "
                   "compression.**")
        out.append("")
    return out, {task for task, _ in failing}


def goal_a(tables_by_task, failing):
    out = [f"### (a) {' and '.join(GOAL_A_TASKS)} at budget {pe.fmt_budget(GOAL_A_BUDGET)}: "
           f"QEvict ≥ {GOAL_A_FRACTION_OF_FULL:.0%} of the full cache and ≥ the best "
           f"keep-or-drop baseline + {GOAL_A_POINTS_OVER_KEEP_OR_DROP:g} points", ""]
    for task in GOAL_A_TASKS:
        t = tables_by_task.get(task)
        q = feasible(t.cell("qevict", GOAL_A_BUDGET)) if t else []
        if not t or not t.cell("qevict", GOAL_A_BUDGET):
            what = f"no {task} rows" if not t else "no qevict rows at this budget"
            out.append(f"- **NOT EVALUATED** {task} @ {pe.fmt_budget(GOAL_A_BUDGET)}: {what}.")
            continue
        if not q:
            out.append(f"- **MISSED** {task} @ {pe.fmt_budget(GOAL_A_BUDGET)}: qevict is "
                       "infeasible at this budget.")
            continue
        parts, ok, unknown = [], True, False
        vs_full = paired(q, t.full_rows(), "accuracy")
        if vs_full is None:
            parts.append("no full-cache rows to compare with")
            unknown = True
        else:
            qa, fa, n = vs_full
            margin = (qa - GOAL_A_FRACTION_OF_FULL * fa) * 100
            ok &= margin >= -EPS
            share = f"{qa / fa:.0%} of" if fa > 0 else "vs"
            parts.append(f"qevict {qa:.2f} = {share} full {fa:.2f} (need ≥ "
                         f"{GOAL_A_FRACTION_OF_FULL * fa:.2f}): margin {fmt_points(margin)}")
        best = best_baseline(t, GOAL_A_BUDGET, pe.KEEP_OR_DROP, "accuracy", q)
        if best is None:
            parts.append("no feasible keep-or-drop baseline to compare with")
            unknown = True
        else:
            name, qa, ba, n = best
            margin = (qa - ba) * 100 - GOAL_A_POINTS_OVER_KEEP_OR_DROP
            ok &= margin >= -EPS
            parts.append(f"qevict {qa:.2f} vs best keep-or-drop ({name}) {ba:.2f} + "
                         f"{GOAL_A_POINTS_OVER_KEEP_OR_DROP:g} points: margin "
                         f"{fmt_points(margin)}")
        caveat = " (the full cache fails on this task, so this says little)" \
            if task in failing else ""
        verdict = "**NOT EVALUATED**" if ok and unknown else status(ok)
        out.append(f"- {verdict} {task} @ {pe.fmt_budget(GOAL_A_BUDGET)}: "
                   + "; ".join(parts) + "." + caveat)
    return out + [""]


def best_baseline(t, budget, names, key, qrows):
    """(name, qevict mean, baseline mean, n) of the feasible baseline closest to or above
    qevict (smallest paired qevict - baseline), or None."""
    best = None
    for name in names:
        pr = paired(qrows, feasible(t.cell(name, budget)), key)
        if pr is None:
            continue
        if best is None or pr[0] - pr[1] < best[1] - best[2] - EPS:
            best = (name,) + pr
    return best


def goal_b(tables):
    out = ["### (b) At every budget QEvict ≥ MiKV (per task)", "",
           "MiKV keeps the same tiers without promotion; where the two are equal, promotion "
           "made no difference.", ""]
    for t in tables:
        key, better_high = ("kl", False) if t.kind == "ppl" else \
            (pe.primary_metric(t.kind)[0], True)
        details, worst, equal_at, evaluated, at_or_above = [], None, [], 0, 0
        for b in t.budgets:
            q, m = feasible(t.cell("qevict", b)), feasible(t.cell("mikv", b))
            if not t.cell("qevict", b) or not t.cell("mikv", b):
                continue
            pr = paired(q, m, key)
            if pr is None:
                details.append(f"  - @ {pe.fmt_budget(b)}: not comparable (infeasible rows)")
                continue
            evaluated += 1
            qv, mv, n = pr
            diff = (qv - mv) if better_high else (mv - qv)
            worst = diff if worst is None else min(worst, diff)
            at_or_above += diff >= -EPS
            promos = pe.mean(pe.kv(r, "promotions") for r in q)
            if t.kind == "ppl":
                desc = f"KL qevict {qv:.3g} vs mikv {mv:.3g}"
            else:
                desc = f"qevict {qv:.2f} vs mikv {mv:.2f} ({fmt_points(diff * 100)})"
            if abs(qv - mv) <= EPS:
                same = identical_outputs(q, m)
                equal_at.append(pe.fmt_budget(b))
                desc += (f" — equal: promotion made no difference (qevict mean promotions "
                         f"{fmt(promos, '{:.1f}')}" + (f"; identical outputs on {same}" if same
                                                       else "") + ")")
            else:
                desc += f", qevict mean promotions {fmt(promos, '{:.1f}')}"
            details.append(f"  - @ {pe.fmt_budget(b)}: {desc}" + ("" if diff >= -EPS
                                                                  else " **(below mikv)**"))
        if not evaluated:
            out.append(f"- **NOT EVALUATED** {t.task}: no budget with feasible rows of both "
                       "qevict and mikv.")
            continue
        what = "KL ≤ mikv's" if t.kind == "ppl" else "qevict ≥ mikv"
        margin = (f"smallest margin {worst:+.3g} KL" if t.kind == "ppl"
                  else f"smallest margin {fmt_points(worst * 100)}")
        eq = f"; equal at {', '.join(equal_at)}" if equal_at else ""
        out.append(f"- {status(worst >= -EPS)} {t.task}: {what} at {at_or_above} of {evaluated} "
                   f"budgets compared ({margin}{eq}).")
        out += details
    return out + [""]


def identical_outputs(a_rows, b_rows):
    """'k/n instances' whose turn outputs are the same for both policies, or ''."""
    a = {str(r.get("id")): [x.get("output") for x in r.get("turns") or []] for r in a_rows}
    b = {str(r.get("id")): [x.get("output") for x in r.get("turns") or []] for r in b_rows}
    common = [i for i in sorted(set(a) & set(b)) if a[i]]
    if not common:
        return ""
    return f"{sum(a[i] == b[i] for i in common)}/{len(common)} instances"


def goal_c(tables):
    out = [f"### (c) ppl: QEvict has the lowest KL among the policies at every budget ≤ "
           f"{pe.fmt_budget(GOAL_C_MAX_BUDGET)}", ""]
    ppl_tables = [t for t in tables if t.kind == "ppl"]
    if not ppl_tables:
        return out + ["- **NOT EVALUATED**: no ppl rows.", ""]
    for t in ppl_tables:
        budgets = [b for b in t.budgets if b <= GOAL_C_MAX_BUDGET + EPS]
        if not budgets:
            out.append(f"- **NOT EVALUATED** {t.task}: no budget ≤ "
                       f"{pe.fmt_budget(GOAL_C_MAX_BUDGET)}.")
        for b in budgets:
            q = feasible(t.cell("qevict", b))
            if not q:
                out.append(f"- **MISSED** {t.task} @ {pe.fmt_budget(b)}: no feasible qevict "
                           "rows.")
                continue
            others = [p for p in t.policies if p not in ("full", "qevict")]
            excluded = [p for p in others if t.cell(p, b) and not feasible(t.cell(p, b))]
            # Best competitor: the lowest KL relative to qevict on the shared instances.
            best = None
            for p in others:
                pr = paired(q, feasible(t.cell(p, b)), "kl")
                if pr and (best is None or pr[1] - pr[0] < best[2] - best[1] - EPS):
                    best = (p,) + pr
            note = f" ({', '.join(excluded)} infeasible, excluded)" if excluded else ""
            if best is None:
                out.append(f"- **NOT EVALUATED** {t.task} @ {pe.fmt_budget(b)}: no feasible "
                           f"competitor{note}.")
                continue
            name, qk, ok_, n = best
            met = qk <= ok_ + EPS
            if ok_ > 0:
                rel = f"{abs(1 - qk / ok_):.0%} {'lower' if qk <= ok_ else 'higher'}"
            else:
                rel = "equal" if qk <= EPS else "higher"
            out.append(f"- {status(met)} {t.task} @ {pe.fmt_budget(b)}: qevict KL {qk:.3g} vs "
                       f"best other ({name}) {ok_:.3g}: {rel}{note}.")
    return out + [""]


def section_goals(tables, failing):
    by_task = {t.task: t for t in tables}
    return (["## Goals", ""] + goal_a(by_task, failing) + goal_b(tables) + goal_c(tables))


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


def section_task_tables(tables):
    out = ["## Results per task", "",
           "Mean over instances. **Bold**: the best feasible compressed policy at that budget. "
           "\"(inf.)\": the policy could not meet the budget (kivi at small budgets, or a budget "
           "below the fp16 floor), so the value is not an equal-bytes comparison; \"inf. k/n\" "
           "when only some instances were infeasible.", ""]
    for t in tables:
        out += [f"### {t.task}", ""]
        full = t.full_rows()
        sizes = sorted(len(rs) for (p, _), rs in t.cells.items() if p != "full")
        typical_n = max(set(sizes), key=sizes.count) if sizes else 0
        for key, label, spec, high in table_metrics(t.kind):
            full_val = pe.mean(r.get(key) for r in full)
            full_txt = f"full cache {fmt(full_val, spec)} (n = {len(full)})" if full else \
                "no full-cache rows"
            out += [f"{label[0].upper() + label[1:]}; {full_txt}; n = {typical_n} per cell "
                    "unless noted.", ""]
            body = []
            best = {}
            for b in t.budgets:
                vals = [pe.mean(r.get(key) for r in t.cell(p, b)) for p in t.policies
                        if p != "full" and t.cell(p, b)
                        and not any(map(pe.is_infeasible, t.cell(p, b)))]
                vals = [v for v in vals if v is not None]
                if vals:
                    best[b] = max(vals) if high else min(vals)
            for p in t.policies:
                if p == "full":
                    continue
                row = [f"**{p}**" if p == "qevict" else p]
                for b in t.budgets:
                    rs = t.cell(p, b)
                    v = pe.mean(r.get(key) for r in rs)
                    if not rs or v is None:
                        row.append(DASH)
                        continue
                    txt = fmt(v, spec)
                    n_inf = sum(pe.is_infeasible(r) for r in rs)
                    if n_inf == 0 and b in best and abs(v - best[b]) <= EPS:
                        txt = f"**{txt}**"
                    if n_inf == len(rs):
                        txt += " (inf.)"
                    elif n_inf:
                        txt += f" (inf. {n_inf}/{len(rs)})"
                    if len(rs) != typical_n:
                        txt += f" (n={len(rs)})"
                    row.append(txt)
                body.append(row)
            out += md_table(["policy \\ budget"] + [pe.fmt_budget(b) for b in t.budgets], body)
            out.append("")
    return out


def section_wins(tables):
    out = ["## Where QEvict wins and where it loses", "",
           f"QEvict minus each baseline at the same budget, in points (x100) of the task's "
           f"metric, over feasible rows and the instances both have: a win is ≥ "
           f"+{WIN_POINTS:g}, a tie within ±{WIN_POINTS:g}, a loss ≤ -{WIN_POINTS:g}. "
           "Keep-or-drop baselines: " + ", ".join(pe.KEEP_OR_DROP) + ".", ""]
    for t in tables:
        key, label = comparison_metric(t.kind)
        baselines = [p for p in t.policies if p not in ("full", "qevict")]
        if not any(t.cell("qevict", b) for b in t.budgets) or not baselines:
            continue
        out += [f"### {t.task} ({label})", ""]
        tally = {"wins": 0, "ties": 0, "losses": 0}
        for b in t.budgets:
            head = f"- {t.task} @ {pe.fmt_budget(b)}: "
            q_all = t.cell("qevict", b)
            q = feasible(q_all)
            if not q_all:
                continue
            if not q:
                out.append(head + "QEvict is infeasible at this budget.")
                continue
            best = best_baseline(t, b, pe.KEEP_OR_DROP, key, q)
            if best:
                name, qv, bv, n = best
                out.append(head + f"QEvict {qv:.2f} vs best keep-or-drop ({name}) {bv:.2f}: "
                           f"{fmt_points((qv - bv) * 100)}.")
            else:
                qv = pe.mean(r.get(key) for r in q)
                out.append(head + f"QEvict {fmt(qv)}; no feasible keep-or-drop baseline.")
            groups = {"wins": [], "ties": [], "losses": [], "not comparable": []}
            for p in baselines:
                pr = paired(q, feasible(t.cell(p, b)), key)
                if pr is None:
                    if t.cell(p, b):
                        why = "infeasible" if not feasible(t.cell(p, b)) else "other instances"
                        groups["not comparable"].append(f"{p} ({why})")
                    continue
                d = (pr[0] - pr[1]) * 100
                g = "wins" if d >= WIN_POINTS else ("losses" if d <= -WIN_POINTS else "ties")
                groups[g].append(f"{p} {d:+.0f}")
                tally[g] += 1
            parts = [f"{g}: {', '.join(v)}" for g, v in groups.items() if v]
            out.append("  - " + "; ".join(parts) + ".")
        total = sum(tally.values())
        out += ["", f"Over {t.task}: wins {tally['wins']}, ties {tally['ties']}, losses "
                f"{tally['losses']} of {total} comparisons.", ""]
    return out


def section_diagnostics(tables):
    out = ["## Diagnostics", "",
           "Means over instances (peaks: the largest over instances). Bytes in MiB: mean / peak "
           "resident per tier (fp16, 2-bit quantized) and in total, and the budget; what the "
           "cache held mapped from the OS at its peak (pools and buffers, KvStats reserved "
           "bytes) and the process's peak RSS during the row (weights included; in bounded "
           "runs without a shadow the row's cache alone, otherwise with the shared fp16 "
           "prefix). Missed "
           "mass: share of the full cache's attention on tokens the policy no longer holds (mean "
           "over decode steps); FMM: future missed mass at routing events. Both need a shadow "
           "run (`--shadow`).", ""]
    for t in tables:
        # The main policies in every prefill mode ("qevict", "qevict (prompt-end)", ...).
        pols = [p for p in t.policies
                if p.split(" (")[0] in DIAG_POLICIES and any(t.cell(p, b) for b in t.budgets)]
        if not pols:
            continue
        has_mm = any(pe.num(r.get("missed_mass")) is not None for r in t.rows)
        has_fmm = any(pe.num(r.get("fmm")) is not None for r in t.rows)
        has_cold = any((pe.kv(r, "cold_peak_bytes") or 0) > 0 for r in t.rows)
        header = ["budget", "policy", "n", "promotions", "demotions", "evictions",
                  "fp16 MiB mean / peak", "quant MiB mean / peak", "total MiB mean / peak",
                  "budget MiB", "mapped MiB peak", "peak RSS MiB"]
        header += ["cold peak MiB"] if has_cold else []
        header += ["missed mass"] if has_mm else []
        header += ["FMM"] if has_fmm else []
        body = []
        for b in t.budgets:
            for p in pols:
                rs = t.cell(p, b)
                if not rs:
                    continue

                def m(key, rs=rs):
                    return pe.mean(pe.kv(r, key) for r in rs)

                def mx(key, rs=rs):
                    vals = [v for v in (pe.kv(r, key) for r in rs) if v is not None]
                    return max(vals) if vals else None
                row = [pe.fmt_budget(b), p + (" (inf.)" if any(map(pe.is_infeasible, rs))
                                              else ""), str(len(rs)),
                       fmt(m("promotions"), "{:.1f}"), fmt(m("demotions"), "{:.1f}"),
                       fmt(m("evictions"), "{:.1f}"),
                       f"{fmt_mib(m('mean_fp16_bytes'))} / {fmt_mib(mx('peak_fp16_bytes'))}",
                       f"{fmt_mib(m('mean_quant_bytes'))} / {fmt_mib(mx('peak_quant_bytes'))}",
                       f"{fmt_mib(m('mean_resident_bytes'))} / {fmt_mib(mx('peak_bytes'))}",
                       fmt_mib(m("budget_bytes")), fmt_mib(mx("peak_reserved_bytes")),
                       fmt_mib(mx("peak_rss_bytes"))]
                if has_cold:
                    row.append(fmt_mib(mx("cold_peak_bytes")))
                if has_mm:
                    row.append(fmt(pe.mean(r.get("missed_mass") for r in rs), "{:.3f}"))
                if has_fmm:
                    row.append(fmt(pe.mean(r.get("fmm") for r in rs), "{:.3f}"))
                body.append(row)
        out += [f"### {t.task}", ""] + md_table(header, body) + [""]
    return out


def clear_stale_pictures(images):
    for pattern in pe.OUTPUT_PATTERNS:
        for path in sorted(glob.glob(os.path.join(images, pattern))):
            os.remove(path)


def section_pictures(rows, images, out_path):
    clear_stale_pictures(images)
    pictures = pe.render_all(rows, images)
    out = ["## Pictures", ""]
    if not pictures:
        return out + ["No pictures: the rows hold nothing to draw.", ""]
    base = os.path.dirname(os.path.abspath(out_path))
    section = None
    for path, caption, group in pictures:
        if group != section:
            out += [f"### {group}", ""]
            section = group
        rel = os.path.relpath(os.path.abspath(path), base).replace(os.sep, "/")
        if any(c in rel for c in " ()[]"):  # a labelled policy or task: "accuracy_niah (completion).png"
            rel = f"<{rel}>"
        out += [f"![{caption}]({rel})", "", f"*{caption}*", ""]
    return out


def add_retained_accuracy(rows):
    """For question tasks: row["retained_accuracy"] = share of the turns the full cache answered
    correctly (same task instance) that this row answers correctly too; None when the full cache
    answered none. It makes tasks the full cache only partly solves (drift with a small model)
    say something about compression: a turn the full cache fails is left out."""
    full = {}
    for r in rows:
        if r["policy"] == "full" and r.get("kind") == "questions":
            full[(r["task"], str(r.get("id")))] = [bool(t.get("correct")) for t in r.get("turns") or []]
    for r in rows:
        ref = full.get((r["task"], str(r.get("id"))))
        turns = r.get("turns") or []
        if r.get("kind") != "questions" or ref is None or not any(ref) or len(turns) != len(ref):
            r["retained_accuracy"] = None
            continue
        kept = [bool(t.get("correct")) for t, ok in zip(turns, ref) if ok]
        r["retained_accuracy"] = sum(kept) / len(kept)


def section_retained(tables, failing):
    """Accuracy on the turns the full cache answers, for tasks the full cache partly fails."""
    out = []
    for t in tables:
        if t.task not in failing:
            continue
        if not out:
            out = ["## Turns the full cache answers", "",
                   "Where the full cache fails some turns, those turns say nothing about "
                   "compression. Here each policy is scored only on the turns (of the same task "
                   "instance) that the full cache answered correctly: 1.00 means it kept every "
                   "answer the full cache could give.", ""]
        body = []
        for policy in t.policies:
            if policy == "full":
                continue
            line = [policy]
            for b in t.budgets:
                cell = t.cell(policy, b)
                v = pe.mean(r.get("retained_accuracy") for r in cell)
                inf = any(pe.is_infeasible(r) for r in cell)
                line.append(DASH if v is None else fmt(v) + (" (inf.)" if inf else ""))
            body.append(line)
        n_turns = sum(sum(bool(x.get("correct")) for x in (r.get("turns") or []))
                      for r in t.full_rows())
        out += [f"### {t.task}", ""]
        if n_turns == 0:
            out += ["The full cache answered no turn: there is nothing compression could keep.", ""]
            continue
        out += [f"Turns the full cache answered: {n_turns}.", ""]
        out += md_table(["policy \\ budget"] + [pe.fmt_budget(b) for b in t.budgets], body)
        q = t.cell("qevict", GOAL_A_BUDGET)
        best = best_baseline(t, GOAL_A_BUDGET, pe.KEEP_OR_DROP, "retained_accuracy", feasible(q))
        qv = pe.mean(r.get("retained_accuracy") for r in feasible(q))
        if qv is not None and best is not None:
            name, qa, ba, n = best
            ok_full = qv >= GOAL_A_FRACTION_OF_FULL - EPS
            ok_base = (qa - ba) * 100 >= GOAL_A_POINTS_OVER_KEEP_OR_DROP - EPS
            out += ["", f"At budget {pe.fmt_budget(GOAL_A_BUDGET)} on these turns: qevict keeps "
                    f"{qv:.0%} of the full cache's answers ({status(ok_full)} against "
                    f"{GOAL_A_FRACTION_OF_FULL:.0%}); qevict {qa:.2f} vs best keep-or-drop "
                    f"({name}) {ba:.2f}: {fmt_points((qa - ba) * 100)} "
                    f"({status(ok_base)} against +{GOAL_A_POINTS_OVER_KEEP_OR_DROP:g})."]
        out.append("")
    return out


def render(dirs, out_path, images, notes, argv):
    runs = load_runs(dirs)
    rows, duplicates = merge_rows(runs)
    add_retained_accuracy(rows)
    if not rows:
        raise SystemExit("render_results: no rows in " + ", ".join(dirs))
    tables = [Table(rows, task) for task in pe.ordered_tasks(rows)]
    full_md, failing = section_full(tables)
    md = section_header(runs, rows, duplicates, argv)
    md += full_md
    md += section_goals(tables, failing)
    md += section_retained(tables, failing)
    md += section_notes(notes)
    md += section_task_tables(tables)
    md += section_wins(tables)
    md += section_diagnostics(tables)
    md += section_pictures(rows, images, out_path)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(md).rstrip("\n") + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", metavar="DIR", help="`qevict eval` output directories")
    ap.add_argument("--out", default="docs/results.md", help="Markdown file to write")
    ap.add_argument("--images", default="docs/results", help="directory for the pictures")
    ap.add_argument("--notes", default=os.path.join(here, "results_notes.md"),
                    help="hand-written interpretation included verbatim (default "
                         "scripts/results_notes.md)")
    args = ap.parse_args()
    try:
        render(args.dirs, args.out, args.images, args.notes, sys.argv[1:])
    except OSError as e:
        print(f"render_results: {e}", file=sys.stderr)
        return 1
    print(f"render_results: wrote {args.out} and pictures in {args.images}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
