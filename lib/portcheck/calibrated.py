"""A tolerance measured on the model itself (framework-free): torch's own fp32 error as the yardstick.

For every module output, the torch model is run twice on the same weights and inputs, in float32 and in
float64. err32 = max |torch fp32 - torch fp64| is the rounding fp32 itself makes there, on this model,
at this size. The Paddle port is held to a multiple of it:

    max |paddle - torch| <= K * err32 + FLOOR * eps32 * max |torch|
    and, on what a hand-in holds (the model's output, a pair's keys), mean |paddle - torch| <= the guide's
    threshold of that pair (1e-6; bp_align's 1e-2), so the measured rule is never looser than the guide.

K is for a forward; gradients and everything after optimizer steps take K_BACKWARD, since BatchNorm's batch
statistics and each update compound both sides' rounding.

The floor is for outputs that are exact in fp32 on the torch side (an embedding lookup, a max-pool, a ReLU
of exact values: err32 = 0) where another framework's kernel may still round once. K and FLOOR were
measured (docs/align.md): clean ports stay under them on every model measured, every planted bug sits above.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np

from portcheck import tolerances
from portcheck.diff import EMPTY

EPS32 = 2.0 ** -23  # fp32's relative spacing
K = 16.0            # the measured multiple of torch's own fp32 error in a forward (docs/align.md)
# Gradients and everything after optimizer steps: BatchNorm's batch statistics and each update compound both
# sides' rounding, and err32 is one sample of it; clean training of ResNet-18 reached 48.9 (docs/align.md)
K_BACKWARD = 128.0
# One optimizer step from the same weights (compare_backward(isolate=True)): nothing compounds over steps
K_STEP = 16.0
FLOOR = 16.0        # in units of eps32 * max|torch|: one rounding of another kernel, with margin
MEAN_BOUND = tolerances.MEAN_BOUND  # the guide's bound on a model's output; no measured tolerance is looser


def multiple(after_steps: bool) -> float:
    """K for a pair's keys: K_BACKWARD for what comes after a backward or an optimizer step."""
    return K_BACKWARD if after_steps else K


@dataclass
class Row:
    """One recorded module output: torch's fp32 error beside the Paddle-torch difference."""
    name: str
    shape: tuple
    max: float          # max |paddle - torch|
    mean: float         # mean |paddle - torch|
    err32: float        # max |torch fp32 - torch fp64|
    scale: float        # max |torch fp64|
    input_ok: Optional[bool] = None  # its input within tolerance (None: no input recorded)
    problem: str = ""   # a shape, dtype or NaN problem, or "no counterpart"
    mean_bound: Optional[float] = None  # the guide's bound on the mean, on what is handed in (a model's output)
    multiple: float = K
    by_design: str = ""  # a difference the two libraries make on purpose, its rule and the raw figure; max and
    #                      mean are then what is left once the rule is applied, judged as any other row
    own_mean: float = float("nan")  # mean |torch fp32 - torch fp64|: where it exceeds mean_bound, no port can meet it

    @property
    def allowed(self) -> float:
        return self.multiple * self.err32 + FLOOR * EPS32 * self.scale

    def key_figures(self) -> str:
        return f"max {self.max:.3g} = {self.ratio:.3g} x torch's own fp32 error (allowed {self.allowed:.3g})"

    @property
    def ratio(self) -> float:
        """diff / torch's own fp32 error: how many times fp32's own rounding the port differs by."""
        if self.err32 > 0:
            return self.max / self.err32
        return 0.0 if self.max == 0 else float("inf")

    @property
    def why(self) -> str:
        """The bound it failed, said ("" when it passed). Where the guide's bound on the mean is below torch's own
        fp32 error there, even the exact value would fail it: said so, with both figures."""
        if self.problem:
            return self.problem
        if not self.max <= self.allowed:
            return f"max diff {self.max:.3e} > allowed {self.allowed:.3e} ({self.ratio:.3g} x torch's own fp32 error)"
        if self.mean_bound is not None and not self.mean <= self.mean_bound:
            said = f"mean diff {self.mean:.3e} > the guide's bound {self.mean_bound:g}"
            if self.own_mean > self.mean_bound:
                said += (f"; torch's own fp32 result is {self.own_mean:.3e} from its float64 one on the mean, over "
                         "that bound too: no port can meet it on this input (max within its allowance)")
            return said
        return ""

    @property
    def passed(self) -> bool:
        return not self.problem and self.max <= self.allowed and (self.mean_bound is None or self.mean <= self.mean_bound)


def measure(name, a, ref, b, mean_bound=None, multiple=K) -> "Row":
    """One compared tensor as a Row: torch fp32 `a`, torch fp64 `ref` (None: `a` itself), Paddle `b`.
    Every comparison of portcheck/ and of an align hand-in judges through it."""
    a, b = np.asarray(a), np.asarray(b)
    if {a.shape, b.shape} == {(), (1,)}:  # a 0-d scalar and a [1] one are one scalar (portcheck.handin's rule too)
        a, b = a.reshape(1), b.reshape(1)
        ref = None if ref is None else np.asarray(ref).reshape(1)
    row = Row(name, tuple(a.shape), *[float("nan")] * 4, mean_bound=mean_bound, multiple=multiple)
    if a.shape != b.shape:
        row.problem = f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}"
    elif not a.size:  # an empty batch, an empty array: nothing compared is never a pass
        row.max = row.mean = row.err32 = row.scale = 0.0
        row.problem = EMPTY
    else:
        with np.errstate(all="ignore"):  # inf - inf, said below as what it is
            figures = _figures(a, ref, b)
        # a NaN or an Inf in either makes the largest difference one (checked first where it is not)
        if a.dtype.kind == "f" and not np.isfinite(figures[0]) and not (np.isfinite(a).all() and np.isfinite(b).all()):
            row.problem = "NaN or Inf"
        else:
            row.max, row.mean, row.err32, row.own_mean, row.scale = figures
    return row


BLOCK = 1 << 15  # values per block: a block's float64 temporaries stay in the CPU's cache


def _figures(a, ref, b) -> tuple:
    """max and mean of |a - b|, of |a - ref| (ref None: a itself), max |ref|, in float64. Float arrays of one
    shape go block by block (3-4x faster on a module output of a million values, where memory, not arithmetic,
    is the cost), each block's sum added in numpy's own pairwise order: the same figures, bit for bit, as the
    whole arrays' (tests/test_size.py checks it)."""
    exact = a if ref is None else np.asarray(ref)
    if not all(x.dtype.kind == "f" and x.itemsize <= 8 and x.shape == a.shape and x.flags.c_contiguous
               for x in (a, exact, b)):
        a64 = a.astype(np.float64)
        exact = a64 if ref is None else exact.astype(np.float64)
        d = np.abs(a64 - b.astype(np.float64))
        own = np.abs(a64 - exact)
        return float(d.max()), float(d.mean()), float(own.max()), float(own.mean()), float(np.abs(exact).max())
    a, exact, b = a.reshape(-1), exact.reshape(-1), b.reshape(-1)
    a64, d = np.empty(min(a.size, BLOCK)), np.empty(min(a.size, BLOCK))

    def block(lo, hi):
        """[max |a - b|, sum, max |a - ref|, sum, max |ref|] of a[lo:hi], split as numpy's pairwise sum splits."""
        n = hi - lo
        if n > BLOCK:
            half = n // 2 - n // 2 % 8
            x, y = block(lo, lo + half), block(lo + half, hi)
            return [np.maximum(x[0], y[0]), x[1] + y[1], np.maximum(x[2], y[2]), x[3] + y[3], np.maximum(x[4], y[4])]
        np.copyto(a64[:n], a[lo:hi])
        out = []
        for other in (b, exact):
            np.abs(np.subtract(a64[:n], other[lo:hi], out=d[:n]), out=d[:n])
            out += [d[:n].max(), np.add.reduce(d[:n])]
        return out + [np.abs(exact[lo:hi], out=d[:n]).max()]
    m, total, own_max, own_total, scale = block(0, a.size)
    return float(m), float(total / a.size), float(own_max), float(own_total / a.size), float(scale)


def judge_pair(torch_data: dict, paddle_data: dict, exact: dict, threshold: float, k: float = K) -> list:
    """A hand-in pair judged by the measured rule, one Row per key, each also held to the pair's threshold on
    its mean: the torch and Paddle dicts and torch's float64 run of the same keys, K = k. A key missing on any
    side is a problem."""
    rows = []
    for key in sorted(set(torch_data) | set(paddle_data) | set(exact)):
        missing = [side for side, d in (("torch", torch_data), ("paddle", paddle_data), ("torch float64", exact))
                   if key not in d]
        if missing:
            rows.append(Row(key, (), float("nan"), float("nan"), float("nan"), float("nan"), mean_bound=threshold,
                            problem=f"missing on {', '.join(missing)}"))
        else:
            rows.append(measure(key, torch_data[key], exact[key], paddle_data[key], threshold, k))
    return rows


def first_origin(rows: list) -> Optional[Row]:
    """The first module, in run order, out of tolerance while its input was within: where a bug is, not
    where it shows (every module after it inherits the difference). Without input records: the first over."""
    over = [r for r in rows if not r.passed and not r.problem.startswith("no counterpart")]
    return next((r for r in over if r.input_ok is not False), over[0] if over else None)


HEADER = ("module", "shape", "max abs diff", "mean abs diff", "torch fp32 err", "diff/err", "allowed", "")


ORIGIN = "<-- first out of tolerance with its input within"


def table_rows(rows: list) -> list:
    origin = first_origin(rows)
    out = []
    for r in rows:
        mark = ORIGIN if r is origin else (
            r.problem or ("over" if not r.passed else "") or r.by_design)
        out.append((r.name, str(r.shape), f"{r.max:.3e}", f"{r.mean:.3e}", f"{r.err32:.3e}", f"{r.ratio:.2f}",
                    f"{r.allowed:.3e}", mark))
    return out


def beside(rows: list, tuned: bool) -> str:
    """The measured verdict on a pipeline's own keys, in one line beside its tuned verdict (which decides the
    step): both are shown, and the line says when they differ."""
    bad = [r for r in rows if not r.passed]
    worst = max(rows, key=lambda r: r.max / r.allowed if r.allowed else float("inf"), default=None)
    if worst is None:
        return "measured rule (align): no keys to judge"
    verdict = (f"first over: {bad[0].name} ({bad[0].why})"
               if bad else
               f"all {len(rows)} within (largest: {worst.name}, {worst.max / worst.allowed:.3g} of its allowance)")
    differ = "; the two verdicts differ, the tuned one decides this step" if bool(bad) == tuned else ""
    return f"measured rule (align: {K:g} x torch's own fp32 error + a floor): {verdict}{differ}"
