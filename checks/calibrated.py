"""A tolerance measured on the model itself (framework-free): torch's own fp32 error as the yardstick.

For every module output, the torch model is run twice on the same weights and inputs, in float32 and in
float64. err32 = max |torch fp32 - torch fp64| is the rounding fp32 itself makes there, on this model,
at this size. The Paddle port is held to a multiple of it:

    max |paddle - torch| <= K * err32 + FLOOR * eps32 * max |torch|
    and, on the model's own output (what a hand-in holds), mean |paddle - torch| <= the guide's 1e-6.

The floor is for outputs that are exact in fp32 on the torch side (an embedding lookup, a max-pool, a ReLU
of exact values: err32 = 0) where another framework's kernel may still round once. K and FLOOR were
measured (docs/align.md): clean ports stay under them on every model measured, every planted bug sits above.
"""
from dataclasses import dataclass
from typing import Optional

EPS32 = 2.0 ** -23  # fp32's relative spacing
K = 16.0            # the measured multiple of torch's own fp32 error (docs/align.md)
FLOOR = 16.0        # in units of eps32 * max|torch|: one rounding of another kernel, with margin
MEAN_BOUND = 1e-6   # the guide's bound; no measured tolerance is looser


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
    final: bool = False  # the model's own output: the guide's mean bound applies (it bounds what is handed in)
    by_design: str = ""  # a difference the two libraries make on purpose, its rule and the raw figure; max and
    #                      mean are then what is left once the rule is applied, judged as any other row

    @property
    def allowed(self) -> float:
        return K * self.err32 + FLOOR * EPS32 * self.scale

    @property
    def ratio(self) -> float:
        """diff / torch's own fp32 error: how many times fp32's own rounding the port differs by."""
        if self.err32 > 0:
            return self.max / self.err32
        return 0.0 if self.max == 0 else float("inf")

    @property
    def passed(self) -> bool:
        return not self.problem and self.max <= self.allowed and (not self.final or self.mean <= MEAN_BOUND)


def first_origin(rows: list) -> Optional[Row]:
    """The first module, in run order, out of tolerance while its input was within: where a bug is, not
    where it shows (every module after it inherits the difference). Without input records: the first over."""
    over = [r for r in rows if not r.passed and not r.problem.startswith("no counterpart")]
    return next((r for r in over if r.input_ok is not False), over[0] if over else None)


HEADER = ("module", "shape", "max abs diff", "mean abs diff", "torch fp32 err", "diff/err", "allowed", "")


def table_rows(rows: list) -> list:
    origin = first_origin(rows)
    out = []
    for r in rows:
        mark = "<-- first out of tolerance with its input within" if r is origin else (
            r.problem or ("over" if not r.passed else "") or r.by_design)
        out.append((r.name, str(r.shape), f"{r.max:.3e}", f"{r.mean:.3e}", f"{r.err32:.3e}", f"{r.ratio:.2f}",
                    f"{r.allowed:.3e}", mark))
    return out
