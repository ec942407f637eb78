"""The page a hand-in folder holds (diagnostics/report.html), held to the folder: never a second verdict that can
disagree with it.

A writer that hands files in drops the page first (record.list_handed), and writes it again once the folder is as
it leaves it (write): bound to the folder and the run its manifest seals (page data's folder and run), its verdict
the folder's (every pair judged there, as its verdict file says, beside the writer's own). `check` derives the
folder's verdict and is red in one line where the page says another, or another run (disagrees).
"""
import os
from pathlib import Path

from portcheck.core import page, record, report
from portcheck.core.report import DIAGNOSTICS


def path(top) -> Path:
    return Path(top) / DIAGNOSTICS / page.NAME


def judged(top) -> dict:
    """{pair: passed} of every pair judged into the hand-in `top`, as its verdict file (diagnostics/<pair>_diff.json)
    says; a verdict file that does not read: not passed."""
    out = {}
    below = Path(top) / DIAGNOSTICS
    for f in sorted(below.glob("*_diff.json")) if below.is_dir() else ():
        try:
            out[f.name.removesuffix("_diff.json")] = report.read_verdict(f).get("passed") is True
        except (OSError, ValueError, AttributeError, UnicodeDecodeError, RecursionError):
            out[f.name.removesuffix("_diff.json")] = False
    return out


def write(data: dict, top) -> str:
    """`data`'s page left in the hand-in `top` (diagnostics/report.html), bound to the folder as it is now: its run
    (the manifest's seal), and its verdict the folder's, green only where every pair judged there is."""
    top = Path(top)
    pairs = judged(top)
    red = [p for p, ok in pairs.items() if not ok]
    line = {"name": "the folder", "passed": not red, "text": f"the hand-in folder: {'green' if not red else 'red'} ("
            + ", ".join(f"{p} {'green' if ok else 'red'}" for p, ok in pairs.items()) + ")"} if pairs else None
    bound = {**data, "passed": bool(data.get("passed")) and not red, "folder": str(top.absolute()),
             "run": record.manifest_seal(top / DIAGNOSTICS), "pairs": pairs,
             "verdicts": [*([line] if line else []), *data.get("verdicts", [])]}
    return page.write(bound, path(top))


def disagrees(top, green: bool, whole: bool):
    """Why the page in the hand-in `top` is not the folder's verdict as `check` derives it, one phrase; None where it
    is, or where the folder holds no page. green: whether it found every pair the folder holds green (a page that
    says green must be of such a folder); whole: whether it found the folder green as a hand-in, every pair the guide
    asks for there (a page that says red must be of a folder that is not)."""
    where = path(top)
    if not os.path.lexists(where):
        return None
    name = f"{DIAGNOSTICS}/{page.NAME}"
    data = page.data_of(where)
    if data is None:
        return f"{name} is not a page portcheck wrote or its data does not read"
    run = record.manifest_seal(Path(top) / DIAGNOSTICS)
    if data.get("run") != run:
        return (f"{name} describes another run of the folder (run {str(data.get('run'))[:12]}; the folder's "
                f"manifest seals {str(run)[:12]})")
    if data.get("passed") is True and not green:
        return f"{name} says green where the folder is red"
    if data.get("passed") is not True and whole:
        return f"{name} says red where the folder is green"
    return None
