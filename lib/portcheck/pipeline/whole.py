"""Each side's whole record behind Step 4's pair, handed in beside it and judged from the folder by the reviewer's
check.

The guide's bp_align pair holds a digest of each step (backward.updates: each weight's mean |update|, sorted, one
allowance a key, which the noisiest parameter's own spread sets): a change under that spread does not show in it (a
weight decay left out of AdamW for a bias before a BatchNorm). compare_backward judges every parameter and step, each
against torch's own error; a hand-in made through portcheck.Handin or portcheck.Side keeps what it judges, each side's
whole record (record_backward's), in diagnostics/records/ with its run record, so `python -m portcheck check`
judges it again from the folder alone (judged), beside the guide's rule. The records are held to the pair they
stand behind: each bound to its file and side by its run record, binding what the pair's binds, giving the pair's
values bit for bit (a record of another run does not, whatever its run record says), the Paddle one no copy of
torch's and holding no float64 run (torch's alone has one), and listed in the hand-in's manifest.

Imports core, forward.twin, pipeline.guide and kink_files, and gradients.backward (lazily).
"""
import os
from pathlib import Path

import numpy as np

from portcheck.core import record, report
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy, writable
from portcheck.core.record import RECORDS
from portcheck.forward.twin import F64
from portcheck.pipeline.guide import BP_ALIGN, bp_key
from portcheck.pipeline.kink_files import BOUND

SIDES = ("torch", "paddle")
JUDGED = ("bp_align",)  # the pairs whose whole records a hand-in keeps and its check judges: Step 4's
WHOLE_BYTES = 1 << 28  # each side's whole record is handed in up to this size: a large model's hand-in stays small
BACKWARD = "compare_backward, every parameter and step"
# a torch whole record's keys where it was judged otherwise than its own run holds (backward.judged across a kink:
# torch's run on Paddle's branch, or taking Paddle's side), kept beside the run's own keys, which give its pair
JUDGED_AS = "judged:"


def as_judged(own: dict, judged: dict) -> dict:
    """torch's own run, and under JUDGED_AS each key of the record it was judged as (backward.judged's keep) that is
    not the run's own value: what the check judges again."""
    return {**own, **{JUDGED_AS + k: v for k, v in judged.items() if own.get(k) is not v}}


def _of_pair(pair_file, whole, side: str, arrays: dict, half_record=None) -> str:
    """Why a side's whole record is not the run behind its pair's file (same_as_pair, half_record: the file's run
    record, default beside it), or that it does not give the file's values: "" where it is."""
    own = {k: v for k, v in arrays.items() if not k.startswith(JUDGED_AS)}
    return same_as_pair(half_record or record.path_for(pair_file), whole, side, arrays) or (
        "" if _gives_pair(own, pair_file) else f"its steps' figures are not the ones {Path(pair_file).name} holds")


def _gives_pair(arrays: dict, pair_file) -> bool:
    """Whether a whole record gives its pair's values bit for bit (handin.bp_align's keys: each step's figures)."""
    given, pair = {bp_key(k): v for k, v in arrays.items() if bp_key(k)}, load_npy(pair_file)
    same = lambda a, b: a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return given.keys() == pair.keys() and all(same(np.asarray(v), pair[k]) for k, v in given.items())


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
        ours = all(_of_pair(Path(folder) / f"{pair}_{side}.npy", w, side, load_npy(w)) == ""
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
    for _, target in moved:  # the records read once: _handed's answer is the places
        writable(target)
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


def judged(below, pair: str, files: dict, pair_records) -> tuple:
    """(passed, detail) of compare_backward judged again from a hand-in's whole records of a pair (below: its
    diagnostics/; files: the pair's {"torch": file, "paddle": file}; pair_records: their run records), None where it
    holds neither. Red where one is missing, is not the pair's run, the Paddle one is torch's, or a value is over its
    rule."""
    wholes = [path(below, pair, side) for side in SIDES]
    there = [os.path.lexists(w) for w in wholes]
    if not any(there):
        return None
    if not all(there):
        return False, f"{RECORDS}/{wholes[there.index(False)].name} missing beside {wholes[there.index(True)].name}"
    large = [w for w in wholes if w.lstat().st_size > WHOLE_BYTES]
    if large:  # never loaded: the writers hand in none so large
        return False, f"{RECORDS}/{large[0].name} is over the {WHOLE_BYTES >> 20} MB a hand-in keeps of a whole record"
    from portcheck.gradients.backward import judge_backward
    try:
        arrays = [load_npy(w) for w in wholes]
        for side, half, whole, rec in zip(SIDES, pair_records, wholes, arrays):
            problem = _of_pair(files[side], whole, side, rec, half)
            if problem:
                return False, f"{RECORDS}/{whole.name} is not the run of {pair}_{side}.npy ({problem})"
        copy = record.copied(*wholes, pair)
        if copy or any(k.startswith(F64) for k in arrays[1]):
            return False, (f"{RECORDS}/{wholes[1].name}: " + (copy or "it holds torch's float64 run (f64: keys), "
                                                             "which torch's record alone holds: not Paddle's record"))
        t, p = ({k: v for k, v in rec.items() if not k.startswith(JUDGED_AS)} for rec in arrays)
        kink = {k[len(JUDGED_AS):]: v for k, v in arrays[0].items() if k.startswith(JUDGED_AS)}
        if any(k.startswith(JUDGED_AS) for k in arrays[1]) or kink and not any(
                os.path.lexists(Path(below) / f"{pair}{suffix}") for suffix in BOUND):
            return False, (f"{RECORDS}/{wholes[0 if kink else 1].name} holds a run across a kink its pair's check did "
                           "not judge with (no file of it beside the pair)")
        [(_, passed, why)] = compared_beside(judge_backward({**t, **kink}, p))
    except PipelineError as e:
        return False, report.one_line(str(e))
    return passed, why


def digest_only(torch_arrays: dict) -> bool:
    """Whether a bp_align pair holds each step's figures alone (the guide's loss, lr, the library's digests:
    <kind>_<step>), nothing parameter by parameter."""
    return bool(torch_arrays) and all(k.rpartition("_")[0] in BP_ALIGN and k.rpartition("_")[2].isdigit()
                                      for k in torch_arrays)


def unjudged_line(pair: str) -> str:
    """The line of a bp_align pair judged on its figures alone: what they cannot show, and what makes the full
    comparison possible."""
    return (f"{pair}: judged on each step's figures alone (the guide's rule; a digest of each weight's mean |update| "
            "has one allowance a key, set by the noisiest parameter, and cannot show a change under that parameter's "
            f"spread); {BACKWARD} not compared: hand in with portcheck.Handin or portcheck.Side, which keep each "
            f"side's whole record ({report.DIAGNOSTICS}/{RECORDS}/) for the check to judge [PC464]")
