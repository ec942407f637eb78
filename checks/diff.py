"""The one comparison every check uses: two dicts of arrays in, a CheckResult out.

It reads reprod_log's files (common.fileio.load_npy: a dict of numeric arrays, never
code) and fixes what reprod_log's ReprodDiffHelper gets wrong:

* a key missing on one side, a shape or dtype mismatch, NaN or Inf: failures
  (reprod_log passes NaN and silently transposes or broadcasts shapes);
* mean, max and relative abs diff are all measured; the max is held to a threshold that
  can be set per key (fnmatch patterns, first match wins);
* the verdict is data (CheckResult.passed) and the scripts exit 1 on red
  (reprod_log's report() returns nothing and exits 0).

Nothing here prints or writes: checks.report turns a CheckResult into the log and the
verdict file.
"""
import fnmatch
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from common.errors import PipelineError
from common.fileio import load_npy

SIDES = ("torch", "paddle")


@dataclass
class KeyResult:
    """One key of a pair: its diffs against its threshold, or the problems that prevented comparing."""
    key: str
    threshold: float
    passed: bool = False
    max: float = float("nan")       # max abs diff
    mean: float = float("nan")      # mean abs diff
    relative: float = float("nan")  # max abs diff / max |torch value|
    shape: tuple = ()
    problems: list = field(default_factory=list)

    @property
    def compared(self) -> bool:
        return self.max == self.max  # not NaN: the arrays could be compared


@dataclass
class Finding:
    """A verdict a check adds beside its keys (e.g. Step 1's module outputs), with the reason."""
    name: str
    passed: bool
    detail: str


@dataclass
class Table:
    """Rows of a diagnosis table, kept as data; checks.report formats it."""
    title: str
    header: tuple
    rows: list


@dataclass
class CheckResult:
    name: str                                      # the pair's name: forward, data, metric, ...
    keys: list = field(default_factory=list)       # [KeyResult], in torch's key order
    findings: list = field(default_factory=list)   # [Finding]
    notes: list = field(default_factory=list)      # figures worth a line in the log, as text
    tables: list = field(default_factory=list)     # [Table]

    @property
    def passed(self) -> bool:
        return bool(self.keys) and all(k.passed for k in self.keys) and all(f.passed for f in self.findings)

    @property
    def failed_keys(self) -> list:
        return [k for k in self.keys if not k.passed]

    def key(self, name) -> KeyResult:
        return next(k for k in self.keys if k.key == name)

    def to_json(self) -> dict:
        """The verdict file's content (checks.report.write_verdict); tables stay in the log."""
        return {"name": self.name, "passed": self.passed,
                "keys": [{**asdict(k), "shape": list(k.shape)} for k in self.keys],
                "findings": [asdict(f) for f in self.findings], "notes": list(self.notes)}


def threshold_for(key: str, thresholds, default: float) -> float:
    if isinstance(thresholds, (int, float)):
        return float(thresholds)
    for pattern, value in (thresholds or {}).items():
        if fnmatch.fnmatchcase(key, pattern):
            return float(value)
    return default


def compare_key(key, x, y, threshold: float) -> KeyResult:
    r = KeyResult(key, threshold=threshold)
    if x.dtype != y.dtype:
        r.problems.append(f"dtype {SIDES[0]} {x.dtype} vs {SIDES[1]} {y.dtype}")
    if x.shape != y.shape:
        r.problems.append(f"shape {SIDES[0]} {x.shape} vs {SIDES[1]} {y.shape}")
        return r
    r.shape = tuple(x.shape)
    for side, v in zip(SIDES, (x, y)):
        if v.dtype.kind == "f" and not np.isfinite(v).all():
            r.problems.append(f"{int(np.isnan(v).sum())} NaN and {int(np.isinf(v).sum())} Inf in {side}")
    diff = np.abs(x.astype(np.float64) - y.astype(np.float64))
    if diff.size:
        scale = float(np.abs(x.astype(np.float64)).max())
        r.mean, r.max = float(diff.mean()), float(diff.max())
        r.relative = r.max / scale if scale > 0 else (0.0 if r.max == 0 else float("inf"))
    else:
        r.mean = r.max = r.relative = 0.0
    if x.dtype.kind in "biu" and not r.problems:
        unequal = int(np.count_nonzero(x != y))  # exactly: float64 merges integers above 2^53
        if unequal:
            r.problems.append(f"{unequal} of {x.size} integers differ")
    if not r.problems and not r.max <= r.threshold:
        r.problems.append(f"max diff {r.max:.3e} > threshold {r.threshold:.1e}")
    r.passed = not r.problems
    return r


def same_scalar(x, y) -> tuple:
    """A 0-d scalar and a [1] array are the same scalar (torch and Paddle >= 2.5 give 0-d losses, Paddle
    before 2.5 and reprod_log's examples [1]); every other shape mismatch stays a mismatch."""
    if {x.shape, y.shape} == {(), (1,)}:
        return x.reshape(()), y.reshape(())
    return x, y


def compare(a: dict, b: dict, thresholds=None, default: float = 1e-6, name: str = "") -> CheckResult:
    """Compare two dicts of arrays key by key; every mismatch is a failed KeyResult."""
    result = CheckResult(name)
    for key in list(a) + [k for k in b if k not in a]:
        threshold = threshold_for(key, thresholds, default)
        missing = [f"missing in {side}" for side, d in zip(SIDES, (a, b)) if key not in d]
        result.keys.append(KeyResult(key, threshold, problems=missing) if missing
                           else compare_key(key, *same_scalar(a[key], b[key]), threshold))
    return result


def load_pair(torch_path, paddle_path, how=None) -> tuple:
    """(torch dict, paddle dict) from two ReprodLogger files; a missing one names the command that makes it."""
    data = []
    for side, path in zip(SIDES, (torch_path, paddle_path)):
        if not Path(path).is_file():
            hint = f": run `{how[side]}` first" if how else ""
            raise PipelineError(f"{path} not found{hint}")
        data.append(load_npy(path))
    return tuple(data)


def select(data: dict, patterns) -> dict:
    """The keys of `data` matching any fnmatch pattern, in order."""
    return {k: v for k, v in data.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
