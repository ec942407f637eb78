"""Torch's own runs of a training as the yardstick (Step 5, judge_training's own=): how far they end from this run and
how far their weight norm parts from it step by step (own_spread), and the file a hand-in carries them in, OWN,
written (save_own) and read back only when it is this training's (load_own); torch_kernels runs one under other
kernels. Reducing the runs (own_runs) judges
each against this one, so it stays with the judge in portcheck.pipeline.training.

Imports core and pipeline.training_log (the logs' names); never training, which imports it.
"""
import contextlib
from pathlib import Path

import numpy as np

from portcheck.core import record, report
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy, save_npy
from portcheck.pipeline.training_log import LOG, METRIC

OWN = "train_own"  # train_own_torch.npy: torch's own runs of the training, as own_runs reduces them
DIAGNOSTICS_OWN = f"{report.DIAGNOSTICS}/{OWN}_torch.npy"
# With torch's own runs on the user's machine (judge_training's own=), deterministic runs: the weight norm within this
# multiple of their largest relative gap so far, step by step, and never under NORM_RTOL_ALIGNED (docs/bench/rules.md).
# Measured on the ResNet-18 example on an AMD EPYC host (AVX2), its torch run against the committed one of another
# CPU: Paddle's gap at most 5.5 times torch's own running largest (step 7, just after the loss curves part; 2e-6
# against 3.6e-7), 1.3 times by the end (2.9e-3 against 2.2e-3). A weight decay that differs is red before they part.
# Not with dropout's own masks: on the digits CNN torch parted from itself with other masks by 0.8% to 3.1% in 30
# steps, from Paddle by 2.0%, and from Paddle missing its weight decay by 2.5%: no multiple of one sample separates them.
OWN_MULTIPLE = 16.0
# The rows torch's own run may be red on against this one and still be the same training (own_runs): its final
# metric, the spread it measures, and its weight norm, which a training that parts from itself moves from the first
# step (BatchNorm's batch statistics over few values per channel amplify a weight moved one ulp: issue 62). Its
# lr, steps, data order, modes, first loss and run record still say whether it is this training.
OWN_PARTS = ("final metric", "weight norm")


@contextlib.contextmanager
def torch_kernels(threads: int, onednn: bool = True):
    """torch at `threads` intra-op threads, oneDNN on or off, both restored after: one of torch's own runs of a
    training under other kernels (another CPU's thread count splits each sum otherwise). A count metric a sum's
    order decides can end alike in every run moved one ulp on one's own kernels and flip under others
    (docs/rules.md)."""
    import torch
    before, was = torch.get_num_threads(), torch.backends.mkldnn.enabled
    torch.set_num_threads(threads)
    torch.backends.mkldnn.enabled = onednn
    try:
        yield
    finally:
        torch.set_num_threads(before)
        torch.backends.mkldnn.enabled = was


def kept_norm(param_norm, keep) -> np.ndarray:
    """The weight norm of the columns kept, summed as weight_norm sums them."""
    return np.sqrt(np.add.reduce(np.square(param_norm[:, keep]), axis=1))


def _without(weight_norm, left) -> np.ndarray:
    """A weight norm without the parameters of `left` (their norms [steps, k]), computed alike for torch's run and
    its own runs, so a run of the same bits shows a gap of 0."""
    return np.sqrt(np.maximum(np.square(weight_norm) - np.add.reduce(np.square(left), axis=1), 0.0))


def own_spread(torch_log: dict, runs: dict, left_out=()) -> tuple:
    """(how far torch's own runs (own_runs) end from this one, the largest over the final metrics; a line saying
    so; the largest relative weight-norm gap at each step, or None). left_out: the columns of parameters the
    weight norm is judged without (noise_parameters), left out of torch's gap too (a conv bias before a BatchNorm
    under Adam moves by +-lr in each of torch's runs: 1.2e-3 of the digits CNN's norm at its first step, a gap
    that hid a missing weight decay); None for the gap where the runs hold no parameter norms to leave them out of."""
    moved, said, norm = 0.0, [], None
    names = sorted(k for k in torch_log if k.startswith(METRIC))
    for i in range(len(runs["weight_norm"])):
        gaps = {n: abs(float(torch_log[n][-1]) - float(runs[n][i])) for n in names
                if n in runs and np.isfinite(runs[n][i])}
        k = max(gaps, key=gaps.get, default=None)
        if k is not None:
            moved = max(moved, gaps[k])
            said.append(f"{k[len(METRIC):]} {float(runs[k][i]):.6g}")
        w, a = runs["weight_norm"][i], torch_log.get("weight_norm")
        if len(left_out):
            kept = list(np.asarray(runs.get("noise_columns", []), np.int64))
            if "param_norm" not in runs or "param_norm" not in torch_log or not set(left_out) <= set(kept):
                continue
            at = [kept.index(c) for c in left_out]
            w, a = _without(w, runs["param_norm"][i][:, at]), _without(a, torch_log["param_norm"][:, list(left_out)])
        if a is not None and np.isfinite(w).any():
            n = min(int(np.isfinite(w).sum()), len(a))
            a = a[:n]
            if np.array_equal(a, w[:n]):  # this run's own bits again (the same CPU's): no spread, no yardstick
                continue
            rel = np.maximum.accumulate(np.abs(a - w[:n]) / np.maximum(np.abs(a), 1e-300))
            norm = rel if norm is None else np.maximum(norm[:n], rel[:len(norm)])
    return moved, "torch's own run(s) ending " + ", ".join(said) if said else "", norm


def save_own(folder, runs: dict) -> Path:
    """Write own_runs' reduction as OWN in folder, its run record the torch training log's, bound to it
    (record.save_derived): the hand-in checker judges the curves and the outcome against torch's own spread
    as check_step5 did, and leaves out a file not of this training."""
    path = Path(folder) / f"{OWN}_torch.npy"
    save_npy(path, runs)
    record.save_derived(Path(folder) / f"{LOG}_torch.npy", path)
    return path


def not_of_training(path, torch_record: dict) -> str:
    """Why the torch file at `path` is not of the training torch_record (a torch training log's run record)
    describes, "" when it is: no run record, a record not bound to the file (edited since, or another file's),
    or another training's (other weights, data order, seeds or flags)."""
    rec = record.load(path)
    return ("it has no run record" if rec is None else record.bound("torch", path, rec) or
            ("its run record is not the torch training log's" if record.differences(rec, torch_record) else ""))


def load_own(folder, torch_record: dict) -> tuple:
    """(OWN's runs or None, why it is left out or ""): the file a hand-in carries beside its torch training
    log, used only when its record is bound to it and is that log's training's (torch_record)."""
    path = Path(folder) / f"{OWN}_torch.npy"
    if not path.is_file():
        return None, ""
    problem = not_of_training(path, torch_record)
    if not problem:
        try:
            runs = load_npy(path)
        except PipelineError as e:
            problem = str(e)
        else:
            rows = runs.get("weight_norm")
            if not isinstance(rows, np.ndarray) or rows.ndim != 2 or any(
                    np.shape(v) != rows.shape[:1] for k, v in runs.items()
                    if k not in ("weight_norm", "param_norm", "noise_columns")) \
                    or np.shape(runs.get("param_norm", rows[..., None]))[:2] != rows.shape \
                    or np.shape(runs.get("param_norm", rows[..., None]))[2:] != np.shape(runs.get("noise_columns", [0])):
                problem = "it is not torch's own runs as portcheck.pipeline.training.save_own writes them"
    return (None, f"{path.name} left out: {problem}") if problem else (runs, "")


