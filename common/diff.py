"""The one diff check every check_stepN.py uses.

It keeps reprod_log's file format (np.save of a dict of numpy arrays, as written
by ReprodLogger) and its log lines, and fixes what reprod_log gets wrong:

* a key missing on one side, a shape or dtype mismatch, NaN or Inf: failures
  (reprod_log passes NaN and silently transposes or broadcasts shapes);
* mean and max abs diff are both reported; the max is held to a threshold that
  can be set per key (fnmatch patterns, first match wins);
* check_pair() returns False on any failure and the check scripts exit 1
  (reprod_log's report() returns nothing and exits 0);
* loading never executes code: only plain dicts of numpy arrays are unpickled;
* the log is written without the logging module, so running several checks in
  one process never duplicates lines.
"""
import fnmatch
import io
import os
import pickle
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common.paths import PipelineError, log_reprod

# What np.save needs to rebuild a dict of numeric arrays, and nothing else.
_SAFE_GLOBALS = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
}


class _ArraysOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")


def _is_plain_array(v) -> bool:
    return isinstance(v, np.ndarray) and not v.dtype.hasobject and v.dtype.kind in "biuf"


def load_npy(path) -> dict:
    """Load a ReprodLogger .npy (a dict of arrays) without executing any code."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path} not found")
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = read_header(f)
            if not dtype.hasobject:
                raise ValueError(f"holds a bare {dtype} array of shape {shape}, not a dict of arrays")
            obj = _ArraysOnlyUnpickler(io.BytesIO(f.read())).load()
    except (pickle.UnpicklingError, ValueError, EOFError, OSError) as e:
        raise PipelineError(f"{path} is not a ReprodLogger .npy of numeric arrays ({e}); "
                            "re-run the script that writes it") from None
    data = obj.item() if isinstance(obj, np.ndarray) and obj.shape == () else obj
    if not isinstance(data, dict):
        raise PipelineError(f"{path} holds a {type(data).__name__}, not a dict of arrays; "
                            "re-run the script that writes it")
    bad = [k for k, v in data.items() if not isinstance(k, str) or not _is_plain_array(v)]
    if bad:
        raise PipelineError(f"{path}: keys {bad} are not numeric numpy arrays; re-run the script that writes it")
    return data


def atomic_write(path, write):
    """write(tmp_path) then rename: a kill never leaves a truncated file at path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_npy(path, data: dict):
    """Save what a ReprodLogger collected (pass logger.data), in its format, atomically."""
    bad = [k for k, v in data.items() if not _is_plain_array(v)]
    if bad:
        raise TypeError(f"values for {bad} must be numeric numpy arrays")

    atomic_write(path, lambda tmp: _np_save(tmp, data))


def save_array(path, array: np.ndarray):
    """np.save, atomically (np.save on a path would also append .npy to the temp name)."""
    atomic_write(path, lambda tmp: _np_save(tmp, array))


def _np_save(path, obj):
    with open(path, "wb") as f:
        np.save(f, obj, allow_pickle=isinstance(obj, dict))


@dataclass
class KeyResult:
    key: str
    passed: bool
    threshold: float
    mean: float = float("nan")
    max: float = float("nan")
    problems: list = field(default_factory=list)


def threshold_for(key: str, thresholds, default: float) -> float:
    if isinstance(thresholds, (int, float)):
        return float(thresholds)
    for pattern, value in (thresholds or {}).items():
        if fnmatch.fnmatchcase(key, pattern):
            return float(value)
    return default


def compare(a: dict, b: dict, thresholds=None, default: float = 1e-6, names=("torch", "paddle")) -> list:
    """Compare two dicts of arrays key by key; every mismatch is a failed KeyResult."""
    results = []
    for key in list(a) + [k for k in b if k not in a]:
        r = KeyResult(key, passed=False, threshold=threshold_for(key, thresholds, default))
        results.append(r)
        for side, d in zip(names, (a, b)):
            if key not in d:
                r.problems.append(f"missing in {side}")
        if r.problems:
            continue
        x, y = a[key], b[key]
        if x.dtype != y.dtype:
            r.problems.append(f"dtype {names[0]} {x.dtype} vs {names[1]} {y.dtype}")
        if x.shape != y.shape:
            r.problems.append(f"shape {names[0]} {x.shape} vs {names[1]} {y.shape}")
            continue
        for side, v in zip(names, (x, y)):
            if v.dtype.kind == "f" and not np.isfinite(v).all():
                r.problems.append(f"{int(np.isnan(v).sum())} NaN and {int(np.isinf(v).sum())} Inf in {side}")
        diff = np.abs(x.astype(np.float64) - y.astype(np.float64))
        r.mean, r.max = (float(diff.mean()), float(diff.max())) if diff.size else (0.0, 0.0)
        if not r.problems and not r.max <= r.threshold:
            r.problems.append(f"max diff {r.max:.3e} > threshold {r.threshold:.1e}")
        r.passed = not r.problems
    return results


class DiffLog:
    """Writes reprod_log-style lines to stdout and a fresh log file."""

    def __init__(self, path):
        self.path = Path(path)
        self.lines = []

    def info(self, msg: str, echo: bool = True):
        line = f"[{time.strftime('%Y/%m/%d %H:%M:%S')}] root INFO: {msg}"
        if echo:
            print(line)
        self.lines.append(line)

    def save(self):
        atomic_write(self.path, lambda tmp: Path(tmp).write_text("\n".join(self.lines) + "\n"))


def report(results, log: DiffLog, echo_limit: int = 20) -> bool:
    """Every key goes to the log; past echo_limit keys, only failing ones are echoed to stdout."""
    for r in results:
        echo = not r.passed or len(results) <= echo_limit
        log.info(f"{r.key}: ", echo)
        if r.mean == r.mean:  # not NaN: the arrays could be compared
            log.info(f"\tmean diff: check passed: {r.mean <= r.threshold}, value: {r.mean}", echo)
            log.info(f"\tmax diff: check passed: {r.passed}, value: {r.max}, threshold: {r.threshold}", echo)
        for p in r.problems:
            log.info(f"\tcheck passed: False, {p}", echo)
    if len(results) > echo_limit:
        log.info(f"{sum(r.passed for r in results)} of {len(results)} keys passed (all in {log.path.name})")
    passed = bool(results) and all(r.passed for r in results)
    if not results:
        log.info("no keys to compare")
    log.info("diff check passed" if passed else
             f"diff check failed: {', '.join(r.key for r in results if not r.passed) or 'nothing compared'}")
    return passed


def check_pair(torch_path, paddle_path, log_path, thresholds=None, default=1e-6, how=None, extra=None,
               hand_in=True, hand_in_keys=None) -> bool:
    """Diff a torch/paddle .npy pair, write the log, copy all three into log_reprod/ (if hand_in).

    hand_in_keys: fnmatch patterns; if given, the copies hold only those keys (for pairs too big to
    hand in whole; the log still lists every key's diff).

    how: {"torch": cmd, "paddle": cmd}, named in the error when a file is missing.
    extra(log, torch_data, paddle_data): writes more lines (figures, tables) after the report;
        log.passed holds the verdict.
    """
    data = {}
    for side, path in (("torch", torch_path), ("paddle", paddle_path)):
        if not Path(path).is_file():
            hint = f": run `{how[side]}` first" if how else ""
            raise PipelineError(f"{path} not found{hint}")
        data[side] = load_npy(path)
    log = DiffLog(log_path)
    passed = log.passed = report(compare(data["torch"], data["paddle"], thresholds, default), log)
    if extra:
        extra(log, data["torch"], data["paddle"])
    log.save()
    if not hand_in:
        return passed
    out = log_reprod()
    out.mkdir(parents=True, exist_ok=True)
    for side, p in (("torch", torch_path), ("paddle", paddle_path), (None, log_path)):
        if side and hand_in_keys:
            save_npy(out / Path(p).name, {k: v for k, v in data[side].items()
                                          if any(fnmatch.fnmatchcase(k, pat) for pat in hand_in_keys)})
        else:
            atomic_write(out / Path(p).name, lambda tmp, p=p: shutil.copyfile(p, tmp))
    return passed
