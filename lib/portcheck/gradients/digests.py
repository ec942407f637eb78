"""A step's digests, as a hand-in's bp_align carries them: every weight's mean |update| (updates) and BatchNorm's
running means' (running_means), sorted, without names.

May import portcheck.mapping (numpy only).
"""
import numpy as np

from portcheck.mapping.layouts import RENAMES

STATISTICS = {*RENAMES, *RENAMES.values()}  # BatchNorm's running statistics, recorded after every step
RUNNING_MEANS = {"running_mean", RENAMES["running_mean"]}  # their means, torch's name and Paddle's


def updates(before: dict, after: dict) -> np.ndarray:
    """A step's digest: every weight's mean |after - before| per element in float64, sorted. It needs no names
    (the frameworks name and order tensors otherwise), and sorting moves no value further than the two sides
    differ; an update that differs (an optimizer's epsilon, a weight decay) shows in its weight's mean, where a loss
    or a weight's norm can hide it. A mean, not a sum: a value of the size of one element's update, on the scale
    the guide's absolute bound on bp_align is set for (a sum over a conv's 2.4M elements is thousands of times
    its rounding). BatchNorm's running statistics are left out: they are not what the optimizer trains
    (running_means digests the means)."""
    return _changes(before, after, lambda name: name not in STATISTICS)


def running_means(before: dict, after: dict) -> np.ndarray:
    """A step's digest of BatchNorm's running means, as updates digests the weights: a momentum that differs
    (Paddle's m is torch's 1 - m) moves them alone, every loss and weight staying the same in train mode, so a
    hand-in without them is green from its folder while judge_backward is red. The running variances are left out:
    Paddle updates them with the biased batch variance, torch with the unbiased one (BIASED_VARIANCE), which a
    digest without names cannot take apart; judge_backward judges them by name."""
    return _changes(before, after, RUNNING_MEANS.__contains__)


def _changes(before: dict, after: dict, kept) -> np.ndarray:
    """Each float tensor's mean |after - before| in float64, sorted, of the tensors whose last name kept() keeps;
    one tensor under two names (Paddle's RNN weight_ih_l0 and 0.cell.weight_ih, a head tied to its embedding: one
    side lists it twice, the other once) counted once: the same values before and after. A tensor holding one value
    before the step is never taken for another's name: distinct BatchNorm weights at 1 (biases at 0) a small first
    step leaves bit-identical in float32 and not in float64 would be counted once in one run and twice in the other,
    and the float64 digest would not be the float32 one's length (the same test in both: their values before agree)."""
    means, seen = [], {}
    for k in after:
        if k not in before or after[k].dtype.kind != "f" or not kept(k.rsplit(".", 1)[-1]):
            continue
        b, a = before[k], after[k]
        mean = 0.0
        if a.size:  # widened inside the subtraction, abs in place: the same values, no float64 copies of a and b
            d = np.atleast_1d(np.subtract(a, b, dtype=np.float64))  # a 0-d scalar's difference is no array
            mean = float(np.abs(d, out=d).mean())
        counted = seen.setdefault((a.shape, mean), [])
        # filled asked only of a tensor that may be another's: most have a (shape, mean) of their own
        if not counted or b.size > 0 and bool((b.reshape(-1) == b.reshape(-1)[0]).all()) or not any(
                np.array_equal(a, a2) and np.array_equal(b, b2) for b2, a2 in counted):
            counted.append((b, a))
            means.append(mean)
    return np.sort(np.array(means, dtype=np.float64))
