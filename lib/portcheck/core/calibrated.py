"""A tolerance measured on the model itself (framework-free): torch's own fp32 error as the yardstick.

For every module output, the torch model is run twice on the same weights and inputs, in float32 and in
float64. err32 = max |torch fp32 - torch fp64| is the rounding fp32 itself makes there, on this model,
at this size. The Paddle port is held to a multiple of it:

    max |paddle - torch| <= K * err32 + FLOOR * eps32 * max |torch|   (FLOOR: ROOT x sqrt(n) for rows of n > 256)
    and, on what a hand-in holds (the model's output, a pair's keys), mean |paddle - torch| <= the guide's
    threshold of that pair (1e-6; bp_align's 1e-2), so the measured rule is never looser than the guide.

K is for a forward; gradients after the first backward take K_GRAD, everything after optimizer steps K_BACKWARD,
since BatchNorm's batch statistics and each update compound both sides' rounding (K_STEP: one isolated step).
After the steps of a plain run, a value within rounding of a ReLU's kink in a later step takes one branch in one
fp32 run and the other in another, and torch's float64 run may take torch's fp32 branch: there the allowance is
also SPREAD x what torch does to itself (its run again with every weight moved one ulp, with other threads; and in
a red run where Paddle put such a value on the other side of 0, its run again taking Paddle's side there),
whichever is larger.

The floor is for outputs that are exact in fp32 on the torch side (an embedding lookup, a max-pool, a ReLU
of exact values: err32 = 0) where another framework's kernel may still round once. K and FLOOR were
measured (docs/bench/align.md): clean ports stay under them on every model measured, every planted bug sits above.
"""
from typing import NamedTuple, Optional

import numpy as np

from portcheck.core import tolerances, unread
from portcheck.core.diff import EMPTY, NOT_JUDGED, KeyResult, first_diverging

EPS32 = 2.0 ** -23  # fp32's relative spacing
K = 16.0            # the measured multiple of torch's own fp32 error in a forward (docs/bench/align.md)
# Gradients and everything after optimizer steps: BatchNorm's batch statistics and each update compound both
# sides' rounding, and err32 is one sample of it; clean training of ResNet-18 reached 48.9 (docs/bench/align.md)
K_BACKWARD = 128.0
# One optimizer step from the same weights (compare_backward(isolate=True)): nothing compounds over steps
K_STEP = 16.0
# Gradients after the first backward, from the same weights: nothing compounds over steps either, and BatchNorm's
# batch statistics (train mode) did not raise it. Clean ports needed at most 1.97 x torch's own error; one
# LayerNorm epsilon 1e-5 among 1e-12 showed 13.7 to 33 (docs/bench/k_backward.md): K_BACKWARD's 128 let it through
K_GRAD = 8.0
# The plain run's steps (compare_backward without isolate): after a few steps a ReLU input within rounding of 0
# flips between any two fp32 runs, a jump no multiple of torch's own error covers. On the ResNet-18 example's 5
# steps (docs/bench/k_backward.md) Paddle, torch with one thread and torch with every weight moved one ulp land 176
# to 188 x torch's own error from torch at one conv weight, torch with channels_last or ATEN_CPU_CAPABILITY=default 1.65e3,
# where torch's float64 run took torch's own branch (oneDNN off: no jump). Each row is also allowed SPREAD x max
# |torch fp32 - torch fp32 with every weight moved one ulp| (seeded signs: the same perturbation on any CPU),
# measured in the same call: the clean port then uses 0.249 of its allowance, a momentum plant 3.89e3.
# On small conv/BatchNorm nets (tools/bench_k_backward.py --kinks) Paddle crossed a kink at step 5 in two of 48 that
# runs moved one ulp with the same kernels (two sign seeds) missed (70 and 78 of the allowance). The run is made with
# another thread count (backward.AGAINST_ITSELF): it crosses one of the two (0.68); oneDNN off crossed the other,
# but as a second run it hid a weight decay plant on the ResNet-18 example (docs/bench/k_backward.md). Where a red plain
# run holds a value each run puts within rounding of 0 on its own side in a later step, torch's run taking Paddle's
# side of exactly those values is torch against itself too (backward.judged): the other net is then green
SPREAD = 4.0
FLOOR = 16.0        # in units of eps32 * max|torch|: one rounding of another kernel, with margin
# A row of n values summed (a norm's mean over its last axis) may be summed in any order: torch's CPU kernels sum
# pairwise (its fp32 mean of 4096 bf16 squares 1e-7 from float64, any ATEN_CPU_CAPABILITY), Paddle's CPU mean left to
# right (7e-6). Such a sum errs by about sqrt(n) roundings, which 16 no longer covers past a few hundred values:
# RMSNorm and LayerNorm over n = 1,024 - 16,384 bf16 values (tools/floor_rows.py, 36 scales and widths, 32-row
# tensors) summed left to right reached 0.64 x sqrt(n) roundings of the output's largest value (0.73 with other draws).
# The floor is ROOT x sqrt(n) where that is more than FLOOR, n the output's last axis (the row a normalization sums)
ROOT = 1.0
MEAN_BOUND = tolerances.MEAN_BOUND  # the guide's bound on a model's output; no measured tolerance is looser


def roundings(shape) -> float:
    """The floor's roundings of the largest value for an output of `shape`: FLOOR, or ROOT x sqrt(n) for rows of
    n values (its last axis) where that is more."""
    return max(FLOOR, ROOT * float(np.sqrt(shape[-1]))) if len(shape) else FLOOR


def multiple(after_steps: bool) -> float:
    """K for a pair's keys: K_BACKWARD for what comes after a backward or an optimizer step."""
    return K_BACKWARD if after_steps else K


class Measured(NamedTuple):
    """The rule measured on the model, a value of the one result type (diff.KeyResult) as tolerances.Tol is:
    max abs diff <= multiple x torch's own fp32 error + FLOOR x eps32 x max|torch fp64|, and mean abs diff <=
    mean (None: no mean bound; the guide's, on what a hand-in holds)."""
    multiple: float = K
    mean: Optional[float] = None
    spread: float = 0.0  # max |torch fp32 - torch fp32 again, moved one ulp, other kernels| (0: not measured)
    spread_by: str = ""  # what that run of torch against itself was, when not its runs moved one ulp
    # a weight after optimizer steps: max |the two sides' float32 weights each minus its optimizer replayed in float64
    # on that side's own gradients| (with_optimizers; 0: not measured), what no port's arithmetic can close
    optimizers: float = 0.0

    def own(self, r) -> float:
        """The measured part of the allowance: multiple x torch's own fp32 error, or SPREAD x torch's spread
        against itself where that is larger; and the two optimizers' own float32 error beside it."""
        return max(self.multiple * r.err32, SPREAD * self.spread) + self.optimizers

    def optimizers_decide(self, r) -> bool:
        """The row is within its allowance only with the two optimizers' own float32 error in it."""
        return bool(self.optimizers) and r.max > self._replace(optimizers=0.0).allowed(r)

    def allowed(self, r) -> float:
        return self.own(r) + self.floor(r)

    @staticmethod
    def floor(r) -> float:
        return roundings(r.shape) * EPS32 * r.scale

    def floored(self, r) -> bool:
        """The floor, not the multiple of torch's own error, is most of the allowance: a value fp32 computes
        (almost) exactly, as an lr or a loss of few terms; its diff/err ratio then says nothing."""
        return self.floor(r) >= self.own(r)

    def floor_said(self, r) -> str:
        return f"the floor {self.floor(r):.3g} ({roundings(r.shape):.3g} x eps32 x max|torch|)"

    def over(self, r) -> str:
        if self.floored(r):
            return (f"max diff {r.max:.3e} > allowed {r.allowed:.3e} ({self.floor_said(r)}: torch's own fp32 error "
                    f"here is {r.err32:.3e})")
        if self.spread_decides(r):
            return (f"max diff {r.max:.3e} > allowed {r.allowed:.3e} ({self.spread_said()}; {r.ratio:.3g} x torch's "
                    "own fp32 error)")
        return f"max diff {r.max:.3e} > allowed {r.allowed:.3e} ({r.ratio:.3g} x torch's own fp32 error)"

    def spread_decides(self, r) -> bool:
        return SPREAD * self.spread > self.multiple * r.err32

    def spread_said(self) -> str:
        return (f"{SPREAD:g} x {self.spread:.3e}, torch against itself "
                f"{self.spread_by or 'with every weight moved one ulp (other threads)'}")


def with_spread(row: KeyResult, spread, by: str = "") -> KeyResult:
    """The row's rule also allowing SPREAD x torch's spread against itself (None, 0 or not finite: not measured);
    by: what that run was, when not its runs moved one ulp. A row stopped by a problem keeps its rule."""
    if spread is not None and np.isfinite(spread) and spread > 0 and not row.problems:
        row.rule = row.rule._replace(spread=float(spread), spread_by=by)
    return row


def with_optimizers(row: KeyResult, own) -> KeyResult:
    """The row (a weight after optimizer steps) also allowing the two optimizers' own float32 error there: max over
    its values of |torch's weight - torch's optimizer replayed in float64 on torch's gradients| + |Paddle's - Paddle's
    replayed on Paddle's| (gradients/optimizers.replayed_error). An optimizer's settings or a gradient that differs
    is in its replay too: only the arithmetic is allowed. A row stopped by a problem keeps its rule."""
    if own is not None and np.isfinite(own) and own > 0 and not row.problems:
        row.rule = row.rule._replace(optimizers=float(own))
    return row


def unjudged(name, shape, problem: str, figure: float = float("nan"), mean_bound=None, k: float = K) -> KeyResult:
    """A result the measured rule could not judge (no counterpart, a structure that differs), red by its problem."""
    return KeyResult(name, Measured(k, mean_bound), tuple(shape), figure, figure, figure, err32=figure,
                     problems=[problem])


def measure(name, a, ref, b, mean_bound=None, multiple=K) -> KeyResult:
    """One compared tensor judged by the measured rule: torch fp32 `a`, torch fp64 `ref` (None: `a` itself),
    Paddle `b`. Every comparison of portcheck/ and of an align hand-in judges through it. Values are compared,
    in float64: a dtype that differs is the caller's to refuse (judging.judge_one does; a hand-in's strict
    verdict shows it)."""
    return own_error(against(name, a, b, mean_bound, multiple), a, ref)


def same_but_ones(x, y) -> bool:
    """Two shapes of the same values in the same order: a 0-d scalar against [1], a vector [n, 1] against [n] (a
    bias one framework shapes its own way): axes of 1 one side adds, at most one axis longer than 1."""
    squeezed = lambda s: tuple(d for d in s if d != 1)
    return tuple(x) != tuple(y) and squeezed(x) == squeezed(y) and len(squeezed(x)) <= 1


def against(name, a, b, mean_bound=None, multiple=K) -> KeyResult:
    """measure's half that reads `b`: the differences, or the problem (shape, empty, NaN) that stops judging.
    own_error adds torch's own fp32 error: a value judged as its run computes it, before torch's float64 run
    exists (portcheck.forward.isolate), keeps these few figures, not the value."""
    a, b = np.asarray(a), np.asarray(b)
    if same_but_ones(a.shape, b.shape):  # a 0-d scalar and a [1] one are one scalar (handin's rule too)
        a, b = (a.reshape(1), b.reshape(1)) if a.size == 1 else (a, b.reshape(a.shape))
    row = KeyResult(name, Measured(multiple, mean_bound), tuple(a.shape))
    if a.shape != b.shape:
        row.problems.append(f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}")
    elif not a.size:  # an empty batch, an empty array: nothing compared is never a pass
        row.max = row.mean = row.err32 = row.scale = 0.0
        row.problems.append(EMPTY)
    else:
        with np.errstate(all="ignore"):  # inf - inf, said below as what it is
            largest, total = _figures(a, b)
        # a NaN or an Inf in either makes the largest difference one (checked first where it is not)
        if a.dtype.kind == "f" and not np.isfinite(largest) and not (np.isfinite(a).all() and np.isfinite(b).all()):
            row.problems.append(non_finite(a, b))
        else:
            row.max, row.mean = float(largest), float(total / a.size)
    return row


def non_finite(a, b) -> str:
    """Which side holds the NaN or Inf, and how many: a padded batch NaN in the port alone is the port's."""
    count = lambda v: f"{int(np.isnan(v).sum())} NaN, {int(np.isinf(v).sum())} Inf"
    bad = [side for side, v in (("torch", a), ("paddle", b)) if not np.isfinite(v).all()]
    if len(bad) == 2:
        return f"NaN or Inf on both sides (torch {count(a)}; paddle {count(b)})"
    return f"NaN or Inf in {bad[0]} only ({count(a if bad[0] == 'torch' else b)}; the other side finite)"


OVERFLOWED = (f"{NOT_JUDGED} torch's float64 run (the library's yardstick) is NaN or Inf here where its float32 run "
              "is finite: the model builds a value from its dtype (torch.finfo(dtype).min, a mask filled with it) "
              "that overflows in float64, or casts one back to float32")


def overflowed(a, ref) -> bool:
    """torch's float64 value `ref` holds a NaN or an Inf where its float32 one `a` is finite (same shape)."""
    a, ref = np.asarray(a), np.asarray(ref)
    if a.dtype.kind != "f" or ref.dtype.kind != "f" or a.shape != ref.shape:
        return False
    if not ref.size or np.isfinite(ref.min()) and np.isfinite(ref.max()):  # min and max pass NaN and Inf on:
        return False  # a finite ref is two passes, no temporaries (every value of every comparison comes here)
    return bool((np.isfinite(a) & ~np.isfinite(ref)).any())


def integers(name, a, b) -> KeyResult:
    """An integer or boolean tensor a module computes (position buckets, a mask, indices) against Paddle's: equal
    values or red, whatever the integer width on each side (int64 and int32 indices are one computation)."""
    a, b = np.asarray(a), np.asarray(b)
    row = KeyResult(name, Measured(K), tuple(a.shape))
    if b.dtype.kind not in "biu" or a.shape != b.shape:
        row.problems.append(f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}")
        return row
    if not a.size:
        row.problems.append(EMPTY)
        return row
    wide_a, wide_b = a.astype(np.int64), b.astype(np.int64)
    d = np.abs(wide_a - wide_b)
    row.max, row.mean, row.err32, row.own_mean = float(d.max()), float(d.mean()), 0.0, 0.0
    row.scale = float(np.abs(wide_a).max())
    if d.any():
        i = int(np.flatnonzero(d)[0])
        row.problems.append(f"integer values differ at {int((d > 0).sum())} of {d.size} positions (first: torch "
                            f"{wide_a.flat[i]}, paddle {wide_b.flat[i]}): every integer a module computes is exact")
    return row


def own_error(row: KeyResult, a, ref) -> KeyResult:
    """`row` (against's, on `a`) with torch's own fp32 error: `a` against its float64 run `ref` (None: `a`
    itself), each broadcast to the row's shape as against broadcast them; a row with a problem as it is. A
    float64 run that overflowed where fp32 did not measures nothing: the row says it is not judged, and why."""
    if row.problems:
        return row
    a = np.asarray(a)
    exact = a if ref is None else unread.filled(a, np.asarray(ref))  # no error measured where no real token reads
    if exact.shape != a.shape:  # a file's float64 run of another shape: said, never a broadcast's traceback
        row.problems.append(f"{NOT_JUDGED} torch's float64 run holds {exact.dtype}{list(exact.shape)} here, its float32 "
                            f"run {a.dtype}{list(a.shape)}: not runs of one computation; record both again")
        return row
    wide = (np.broadcast_to(a, row.shape), np.broadcast_to(exact, row.shape)) if a.shape != row.shape else (a, exact)
    with np.errstate(all="ignore"):
        largest, total, scale = _figures(*wide, scale=True)
    # max |exact| is NaN or Inf exactly when exact holds one: overflowed's own passes only then (most values: none)
    if ref is not None and not np.isfinite(scale) and overflowed(a, exact):
        row.problems.append(OVERFLOWED)
        return row
    if np.isfinite(scale) and scale >= SATURATED:
        # a mask filled with finfo(float32).min sets no scale: the floor is the other values' rounding
        rest = np.abs(wide[1][np.abs(wide[1]) < SATURATED])
        scale = rest.max() if rest.size else 0.0
    row.err32, row.own_mean, row.scale = float(largest), float(total / wide[0].size), float(scale)
    return row


SATURATED = 0.5 * float(np.finfo(np.float32).max)  # a value built from a dtype's bound (finfo(float32).min), not
# computed: an additive attention mask's fill


BLOCK = 1 << 16  # values per block: a block's float64 temporaries stay in the CPU's cache
_PAIR = []        # the one worker thread that judges the first half of a large array (numpy frees the GIL)


def _figures(a, other, scale=False) -> tuple:
    """max |a - other| and its sum, in float64, and with scale max |other|. Float arrays of one shape go block by
    block (3-4x faster on a module output of a million values, where memory, not arithmetic, is the cost), each
    block's sum added in numpy's own pairwise order: the same figures, bit for bit, as the whole arrays'
    (tests/test_size.py checks it). A large array's two halves go to two cores, combined in that same order."""
    if not all(x.dtype.kind == "f" and x.itemsize <= 8 and x.shape == a.shape and x.flags.c_contiguous
               for x in (a, other)):
        d = np.abs(a.astype(np.float64) - other.astype(np.float64))
        return (d.max(), np.add.reduce(d.reshape(-1))) + ((np.abs(other.astype(np.float64)).max(),) if scale else ())
    a, other = a.reshape(-1), other.reshape(-1)

    def block(lo, hi, d):
        """[max |a - other|, sum(, max |other|)] of a[lo:hi], split as numpy's pairwise sum splits."""
        n = hi - lo
        if n > BLOCK:
            half = n // 2 - n // 2 % 8
            return _combined(block(lo, lo + half, d), block(lo + half, hi, d))
        # both widened inside the subtraction (exact): no float64 copy of a made first
        np.abs(np.subtract(a[lo:hi], other[lo:hi], out=d[:n], dtype=np.float64), out=d[:n])
        out = [d[:n].max(), np.add.reduce(d[:n])]
        return out + [np.abs(other[lo:hi], out=d[:n]).max()] if scale else out
    scratch = lambda: np.empty(min(a.size, BLOCK))
    if a.size <= 2 * BLOCK or _cores() < 2:  # a hidden state of 2 x 128 x 2048 values split: 30% faster
        return tuple(block(0, a.size, scratch()))
    if not _PAIR:
        from concurrent.futures import ThreadPoolExecutor
        _PAIR.append(ThreadPoolExecutor(1, thread_name_prefix="portcheck-judge"))
    half = a.size // 2 - a.size // 2 % 8  # block(0, a.size)'s own first split
    first = _PAIR[0].submit(block, 0, half, scratch())
    second = block(half, a.size, scratch())
    return tuple(_combined(first.result(), second))


def _combined(x, y) -> list:
    """Two halves' [max, sum(, max)]: the sums added as numpy's pairwise sum adds them."""
    return [np.maximum(x[0], y[0]), x[1] + y[1]] + ([np.maximum(x[2], y[2])] if len(x) > 2 else [])


def _cores() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# A key of a hand-in's float64 file (<pair>_torch64.npy) holding, for the key after it, torch's spread against itself
# (compare_backward's plain run: Measured.spread), written beside the float64 values by the torch side's own run
SPREAD_OF = "spread:"


def judge_pair(torch_data: dict, paddle_data: dict, exact: dict, threshold: float, k: float = K) -> list:
    """A hand-in pair judged by the measured rule, one result per key, each also held to the pair's threshold on
    its mean: the torch and Paddle dicts and torch's float64 run of the same keys, K = k, and where that file holds
    it (SPREAD_OF), torch's spread against itself at a key after optimizer steps. A key missing on any side is a
    problem."""
    spreads = {key[len(SPREAD_OF):]: v for key, v in exact.items() if key.startswith(SPREAD_OF)}
    exact = {key: v for key, v in exact.items() if not key.startswith(SPREAD_OF)}
    rows = []
    for key in sorted(set(torch_data) | set(paddle_data) | set(exact)):
        missing = [side for side, d in (("torch", torch_data), ("paddle", paddle_data), ("torch float64", exact))
                   if key not in d]
        if missing:
            rows.append(unjudged(key, (), f"missing on {', '.join(missing)}", mean_bound=threshold))
            continue
        spread = float(np.max(spreads[key])) if key in spreads and np.size(spreads[key]) == 1 else None
        rows.append(with_spread(measure(key, torch_data[key], exact[key], paddle_data[key], threshold, k), spread))
    return rows


HEADER = ("module", "shape", "max abs diff", "mean abs diff", "torch fp32 err", "diff/err", "allowed", "")


ORIGIN = "<-- first out of tolerance with its input within"
ORIGIN_UNSOURCED = "<-- first out of tolerance, its input from no module (below)"  # diff.first_diverging's other


def table_rows(rows: list, origin=None) -> list:
    """One table row per result; origin (diff.first_diverging's) is marked as where the runs part."""
    out = []
    for r in rows:
        marked = ORIGIN_UNSOURCED if r.input_unsourced else ORIGIN
        mark = marked if r is origin else "not judged (below)" if not r.judged else (
            r.problem or (("the guide's mean bound only" if r.beyond(MEAN_BOUND) else "over") if not r.passed else "")
            or r.by_design)
        out.append((r.name, str(r.shape), f"{r.max:.3e}", f"{r.mean:.3e}", f"{r.err32:.3e}", f"{r.ratio:.2f}",
                    f"{r.allowed:.3e}", mark))
    return out


def beside(rows: list, tuned: bool) -> str:
    """The measured verdict on a pipeline's own keys, in one line beside its tuned verdict (which decides the
    step): both are shown, and the line says when they differ."""
    bad = first_diverging(rows)
    worst = max(rows, key=lambda r: r.max / r.allowed if r.allowed else float("inf"), default=None)
    if worst is None:
        return "measured rule (align): no keys to judge"
    verdict = (f"first over: {bad.name} ({bad.why})"
               if bad else
               f"all {len(rows)} within (largest: {worst.name}, {worst.max / worst.allowed:.3g} of its allowance)")
    differ = "; the two verdicts differ, the tuned one decides this step" if (bad is not None) == tuned else ""
    return f"measured rule (align: {K:g} x torch's own fp32 error + a floor): {verdict}{differ}"


def module_scales(scales: dict) -> dict:
    """{module: the largest of its tensors' scales} from {tensor name (a.b.weight): its max |torch float64|}: each
    tensor's scale carried to every module above it, the model's own ("") included."""
    out = {}
    for name, scale in scales.items():
        parts = name.split(".")
        for i in range(len(parts)):
            module = ".".join(parts[:i])
            out[module] = max(out.get(module, 0.0), scale)
    return out


def zero_to_fp32(row: KeyResult, name: str, modules: dict, what: str = "tensors") -> KeyResult:
    """`row` of tensor `name` (a.b.bias), its floor on the scale of its module's tensors where its own value is zero
    to fp32 beside them: a value exact arithmetic makes 0 (a key bias's gradient: softmax takes no key shift; a
    query's and key's gradients where one position attends only to itself) is rounding left over from terms of the
    size of its module's other tensors, not of its own. The module is the nearest above it holding a tensor larger
    than its own; taken only where its own largest value is below one fp32 rounding of that (EPS32 x its scale):
    a small tensor that is not zero to fp32 keeps its own floor. modules: module_scales of the tensors of its kind
    (the gradients, or the weights after one step). Said in the row's notes."""
    if row.problems or not np.isfinite(row.scale):
        return row
    parts = name.split(".")
    for i in range(len(parts) - 1, -1, -1):
        module = ".".join(parts[:i])
        scale = modules.get(module, 0.0)
        if scale > row.scale:
            if row.scale <= EPS32 * scale:
                row.notes.append(f"zero to fp32 beside {module or 'the model'}'s {what} (its largest "
                                 f"{row.scale:.3g}, theirs {scale:.3g}): the floor on theirs")
                row.scale = float(scale)
            return row
    return row
