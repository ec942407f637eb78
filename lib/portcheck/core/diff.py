"""The one comparison every check uses: two dicts of arrays in, a CheckResult out.

It reads reprod_log's files (portcheck.core.fileio.load_npy: a dict of numeric arrays, never
code) and fixes what reprod_log's ReprodDiffHelper gets wrong:

* a key missing on one side, a shape or dtype mismatch, NaN or Inf, unequal integers (at any
  threshold): failures
  (reprod_log passes NaN and silently transposes or broadcasts shapes);
* mean, max and relative abs diff are all measured; each key is held to a tolerance
  (portcheck.core.tolerances.Tol: max diff <= atol + rtol * max |torch|, and mean diff under the
  guide's bound) that can be set per key (fnmatch patterns, first match wins);
* the verdict is data (CheckResult.passed) and the scripts exit 1 on red
  (reprod_log's report() returns nothing and exits 0).

Nothing here prints or writes: portcheck.core.report turns a CheckResult into the log and the
verdict file.
"""
import fnmatch
import re
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from portcheck.core.errors import PipelineError, require
from portcheck.core.fileio import load_npy
from portcheck.core.keys import ROOT
from portcheck.core.tolerances import Tol

SIDES = ("torch", "paddle")
# A port as exact as torch is its own fp32 error from the exact value, as torch's result is: the two differ on the
# mean by up to the sum, twice torch's own (|paddle - torch| <= |paddle - exact| + |torch - exact|). A bound on the
# mean under twice torch's own error holds a correct port to a coin's toss: paddlenlp's CLIP logits (x 14.3, the
# logit scale) were 1.19e-6 from torch's, torch's own 7.0e-7, the guide's bound 1e-6
BOTH_SIDES = 2.0
EMPTY = "empty: nothing compared"  # an empty array (an empty batch) is never a pass
# a result's problem when its yardstick failed (torch's float64 run overflowed or stopped): red, said as not judged,
# and never named as where two runs part
NOT_JUDGED = "not judged:"
# the start of a row's problem when the other side holds nothing to compare it with: no verdict on its values
UNPAIRED = "no counterpart"


@dataclass
class KeyResult:
    """One compared key (or module output) of a pair, the one result type of every check: its figures against
    its rule, a value (tolerances.Tol: exact or atol + rtol; calibrated.Measured: K x torch's own fp32 error;
    tolerances.ReprodLog: the guide's own mean rule), or the problems that prevented judging it by the rule."""
    key: str
    rule: object                    # tolerances.Tol or calibrated.Measured: .allowed(result), .over(result), .mean
    shape: tuple = ()
    max: float = float("nan")       # max abs diff
    mean: float = float("nan")      # mean abs diff
    scale: float = float("nan")     # max |torch value| (its float64 run's, where there is one)
    relative: float = float("nan")  # max / scale
    err32: float = float("nan")     # max |torch fp32 - torch fp64|: torch's own fp32 error (the measured rule's)
    own_mean: float = float("nan")  # mean |torch fp32 - torch fp64|: where it exceeds the mean bound, no port can
    problems: list = field(default_factory=list)  # a key missing, a shape, dtype, NaN or integer problem
    input_ok: Optional[bool] = None  # its input within its rule (None: no input recorded)
    input_unsourced: str = ""  # its input differs and no module output it: the module whose forward read it
    #                            (a buffer, a value computed there), its caller; "" otherwise
    by_design: str = ""  # a difference the two libraries make on purpose, its rule and the raw figure; max and
    #                      mean are then what is left once the rule is applied, judged as any other result
    notes: list = field(default_factory=list)  # what the rule's judge did and passed silently (reprod_log's
    #                                            transposes, broadcasts and NaN): said, never a failure

    @property
    def name(self) -> str:
        return self.key

    @property
    def problem(self) -> str:
        return "; ".join(self.problems)

    @property
    def judged(self) -> bool:
        """False when its yardstick failed (NOT_JUDGED): no verdict on the port, only on the library's run."""
        return not any(p.startswith(NOT_JUDGED) for p in self.problems)

    @property
    def mean_bound(self) -> Optional[float]:
        """The guide's bound on the mean abs diff; None: not applied."""
        return self.rule.mean

    @property
    def atol(self) -> Optional[float]:
        return getattr(self.rule, "atol", None)  # None: a rule of another kind (measured on the model)

    @property
    def rtol(self) -> Optional[float]:
        return getattr(self.rule, "rtol", None)

    @property
    def multiple(self) -> Optional[float]:
        return getattr(self.rule, "multiple", None)

    @property
    def exact(self) -> bool:
        return getattr(self.rule, "exact", False)

    @property
    def allowed(self) -> float:
        """The rule's bound on max."""
        return self.rule.allowed(self)

    @property
    def compared(self) -> bool:
        return self.max == self.max  # not NaN: the arrays could be compared

    def _nan_passes(self, figure: float) -> bool:
        """A NaN figure within a rule that tests `figure > bound` (reprod_log's: tolerances.ReprodLog)."""
        return figure != figure and getattr(self.rule, "nan_passes", False)

    @property
    def max_ok(self) -> bool:
        return self.max <= self.allowed or self._nan_passes(self.max)

    @property
    def mean_ok(self) -> bool:
        return self.mean_bound is None or self.mean <= self.mean_bound or self._nan_passes(self.mean)

    @property
    def passed(self) -> bool:
        return not self.problems and self.max_ok and self.mean_ok

    def beyond(self, bound) -> bool:
        """Red by `bound`, the guide's bound on the mean, alone, which a port as exact as torch's own fp32 result may
        miss (own_mean over it by BOTH_SIDES: each side's own error) while the max is within the measured rule: no
        port can be held to that bound on this input. The library's reports let the measured verdict decide (a
        correct port is never red there) and say the guide's beside; a caller's own stricter bound still decides,
        and a hand-in's check keeps the guide's verdict, as its reviewers judge."""
        return (not self.problems and self.max_ok and not self.mean_ok and self.mean_bound == bound
                and BOTH_SIDES * self.own_mean > self.mean_bound)

    @property
    def why(self) -> str:
        """The first thing it failed, said ("" when it passed). Where the guide's bound on the mean is below torch's
        own fp32 error there, even the exact value would fail it: said so, with both figures."""
        if self.problems:
            return self.problem
        if not self.max_ok:
            return self.rule.over(self)
        if not self.mean_ok:
            said = f"mean diff {self.mean:.3e} > the guide's bound {self.mean_bound:g}"
            if self.own_mean > self.mean_bound:
                said += (f"; torch's own fp32 result is {self.own_mean:.3e} from its float64 one on the mean, over "
                         "that bound too: no port can meet it on this input (max within its allowance)")
            elif BOTH_SIDES * self.own_mean > self.mean_bound:
                said += (f"; torch's own fp32 result is {self.own_mean:.3e} from its float64 one on the mean: a port "
                         f"as exact differs from it by up to {BOTH_SIDES:g} x that, over the bound: no port can be "
                         "held to it on this input (max within its allowance)")
            return said
        return ""

    @property
    def failures(self) -> list:
        """Its problems, else the bound it failed: what a diff log and a verdict file list."""
        return list(self.problems) or [w for w in [self.why] if w]

    @property
    def used(self) -> float:
        """max / allowed: how much of its tolerance the key uses (over 1: over tolerance)."""
        return self.max / self.allowed if self.allowed > 0 else (0.0 if self.max == 0 else float("inf"))

    @property
    def ratio(self) -> float:
        """diff / torch's own fp32 error: how many times fp32's own rounding the port differs by."""
        if self.err32 > 0:
            return self.max / self.err32
        return 0.0 if self.max == 0 else float("inf")

    def key_figures(self) -> str:
        if getattr(self.rule, "ulps", None):  # tolerances.Ulps: rounding of the value, no fp32 run to measure
            return f"max {self.max:.3g} (allowed {self.allowed:.3g}: {self.rule.ulps} ulps of the largest value)"
        floored = getattr(self.rule, "floored", None)
        if floored is not None and floored(self):  # a multiple of an error the floor dwarfs says nothing
            return (f"max {self.max:.3g} {self._within()} {self.rule.floor_said(self)}, the allowance here: torch's own fp32 "
                    f"error is {self.err32:.3g} (allowed {self.allowed:.3g})")
        decides = getattr(self.rule, "spread_decides", None)
        if decides is not None and decides(self):  # the plain run's later steps: torch's spread against itself
            return (f"max {self.max:.3g} = {self.ratio:.3g} x torch's own fp32 error, {self._within()} {self.rule.spread_said()} "
                    f"(allowed {self.allowed:.3g})")
        return f"max {self.max:.3g} = {self.ratio:.3g} x torch's own fp32 error (allowed {self.allowed:.3g})"

    def _within(self) -> str:
        return "within" if self.max <= self.allowed else "beyond"

    def to_json(self) -> dict:
        return {"key": self.key, "atol": self.atol, "rtol": self.rtol, "mean_bound": self.mean_bound,
                "passed": self.passed, "max": self.max, "mean": self.mean, "scale": self.scale, "allowed": self.allowed,
                "relative": self.relative, "shape": list(self.shape), "problems": self.failures}


@dataclass
class Finding:
    """A verdict a check adds beside its keys (e.g. Step 1's module outputs), with the reason."""
    name: str
    passed: bool
    detail: str


@dataclass
class Table:
    """Rows of a diagnosis table, kept as data; portcheck.core.report formats it."""
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
    loosened: list = field(default_factory=list)   # flags that loosened a measured tolerance (tolerances.from_flags)
    as_logged: dict = field(default_factory=dict)  # {key: {"mean": .., "max": ..}}: what reprod_log's own arithmetic
    #                                                gives where it is not the exact figure (integers it wraps)

    @property
    def passed(self) -> bool:
        return bool(self.keys) and all(k.passed for k in self.keys) and all(f.passed for f in self.findings)

    @property
    def failed_keys(self) -> list:
        return [k for k in self.keys if not k.passed]

    def key(self, name) -> KeyResult:
        return next(k for k in self.keys if k.key == name)

    def to_json(self) -> dict:
        """The verdict file's content (portcheck.core.report.write_verdict); tables stay in the log."""
        return {"name": self.name, "passed": self.passed,
                "keys": [k.to_json() for k in self.keys],
                "findings": [asdict(f) for f in self.findings], "notes": list(self.notes),
                "loosened": list(self.loosened)}


def first_diverging(results, reverse: bool = False):
    """The one rule for where two runs part, every report's: the first result out of its rule, in the order the
    values were computed, whose input was within its rule (input_ok, where one was recorded): where a bug is, not
    where it shows, since every value computed after it inherits the difference. One before it whose input differs
    and came from no module (input_unsourced: a buffer or a value its caller computed) is named instead, unless
    that first one is its caller (whose own forward made the input), other than the whole model (which names no
    place), or its caller's input differs too (the place is further out). Without input records: the first out.
    reverse: results listed in the reverse of their computing order (gradients in forward order: the
    backward pass reaches them last to first). None when every result passed."""
    out = [r for r in (reversed(results) if reverse else results) if not r.passed and r.judged]
    first = next((r for r in out if getattr(r, "input_ok", None) is not False), None)
    for lone in out[:next(i for i, r in enumerate(out) if r is first) if first else len(out)]:
        caller = getattr(lone, "input_unsourced", "")
        row = next((r for r in out if _module(r.name) == caller), None) if caller else None
        if not caller or row is not None and row.input_ok is False:
            continue  # a caller whose input differs too passed it on: the place is further out
        # a caller whose own forward made the input is named, not its reader; the whole model's names no place
        return first if first is not None and row is first and caller != ROOT else lone
    return first or (out[0] if out else None)


def _module(name: str) -> str:
    """The module of a forward row's name: "encoder" of "encoder#2", "encoder[0]", "encoder:logits"."""
    return re.split(r"[#\[:]", name, maxsplit=1)[0]


def tolerance_for(key: str, tolerances, default) -> Tol:
    """The first matching fnmatch pattern's Tol; a bare number is reprod_log's absolute threshold."""
    if not isinstance(tolerances, dict):
        tolerances = {"*": tolerances} if tolerances is not None else {}
    value = next((v for pattern, v in tolerances.items() if fnmatch.fnmatchcase(key, pattern)), default)
    return value if isinstance(value, Tol) else Tol.absolute(float(value))


def compare_key(key, x, y, tol: Tol) -> KeyResult:
    r = KeyResult(key, tol)
    if x.dtype != y.dtype:
        r.problems.append(f"dtype {SIDES[0]} {x.dtype} vs {SIDES[1]} {y.dtype}")
    if x.shape != y.shape:
        r.problems.append(f"shape {SIDES[0]} {x.shape} vs {SIDES[1]} {y.shape}")
        return r
    r.shape = tuple(x.shape)
    for side, v in zip(SIDES, (x, y)):
        if v.dtype.kind == "f" and not np.isfinite(v).all():
            r.problems.append(f"{int(np.isnan(v).sum())} NaN and {int(np.isinf(v).sum())} Inf in {side}")
    diff = abs_diff(x, y)
    if diff.size:
        # a float's |x| and largest are exact in its own type: no float64 copy of a large gradient for one value
        r.scale = float(np.abs(x if x.dtype.kind == "f" else x.astype(np.float64)).max())
        r.mean, r.max = float(diff.mean()), float(diff.max())
        r.relative = r.max / r.scale if r.scale > 0 else (0.0 if r.max == 0 else float("inf"))
    else:  # an empty array: nothing compared is never a pass
        r.mean = r.max = r.relative = r.scale = 0.0
        r.problems.append(EMPTY)
    if x.dtype.kind in "biu" and y.dtype.kind in "biu" and EMPTY not in r.problems:
        # ids, labels, counts and steps are equal or wrong: exactly, at any threshold, whatever their two dtypes
        # (x != y would compare uint64 and int64 in float64, where 2^53 + 1 equals 2^53)
        unequal = int(np.count_nonzero(diff))
        if unequal:
            r.problems.append(f"{unequal} of {x.size} integers differ (integers compare exactly)")
    return r


def abs_diff(x, y) -> np.ndarray:
    """|x - y| in float64. Integers beyond 2^53 are subtracted as Python integers first: float64 would merge
    2^53 and 2^53 + 1 into one value, a diff of 0 at any threshold, where the exact diff is 1."""
    big = 2 ** 53
    if x.dtype.kind in "biu" and y.dtype.kind in "biu" and x.size and not (
            -big <= int(x.min()) and int(x.max()) <= big and -big <= int(y.min()) and int(y.max()) <= big):
        return np.abs(x.astype(object) - y.astype(object)).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: a NaN, which every caller says
        if x.dtype.kind == "f" and y.dtype.kind == "f":  # the same float64 values, cast as they are read, not copied
            out = np.subtract(x, y, dtype=np.float64)
            return np.abs(out, out=out) if out.ndim else np.abs(out)  # 0-d: a scalar, as before
        return np.abs(x.astype(np.float64) - y.astype(np.float64))


def same_scalar(x, y) -> tuple:
    """A 0-d scalar and a [1] array are the same scalar (torch and Paddle >= 2.5 give 0-d losses, Paddle
    before 2.5 and reprod_log's examples [1]); every other shape mismatch stays a mismatch."""
    if {x.shape, y.shape} == {(), (1,)}:
        return x.reshape(()), y.reshape(())
    return x, y


def compare(a: dict, b: dict, tolerances=None, default=1e-6, name: str = "") -> CheckResult:
    """Compare two dicts of arrays key by key; every mismatch is a failed KeyResult.

    tolerances: {fnmatch pattern: Tol or number} (first match wins), one Tol or number for all keys,
    or None; keys no pattern matches get `default`. A number is reprod_log's absolute threshold
    (its default, 1e-6, on max and mean alike).
    """
    result = CheckResult(name)
    for key in list(a) + [k for k in b if k not in a]:
        tol = tolerance_for(key, tolerances, default)
        missing = [f"missing in {side}" for side, d in zip(SIDES, (a, b)) if key not in d]
        result.keys.append(KeyResult(key, tol, problems=missing) if missing
                           else compare_key(key, *same_scalar(a[key], b[key]), tol))
    return result


def load_pair(torch_path, paddle_path, how=None) -> tuple:
    """(torch dict, paddle dict) from two ReprodLogger files; a missing one names the command that makes it."""
    data = []
    for side, path in zip(SIDES, (torch_path, paddle_path)):
        if how:
            require(path, how[side])
        data.append(load_npy(path))
    return tuple(data)


def select(data: dict, patterns) -> dict:
    """The keys of `data` matching any fnmatch pattern, in order."""
    return {k: v for k, v in data.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
