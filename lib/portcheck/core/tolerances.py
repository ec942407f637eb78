"""The rules a key is judged by, and the guide's own thresholds: the one table of both.

A key passes a Tol when both hold:

* the rule, as torch.testing.assert_close and numpy.allclose state it:
  max |torch - paddle| <= atol + rtol * scale, where scale is max |torch| over the whole
  tensor. Not element-wise: fp32 rounding in a matmul or a sum is relative to the size of
  the terms, not of each result, so an entry that cancels to near zero carries the same
  absolute error as its large neighbours. The tensor's largest value is the size of its
  terms, and it grows with the model, so the bound grows with it;
* a bound on the mean abs diff (the guide's threshold of the pair), which no rule may loosen.

The rule measured on the model itself (torch's own fp32 error as the yardstick) is
portcheck.core.calibrated's Measured; a client's own tuned tolerances are Tols too; reprod_log's own rule
(the guide's verdict: the mean alone, NaN passing) is ReprodLog. All are values of the one result
type, diff.KeyResult, which applies them.

GUIDE is the contest guide's pairs: the step each belongs to, the threshold its ReprodDiffHelper
call uses, and its kind. A caller's own threshold overrides the table (guide_threshold), and a pair
the table does not name takes reprod_log's default.
"""
import math
from typing import NamedTuple, Optional

import numpy as np

from portcheck.core.errors import PipelineError

# reprod_log's ReprodDiffHelper.report default: the guide's bound on the mean abs diff in Steps 1-4.
MEAN_BOUND = 1e-6


class Tol(NamedTuple):
    """max abs diff <= atol + rtol * max |torch|, and mean abs diff <= mean (None: no mean bound)."""
    atol: float
    rtol: float
    mean: Optional[float] = MEAN_BOUND

    @classmethod
    def absolute(cls, threshold: float) -> "Tol":
        """reprod_log's own rule: max and mean abs diff both under one threshold."""
        return cls(threshold, 0.0, threshold)

    @property
    def exact(self) -> bool:
        return self.atol == 0 and self.rtol == 0

    def allowed(self, r) -> float:
        """The bound on a result's max abs diff (diff.KeyResult: every rule is applied there)."""
        return self.atol + self.rtol * r.scale

    def over(self, r) -> str:
        return f"max diff {r.max:.3e} > " + ("0 (exact)" if self.exact else f"{r.allowed:.3e} allowed "
                                             f"(atol {self.atol:g} + rtol {self.rtol:g} * max|torch| {r.scale:.3e})")


# Ids, labels, counts: equal or wrong.
EXACT = Tol(0.0, 0.0, None)
# An lr and a float64 metric: equal but for the rounding two correct ports make computing the same value another
# way. torch's StepLR gives gamma ** k * lr (closed form), Paddle's StepDecay the same in another order:
# 3.0000000000000004e-05 against 3.0000000000000008e-05; ExponentialLR and PolynomialLR multiply recursively, their
# Paddle counterparts in closed form; a macro-F1 sums its classes in another order. Counted in ulps of the pair's
# largest value (np.spacing of it, in its dtype), as every rule here counts an error against the size of the terms:
# a cosine schedule ending at 0 differs by terms of the size of its base lr. Measured (tools/lr_ulps.py,
# docs/bench/rules.md): every torch scheduler with a Paddle counterpart, 3,000 steps at four base lrs, at most 15 ulps
# apart; the recursive forms drift with the length, PolynomialLR's linear decay to 1,018 ulps over 100,000 steps;
# a schedule one step ahead or a decay factor off by 1% at least 7e10 ulps. Four times the drift, 1e-7 of the plants.
ULPS = 4096
# A value held in float32 (a metric a framework computed on its float32 tensors): its few operations round within a
# few float32 ulps, and float32's ulp is 2**29 float64 ones, so ULPS of it would pass a sample miscounted. Measured
# (tools/metric_ulps.py, docs/bench/rules.md): torch's and Paddle's float32 accuracy, F1s, precision, AUC and MCC on 100
# random prediction sets at most 3 ulps apart; 16 ulps of a metric of 1.0 is 1.9e-6, one sample in 500,000.
ULPS_FLOAT32 = 16


class ReprodLog(NamedTuple):
    """reprod_log's own rule, the guide's verdict (ReprodDiffHelper.report): mean abs diff <= threshold, and no
    bound on the max. reprod_log tests `mean > threshold`, which is False for NaN: a NaN passes it, and
    nan_passes tells diff.KeyResult so (portcheck.pipeline.handin.guide_verdict notes it on the key; the strict verdict
    and the measured rule fail it). Its other quirks, transposing and broadcasting shapes, are the judge's
    (handin.guide_verdict), noted on the key."""
    threshold: float
    nan_passes = True  # a class constant, not a field: the rule is reprod_log's as it is, NaN blindness and all

    @property
    def mean(self) -> float:
        return self.threshold

    def allowed(self, r) -> float:
        return math.inf  # reprod_log judges the mean alone; the max is shown beside by the strict verdict

    def over(self, r) -> str:
        return f"max diff {r.max:.3e} is not bounded by reprod_log's rule"  # never asked: nothing exceeds inf

# A pair's kind says how it is judged:
#   exact     data, labels, ids, lr: equal (integers bitwise);
#   computed  forward, loss, gradients: the rule measured on the model, with torch's float64 run;
#   outcome   a training result (a final metric): the guide's threshold for the task, no float64 run.
KINDS = ("exact", "computed", "outcome")  # strictest first: a kind declared looser than a pair's own never judges it


class Guide(NamedTuple):
    step: int
    threshold: float   # the ReprodDiffHelper.report(diff_threshold=...) the guide uses for the pair
    kind: str
    ulps: int = 0      # an exact pair's floats: equal within this many ulps of the pair's largest value (ULPS)
    handed_in: bool = True     # the guide lists it among the files handed in (data and lr are checks it walks
    #                            through: judged when present, never required)
    after_steps: bool = False  # its keys come after optimizer steps: the measured rule's K_BACKWARD


GUIDE = {
    "forward": Guide(1, MEAN_BOUND, "computed"),
    "data": Guide(2, MEAN_BOUND, "exact", handed_in=False),
    "metric": Guide(2, MEAN_BOUND, "exact", ulps=ULPS),
    "loss": Guide(3, MEAN_BOUND, "computed"),
    "lr": Guide(4, MEAN_BOUND, "exact", ulps=ULPS, handed_in=False),
    "bp_align": Guide(4, 1e-2, "computed", after_steps=True),   # losses over optimizer steps: the guide's looser bound
    "train_align": Guide(5, 0.0015, "outcome"),  # the guide's 0.15% on the final metric; a task may set its own
}
HANDED_IN = tuple(p for p, g in GUIDE.items() if g.handed_in)  # what a complete hand-in holds


def looser_kind(kind: str, than: str) -> bool:
    """A kind that asks less than another (an outcome than a computed pair: no float64 run)."""
    return KINDS.index(kind) > KINDS.index(than)


def kind_of(pair: str, kind: str = None) -> str:
    """A pair's kind: the caller's, else the guide's for a pair it names, else "computed" (the strictest
    evidence: a float64 run is required)."""
    if kind is None:
        return GUIDE[pair].kind if pair in GUIDE else "computed"
    if kind not in KINDS:
        raise PipelineError(f"kind={kind!r}: a pair is one of {', '.join(KINDS)} [PC133]")
    return kind


class Ulps(NamedTuple):
    """A value two correct ports round differently (an lr, a float64 metric), a rule of the one result type
    (diff.KeyResult): max abs diff <= ulps x np.spacing(the largest value), the largest of the key and of `of`
    (the whole curve's or record's largest, so that every step of a schedule is judged on one scale)."""
    ulps: int = ULPS
    of: float = 0.0
    mean = None  # no bound on the mean: the max is within rounding

    def allowed(self, r) -> float:
        return self.ulps * float(np.spacing(max(abs(self.of), r.scale if r.scale == r.scale else 0.0)))

    def over(self, r) -> str:
        return (f"max diff {r.max:.3e} > {r.allowed:.3e} allowed ({self.ulps} ulps of {max(self.of, r.scale):.17g}: "
                "beyond the rounding two correct ports make)")


def ulps_of(pair: str) -> int:
    """How many ulps of its largest value an exact pair's floats may differ by: ULPS for the guide's lr and metric
    (two correct ports round them differently), 0 (bit for bit) for any other."""
    return GUIDE[pair].ulps if pair in GUIDE else 0


def rounding(values, ulps: int) -> dict:
    """{dtype: the largest difference `ulps` allows} over the float arrays `values` (one record, or one curve):
    ulps x np.spacing of their largest magnitude, in each dtype. {} when ulps is 0 (bit for bit)."""
    if not ulps:
        return {}
    largest = {}
    for v in values:
        v = np.asarray(v)
        if v.dtype.kind == "f" and v.size and np.isfinite(v).any():
            largest[v.dtype] = max(largest.get(v.dtype, 0.0), float(np.nanmax(np.abs(v[np.isfinite(v)]))))
    return {dtype: ulps_in(dtype, ulps) * float(np.spacing(dtype.type(scale))) for dtype, scale in largest.items()}


def ulps_in(dtype, ulps: int) -> int:
    """An exact pair's ulps for values of `dtype`: ULPS_FLOAT32 at most for float32 (and narrower) values."""
    return min(ulps, ULPS_FLOAT32) if np.dtype(dtype).itemsize <= 4 else ulps


def said(ulps: int) -> str:
    """How an exact pair's rule is said: bit for bit, or within ulps and why."""
    return ("every value equal" if not ulps else
            f"every value equal within {ulps} ulps of the pair's largest value ({ulps_in(np.float32, ulps)} for float32 "
            "values; two correct ports round an lr's closed and recursive forms, or a metric's sum, differently)")


def guide_threshold(pair: str, overrides: dict = None) -> float:
    """The threshold a pair is judged at: the caller's (overrides), else the guide's, else reprod_log's default."""
    overrides = overrides or {}
    if pair in overrides:
        return overrides[pair]
    return GUIDE[pair].threshold if pair in GUIDE else MEAN_BOUND


def looser_task(pair: str, threshold: float, spread: float = 0.0) -> str:
    """How a guide outcome pair judged above the guide's threshold says its rule: "the task's 0.002, looser than
    the guide's 0.0015" (a task may set its own bound on a training's result, but never silently under the
    guide's name); "" for any other pair or threshold. spread: how far torch's own runs widened the task's
    threshold to `threshold` (portcheck.pipeline.training's own runs), said as such, never as the task's."""
    guide = GUIDE.get(pair)
    if guide is None or guide.kind != "outcome" or not threshold > guide.threshold:
        return ""
    return f"{task_rule(threshold, spread)}, looser than the guide's {guide.threshold:g}"


def task_rule(threshold: float, spread: float = 0.0, where: str = None) -> str:
    """A task's threshold on a training's outcome, as judged: "the task's 0.002", or, widened by torch's own
    runs, "0.016 = the task's 0.00972 + torch's own spread 0.0063 on this machine" (where: which runs, where;
    given, the sum is said even where the spread is 0: the runs were made). Where the spread is over the task's
    own, torch ends further from itself than the task allows: no port can meet the task's there, said so."""
    if not spread and where is None:
        return f"the task's {threshold:g}"
    task = threshold - spread
    return (f"{threshold:g} = the task's {task:g} + torch's own spread {spread:.3g} {where or 'on this machine'}"
            + (f": torch's own spread is over the task's {task:g}, which no port can meet there"
               if spread > task else ""))


def from_flags(tol: Tol, what: str, loosened: list, atol=None, rtol=None, atol_flag="--threshold",
               rtol_flag="--rtol", mean_too=False) -> Tol:
    """`tol` with a check's command-line flags applied. Each must be a finite number >= 0 (else one line,
    before anything is written, as check_pair.py does); each that loosens the measured figure is appended
    to `loosened` (CheckResult.loosened), which the diff log, the verdict, SUMMARY.md and
    check_log_reprod.py state. mean_too: the flag sets the mean bound as well (a single number's)."""
    new = tol
    for flag, field, value in ((atol_flag, "atol", atol), (rtol_flag, "rtol", rtol)):
        if value is None:
            continue
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise PipelineError(f"{flag} must be a finite number >= 0, got {value} [PC134]")
        new = new._replace(**{field: float(value)}, **({"mean": float(value)} if mean_too and field == "atol" else {}))
        if value > getattr(tol, field):
            loosened.append(f"{flag} {value:g} loosens {what}'s {field} (measured: {getattr(tol, field):g})")
    return new
