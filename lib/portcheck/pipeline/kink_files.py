"""The files beside a pair where its check judged it against torch's run taking Paddle's side of a ReLU kink
(backward.judged): written from the comparison (save_kinks, save_taken) and read back only when bound to the pair's
files (load_kinks, load_taken), so the hand-in checker judges as the check did.

Imports core and pipeline.guide (a pair's name, files and bp_align keys); never handin, which imports it.
"""
import os
from pathlib import Path

import numpy as np

from portcheck.core import record
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy, save_npy, writable
from portcheck.pipeline.guide import bp_key, handed_in, pair_name

# Where a pair's check judged it against torch's run taking Paddle's side of a kink (backward.judged), that run's
# part beside the pair in diagnostics/, its run record the torch side's, bound to it and to both sides' files
# (TAKEN_OF), so the checker judges as the check did and leaves out a file edited since or of other runs:
# - <pair>_taken_torch.npy, a kink Paddle crossed in a later step (a BackwardReport's taking): that run's distance
#   from torch's at each key, one figure per key, allowed SPREAD x as judge_backward allows it;
# - <pair>_branch_torch.npy, the first forward's kinks (a BackwardReport's branch): torch's values on Paddle's
#   branch at each key, which stand for torch's, its float64 run moved by as much (backward.on_paddles_branch).
TAKEN = "_taken_torch.npy"
BRANCH = "_branch_torch.npy"
TAKEN_OF = "taken_of"  # its run record's field: {side: the fingerprint of the pair's file the run was judged with}
# {suffix: (what its run is, what its file holds, whether a value fits the torch file's value at its key)}
BOUND = {
    TAKEN: ("torch's run taking Paddle's side of a kink", "one figure >= 0 per key of the pair",
            lambda v, t: v.shape == (1,) and v.dtype.kind == "f" and np.isfinite(v[0]) and v[0] >= 0),
    BRANCH: ("torch's run on Paddle's branch of the first forward's kinks",
             "finite values of the torch file's keys, each its shape and dtype",
             lambda v, t: v.shape == np.shape(t) and v.dtype == np.asarray(t).dtype and bool(np.all(np.isfinite(v)))),
}


def taken_figures(comparison, torch_file) -> dict:
    """{pair key: [figure]} of a comparison judged with torch's taking run (a BackwardReport's taking), for the keys
    the pair's torch file holds; {} for any other comparison."""
    taking = getattr(comparison, "taking", None) or {}
    out = {bp_key(k): np.asarray(v, np.float64).reshape(-1)[:1] for k, v in taking.items() if np.size(v) == 1}
    keys = set(load_npy(torch_file)) if out else ()
    return {k: v for k, v in out.items() if k in keys}


def on_branch_line(pair: str) -> str:
    """The line of a pair judged with its BRANCH file."""
    return (f"{pair}{BRANCH}: {BOUND[BRANCH][0]} judged in place of torch's run, its float64 run moved by as much "
            "(backward.on_paddles_branch), as the pair's check judged")


def branch_values(comparison, torch_file) -> dict:
    """{pair key: torch's value on Paddle's branch} of a comparison judged so (a BackwardReport's branch), for the keys
    the pair's torch file holds; {} for any other comparison."""
    branch = {bp_key(k): v for k, v in (getattr(comparison, "branch", None) or {}).items() if bp_key(k)}
    keys = set(load_npy(torch_file)) if branch else ()
    return {k: v for k, v in branch.items() if k in keys}


def _taken_of(torch_file, paddle_file) -> dict:
    return {side: record.result_fingerprint(f) for side, f in (("torch", torch_file), ("paddle", paddle_file))}


def save_taken(folder, pair: str, figures: dict, suffix: str = TAKEN) -> Path:
    """Write `figures` (taken_figures; suffix BRANCH: branch_values) as <pair><suffix> beside the pair, its record the
    torch side's bound to it and to the pair's two files (record.save_derived)."""
    folder, pair = Path(folder), pair_name(pair)
    path, torch_file, paddle_file = folder / f"{pair}{suffix}", *handed_in(folder, pair)[:2]
    writable(path)
    writable(record.path_for(path))
    save_npy(path, figures)
    record.save_derived(torch_file, path, extra={TAKEN_OF: _taken_of(torch_file, paddle_file)})
    return path


def save_kinks(folder, pair: str, comparison) -> list:
    """The runs taking Paddle's side of a kink a comparison was judged with (BOUND), each written beside the pair;
    [a line per run that diverged]: its keys holding NaN or Inf (the runs' values grown past float32's range from
    that step on) are left out of its file, which holds finite figures only, and the pair is judged there without
    it (as strictly as with no such run); the line says the first step."""
    torch_file, lines = handed_in(Path(folder), pair)[0], []
    for suffix, made in ((TAKEN, taken_figures), (BRANCH, branch_values)):
        figures = made(comparison, torch_file)
        bad = sorted((k for k, v in figures.items() if not np.all(np.isfinite(v))), key=_step)
        if bad:
            lines.append(f"{pair}{suffix}: {BOUND[suffix][0]} diverged, NaN or Inf from step {_step(bad[0])} on "
                         f"({', '.join(bad[:4])}{', ...' if len(bad) > 4 else ''}): those keys are judged without it")
            figures = {k: v for k, v in figures.items() if k not in bad}
        if figures:
            save_taken(folder, pair, figures, suffix)
    return lines


def _step(key: str) -> int:
    """The step of a bp_align key (loss_3: 3)."""
    tail = key.rpartition("_")[2]
    return int(tail) if tail.isdigit() else -1


def load_taken(path, torch_file, paddle_file, torch_record, suffix: str = TAKEN) -> tuple:
    """({key: figure (TAKEN) or array (BRANCH)} or None, why it is left out or ""): a pair's file of that suffix, used
    only when its record is bound to it, is the torch side's (torch_record: the torch file's run record, its path) and
    was written for these two files; a file that does not hold what BOUND says is a PipelineError (red)."""
    path, (what, holds, fits) = Path(path), BOUND[suffix]
    if not os.path.lexists(path):
        return None, ""
    figures = load_npy(path)
    torch_record = record.load(None, torch_record) if torch_record and Path(torch_record).is_file() else None
    values = load_npy(torch_file)
    if any(k not in values or not fits(np.asarray(v), values[k]) for k, v in figures.items()):
        raise PipelineError(f"{path.name} is not {what} as portcheck.pipeline.kink_files.save_taken writes it "
                            f"({holds}); run the pair's check again [PC116]")
    rec = record.load(path)
    why = "it has no run record" if rec is None else (record.bound("torch", path, rec) and (
        "its run record does not describe it (edited since its check wrote it, or another file's)")) or (
        "its run record is not the torch side's" if torch_record is None or record.differences(rec, torch_record)
        else "it was written for other files of the pair" if rec.get(TAKEN_OF) != _taken_of(torch_file, paddle_file)
        else "")
    if why:
        return None, f"{path.name} left out: {why}; the pair is judged without {what} (run its check again)"
    return {k: float(v[0]) if suffix == TAKEN else np.asarray(v) for k, v in figures.items()}, ""


def load_kinks(below, pair: str, torch_file, paddle_file, torch_record) -> tuple:
    """({suffix: load_taken's values or None} of each BOUND file of the pair in `below`, [its lines]): why one is
    left out, or that the pair is judged on torch's run on Paddle's branch."""
    used, said = {}, []
    for suffix in BOUND:
        used[suffix], line = load_taken(Path(below) / f"{pair}{suffix}", torch_file, paddle_file, torch_record, suffix)
        said += [line] if line else [on_branch_line(pair)] if suffix == BRANCH and used[suffix] else []
    return used, said
