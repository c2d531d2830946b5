#!/usr/bin/env python3
"""Draws the pictures of a `qevict eval` run (matplotlib, Agg backend, deterministic PNGs).

    scripts/plot_eval.py DIR [--out PLOTDIR]        (PLOTDIR defaults to DIR/plots)

Reads DIR/rows.jsonl (one row per task instance x policy x budget) and writes, each only when
its data is present:
  needle_<policy>.png    niah accuracy heatmaps: context length x depth, one panel per budget
  passkey_<policy>.png   the same for passkey
  accuracy_<task>.png    accuracy vs budget per policy ("questions" tasks; agreement with the
                         full cache's output for "longgen" tasks), full cache as a dashed line
  kl_<task>.png          KL to the full cache (log) and delta-PPL vs budget ("ppl" tasks)
  resident_bytes.png     peak resident KV MiB vs context length, one panel per budget
  fmm_steps.png          missed attention mass over decode steps, one panel per budget

Infeasible points (the policy could not meet the budget) are drawn hollow. Every policy has one
color and marker in every picture; qevict is drawn thick. scripts/render_results.py imports the
helpers and render_all() from here.
"""
import argparse
import gzip
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

# Same bytes for the same input: no timestamps / software tags, fixed SVG ids.
matplotlib.rcParams["svg.hashsalt"] = "qevict"
matplotlib.rcParams["path.simplify"] = True
SAVE_KW = {"dpi": 110, "metadata": {"Software": None}}

POLICY_ORDER = ["full", "streaming", "h2o", "tova", "snapkv", "pyramidkv", "kivi", "mikv",
                "qevict"]
KEEP_OR_DROP = ["streaming", "h2o", "tova", "snapkv", "pyramidkv"]
POLICY_COLORS = {
    "full": "#000000", "streaming": "#7f7f7f", "h2o": "#1f77b4", "tova": "#17becf",
    "snapkv": "#ff7f0e", "pyramidkv": "#8c564b", "kivi": "#9467bd", "mikv": "#2ca02c",
    "qevict": "#d62728",
}
POLICY_MARKERS = {
    "full": "o", "streaming": "v", "h2o": "s", "tova": "^", "snapkv": "D", "pyramidkv": "P",
    "kivi": "X", "mikv": "o", "qevict": "*",
}
EXTRA_COLORS = ["#e377c2", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39"]
MIB = 1024.0 * 1024.0
# Patterns of the files this module writes (render_results.py removes stale ones).
OUTPUT_PATTERNS = ("needle_*.png", "passkey_*.png", "accuracy_*.png", "kl_*.png",
                   "resident_bytes.png", "fmm_steps.png")


# ----------------------------------------------------------------------------- data helpers
def load_rows(directory):
    """Rows of DIR/rows.jsonl (or DIR/rows.jsonl.gz, as committed under docs/); malformed lines
    are reported on stderr and skipped."""
    path = os.path.join(directory, "rows.jsonl")
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    rows = []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{path}:{lineno}: skipped, not JSON ({e})", file=sys.stderr)
                continue
            if not isinstance(row, dict) or "task" not in row or "policy" not in row:
                print(f"{path}:{lineno}: skipped, no task/policy", file=sys.stderr)
                continue
            rows.append(row)
    return rows


def load_summary(directory):
    """DIR/summary.json as a dict, or None when absent or unreadable."""
    path = os.path.join(directory, "summary.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"{path}: not read ({e})", file=sys.stderr)
        return None


def budget_of(row):
    """The row's budget rounded so that equal budgets compare equal (full: 1.0)."""
    b = row.get("budget")
    if b is None:
        b = 1.0
    return round(float(b), 6)


def fmt_budget(b):
    return f"{b:g}"


def num(x):
    """x as a finite float, or None."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def mean(values):
    vals = [v for v in (num(x) for x in values) if v is not None]
    return sum(vals) / len(vals) if vals else None


def kv(row, key):
    k = row.get("kv")
    return num(k.get(key)) if isinstance(k, dict) else None


def is_infeasible(row):
    return bool(row.get("infeasible"))


def context_of(row):
    """Context length of a row: the target length when the task has one, else the prompt."""
    t = num(row.get("target_tokens"))
    if t:
        return int(t)
    p = num(row.get("prompt_tokens"))
    return int(p) if p else None


def task_kind(rows, task):
    """The kind ("questions", "longgen", "ppl") most rows of a task carry."""
    counts = {}
    for r in rows:
        if r.get("task") == task:
            k = r.get("kind") or "questions"
            counts[k] = counts.get(k, 0) + 1
    return max(sorted(counts), key=lambda k: counts[k]) if counts else "questions"


def ordered_policies(names):
    names = set(names)
    known = [p for p in POLICY_ORDER if p in names]
    return known + sorted(names - set(POLICY_ORDER))


def ordered_tasks(rows):
    seen = []
    for r in rows:
        if r["task"] not in seen:
            seen.append(r["task"])
    # Preferred order of the built-in tasks, then the rest in order of appearance.
    pref = ["passkey", "niah", "multikey", "vt", "drift", "longgen", "ppl", "file"]
    return [t for t in pref if t in seen] + [t for t in seen if t not in pref]


def policy_style(policy, all_policies=()):
    """Line style keywords for a policy; qevict thick and on top."""
    if policy in POLICY_COLORS:
        color = POLICY_COLORS[policy]
    else:
        extra = sorted(set(all_policies) - set(POLICY_COLORS)) or [policy]
        idx = extra.index(policy) if policy in extra else 0
        color = EXTRA_COLORS[idx % len(EXTRA_COLORS)]
    style = {"color": color, "marker": POLICY_MARKERS.get(policy, "o"), "linewidth": 1.5,
             "markersize": 6, "zorder": 2}
    if policy == "qevict":
        style.update(linewidth=3.2, markersize=13, zorder=5)
    return style


def compressed_budgets(rows):
    """Budgets of the rows of compressing policies (all but full), ascending."""
    return sorted({budget_of(r) for r in rows if r.get("policy") != "full"})


def group(rows, keyfn):
    out = {}
    for r in rows:
        out.setdefault(keyfn(r), []).append(r)
    return out


def primary_metric(kind):
    """(row key, label) of the number a task of this kind is judged by in the curves."""
    if kind == "longgen":
        return "agreement", "agreement with the full cache's output"
    if kind == "ppl":
        return "kl", "KL to the full cache"
    return "accuracy", "accuracy"


# ----------------------------------------------------------------------------- drawing helpers
def _save(fig, path):
    fig.savefig(path, **SAVE_KW)
    plt.close(fig)
    return path


def _infeasible_handle():
    return Line2D([], [], linestyle="none", marker="o", markerfacecolor="none",
                  markeredgecolor="#444444", markersize=7, label="hollow = infeasible")


def _plot_policy_curve(ax, xs, ys, infeas, policy, policies):
    """A line through (xs, ys); infeasible points drawn hollow."""
    st = policy_style(policy, policies)
    ax.plot(xs, ys, label=policy, color=st["color"], linewidth=st["linewidth"],
            zorder=st["zorder"])
    for x, y, bad in zip(xs, ys, infeas):
        ax.plot([x], [y], linestyle="none", marker=st["marker"], markersize=st["markersize"],
                color=st["color"], markerfacecolor="white" if bad else st["color"],
                markeredgewidth=1.6 if bad else 1.0, zorder=st["zorder"] + 0.5)


def _policy_handle(policy, policies):
    st = policy_style(policy, policies)
    return Line2D([], [], color=st["color"], marker=st["marker"], linewidth=st["linewidth"],
                  markersize=min(st["markersize"], 10), label=policy)


def _legend(fig, axes, extra=()):
    """One legend for the figure, each label once: policies (in their order) with their marker,
    then the reference lines, then `extra`."""
    seen = {}
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    references = [lab for lab in seen if lab.startswith("full") or lab == "budget"]
    policies = ordered_policies(set(seen) - set(references))
    labels = policies + references
    handles = [_policy_handle(p, policies) for p in policies] \
        + [seen[lab] for lab in references] + list(extra)
    names = labels + [h.get_label() for h in extra]
    if handles:
        fig.legend(handles, names, loc="outside right upper", fontsize=8, frameon=False)


def _budget_axis(ax, budgets):
    ax.set_xscale("log")
    ax.set_xticks(budgets)
    ax.set_xticklabels([fmt_budget(b) for b in budgets])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if len(budgets) == 1:
        ax.set_xlim(budgets[0] / 1.5, budgets[0] * 1.5)
    ax.set_xlabel("KV budget (fraction of the fp16 cache)")
    ax.grid(True, alpha=0.3)


# ----------------------------------------------------------------------------- pictures
def plot_needles(rows, outdir, task="niah", prefix="needle"):
    """One heatmap file per policy for `task`: context length x depth, panel per budget."""
    # Ablation variants and tagged runs ("policy:key=value", "policy[tag]") get curves only.
    trows = [r for r in rows if r.get("task") == task and context_of(r)
             and not any(c in r["policy"] for c in ":[")]
    if not trows:
        return []
    lengths = sorted({context_of(r) for r in trows})
    depths = sorted({num(r.get("depth")) for r in trows}, key=lambda d: (d is None, d or 0))
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("#d9d9d9")
    written = []
    by_policy = group(trows, lambda r: r["policy"])
    for policy in ordered_policies(by_policy):
        prow = by_policy[policy]
        budgets = sorted({budget_of(r) for r in prow})
        ncols = len(budgets)
        fig, axes = plt.subplots(1, ncols, figsize=(0.9 * len(lengths) * ncols + 2.2,
                                                    0.45 * len(depths) + 1.9),
                                 squeeze=False, layout="constrained")
        any_inf = False
        im = None
        for ax, b in zip(axes[0], budgets):
            grid = np.full((len(depths), len(lengths)), np.nan)
            inf = np.zeros_like(grid, dtype=bool)
            cells = group([r for r in prow if budget_of(r) == b],
                          lambda r: (num(r.get("depth")), context_of(r)))
            for (d, length), rs in cells.items():
                m = mean(r.get("accuracy") for r in rs)
                i, j = depths.index(d), lengths.index(length)
                grid[i, j] = np.nan if m is None else m
                inf[i, j] = any(is_infeasible(r) for r in rs)
            im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=1.0,
                           aspect="auto", interpolation="nearest")
            for i in range(len(depths)):
                for j in range(len(lengths)):
                    text = "–" if np.isnan(grid[i, j]) else f"{grid[i, j]:.2f}"
                    if inf[i, j]:
                        text += "*"
                        any_inf = True
                    dark = not np.isnan(grid[i, j]) and (grid[i, j] < 0.15 or grid[i, j] > 0.85)
                    ax.text(j, i, text, ha="center", va="center", fontsize=7,
                            color="white" if dark else "black")
            ax.set_xticks(range(len(lengths)))
            ax.set_xticklabels([str(x) for x in lengths], fontsize=8)
            ax.set_yticks(range(len(depths)))
            ax.set_yticklabels(["n/a" if d is None else f"{d:g}" for d in depths], fontsize=8)
            ax.set_xlabel("context length (tokens)")
            ax.set_title("full cache" if policy == "full" else f"budget {fmt_budget(b)}",
                         fontsize=9)
        axes[0][0].set_ylabel("needle depth")
        if im is not None:
            fig.colorbar(im, ax=axes[0].tolist(), shrink=0.9, label="accuracy")
        title = f"{task}: {policy}"
        if any_inf:
            title += "   (* infeasible: not an equal-bytes comparison)"
        fig.suptitle(title, fontsize=10, fontweight="bold" if policy == "qevict" else "normal")
        written.append(_save(fig, os.path.join(outdir, f"{prefix}_{policy}.png")))
    return written


def _curve_points(rows, key):
    """{policy: [(budget, mean value, any infeasible)]} over compressing policies."""
    out = {}
    for (policy, b), rs in sorted(group(rows, lambda r: (r["policy"], budget_of(r))).items()):
        if policy == "full":
            continue
        m = mean(r.get(key) for r in rs)
        if m is not None:
            out.setdefault(policy, []).append((b, m, any(is_infeasible(r) for r in rs)))
    return out


def plot_task_curve(rows, outdir, task):
    """accuracy_<task>.png (questions / longgen) or kl_<task>.png (ppl); None without data."""
    trows = [r for r in rows if r.get("task") == task]
    kind = task_kind(rows, task)
    budgets = compressed_budgets(trows)
    if not budgets:
        return None
    policies = ordered_policies({r["policy"] for r in trows})
    panels = [("kl", "KL to the full cache (log)", True), ("delta_ppl", "ΔPPL vs full", False)] \
        if kind == "ppl" else [(primary_metric(kind)[0], primary_metric(kind)[1], False)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 1.8, 4.0),
                             squeeze=False, layout="constrained")
    drew = False
    any_inf = False
    for ax, (key, label, logy) in zip(axes[0], panels):
        points = _curve_points(trows, key)
        if logy:  # KL can be 0 (identical distributions): clip to show it on the log axis
            pos = [m for pts in points.values() for _, m, _ in pts if m > 0]
            floor = min(pos) / 10 if pos else 1e-6
            points = {p: [(b, max(m, floor), i) for b, m, i in pts] for p, pts in points.items()}
            ax.set_yscale("log")
        for policy in policies:
            if policy not in points:
                continue
            bs, ms, inf = zip(*points[policy])
            _plot_policy_curve(ax, bs, ms, inf, policy, policies)
            drew = True
            any_inf = any_inf or any(inf)
        full_val = mean(r.get(key) for r in trows if r["policy"] == "full")
        if full_val is not None and not logy:
            ax.axhline(full_val, color="black", linestyle="--", linewidth=1.3,
                       label=f"full ({full_val:.2f})" if key != "delta_ppl" else "full")
        if key in ("accuracy", "agreement"):
            ax.set_ylim(-0.03, 1.05)
        _budget_axis(ax, budgets)
        ax.set_ylabel(label)
    if not drew:
        plt.close(fig)
        return None
    _legend(fig, axes, [_infeasible_handle()] if any_inf else [])
    fig.suptitle(f"{task}: {'KL / ΔPPL' if kind == 'ppl' else primary_metric(kind)[1]} "
                 "vs KV budget", fontsize=10)
    name = f"kl_{task}.png" if kind == "ppl" else f"accuracy_{task}.png"
    return _save(fig, os.path.join(outdir, name))


def plot_resident_bytes(rows, outdir):
    """resident_bytes.png: peak resident KV MiB vs context length, panel per budget."""
    qrows = [r for r in rows if r.get("kind", "questions") == "questions"] or rows
    qrows = [r for r in qrows if context_of(r) and kv(r, "peak_bytes") is not None]
    budgets = compressed_budgets(qrows)
    if not budgets:
        return None
    policies = ordered_policies({r["policy"] for r in qrows})
    full_pts = sorted((x, mean(kv(r, "peak_bytes") for r in rs) / MIB) for x, rs in
                      group([r for r in qrows if r["policy"] == "full"], context_of).items())
    ncols = min(len(budgets), 4)
    nrows = math.ceil(len(budgets) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols + 1.8, 3.6 * nrows),
                             squeeze=False, layout="constrained", sharey=True)
    any_inf = False
    for idx, b in enumerate(budgets):
        ax = axes[idx // ncols][idx % ncols]
        brows = [r for r in qrows if budget_of(r) == b and r["policy"] != "full"]
        if full_pts:
            xs, ys = zip(*full_pts)
            ax.plot(xs, ys, color="black", linestyle="--", linewidth=1.3, label="full")
        bud = sorted((x, mean(kv(r, "budget_bytes") for r in rs)) for x, rs in
                     group(brows, context_of).items())
        bud = [(x, y / MIB) for x, y in bud if y]
        if bud:
            xs, ys = zip(*bud)
            ax.plot(xs, ys, color="#555555", linestyle=":", linewidth=1.2, label="budget")
        for policy in policies:
            prs = [r for r in brows if r["policy"] == policy]
            if not prs:
                continue
            pts = sorted((x, mean(kv(r, "peak_bytes") for r in rs) / MIB,
                          any(is_infeasible(r) for r in rs))
                         for x, rs in group(prs, context_of).items())
            xs, ys, inf = zip(*pts)
            _plot_policy_curve(ax, xs, ys, inf, policy, policies)
            any_inf = any_inf or any(inf)
        contexts = sorted({context_of(r) for r in qrows})
        ax.set_xscale("log")
        ax.set_xticks(contexts)
        ax.set_xticklabels([str(c) for c in contexts], fontsize=8)
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.set_title(f"budget {fmt_budget(b)}", fontsize=9)
        ax.set_xlabel("context length (tokens)")
        if idx % ncols == 0:
            ax.set_ylabel("peak resident KV (MiB)")
    for idx in range(len(budgets), nrows * ncols):
        axes[idx // ncols][idx % ncols].set_visible(False)
    _legend(fig, axes, [_infeasible_handle()] if any_inf else [])
    fig.suptitle("peak resident KV bytes vs context length", fontsize=10)
    return _save(fig, os.path.join(outdir, "resident_bytes.png"))


def plot_fmm_steps(rows, outdir):
    """fmm_steps.png: mean missed attention mass per decode step; None without step data."""
    srows = [r for r in rows if isinstance(r.get("missed_mass_steps"), list)
             and r["missed_mass_steps"] and r["policy"] != "full"]
    if not srows:
        return None
    budgets = sorted({budget_of(r) for r in srows})
    policies = ordered_policies({r["policy"] for r in srows})
    ncols = min(len(budgets), 4)
    nrows = math.ceil(len(budgets) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols + 1.8, 3.4 * nrows),
                             squeeze=False, layout="constrained", sharey=True)
    for idx, b in enumerate(budgets):
        ax = axes[idx // ncols][idx % ncols]
        for policy in policies:
            series = [[num(v) for v in r["missed_mass_steps"]] for r in srows
                      if r["policy"] == policy and budget_of(r) == b]
            if not series:
                continue
            length = max(len(s) for s in series)
            ys = [mean(s[i] for s in series if i < len(s)) for i in range(length)]
            xs = [i for i, y in enumerate(ys) if y is not None]
            st = policy_style(policy, policies)
            ax.plot(xs, [ys[i] for i in xs], color=st["color"], linewidth=st["linewidth"] * 0.7,
                    zorder=st["zorder"], label=policy)
        ax.set_title(f"budget {fmt_budget(b)}", fontsize=9)
        ax.set_xlabel("decode step")
        if idx % ncols == 0:
            ax.set_ylabel("missed attention mass")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    for idx in range(len(budgets), nrows * ncols):
        axes[idx // ncols][idx % ncols].set_visible(False)
    _legend(fig, axes)
    fig.suptitle("share of the full cache's attention on tokens the policy no longer holds "
                 "(mean over instances)", fontsize=10)
    return _save(fig, os.path.join(outdir, "fmm_steps.png"))


def render_all(rows, outdir):
    """Every picture the rows allow; returns [(path, caption, section)] in display order:
    curves per task, resident bytes, missed mass, then the heatmaps (qevict and full first)."""
    os.makedirs(outdir, exist_ok=True)
    out = []
    for task in ordered_tasks(rows):
        path = plot_task_curve(rows, outdir, task)
        if path:
            kind = task_kind(rows, task)
            what = "KL and ΔPPL" if kind == "ppl" else primary_metric(kind)[1]
            out.append((path, f"{task}: {what} vs budget", "Quality vs budget"))
    path = plot_resident_bytes(rows, outdir)
    if path:
        out.append((path, "peak resident KV bytes vs context length", "Resident KV bytes"))
    path = plot_fmm_steps(rows, outdir)
    if path:
        out.append((path, "missed attention mass over decode steps", "Missed attention mass"))
    for task, prefix in (("niah", "needle"), ("passkey", "passkey")):
        paths = plot_needles(rows, outdir, task, prefix)
        first = [f"{prefix}_{p}.png" for p in ("qevict", "full")]
        paths.sort(key=lambda p: first.index(os.path.basename(p))
                   if os.path.basename(p) in first else len(first))
        for path in paths:
            policy = os.path.basename(path)[len(prefix) + 1:-4]
            out.append((path, f"{task}, {policy}: accuracy by context length and depth",
                        f"{task} heatmaps"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="output directory of `qevict eval` (holds rows.jsonl)")
    ap.add_argument("--out", help="where the PNGs go (default DIR/plots)")
    args = ap.parse_args()
    outdir = args.out or os.path.join(args.dir, "plots")
    try:
        rows = load_rows(args.dir)
    except OSError as e:
        print(f"plot_eval: {e}", file=sys.stderr)
        return 1
    if not rows:
        print(f"plot_eval: no rows in {args.dir}/rows.jsonl", file=sys.stderr)
        return 1
    for path, _, _ in render_all(rows, outdir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
