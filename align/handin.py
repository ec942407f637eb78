"""The guide's reprod_log pairs from align's records, with run records: what a hand-in is made of.

Each side's script saves its own half (save_side): <pair>_<framework>.npy, a dict of arrays as reprod_log
writes it, with its run record beside it; the torch side also saves <pair>_torch64.npy, torch's float64
run of the same keys, so the rule measured on the model (checks/calibrated.py) can be re-derived later.
The check judges the three files (checks.handin.judge_measured), writes <pair>_diff.log in reprod_log's
format, and hand_in copies the pair and its log into a log_reprod/ folder (records and the float64 run
into its diagnostics/), which pipeline/check_log_reprod.py re-checks from the folder alone.

    rec = align.record_forward(model, images)                          # either framework
    align.handin.save_side(out, "forward", "torch", {"logits": align.handin.model_output(rec)},
                           depends, script, exact={"logits": align.handin.model_output(rec, exact=True)})
"""
from pathlib import Path

import numpy as np

from align.compare import F64, ROOT
from checks import report
from checks.handin import EXACT, judge_measured
from common import record
from common.errors import PipelineError
from common.fileio import save_npy


def model_output(rec: dict, exact: bool = False) -> np.ndarray:
    """The model's own output in a record_forward (its first tensor: a ModelOutput's logits, or the tensor)."""
    prefix = (F64 if exact else "") + f"out/{ROOT}"
    key = next((k for k in rec if k == prefix or k.startswith((prefix + "[", prefix + ":"))), None)
    if key is None:
        raise PipelineError("the record holds no model output: write it with align.record_forward")
    return rec[key]


def per_step(rec: dict, kind: str, exact: bool = False) -> dict:
    """{"<kind>_0": ..., "<kind>_1": ...} from a record_backward's loss/<i> or lr/<i>: the guide's bp_align
    and lr pairs."""
    prefix = (F64 if exact else "") + f"{kind}/"
    return {f"{kind}_{k[len(prefix):]}": v for k, v in rec.items() if k.startswith(prefix)}


def save_side(folder, pair: str, framework: str, arrays: dict, depends: dict, script: str, exact: dict = None):
    """<folder>/<pair>_<framework>.npy and its run record; with `exact` (the torch side), <pair>_torch64.npy
    and its record too. depends: what must be equal on both sides (weights, inputs, flags fingerprints)."""
    folder = Path(folder)
    path = folder / f"{pair}_{framework}.npy"
    save_npy(path, arrays)
    record.save(path, framework, script, depends)
    if exact is not None:
        save_npy(folder / f"{pair}{EXACT}", exact)
        record.save(folder / f"{pair}{EXACT}", framework, script, depends)
    return path


def judge_and_log(folder, pair: str, threshold: float, tables=()):
    """Judge <folder>/<pair>_{torch,paddle,torch64}.npy and write <pair>_diff.log (tables after the verdict
    line, where reprod_log's readers stop). Returns the checks.handin.MeasuredVerdict."""
    folder = Path(folder)
    verdict = judge_measured(pair, folder / f"{pair}_torch.npy", folder / f"{pair}_paddle.npy",
                             folder / f"{pair}{EXACT}", threshold=threshold)
    report.write_messages(verdict.messages() + [(line, False) for line in tables], folder / f"{pair}_diff.log")
    return verdict


def hand_in(folder, pair: str, top):
    """Copy a judged pair from a step's folder into a log_reprod/ folder `top`: the pair and its diff log at
    the top, the run records and the float64 run in top/diagnostics/."""
    folder = Path(folder)
    report.hand_in(folder / f"{pair}_torch.npy", folder / f"{pair}_paddle.npy", folder / f"{pair}_diff.log",
                   diagnostics=[folder / f"{pair}{EXACT}"], top=top)
