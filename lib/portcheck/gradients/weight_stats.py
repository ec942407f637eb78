"""Per-parameter weight statistics of two trained models, side by side: the guide's check for a
wrong weight-decay group.

Each framework summarises its own parameters (mean, std, L2 norm); the comparison is
numpy only. Two correct ports trained alike end with nearly the same norm in every
parameter: the paddle/torch norm ratio is close to 1 everywhere, and how close is
set by the run (fp32 drift without dropout, trajectory noise with it). A group that
one side decays and the other does not (LayerNorm, biases) shrinks on that side by
(1 - lr * weight_decay) per step, whatever its size, and departs from the rest. The
scale of "close" is taken from the best-agreeing parameters (the PERCENTILE-th
smallest |ratio - 1|), so it holds even when most parameters are in the wrong group;
a parameter is flagged beyond FLAG_FACTOR times that, and beyond FLOOR; and only if
its two norms differ by more than ABS_FLOOR, because a parameter that barely trains
and stays near zero (BERT's key biases: softmax ignores them) has a meaningless ratio.

A long run adds one more floor: DECAY_SHARE of the run's total decay shrink (see
decay_shrink). Each step removes only lr * weight_decay (5e-7 at lr 5e-5) of a weight,
a few float32 ulps, and torch's p * (1 - lr*wd) and Paddle's AdamW kernel round that
differently: over the BERT example's reference epoch (2,105 AdamW steps) every decayed matrix ends with a paddle/torch
norm ratio of 1.00001, about 2% of the 5.3e-4 shrink (a zero-gradient weight under the
same schedule: torch shrinks 5.34e-4, Paddle 5.25e-4, exact 5.26e-4). A parameter decayed
on one side only departs by about the whole shrink, so a quarter of it separates the two.
"""
import numpy as np

FLAG_FACTOR = 20.0
PERCENTILE = 10
FLOOR = 1e-6  # below this, two float32 norms are the same number
ABS_FLOOR = 1e-6
DECAY_SHARE = 0.25


def decay_shrink(lrs, weight_decay: float) -> float:
    """How much decoupled weight decay alone shrinks a parameter over steps at these lrs."""
    return float(1.0 - np.prod(1.0 - np.asarray(lrs, dtype="float64") * weight_decay))


def summarize(named_arrays) -> dict:
    """{name: float64 [mean, std, norm]} from (name, numpy array) pairs."""
    return {name: np.array([a.mean(), a.std(), np.linalg.norm(a.astype("float64"))], dtype="float64")
            for name, a in named_arrays}


HEADER = ("parameter", "torch mean", "torch std", "torch norm", "paddle mean", "paddle std", "paddle norm",
          "norm ratio", "")


def compare(torch_stats: dict, paddle_stats: dict, shrink: float = 0.0) -> tuple:
    """(rows, flagged, missing, limit): rows (name, torch mean/std/norm, paddle mean/std/norm, norm ratio, flag)
    in torch's parameter order; flagged names; names on one side only; the departure limit used.
    shrink: decay_shrink of the run, when known."""
    names = [n for n in torch_stats if n in paddle_stats]
    ratio = np.array([paddle_stats[n][2] / max(torch_stats[n][2], 1e-30) for n in names])
    departure = np.abs(ratio - 1.0)
    limit = max(FLAG_FACTOR * np.percentile(departure, PERCENTILE), FLOOR, DECAY_SHARE * shrink)
    apart = np.array([abs(paddle_stats[n][2] - torch_stats[n][2]) > ABS_FLOOR for n in names])
    rows, flagged = [], []
    for n, r, dep, far in zip(names, ratio, departure, apart):
        flag = dep > limit and far
        if flag:
            flagged.append(n)
        t, p = torch_stats[n], paddle_stats[n]
        rows.append((n, *(f"{v:.6g}" for v in t), *(f"{v:.6g}" for v in p), f"{r:.8f}", "<-- departs" if flag else ""))
    missing = sorted(set(torch_stats) ^ set(paddle_stats))
    return rows, flagged, missing, limit
