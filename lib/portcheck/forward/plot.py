"""A comparison as a picture: each module's (or parameter's) difference over its allowance along the network, on a
log scale, where the two runs part marked; the ordinary (cumulative) run and each module on torch's own values
(isolate=True) side by side. ForwardReport.plot and BackwardReport.plot draw it.

What is drawn is data first (panels(): titles, names, ratios and the marked name), so a test reads where the mark
went without looking at pixels; matplotlib is imported only to draw, and is optional: the library installs with
numpy alone, and without matplotlib the plot is one line saying so.
"""
from dataclasses import dataclass, field

import numpy as np

from portcheck.core.diff import first_diverging
from portcheck.core.fileio import atomic_write

FLOOR = 1e-4  # a ratio of 0 (bit-equal) is drawn here: a log axis has no 0
LABELLED = 40  # at most this many points, each named on the axis
MISSING = "plot skipped: matplotlib is not installed (pip install matplotlib)"


@dataclass
class Panel:
    title: str
    names: list                  # along the network: run order (forward), forward order (gradients)
    ratios: list                 # max diff / allowed per name (inf: not compared: a missing key, a shape, NaN)
    marked: str = None           # where the runs part (first_diverging's), or None
    over: list = field(default_factory=list)  # every name over its allowance


def panel(title: str, rows: list, marked=None) -> Panel:
    """rows: diff.KeyResult, in the order drawn; marked: the row where the runs part (None: none)."""
    ratios = [r.used if r.compared and not r.problems else float("inf") for r in rows]
    return Panel(title, [r.name for r in rows], ratios, marked.name if marked is not None else None,
                 [r.name for r in rows if not r.passed])


def forward_panels(report) -> list:
    """A ForwardReport: the ordinary run, and with isolate=True each module on torch's own values beside it."""
    paired = report.paired
    out = [panel("cumulative: each module's output in the ordinary run", paired, first_diverging(paired))]
    if report.isolated is not None:
        rows = report.isolated
        out.append(panel("isolated: each module on torch's own input (isolate=True)", rows, first_diverging(rows)))
    return out


def backward_panels(report) -> list:
    """A BackwardReport: the first forward's panels, every gradient after the first backward (forward order; the
    mark is the first out in backward order), and every key after the last optimizer step."""
    out = forward_panels(report.forward) if report.forward is not None else []
    out.append(panel("gradients after the first backward", report.grads, first_diverging(report.grads, reverse=True)))
    if report.steps:
        rows, n = report.steps[-1], len(report.steps)
        mode = " (each step from torch's weights: isolated)" if report.isolated else " (cumulative)"
        out.append(panel(f"after step {n}{mode}", rows, report.first_in_step(n - 1)))
    return out


def draw(panels: list, path, title: str = "") -> str:
    """The panels side by side in one PNG at `path` (written whole, never half); a line saying what was done."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return MISSING
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 5), squeeze=False)
    for ax, p in zip(axes[0], panels):
        x = np.arange(len(p.names))
        y = np.asarray(p.ratios, dtype=float)
        shown = np.clip(np.where(np.isfinite(y), y, np.nan), FLOOR, None)
        top = max(10.0, np.nanmax(shown) * 3 if np.isfinite(shown).any() else 10.0)
        over = np.isin(p.names, p.over)
        ax.semilogy(x, shown, "-", color="0.75", lw=0.8)
        ax.semilogy(x[~over], shown[~over], "o", color="tab:blue", ms=3, label="within its allowance")
        ax.semilogy(x[over], np.where(np.isfinite(y[over]), shown[over], top), "o", color="tab:red", ms=4,
                    label="over (or not compared, drawn at the top)")
        ax.axhline(1.0, color="tab:red", ls="--", lw=0.8, label="the allowance (ratio 1)")
        if p.marked is not None:
            i = p.names.index(p.marked)
            ax.axvline(i, color="tab:red", lw=1.2)
            ax.annotate(f"first diverging:\n{p.marked}", (i, 1.0), xytext=(6, 12), textcoords="offset points",
                        fontsize=7, color="tab:red")
        if len(p.names) <= LABELLED:  # each module named under its point; beyond, the index alone
            ax.set_xticks(x, [n if len(n) <= 28 else "..." + n[-25:] for n in p.names], rotation=90, fontsize=6)
        ax.set_ylim(FLOOR / 2, top * 2)
        ax.set_title(p.title, fontsize=9)
        ax.set_xlabel(f"along the network ({len(p.names)} compared, in order)")
        ax.set_ylabel("max diff / allowed")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=72, metadata={"Software": None}))
    plt.close(fig)
    return f"plot: {path}"
