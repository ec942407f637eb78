"""Each side's whole record behind Step 4's pair, handed in beside it and judged from the folder by the reviewer's
check.

The guide's bp_align pair holds a digest of each step (backward.updates: each weight's mean |update|, sorted, one
allowance a key, which the noisiest parameter's own spread sets): a change under that spread does not show in it (a
weight decay left out of AdamW for a bias before a BatchNorm). compare_backward judges every parameter and step, each
against torch's own error; a hand-in made through portcheck.Handin or portcheck.Side keeps what it judges, each side's
whole record (record_backward's), in diagnostics/records/ with its run record, so `python -m portcheck check`
judges it again from the folder alone (judged), beside the guide's rule. The records are held to the pair they
stand behind: each bound to its file and side by its run record, binding what the pair's binds, the Paddle one no
copy of torch's and holding no float64 run (torch's alone has one), and listed in the hand-in's manifest.

Imports core, forward.twin, and gradients.backward (lazily).
"""
import os
from pathlib import Path

import numpy as np

from portcheck.core import record, report
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy, writable
from portcheck.core.record import RECORDS
from portcheck.forward.twin import F64

SIDES = ("torch", "paddle")
JUDGED = ("bp_align",)  # the pairs whose whole records a hand-in keeps and its check judges: Step 4's
WHOLE_BYTES = 1 << 28  # each side's whole record is handed in up to this size: a large model's hand-in stays small
BACKWARD = "compare_backward, every parameter and step"


def path(folder, pair: str, side: str) -> Path:
    """<folder>/records/<pair>_<side>.npy: a side's whole record behind a pair (a sides folder's, or a hand-in's
    diagnostics/)."""
    return Path(folder) / RECORDS / f"{pair}_{side}.npy"


def fits(arrays: dict) -> bool:
    """Whether a whole record is small enough to be handed in (WHOLE_BYTES)."""
    return sum(np.asarray(v).nbytes for v in arrays.values()) <= WHOLE_BYTES


def same_as_pair(half_record, whole, side: str, arrays: dict) -> str:
    """Why a side's whole record is not the run of its pair's file (half_record: that file's run record), or "": it
    has no run record, its run record does not describe it or names another side, or binds other inputs, weights or
    flags than the pair's, or another script."""
    rec = record.load(whole)
    own = record.load(None, half_record) if half_record is not None and Path(half_record).is_file() else None
    if rec is None:
        return "it has no run record"
    return record.bound(side, whole, rec, record.fingerprint(arrays.items())) or (
        "" if own is not None and (rec["depends"], rec.get("script")) == (own["depends"], own.get("script"))
        else "its run record binds other inputs, weights or flags than the pair's, or another script")


def _handed(folder, pair: str, top) -> list:
    """[(source, target)] of a pair's whole records (and their run records) in a sides folder, for a hand-in `top`:
    both sides', each up to WHOLE_BYTES and the run of the pair's file beside it (an earlier run's is not handed in)."""
    below = Path(top) / report.DIAGNOSTICS / RECORDS
    wholes = [path(folder, pair, side) for side in SIDES] if pair in JUDGED else []
    if not (wholes and all(w.is_file() and w.stat().st_size <= WHOLE_BYTES for w in wholes)):
        return []
    try:
        ours = not any(same_as_pair(record.path_for(Path(folder) / f"{pair}_{side}.npy"), w, side, load_npy(w))
                       for side, w in zip(SIDES, wholes))
    except PipelineError:  # a record that is not one: not handed in, as one of another run
        ours = False
    return [(f, below / f.name) for w in wholes for f in (w, record.path_for(w))] if ours else []


def writable_targets(folder, pair: str, top):
    """Every place hand_in writes for a pair, checked before the first write."""
    for _, target in _handed(folder, pair, top):
        writable(target)


def hand_in(folder, pair: str, top) -> list:
    """Copy a pair's whole records from a sides folder into the hand-in `top` (diagnostics/records/), each with its run
    record, listed in the hand-in's manifest. Returns the files handed in."""
    moved = _handed(folder, pair, top)
    writable_targets(folder, pair, top)
    if moved:
        below = Path(top) / report.DIAGNOSTICS
        (below / RECORDS).mkdir(parents=True, exist_ok=True)
        for source, target in moved:
            report.copy_if_changed(source, target)
        record.list_handed(top, below, [target for _, target in moved])
    return [target for _, target in moved]


def compared_beside(comparison) -> list:
    """The comparison a step ran, judged beside its pair as part of its one verdict (judge_and_log's also=): the
    guide's bp_align pair holds a digest a change under the noisiest parameter's own spread cannot show, which
    compare_backward judges parameter by parameter. Not green where the comparison is not: red, a tie said as one,
    or too few values to judge."""
    if comparison is None:
        return []
    what = BACKWARD if hasattr(comparison, "grads") else "compare_forward, every module"
    if comparison.passed:
        return [(what, True, "every value within its rule")]
    why = (getattr(comparison, "cannot_judge", None) or [getattr(comparison, "tied_only", "")])[0] or \
        f"the runs part at {comparison.first_diverging or 'a value not judged'}"
    return [(what, False, why)]


def judged(below, pair: str, pair_records) -> tuple:
    """(passed, detail) of compare_backward judged again from a hand-in's whole records of a pair (below: its
    diagnostics/; pair_records: the run records of the pair's torch and Paddle files), None where it holds neither.
    Red where one is missing, is not the pair's run, the Paddle one is torch's, or a value is over its rule."""
    wholes = [path(below, pair, side) for side in SIDES]
    there = [os.path.lexists(w) for w in wholes]
    if not any(there):
        return None
    if not all(there):
        return False, f"{RECORDS}/{wholes[there.index(False)].name} missing beside {wholes[there.index(True)].name}"
    from portcheck.gradients.backward import judge_backward
    try:
        arrays = [load_npy(w) for w in wholes]
        for side, half, whole, rec in zip(SIDES, pair_records, wholes, arrays):
            problem = same_as_pair(half, whole, side, rec)
            if problem:
                return False, f"{RECORDS}/{whole.name} is not the run of {pair}_{side}.npy ({problem})"
        copy = record.copied(*wholes, pair)
        if copy or any(k.startswith(F64) for k in arrays[1]):
            return False, (f"{RECORDS}/{wholes[1].name}: " + (copy or "it holds torch's float64 run (f64: keys), "
                                                             "which torch's record alone holds: not Paddle's record"))
        (what, passed, why), = compared_beside(judge_backward(*arrays))
    except PipelineError as e:
        return False, report.one_line(str(e))
    return passed, why


def digest_only(torch_arrays: dict) -> bool:
    """Whether a bp_align pair holds each step's figures alone (the guide's loss, lr, the library's digests:
    <kind>_<step>), nothing parameter by parameter."""
    from portcheck.pipeline.guide import BP_ALIGN
    return bool(torch_arrays) and all(k.rpartition("_")[0] in BP_ALIGN and k.rpartition("_")[2].isdigit()
                                      for k in torch_arrays)


def unjudged_line(pair: str) -> str:
    """The line of a bp_align pair judged on its figures alone: what they cannot show, and what makes the full
    comparison possible."""
    return (f"{pair}: judged on each step's figures alone (the guide's rule; a digest of each weight's mean |update| "
            "has one allowance a key, set by the noisiest parameter, and cannot show a change under that parameter's "
            f"spread); {BACKWARD} not compared: hand in with portcheck.Handin or portcheck.Side, which keep each "
            f"side's whole record ({report.DIAGNOSTICS}/{RECORDS}/) for the check to judge [PC464]")
