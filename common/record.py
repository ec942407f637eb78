"""What a result depends on, written beside it, so that a check can prove both sides are the same run.

Every pt_*/pd_* script saves <result>.run.json next to its .npy:

    {"framework": "torch", "script": "pipeline/Step1/pt_forward_bert.py", "written": "...",
     "depends": {"weights": "<sha256>", "inputs": "<sha256>", "flags": {...}}}

`depends` holds only what must be equal on both sides: fingerprints of the weights as loaded (in
torch's layout on both sides, so a converted Paddle model fingerprints like its source), of the input
arrays or data rows read, and the framework-independent flags. Every check compares the two records
before anything else and goes red naming the first field that differs: two results from different
weights, data or flags, or a stale one left by an earlier run, never pass. Results written by a
contestant's own scripts carry no record; the check then says so in one line and still judges the pair.
"""
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from common.errors import PipelineError
from common.fileio import atomic_write

SUFFIX = ".run.json"


def fingerprint(named_arrays) -> str:
    """sha256 over (name, dtype, shape, bytes) of every array, in name order."""
    h = hashlib.sha256()
    for name, array in sorted(named_arrays, key=lambda item: item[0]):
        array = np.ascontiguousarray(array)
        h.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        h.update(array.tobytes())
    return h.hexdigest()


def fingerprint_rows(rows) -> str:
    """sha256 of data rows ({"sentence", "label"} dicts) in order."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps([row["sentence"], int(row["label"])], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def path_for(result) -> Path:
    result = Path(result)
    return result.with_name(result.stem + SUFFIX)


def save(result, framework: str, script: str, depends: dict):
    """Write the record of `result` (the .npy it describes). Call it with the .npy's own save."""
    record = {"framework": framework, "script": script, "written": time.strftime("%Y-%m-%d %H:%M:%S"),
              "depends": depends}
    atomic_write(path_for(result), lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n"))


def load(result, path=None):
    """The record beside `result` (or at `path`), or None if there is none (a contestant's own file)."""
    path = Path(path) if path else path_for(result)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        if not isinstance(record, dict) or not isinstance(record.get("depends"), dict):
            raise ValueError("no 'depends' object")
    except (ValueError, UnicodeDecodeError) as e:
        raise PipelineError(f"{path} is not a run record ({e}); re-run the script that writes it") from None
    return record


def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differences(torch_record, paddle_record) -> list:
    """The `depends` fields that differ: [(field, torch value, paddle value)], in field order."""
    t, p = _flatten(torch_record["depends"]), _flatten(paddle_record["depends"])
    return [(k, t.get(k, "(missing)"), p.get(k, "(missing)")) for k in sorted(set(t) | set(p)) if t.get(k) != p.get(k)]


def _short(v):
    return v[:12] if isinstance(v, str) and len(v) == 64 else v


def same_run(torch_result, paddle_result, record_paths=(None, None)):
    """(passed, detail) for the two results' records (beside them, or at record_paths); passed is None
    when neither side has one."""
    records = [load(torch_result, record_paths[0]), load(paddle_result, record_paths[1])]
    if records == [None, None]:
        return None, "no run records (results written outside this pipeline): same run not proven"
    if None in records:
        side = ("torch", "paddle")[records.index(None)]
        return False, f"the {side} result has no run record: re-run both sides"
    diffs = differences(*records)
    if diffs:
        field, t, p = diffs[0]
        more = f" (and {len(diffs) - 1} more: {', '.join(d[0] for d in diffs[1:])})" if len(diffs) > 1 else ""
        return False, f"{field} differs: torch {_short(t)} vs paddle {_short(p)}{more}; re-run both sides"
    return True, f"both sides record the same {', '.join(sorted(records[0]['depends']))}"
