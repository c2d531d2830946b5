#!/usr/bin/env python3
"""Draws the pictures of `qevict eval` runs from the statistics of `qevict report`.

    scripts/plot_eval.py DIR [DIR ...] [--out PLOTDIR] [--qevict BIN]

Each DIR is a `qevict eval` output directory (rows.jsonl or rows.jsonl.gz, and summary.json).
`qevict report` (BIN, default build/qevict of this checkout) merges their rows and computes every
mean and 95% interval; nothing is averaged here. The pictures are drawn from its cells, one file
per model x task x prompt style x prefill mode, each only when its data is present (PLOTDIR
defaults to the first DIR's plots/):
  budget_<key>.png           the task's metric vs budget per policy, one panel per context
                             length, 95% interval bands; the full cache dashed with its band
                             (ppl: KL to the full cache, log, and ΔPPL)
  heatmap_<key>_<policy>.png accuracy by context length x needle depth, one panel per budget
                             (tasks with at least two lengths and two depths)
  memory_<key>.png           KV ledger bytes (mean resident, peak), peak pool-reserved bytes and
                             peak process RSS vs context length, one column per budget
  steps_<key>.png            missed attention mass over the decode steps of ONE instance (its
                             rows' missed_mass_steps as recorded, not averaged), one panel per
                             budget; needs a shadow run (--shadow)
Policy variants and tagged runs ("policy:key=value", "policy[tag]") are in the tables only.
Infeasible points (rows that could not meet the budget) are drawn hollow. Every policy has one
color and marker in every picture; qevict is drawn thick. PNGs carry no timestamp: the same input
gives the same bytes. scripts/render_results.py imports run_report() and render_all() from here.
"""
import argparse
import gzip
import json
import math
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile

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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_QEVICT = os.path.join(ROOT, "build", "qevict")

POLICY_ORDER = ["full", "streaming", "h2o", "tova", "snapkv", "pyramidkv", "kivi", "mikv",
                "qevict", "qevict-qa"]
KEEP_OR_DROP = ["streaming", "h2o", "tova", "snapkv", "pyramidkv"]
POLICY_COLORS = {
    "full": "#000000", "streaming": "#7f7f7f", "h2o": "#1f77b4", "tova": "#17becf",
    "snapkv": "#ff7f0e", "pyramidkv": "#8c564b", "kivi": "#9467bd", "mikv": "#2ca02c",
    "qevict": "#d62728", "qevict-qa": "#e377c2",
}
POLICY_MARKERS = {
    "full": "o", "streaming": "v", "h2o": "s", "tova": "^", "snapkv": "D", "pyramidkv": "P",
    "kivi": "X", "mikv": "o", "qevict": "*", "qevict-qa": "h",
}
EXTRA_COLORS = ["#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#5254a3"]
MIB = 1024.0 * 1024.0
PROPORTIONS = ("accuracy", "edit_similarity", "agreement", "top1_agreement")
# Patterns of the files this module writes (render_results.py removes stale ones; the last ones
# are the names older versions wrote).
OUTPUT_PATTERNS = ("budget_*.png", "heatmap_*.png", "memory_*.png", "steps_*.png",
                   "needle_*.png", "passkey_*.png", "accuracy_*.png", "kl_*.png",
                   "resident_bytes.png", "fmm_steps.png")


# ----------------------------------------------------------------------------- run directories
def rows_path(directory):
    """DIR/rows.jsonl, else DIR/rows.jsonl.gz (as committed under docs/)."""
    path = os.path.join(directory, "rows.jsonl")
    return path if os.path.exists(path) else path + ".gz"


def load_rows(directory):
    """Rows of DIR/rows.jsonl(.gz), for what is not an aggregate (counts, one instance's curve);
    malformed lines are reported on stderr and skipped."""
    path = rows_path(directory)
    rows = []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{path}:{lineno}: skipped, not JSON ({e})", file=sys.stderr)
                continue
            if isinstance(row, dict) and "task" in row and "policy" in row:
                rows.append(row)
    return rows


def load_summary(directory):
    """DIR/summary.json (the run's metadata) as a dict, or None when absent or unreadable."""
    path = os.path.join(directory, "summary.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"{path}: not read ({e})", file=sys.stderr)
        return None


def model_name(path):
    """"models/SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1" ("?" if none)."""
    return os.path.basename(str(path or "?")).removesuffix(".gguf")


# ----------------------------------------------------------------------------- qevict report
class Report:
    """The cells and paired comparisons `qevict report` computed, indexed for lookups."""

    def __init__(self, cells, comparisons, rows, replaced):
        # Budgets of the global layers (--kv-budget-scope global, docs/evaluation.md "Budget"):
        # the axis says so when every compressed cell has them; in a run that mixes the scopes
        # their cells are drawn as policies of their own, "NAME (global)".
        scopes = {c.get("budget_scope", "all") for c in cells if c["prefill_mode"] != "full"}
        self.budget_label = ("KV budget (fraction of the global layers' fp16 cache, rings on top)"
                             if scopes == {"global"} else "KV budget (fraction of the fp16 cache)")
        if len(scopes) > 1:
            cells = [dict(c, policy=c["policy"] + " (global)")
                     if c.get("budget_scope") == "global" else c for c in cells]
        self.cells = cells
        self.comparisons = comparisons
        self.rows = rows          # rows after merging
        self.replaced = replaced  # rows replaced by a later run's
        self._index = {cell_key(c): c for c in cells}

    def cell(self, model, task, style, mode, policy, budget, length=None, depth=None):
        return self._index.get((model, task, style, mode, policy, rnd(budget), length,
                                rnd(depth)))

    def tables(self):
        """[(model, task, style, mode)] of the compressed prefill modes, in report order."""
        return unique((c["model"], c["task"], c["prompt_style"], c["prefill_mode"])
                      for c in self.cells if c["prefill_mode"] != "full")

    def tasks(self):
        """[(model, task, style)] in report order."""
        return unique((c["model"], c["task"], c["prompt_style"]) for c in self.cells)

    def of(self, model, task, style, mode=None):
        """Cells of a (model, task, style), of one prefill mode when given."""
        return [c for c in self.cells if (c["model"], c["task"], c["prompt_style"])
                == (model, task, style) and (mode is None or c["prefill_mode"] == mode)]

    def lengths(self, model, task, style):
        """Lengths with cells, ascending: [None] when there are only pooled cells."""
        found = sorted({c["length"] for c in self.of(model, task, style)
                        if c["length"] is not None})
        return found or [None]

    def full_cell(self, model, task, style, length=None, depth=None):
        """The full cache's cell ("full", else a tagged run's "full[TAG]"), or None."""
        cells = [c for c in self.of(model, task, style, "full")
                 if c["length"] == length and rnd(c["depth"]) == rnd(depth)]
        cells.sort(key=lambda c: c["policy"] != "full")
        return cells[0] if cells else None

    def metric(self, model, task, style):
        """The metric the report compares this task by (its comparisons' "metric")."""
        for c in self.comparisons:
            if (c["model"], c["task"], c["prompt_style"]) == (model, task, style):
                return c["metric"]
        cells = self.of(model, task, style)
        if any("kl" in c["metrics"] for c in cells):
            return "kl"
        return "edit_similarity" if task == "longgen" else "accuracy"


def rnd(x):
    return None if x is None else round(float(x), 6)


def cell_key(c):
    return (c["model"], c["task"], c["prompt_style"], c["prefill_mode"], c["policy"],
            rnd(c["budget"]), c["length"], rnd(c["depth"]))


def unique(items):
    out, seen = [], set()
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def model_groups(dirs, summaries):
    """[(model, [dir, ...])]: the run directories of each model, in order of appearance. Rows
    written before rows carried their model say nothing about it, so each model's runs go to
    `qevict report` on their own and their cells get the model of the runs' summary.json."""
    groups = {}
    for d, summ in zip(dirs, summaries):
        groups.setdefault(model_name((summ or {}).get("model")), []).append(d)
    return list(groups.items())


def start_qevict_report(binary, dirs, out_dir):
    """Starts `BIN report -o OUT DIR...`; finish_qevict_report() waits for it."""
    cmd = [binary, "report", "-o", out_dir] + list(dirs)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
    except OSError as e:
        raise SystemExit(f"cannot run {binary} ({e}): build it (cmake --build build --target "
                         "qevict) or pass --qevict BIN") from e
    return cmd, proc, out_dir


def finish_qevict_report(started):
    """OUT/summary.json of a started report, as a dict."""
    cmd, proc, out_dir = started
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{err.strip()}")
    with open(os.path.join(out_dir, "summary.json"), encoding="utf-8") as f:
        return json.load(f)


def run_report(binary, dirs, summaries=None):
    """Report over the run directories, one `qevict report` per model (see model_groups), the
    models' reports side by side."""
    if summaries is None:
        summaries = [load_summary(d) for d in dirs]
    cells, comparisons, rows, replaced = [], [], 0, 0
    with tempfile.TemporaryDirectory(prefix="qevict-report-") as tmp:
        groups = model_groups(dirs, summaries)
        started = [start_qevict_report(binary, group_dirs, os.path.join(tmp, str(i)))
                   for i, (_, group_dirs) in enumerate(groups)]
        for (model, _), one in zip(groups, started):
            summary = finish_qevict_report(one)
            for item in summary["cells"] + summary["comparisons"]:
                item["model"] = item.get("model") or model
                item["prompt_style"] = style_key(item.get("prompt_style"), item.get("protocol"))
            cells += summary["cells"]
            comparisons += summary["comparisons"]
            rows += summary.get("rows", 0)
            replaced += summary.get("replaced", 0)
    return Report(cells, comparisons, rows, replaced)


# ----------------------------------------------------------------------------- small helpers
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


def stat(cell, metric):
    """The cell's {"mean", "lo", "hi", "n", "interval"} of a metric, or None."""
    return (cell or {}).get("metrics", {}).get(metric)


def kv_mean(cell, key):
    return num(((cell or {}).get("kv") or {}).get(key))


def is_variant(policy):
    """An ablation variant or a tagged run's policy: "qevict:recovery=exact", "mikv[bits4]"."""
    return any(ch in policy for ch in ":[")


def ordered_policies(names):
    names = set(names)
    known = [p for p in POLICY_ORDER if p in names]
    return known + sorted(names - set(POLICY_ORDER))


def slug(*parts):
    """A file-name-safe key of the parts (no spaces, brackets or colons)."""
    text = "_".join(str(p) for p in parts if p not in (None, ""))
    return re.sub(r"[^A-Za-z0-9._=-]+", "-", text).strip("-")


def metric_label(metric):
    return {"accuracy": "accuracy", "edit_similarity": "edit similarity with the full cache",
            "agreement": "token agreement with the full cache",
            "top1_agreement": "top-1 agreement with the full cache",
            "kl": "KL to the full cache", "delta_ppl": "ΔPPL vs the full cache"}.get(metric,
                                                                                    metric)


def mode_label(mode):
    return {"prompt-end": "prompt-end (the paper's setting)",
            "bounded": "bounded (512-token chunks)"}.get(mode, mode)


def title_of(key):
    model, task, style, mode = key
    return f"{model} · {task} · {style_text(style)} · {mode_label(mode)}"


# The protocol (when the questions arrive) is a condition of the prompt like its style: rows of
# the context-only protocol never share a table, a full-cache reference or a verdict with the
# question-in-prompt ones. It travels in the style key ("completion|context-only"); the
# question-in-prompt protocol, the default, adds nothing, so keys of its pages stay as they were.
CONTEXT_ONLY = "context-only"


def style_key(style, protocol):
    """The prompt style of a cell, comparison or row with its protocol folded in."""
    style = style or "chat"
    return f"{style}|{CONTEXT_ONLY}" if protocol == CONTEXT_ONLY else style


def row_style(row):
    return style_key(row.get("prompt_style"), row.get("protocol"))


def split_style(style):
    """(prompt style, protocol) of a style key; the protocol is "" for question-in-prompt."""
    base, _, protocol = style.partition("|")
    return base, protocol


def style_short(style):
    """"completion", or "completion, context-only protocol"."""
    base, protocol = split_style(style)
    return f"{base}, {protocol} protocol" if protocol else base


def style_text(style):
    """"completion prompts", or with the context-only protocol said."""
    base, protocol = split_style(style)
    text = f"{base} prompts"
    if protocol:
        text += f" · {protocol} protocol (questions asked after compression)"
    return text


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


# ----------------------------------------------------------------------------- drawing helpers
def _save(fig, path):
    fig.savefig(path, **SAVE_KW)
    plt.close(fig)
    return path


def _infeasible_handle():
    return Line2D([], [], linestyle="none", marker="o", markerfacecolor="none",
                  markeredgecolor="#444444", markersize=7, label="hollow = infeasible")


def _plot_policy_curve(ax, xs, ys, infeas, policy, policies, band=None):
    """A line through (xs, ys) with an optional (lo, hi) band; infeasible points hollow."""
    st = policy_style(policy, policies)
    ax.plot(xs, ys, label=policy, color=st["color"], linewidth=st["linewidth"],
            zorder=st["zorder"])
    if band is not None:
        ax.fill_between(xs, band[0], band[1], color=st["color"], alpha=0.08, linewidth=0,
                        zorder=st["zorder"] - 1)
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
    references = [lab for lab in seen if lab.startswith("full")]
    policies = ordered_policies(set(seen) - set(references))
    handles = [_policy_handle(p, policies) for p in policies] \
        + [seen[lab] for lab in references] + list(extra)
    names = policies + references + [h.get_label() for h in extra]
    if handles:
        fig.legend(handles, names, loc="outside right upper", fontsize=8, frameon=False)


def _budget_axis(ax, budgets, label):
    ax.set_xscale("log")
    ax.set_xticks(budgets)
    ax.set_xticklabels([fmt_budget(b) for b in budgets])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if len(budgets) == 1:
        ax.set_xlim(budgets[0] / 1.5, budgets[0] * 1.5)
    ax.set_xlabel(label)
    ax.grid(True, alpha=0.3)


def _length_axis(ax, lengths):
    ax.set_xscale("log")
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(x) for x in lengths], fontsize=8)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("context length (tokens)")
    ax.grid(True, alpha=0.3)


def _mib_axis(ax):
    """Log y axis labelled with plain numbers."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _panels(n, width, height, columns=4, **kw):
    """A grid of n panels, `columns` at most per line: (fig, [axes in order], axes array)."""
    ncols = min(n, columns)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols + 1.8, height * nrows),
                             squeeze=False, layout="constrained", **kw)
    for idx in range(n, nrows * ncols):
        axes[idx // ncols][idx % ncols].set_visible(False)
    return fig, [axes[i // ncols][i % ncols] for i in range(n)], axes


def _length_title(length):
    return "all lengths" if length is None else f"{length} tokens"


# ----------------------------------------------------------------------------- budget curves
def _budget_points(report, key, policy, metric, length):
    """[(budget, mean, lo, hi, infeasible)] of a policy's cells, by budget."""
    model, task, style, mode = key
    pts = []
    for c in report.of(model, task, style, mode):
        s = stat(c, metric)
        if c["policy"] == policy and c["length"] == length and c["depth"] is None and s:
            pts.append((rnd(c["budget"]), s["mean"], s["lo"], s["hi"], c["infeasible_n"] > 0))
    return sorted(pts)


def _draw_full(ax, cell, metric):
    """The full cache's mean (dashed) and its 95% band."""
    s = stat(cell, metric)
    if not s:
        return
    ax.axhspan(s["lo"], s["hi"], color="black", alpha=0.07, linewidth=0)
    ax.axhline(s["mean"], color="black", linestyle="--", linewidth=1.3,
               label=f"full ({s['mean']:.2f} [{s['lo']:.2f}, {s['hi']:.2f}])")


def _draw_budget_panel(ax, report, key, metric, length, policies, log=False):
    """One panel: every policy's curve and band at one length; True when it drew a policy."""
    drew = any_inf = False
    budgets = set()
    for policy in policies:
        pts = _budget_points(report, key, policy, metric, length)
        if not pts:
            continue
        bs, ms, los, his, inf = (list(x) for x in zip(*pts))
        if log:  # KL can be 0 (identical distributions): clip to show it on the log axis
            floor = 1e-5
            ms, los, his = ([max(v, floor) for v in vs] for vs in (ms, los, his))
        _plot_policy_curve(ax, bs, ms, inf, policy, policies, band=(los, his))
        budgets.update(bs)
        drew = True
        any_inf = any_inf or any(inf)
    if not log:
        model, task, style, _ = key
        _draw_full(ax, report.full_cell(model, task, style, length), metric)
    if metric in PROPORTIONS:
        ax.set_ylim(-0.03, 1.05)
    if log:
        ax.set_yscale("log")
    _budget_axis(ax, sorted(budgets) or [1.0], report.budget_label)
    ax.set_ylabel(metric_label(metric) + (" (log)" if log else ""))
    ax.set_title(_length_title(length), fontsize=9)
    return drew, any_inf


def plot_budget_curves(report, key, outdir):
    """budget_<key>.png: the task's metric(s) vs budget, panel per length; None without data."""
    model, task, style, mode = key
    metric = report.metric(model, task, style)
    metrics = [("kl", True), ("delta_ppl", False)] if metric == "kl" else [(metric, False)]
    panels = [(m, log, length) for m, log in metrics
              for length in report.lengths(model, task, style)]
    policies = ordered_policies({c["policy"] for c in report.of(model, task, style, mode)
                                 if not is_variant(c["policy"])})
    fig, axlist, axes = _panels(len(panels), 4.6, 3.6, columns=2)
    drew = any_inf = False
    for ax, (m, log, length) in zip(axlist, panels):
        d, i = _draw_budget_panel(ax, report, key, m, length, policies, log)
        drew, any_inf = drew or d, any_inf or i
    if not drew:
        plt.close(fig)
        return None
    _legend(fig, axes, [_infeasible_handle()] if any_inf else [])
    fig.suptitle(f"{title_of(key)}:\n{metric_label(metric)} vs KV budget, mean and 95% interval",
                 fontsize=10)
    return _save(fig, os.path.join(outdir, f"budget_{slug(*key)}.png"))


# ----------------------------------------------------------------------------- heatmaps
def _heat_axes(report, key):
    """(lengths, depths) of the length x depth cells, or None when fewer than 2 x 2."""
    model, task, style, _ = key
    cells = [c for c in report.of(model, task, style) if c["depth"] is not None]
    lengths = sorted({c["length"] for c in cells})
    depths = sorted({rnd(c["depth"]) for c in cells})
    return (lengths, depths) if len(lengths) >= 2 and len(depths) >= 2 else None


def _heat_grid(cells_at, lengths, depths):
    """(mean, lo, hi, infeasible) grids of a {(length, depth): cell} map."""
    shape = (len(depths), len(lengths))
    mean, lo, hi = (np.full(shape, np.nan) for _ in range(3))
    inf = np.zeros(shape, dtype=bool)
    for (length, depth), c in cells_at.items():
        s = stat(c, "accuracy")
        if s is None:
            continue
        i, j = depths.index(depth), lengths.index(length)
        mean[i, j], lo[i, j], hi[i, j] = s["mean"], s["lo"], s["hi"]
        inf[i, j] = c["infeasible_n"] > 0
    return mean, lo, hi, inf


def _draw_heat_panel(ax, grids, lengths, depths, cmap):
    mean, lo, hi, inf = grids
    im = ax.imshow(np.ma.masked_invalid(mean), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto",
                   interpolation="nearest")
    for i in range(len(depths)):
        for j in range(len(lengths)):
            v = mean[i, j]
            if np.isnan(v):
                text = "–"
            else:
                text = f"{v:.2f}{'*' if inf[i, j] else ''}\n[{lo[i, j]:.2f}, {hi[i, j]:.2f}]"
            dark = not np.isnan(v) and (v < 0.15 or v > 0.85)
            ax.text(j, i, text, ha="center", va="center", fontsize=6.5,
                    color="white" if dark else "black")
    ax.set_xticks(range(len(lengths)))
    ax.set_xticklabels([str(x) for x in lengths], fontsize=8)
    ax.set_yticks(range(len(depths)))
    ax.set_yticklabels([f"{d:g}" for d in depths], fontsize=8)
    ax.set_xlabel("context length (tokens)")
    return im


def _plot_heatmap(cells, key, policy, axes_ld, outdir):
    """heatmap_<key>_<policy>.png from the policy's length x depth cells."""
    lengths, depths = axes_ld
    budgets = sorted({rnd(c["budget"]) for c in cells})
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("#d9d9d9")
    # Fixed margins in inches (constrained layout costs a third of the drawing time here).
    panel_w, panel_h = 1.05 * len(lengths), 0.55 * len(depths)
    left, right, gap, bottom, top = 0.75, 1.25, 0.35, 0.6, 0.85
    width = left + right + len(budgets) * panel_w + (len(budgets) - 1) * gap
    if width < 7.0:  # room for the two-line title
        left, right, width = left + (7.0 - width) / 2, right + (7.0 - width) / 2, 7.0
    height = bottom + top + panel_h
    fig, axes = plt.subplots(1, len(budgets), figsize=(width, height), squeeze=False)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height, wspace=gap / panel_w)
    cax = fig.add_axes([1 - (right - 0.25) / width, bottom / height, 0.15 / width,
                        panel_h / height])
    im, any_inf = None, False
    for ax, b in zip(axes[0], budgets):
        at = {(c["length"], rnd(c["depth"])): c for c in cells if rnd(c["budget"]) == b}
        grids = _heat_grid(at, lengths, depths)
        any_inf = any_inf or bool(grids[3].any())
        im = _draw_heat_panel(ax, grids, lengths, depths, cmap)
        ax.set_title("full cache" if policy == "full" else f"budget {fmt_budget(b)}", fontsize=9)
    axes[0][0].set_ylabel("needle depth")
    fig.colorbar(im, cax=cax, label="accuracy\n(mean [95% interval])")
    title = f"{title_of(key)}:\n{policy}"
    if any_inf:
        title += "   (* infeasible rows: not an equal-bytes comparison)"
    fig.suptitle(title, fontsize=10, fontweight="bold" if policy == "qevict" else "normal")
    return _save(fig, os.path.join(outdir, f"heatmap_{slug(*key, policy)}.png"))


def plot_heatmaps(report, key, outdir):
    """[(policy, path)]: the full cache's heatmap, then each plain policy's."""
    axes_ld = _heat_axes(report, key)
    if axes_ld is None:
        return []
    model, task, style, mode = key
    out = []
    full = [c for c in report.of(model, task, style, "full")
            if c["policy"] == "full" and c["depth"] is not None]
    by_policy = {"full": full} if full else {}
    for c in report.of(model, task, style, mode):
        if c["depth"] is not None and not is_variant(c["policy"]):
            by_policy.setdefault(c["policy"], []).append(c)
    for policy in ordered_policies(by_policy):
        if any(stat(c, "accuracy") for c in by_policy[policy]):
            out.append((policy, _plot_heatmap(by_policy[policy], key, policy, axes_ld, outdir)))
    return out


# ----------------------------------------------------------------------------- memory
MEMORY_ROWS = (("mean_resident_bytes", "KV ledger, mean resident (MiB)"),
               ("peak_bytes", "KV ledger peak (MiB)"),
               ("peak_reserved_bytes", "pool-reserved peak (MiB)"),
               ("peak_rss_bytes", "process peak RSS (MiB)"))


def _memory_points(report, key, policy, budget, what):
    """[(length, MiB, infeasible)] of a policy's per-length cells (budget None: the full cache)."""
    model, task, style, mode = key
    mode = "full" if budget is None else mode
    pts = []
    for c in report.of(model, task, style, mode):
        v = kv_mean(c, what)
        if (c["policy"] == policy and c["length"] is not None and c["depth"] is None
                and v is not None and v > 0 and (budget is None or rnd(c["budget"]) == budget)):
            pts.append((c["length"], v / MIB, c["infeasible_n"] > 0))
    return sorted(pts)


def plot_memory(report, key, outdir):
    """memory_<key>.png: the KV ledger's mean resident and peak bytes, the pool-reserved peak
    and the process's peak RSS (means over instances, from the report's cells) vs length, a
    column per budget; None with fewer than two lengths."""
    model, task, style, mode = key
    lengths = [x for x in report.lengths(model, task, style) if x is not None]
    cells = [c for c in report.of(model, task, style, mode) if not is_variant(c["policy"])]
    budgets = sorted({rnd(c["budget"]) for c in cells})
    if len(lengths) < 2 or not budgets:
        return None
    policies = ordered_policies({c["policy"] for c in cells})
    fig, axes = plt.subplots(len(MEMORY_ROWS), len(budgets),
                             figsize=(3.8 * len(budgets) + 1.8, 2.6 * len(MEMORY_ROWS)),
                             squeeze=False, layout="constrained", sharey="row")
    drew = any_inf = False
    for r, (what, label) in enumerate(MEMORY_ROWS):
        for j, b in enumerate(budgets):
            ax = axes[r][j]
            full = _memory_points(report, key, "full", None, what)
            if full:
                xs, ys, _ = zip(*full)
                ax.plot(xs, ys, color="black", linestyle="--", linewidth=1.3, label="full")
            for policy in policies:
                pts = _memory_points(report, key, policy, b, what)
                if pts:
                    xs, ys, inf = zip(*pts)
                    _plot_policy_curve(ax, xs, ys, inf, policy, policies)
                    drew, any_inf = True, any_inf or any(inf)
            _length_axis(ax, lengths)
            _mib_axis(ax)
            if r < len(MEMORY_ROWS) - 1:
                ax.set_xlabel("")
            if r == 0:
                ax.set_title(f"budget {fmt_budget(b)}", fontsize=9)
            if j == 0:
                ax.set_ylabel(label, fontsize=8)
    if not drew:
        plt.close(fig)
        return None
    _legend(fig, axes, [_infeasible_handle()] if any_inf else [])
    fig.suptitle(f"{title_of(key)}: bytes vs context length (means over instances)", fontsize=10)
    return _save(fig, os.path.join(outdir, f"memory_{slug(*key)}.png"))


# ----------------------------------------------------------------------------- one instance
def _step_rows(rows, key):
    """Rows of a table key with a per-step missed-mass list."""
    model, task, style, mode = key
    return [r for r in rows if r.get("_model") == model and r.get("task") == task
            and row_style(r) == style
            and r.get("prefill_mode", "prompt-end") == mode
            and isinstance(r.get("missed_mass_steps"), list) and r["missed_mass_steps"]
            and not is_variant(str(r.get("policy")))]


def plot_instance_steps(rows, key, outdir):
    """(path, instance id) of steps_<key>.png: the missed mass at each decode step of one
    instance (the first id in order that qevict has steps for), a panel per budget."""
    srows = _step_rows(rows, key)
    ids = sorted({str(r.get("id")) for r in srows if r["policy"] == "qevict"}
                 or {str(r.get("id")) for r in srows})
    if not ids:
        return None
    srows = [r for r in srows if str(r.get("id")) == ids[0]]
    budgets = sorted({rnd(r["budget"]) for r in srows})
    policies = ordered_policies({r["policy"] for r in srows})
    fig, axlist, axes = _panels(len(budgets), 4.2, 3.4, sharey=True)
    for idx, (ax, b) in enumerate(zip(axlist, budgets)):
        for r in sorted((r for r in srows if rnd(r["budget"]) == b),
                        key=lambda r: policies.index(r["policy"])):
            ys = [num(v) for v in r["missed_mass_steps"]]
            xs = [i for i, y in enumerate(ys) if y is not None]
            st = policy_style(r["policy"], policies)
            ax.plot(xs, [ys[i] for i in xs], color=st["color"], linewidth=st["linewidth"] * 0.7,
                    zorder=st["zorder"], label=r["policy"])
        ax.set_title(f"budget {fmt_budget(b)}", fontsize=9)
        ax.set_xlabel("decode step")
        if idx % 4 == 0:
            ax.set_ylabel("missed attention mass")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    _legend(fig, axes)
    fig.suptitle(f"{title_of(key)}: instance {ids[0]}, share of the full cache's attention on "
                 "tokens the policy no longer holds", fontsize=10)
    return _save(fig, os.path.join(outdir, f"steps_{slug(*key)}.png")), ids[0]


# ----------------------------------------------------------------------------- all of them
# The pictures are drawn by a pool of forked workers (one per core), each picture on its own:
# the workers read the report and rows through this module-level slot, set before forking.
_DRAW_INPUT = {}


def _draw(job):
    kind, key = job
    report, rows, outdir = _DRAW_INPUT["report"], _DRAW_INPUT["rows"], _DRAW_INPUT["outdir"]
    if kind == "budget":
        return plot_budget_curves(report, key, outdir)
    if kind == "memory":
        return plot_memory(report, key, outdir)
    if kind == "steps":
        return plot_instance_steps(rows, key, outdir)
    return plot_heatmaps(report, key, outdir)


def draw_in_parallel(jobs, report, rows, outdir):
    """_draw(job) for every job, in order, by forked workers where the platform forks."""
    _DRAW_INPUT.update(report=report, rows=rows, outdir=outdir)
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [_draw(job) for job in jobs]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(_draw, jobs, chunksize=1)


def render_all(report, rows, outdir):
    """Every picture the report allows; returns [(path, caption, section)] in display order:
    budget curves, memory, one instance's missed mass, heatmaps (full and qevict first).
    `rows` (with "_model" set) only feed the one-instance curves."""
    os.makedirs(outdir, exist_ok=True)
    out = []
    keys = report.tables()
    kinds = ["budget", "memory", "steps", "heatmaps"]
    drawn = draw_in_parallel([(kind, key) for kind in kinds for key in keys], report, rows,
                             outdir)
    drawn = {kind: drawn[i * len(keys):(i + 1) * len(keys)] for i, kind in enumerate(kinds)}
    for key, path in zip(keys, drawn["budget"]):
        if path:
            what = metric_label(report.metric(*key[:3]))
            out.append((path, f"{title_of(key)}: {what} vs budget (95% bands)",
                        "Quality vs budget"))
    for key, path in zip(keys, drawn["memory"]):
        if path:
            out.append((path, f"{title_of(key)}: KV ledger, pool-reserved and RSS peaks vs "
                        "context length", "Bytes vs context length"))
    for key, got in zip(keys, drawn["steps"]):
        if got:
            out.append((got[0], f"{title_of(key)}: missed attention mass per decode step, "
                        f"instance {got[1]}", "Missed attention mass of one instance"))
    for key, maps in zip(keys, drawn["heatmaps"]):
        maps.sort(key=lambda pp: ["full", "qevict", "qevict-qa"].index(pp[0])
                  if pp[0] in ("full", "qevict", "qevict-qa") else 3)
        for policy, path in maps:
            out.append((path, f"{policy}: accuracy by context length and needle depth",
                        f"Heatmaps: {title_of(key)}"))
    return out


def load_run_rows(dirs, summaries):
    """Rows of every run, each marked with its model ("_model": the row's, else the run's)."""
    rows = []
    for d, summ in zip(dirs, summaries):
        for r in load_rows(d):
            r["_model"] = r.get("model") or model_name((summ or {}).get("model"))
            rows.append(r)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", metavar="DIR", help="`qevict eval` output directories")
    ap.add_argument("--out", help="where the PNGs go (default DIR/plots of the first DIR)")
    ap.add_argument("--qevict", default=DEFAULT_QEVICT,
                    help="the qevict binary that computes the statistics (default build/qevict)")
    args = ap.parse_args()
    outdir = args.out or os.path.join(args.dirs[0], "plots")
    try:
        summaries = [load_summary(d) for d in args.dirs]
        report = run_report(args.qevict, args.dirs, summaries)
        rows = load_run_rows(args.dirs, summaries)
    except OSError as e:
        print(f"plot_eval: {e}", file=sys.stderr)
        return 1
    for path, _, _ in render_all(report, rows, outdir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
