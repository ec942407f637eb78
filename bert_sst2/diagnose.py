"""Layer-by-layer diagnosis: which module (or parameter) is the first whose values differ between the twins.

The twins share module names (bert.embeddings, bert.encoder.layer.3.attention.output, ...),
so each framework's forward script records the outputs of the same named modules, in
the order they run, with its own hooks; this module turns the comparison of the two
recordings into a table. It is the guide's manual bisection (print a middle block,
compare, move forward or back) done for every block at once.
"""
import re

import numpy as np

from portcheck.core.diff import CheckResult, Table, compare, first_diverging

# Embeddings, each layer's self-attention (context), attention block output, feed-forward
# intermediate and layer output, then pooler and classifier.
WATCHED = re.compile(r"^(bert\.embeddings|bert\.encoder\.layer\.\d+\.(attention\.self|attention\.output|intermediate|output)"
                     r"|bert\.pooler|classifier)$")
HEADER = ("name", "shape", "max abs diff", "mean abs diff", "relative", "allowed", "max/allowed", "")


def watched(named_modules) -> list:
    """[(name, module)] of the modules worth recording, from model.named_modules()/named_sublayers()."""
    return [(name, m) for name, m in named_modules if WATCHED.match(name)]


def first_over(result: CheckResult, reverse: bool = False):
    """The first key over its tolerance (max over atol + rtol * max|torch|, or mean over the guide's
    bound) in the recorded (forward) order, or None: the library's rule (diff.first_diverging)."""
    key = first_diverging(result.keys, reverse)
    return key.key if key else None


def last_over(result: CheckResult):
    """The last over in forward order: the first the backward pass reaches."""
    return first_over(result, reverse=True)


def table(result: CheckResult, title: str, worst_first: bool = False) -> Table:
    """Rows (name, shape, max, mean, relative, allowed, max/allowed, marker) of a comparison, where
    relative = max / max |torch| and allowed = atol + rtol * max |torch|; worst_first sorts by max/allowed."""
    first = first_over(result)
    keys = sorted(result.keys, key=lambda k: -k.used if k.compared else -float("inf")) if worst_first else result.keys
    rows = [(k.key, str(k.shape), k.max, k.mean, k.relative, k.allowed, k.used) if k.compared else
            (k.key, "-", "; ".join(k.problems), "", "", "", "")
            for k in keys]
    rows = [row + ("<-- first over tolerance" if k.key == first else ("" if k.passed else "over"),)
            for row, k in zip(rows, keys)]
    return Table(title, HEADER, rows)


def summary(data: dict) -> dict:
    """{key: float64 [max |x|, mean |x|, rms]}: what a hand-in keeps of arrays too big to hand in whole.
    Each statistic of the two sides differs by at most the max abs diff of the arrays (and mean |x| by at
    most their mean abs diff), so comparing them can only find a difference the full check would find."""
    out = {}
    for key, x in data.items():
        x = np.abs(x.astype(np.float64))
        out[key] = np.array([x.max(), x.mean(), np.sqrt((x * x).mean())] if x.size else [0.0, 0.0, 0.0])
    return out


def compare_stats(torch_stats: dict, paddle_stats: dict, tol) -> CheckResult:
    """summary() statistics of two sides against the tolerance of the arrays they summarise.

    |max|t| - max|p||, |mean|t| - mean|p|| and |rms t - rms p| are each at most max |t - p|, and the
    scale (max |t|) is the arrays' own, so a pair within `tol` always passes here; a tampered or
    diverged value shows as soon as it moves a statistic by more than the tolerance allows. The mean
    bound applies to the mean |x| statistic, which differs by at most the arrays' mean abs diff."""
    result = compare(torch_stats, paddle_stats, default=tol._replace(mean=None), name="statistics")
    for r in result.keys:
        if r.compared and tol.mean is not None:
            gap = abs(float(torch_stats[r.key][1]) - float(paddle_stats[r.key][1]))
            if gap > tol.mean:
                # after the bound it failed, if any: both are the key's problems now
                r.problems[:] = r.failures + [f"mean |x| differs by {gap:.3e} > the guide's bound {tol.mean:g}"]
    return result
