"""The judging every check shares: the library's reports turned into Judgements (one per rule it applied: its
verdict, the share of its allowance used, where it said the two part), and the guide's pairs written as a user's two
scripts write them and judged by the hand-in's own verdict. Nothing here decides a verdict: the library does."""
import contextlib
import io
import math
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from portcheck.core.calibrated import MEAN_BOUND
from portcheck.gradients.kinks import crossing_lines
from portcheck.gradients.result import LOSS_MEAN_BOUND
from portcheck.pipeline import handin


class Judgement(NamedTuple):
    """One rule the library applied to a case: its verdict, the largest share of its allowance any key used
    (measured rules: max diff / allowed; exact rules: the largest difference in units of the last place of the
    torch value, 0 when equal), and where it said the two part ("" when green)."""
    rule: str
    step: int
    passed: bool
    used: float
    where: str = ""
    detail: str = ""


def merged(settings: dict, plant: dict, side: str) -> dict:
    """A side's settings with the plant's overrides for that side (a plant changes the Paddle side)."""
    return {**settings, **((plant or {}).get(side) or {})}


def used(rows) -> float:
    """The largest max diff / allowed over measured rows (a row that could not be judged: inf)."""
    out = 0.0
    for r in rows:
        out = max(out, math.inf if r.problem else r.used)
    return out


def unjudged(rows) -> str:
    """Where a red report names no difference because its yardstick failed: the first value not judged."""
    rows = [r for r in rows if not r.judged]
    return f"not judged from {rows[0].name}" if rows else ""


def guide_only(rows, bound) -> str:
    """The rows red by the guide's mean bound alone, which torch's own fp32 misses too (KeyResult.beyond): the
    library's verdict is the measured rule's there, the guide's said beside it."""
    over = [r.name for r in rows if r.beyond(bound)]
    return (f"the guide's mean bound {bound:g} only, which torch's own fp32 misses too, at {', '.join(over[:3])}"
            if over else "")


def forward_judgements(report, step=1) -> list:
    ok, guide = all(r.passed or r.beyond(MEAN_BOUND) for r in report.paired), guide_only(report.paired, MEAN_BOUND)
    out = [Judgement("forward, every module (K=16)", step, ok and not report.stopped and bool(report.paired),
                     used(report.paired), report.first_diverging or ("" if ok else unjudged(report.paired) or "?"),
                     "; ".join([f"{s} stopped: {e}" for s, e in report.stopped.items()] + [guide] * bool(guide)))]
    if report.isolated is not None:
        ok = not report.isolation_stopped and all(r.passed for r in report.isolated)
        out.append(Judgement("forward, each module isolated (K=16)", step, ok, used(report.isolated),
                             ", ".join(report.differing) or unjudged(report.isolated)))
    return out


def backward_judgements(report, step=4) -> list:
    rows = list(report.grads) + [r for rows in report.steps for r in rows]
    lr = [r for rows in report.steps for r in rows if r.name == "lr"]
    rest = [r for r in rows if r.name != "lr"]
    rule = "compare_backward, isolated steps (K=16)" if report.isolated else "compare_backward (K=128)"
    out = []
    if report.forward is not None:
        out += forward_judgements(report.forward, step)
    guide = guide_only(rest, LOSS_MEAN_BOUND)
    # a kink judged on Paddle's branch is said green too: where, torch's and Paddle's values (its figures on
    # docs/bench/zoo_kernels.md are read from here)
    kinks = crossing_lines(report.crossed, report.on_branch, report.taken) if report.on_branch or report.taken else []
    out.append(Judgement(rule, step, all(r.passed or r.beyond(LOSS_MEAN_BOUND) for r in rest), used(rest),
                         "" if report.passed else (report.first_diverging or unjudged(rest) or "?"),
                         "; ".join(report.by_design + [guide] * bool(guide) + kinks)))
    if lr:
        out.append(Judgement("compare_backward lr rows", step, all(r.passed for r in lr), used(lr),
                             next((f"lr after step {i + 1}" for i, rows in enumerate(report.steps)
                                   for r in rows if r.name == "lr" and not r.passed), "")))
    return out


def ulps(a, b) -> float:
    """The largest |a - b| in units of the last place of max |a| (a's dtype; integers: the difference)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return math.inf
    d = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0
    if not np.issubdtype(a.dtype, np.floating):
        return d
    scale = float(np.abs(a).max()) or 1.0
    return d / (np.finfo(a.dtype).eps * scale)


def pair_judgement(folder, pair, torch_arrays, paddle_arrays, step, exact=None, after_steps=False, rule=None,
                   depends=None) -> Judgement:
    """The guide's pair written as a user's two scripts write it (portcheck.pipeline.handin.save_side) and judged by
    judge_and_log, the hand-in's own verdict: exact pairs (data, metric, lr) by ulps, computed ones (loss,
    bp_align) by the measured rule's share."""
    depends = depends or {"inputs": "zoo"}
    handin.save_side(folder, pair, "torch", torch_arrays, depends, f"zoo_{pair}_torch.py", exact=exact)
    handin.save_side(folder, pair, "paddle", paddle_arrays, depends, f"zoo_{pair}_paddle.py")
    with contextlib.redirect_stdout(io.StringIO()):  # the diff log's echo: the zoo prints its own table
        v = handin.judge_and_log(folder, pair, after_steps=after_steps)
    if v.kind == "exact" and set(torch_arrays) != set(paddle_arrays):
        figure, name = math.inf, rule or f"{pair} pair (exact)"
        where = v.first.describe() if v.first is not None else pair
    elif v.kind == "exact":
        figure = max((ulps(torch_arrays[k], paddle_arrays[k]) if k in paddle_arrays else math.inf)
                     for k in torch_arrays)
        where = v.first.describe() if v.first is not None else ""
        name = rule or f"{pair} pair (exact)"
    else:
        figure, bad = used(v.rows), [r for r in v.rows if not r.passed]
        where = bad[0].name if bad else ""
        name = rule or f"{pair} pair (measured, K={v.rows[0].multiple:g})" if v.rows else f"{pair} pair"
    if not v.passed and not where:
        where = pair
    return Judgement(name, step, v.passed, figure, where, v.describe_measured())


@contextlib.contextmanager
def folder():
    with tempfile.TemporaryDirectory(prefix="zoo_") as d:
        yield Path(d)
