"""torch against itself: its runs again from every weight moved one ulp, with other threads (and a max pooling's
near-ties sent the other way), which a plain run's steps are allowed calibrated.SPREAD x (spread_of), and the record
keys they are held under (MOVED, SPREAD_KEY, AGAINST_KEYS).

May import portcheck.core (numpy and torch, lazily, only).
"""
import contextlib

import numpy as np

from portcheck.core import calibrated

MOVED = "moved:"  # a torch record's key prefix: its run again with every weight moved one ulp (calibrated.SPREAD)
SPREAD_KEY = "spread:"  # a torch record's key prefix: max |moved run - a further run against itself|, one figure
RUNNING = "running/"  # a record's key prefix: running/<i>, step i's digest of BatchNorm's running means
# a record's key prefix: kept<i>/<name>/<key>, a module the script keeps beside the model (an EMA copy, a teacher:
# portcheck.scripts.recorder's Run.keep) as it is when step i + 1 starts (kept0: as the steps start), in Paddle's layout
KEPT = "kept"
# a record's key prefix: kept_running/<i>, step i's digest of the running means of what the script keeps (an EMA
# copy's BatchNorm statistics, which follow the model's or are averaged: kept/<i> digests its weights alone)
KEPT_RUNNING = "kept_running/"
# what judge_backward (and portcheck run's kept modules) read of a run against itself
AGAINST_KEYS = ("loss/", "state", "final/", "weights/", RUNNING, KEPT)


@contextlib.contextmanager
def other_threads():
    """torch's CPU kernels with another thread count (half, or 2 from 1): they split their sums otherwise; and its
    max pooling's ties sent the other way (_ties_other_way). Yields _ties_other_way's list."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(n // 2 if n > 1 else 2)
    try:
        with _ties_other_way() as routed:
            yield routed
    finally:
        torch.set_num_threads(n)


@contextlib.contextmanager
def _ties_other_way():
    """torch's 2-d max pooling with the gradient of each window whose two largest values are within rounding of each
    other (calibrated.FLOOR x eps32 x the input's largest, a Crossing's floor) sent to the later of the two, where
    torch's kernel sends an exact tie to the first. Which of them is the maximum is rounding's choice: another correct
    fp32 run takes either, and the gradient moves whole from one to the other. Measured: vgg11 at 64 x 64 (batch 2),
    one window of features.3's output is tied exactly in torch's fp32 run (0.6376 twice) where Paddle's kernel, 4.8e-7
    from torch there, takes the later one: grad features.3.weight 2.6e-4 from torch's (torch's own fp32 error
    1.5e-8), and 1.7e-8 from torch's with the tie sent there. The window's value is then that later one's (within
    the floor). Yields a list that holds True once a window was sent so (the run's gradients are then kept)."""
    import torch
    import torch.nn.functional as F
    plain, routed = F.max_pool2d, []

    def pool(x, *args, **kwargs):
        if kwargs.get("return_indices") or len(args) > 5 or not isinstance(x, torch.Tensor) or x.dim() < 3 \
                or not x.is_floating_point() or not x.numel():
            return plain(x, *args, **kwargs)
        kwargs.pop("return_indices", None)
        with torch.no_grad():
            top, first = plain(x, *args, return_indices=True, **kwargs)
            flat = x.detach().flatten(-2)
            rest = flat.scatter(-1, first.flatten(-2), float("-inf")).view_as(x)
            second, other = plain(rest, *args, return_indices=True, **kwargs)
            floor = calibrated.FLOOR * torch.finfo(x.dtype).eps * x.detach().abs().max()
            near = (top - second <= floor) & (top != 0)  # ReLU's zeros send nothing back: no gradient moves
        if not near.any():
            return plain(x, *args, **kwargs)
        routed.append(True)
        index = torch.where(near, torch.maximum(first, other), first)
        return x.flatten(-2).gather(-1, index.flatten(-2)).view_as(top)
    F.max_pool2d = pool
    try:
        yield routed
    finally:
        F.max_pool2d = plain


# torch's runs against itself in a plain run (calibrated.SPREAD), each moved one ulp in the context given here: the
# first kept as arrays (moved: keys), any further one as one figure per key (spread:). One run with other threads:
# tools/bench_k_backward.py --kinks measured candidates; a second run with oneDNN off made both kink nets green but
# hid a weight decay plant (3e-4 against 1e-4) on the ResNet-18 example, green at 0.355 of its allowance (red, 5.56,
# with this run alone; 3.64 with judged's taking run too); so did a run sending every ReLU input within rounding of 0
# to its other branch. The kink that net's Paddle crosses is judged by torch's run taking Paddle's side of it
# (backward.judged)
AGAINST_ITSELF = (other_threads,)


def moved_one_ulp(model, seed=0):
    """Every floating parameter moved one ulp up or down, the signs drawn from a seeded generator of its own (the
    same perturbation on any CPU, the global random state untouched): a rounding of the size fp32 makes, from which
    a run takes whatever branches another correct fp32 run may take."""
    import torch
    signs = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                up = torch.randint(0, 2, p.shape, generator=signs, dtype=torch.bool)
                p.copy_(torch.nextafter(p, torch.where(up, torch.tensor(float("inf"), dtype=p.dtype),
                                                       torch.tensor(float("-inf"), dtype=p.dtype))))


def against_itself(runs, keys=AGAINST_KEYS) -> dict:
    """torch's runs against itself, one per AGAINST_ITSELF in its order (record_backward's, or portcheck run's
    further runs of the user's torch script), as a torch record holds them: the first's `keys` as arrays
    (MOVED), each further one as one figure per key (SPREAD_KEY), no second copy of the weights."""
    moved = {}
    for i, run in enumerate(runs):
        run = {k: v for k, v in run.items() if k.startswith(keys)}
        if not i:
            moved = {MOVED + k: v for k, v in run.items()}
            continue
        for k, v in run.items():
            moved[SPREAD_KEY + k] = np.maximum(moved.get(SPREAD_KEY + k, 0.0), distance(moved[MOVED + k], v))
    return moved


def spread_of(record: dict, key: str):
    """torch against itself at a key of a plain run's steps (calibrated.SPREAD): its run against the moved one, and
    the moved one against the second (SPREAD_KEY); None where the record holds no moved run of it."""
    a, other = record.get(key), record.get(MOVED + key)
    if a is None or other is None or np.shape(other) != np.shape(a):
        return None
    spread = max(float(distance(a, other)[0]), float(np.max(record.get(SPREAD_KEY + key, 0.0))))
    return spread if np.isfinite(spread) else None


def distance(a, b) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.array([np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0)])
