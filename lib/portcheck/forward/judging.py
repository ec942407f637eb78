"""One output against the other: torch's value (its float64 run the yardstick) against Paddle's, dtypes and
shapes that differ by design said and compared (judge_one, judge_against), and a module's first input within its
rule (input_ok). May import core and mapping only."""
import dataclasses
import re

import numpy as np

from portcheck.core import calibrated, unread
from portcheck.core.calibrated import measure
from portcheck.core.diff import KeyResult
from portcheck.forward.twin import F64
from portcheck.mapping import alignment, loose, packed, regroup


def as_torch_holds(torch_record, key: str, value):
    """Paddle's output `value` for torch's output `key` as torch holds it: read at the places of the real tokens
    where torch's record keeps a packed sequence there (mapping.packed: the padding is judged on neither side), else
    as it is (also where the places do not fit it: the judge then says the shapes)."""
    where = torch_record.get(packed.PACKED + key)
    read = None if where is None else packed.as_packed(where, value, torch_record.get(key))
    return value if read is None else read


def judge_one(name, a, ref, b, forms=True) -> KeyResult:
    """One torch output `a` (its float64 run `ref`) against Paddle's `b`: dtypes must agree; shapes that differ
    only where one side keeps a size-1 axis the other repeats are compared broadcast, and said so."""
    return calibrated.own_error(judge_against(name, a, b, forms), a, ref)


def judge_against(name, a, b, forms=True) -> KeyResult:
    """judge_one's half that reads Paddle's value; calibrated.own_error adds torch's own error (isolate.judge
    judges Paddle's values as its run computes them, before torch's float64 run)."""
    note = ""
    if a.dtype != b.dtype and _held_otherwise(a, b):
        # transformers' OPT hands its position embedding a float32 mask, paddlenlp's a bool one: compared as values
        note, b = f"by design: dtypes {a.dtype} and {b.dtype}, compared as {a.dtype}", b.astype(a.dtype)
    if a.dtype != b.dtype:
        return calibrated.unjudged(name, a.shape, f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}")
    # one shape: its row first, whose max difference is in_axis_order's own measure, and the row when b stays as it is
    row = calibrated.against(name, a, b) if a.shape == b.shape else None
    here = row.max if row is not None and not row.problems else None
    order = loose.in_axis_order(a, b, here) if loose.axis_orders(a.shape, b.shape) else None
    if order is not None:
        # one side's module takes [batch, hidden, seq], the other's [batch, seq, hidden]: the same values
        note = f"by design: shapes {list(a.shape)} and {list(b.shape)}, the same values in another axis order"
        b = np.transpose(b, np.argsort(order))
    elif alignment.reshaped(a.shape, b.shape):
        # one side feeds its Linear [batch * seq, hidden], the other [batch, seq, hidden]: the same rows
        note = f"by design: shapes {list(a.shape)} and {list(b.shape)}, the same values in another shape"
        b = b.reshape(a.shape)
    elif regroup.regrouped(a.shape, b.shape):
        # paddlenlp's BigBird Linear3D returns [batch, heads, seq, head size], torch's Linear [batch, seq, hidden]
        note = f"by design: shapes {list(a.shape)} and {list(b.shape)}, the same values with axes split and reordered"
        b = regroup.as_other(b, a.shape, near=a)
    elif a.shape != b.shape and broadcasts(a.shape, b.shape):
        # transformers' position embeddings [1, L, H], paddlenlp's [B, L, H]: the same values
        note = f"by design: shapes {list(a.shape)} and {list(b.shape)}, one side broadcast over the other"
        shape = np.broadcast_shapes(a.shape, b.shape)
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    filled = mask_fills(a, b) or (probabilities(a, b) if forms else None)
    if filled:
        note, b = filled
    held = unread.filled(a, b, counted=True)  # a left-padded position no real token reads: torch's value taken
    if row is None or order is not None or filled or held is not b:
        b = held
        row = calibrated.against(name, a, b)
    row.by_design = note
    return row


MASKED = -5e3  # at or below it a position is masked: paddlenlp fills its additive masks with -1e4 (plus a bias)


def mask_fills(a, b):
    """(the line, Paddle's values with the masked positions given torch's) where the two hold an additive attention
    mask filled with different values at the same positions: transformers fills with torch.finfo(float32).min or
    -inf, paddlenlp with -1e4 (T5's position bias returned with the causal mask added), each far below any score and
    0 after softmax. None when no position is saturated on one side only, or the two mask different positions (then
    judged as they are: red)."""
    if a.dtype.kind != "f" or a.shape != b.shape or not a.size:
        return None
    if not (a.min() <= -calibrated.SATURATED or b.min() <= -calibrated.SATURATED):
        return None  # two passes with no temporaries: most outputs hold no mask (a NaN is judged as it is)
    with np.errstate(invalid="ignore"):
        low_a, low_b = a <= -calibrated.SATURATED, b <= -calibrated.SATURATED
        if not (low_a ^ low_b).any() or not np.array_equal(a <= MASKED, b <= MASKED):
            return None
    at = a <= MASKED
    fill = lambda x: f"{float(np.min(x[at])):.3g}" if np.isfinite(x[at]).all() else "-inf"
    return (f"by design: a mask filled with {fill(a)} on torch's side and {fill(b)} on Paddle's at the same "
            f"{int(at.sum())} positions (each 0 after softmax), compared elsewhere", np.where(at, a, b))


def _held_otherwise(a, b) -> bool:
    """A mask or an index held as another dtype: one side boolean, or both integer, and Paddle's values all held
    by torch's dtype. Two float dtypes never are (float64 against float32 is a port's own slip)."""
    if "b" not in a.dtype.kind + b.dtype.kind and not (a.dtype.kind in "iu" and b.dtype.kind in "iu"):
        return False
    with np.errstate(all="ignore"):
        return bool(np.array_equal(b.astype(a.dtype).astype(b.dtype), b))


def broadcasts(x: tuple, y: tuple) -> bool:
    """The two shapes differ only where one of them is 1, or by leading axes (alignment._broadcast's rule)."""
    return alignment._broadcast(x, y)


def input_ok(a, ref, b):
    """Whether a module's first input was within tolerance (None: not recorded on both sides)."""
    if a is None or b is None:
        return None
    if alignment.reshaped(a.shape, b.shape):
        b = b.reshape(a.shape)  # the same values in another shape (judge_against)
    elif regroup.regrouped(a.shape, b.shape):
        b = regroup.as_other(b, a.shape, near=a)
    elif a.shape != b.shape and broadcasts(a.shape, b.shape):  # one side's [seq, d] broadcast over [batch, seq, d]
        shape = np.broadcast_shapes(a.shape, b.shape)
        ref = None if ref is None or ref.shape != a.shape else np.broadcast_to(ref, shape)
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    if a.dtype.kind != "f" or a.shape != b.shape:
        return a.shape == b.shape and bool(np.array_equal(a, unread.filled(a, b)))
    return measure("in", a, ref if ref is not None and ref.shape == a.shape else None, unread.filled(a, b)).passed


def _distribution(x) -> bool:
    """Rows (the last axis, 2 or more) of values at or above 0 summing to 1: probabilities."""
    return x.ndim >= 1 and x.shape[-1] >= 2 and x.size > 0 and bool((x >= 0).all()) and \
        bool(np.allclose(x.astype(np.float64).sum(-1), 1.0, rtol=0, atol=1e-4))


PROBABILITIES = "by design: a router's output in two forms: "


def routers_only(rows: list, routers: set, torch_record, paddle_record, counterparts: dict) -> list:
    """rows, each judged in two forms (probabilities()) judged again as it is unless its call is a router the routing
    found (routers: torch calls): a classifier returning probabilities against a port's logits is red."""
    def plain(row):
        key = f"out/{row.key}"
        again = judge_one(row.key, torch_record[key], torch_record.get(F64 + key),
                          paddle_record[counterparts[key]], forms=False)
        return dataclasses.replace(again, rule=row.rule, input_ok=row.input_ok)
    return [plain(r) if r.by_design.startswith(PROBABILITIES) and re.split(r"[\[:]", r.key)[0] not in routers
            and f"out/{r.key}" in counterparts else r for r in rows]


def probabilities(a, b):
    """(note, b in torch's form) where one side returns a router's probabilities over the last axis and the other
    its logits (transformers 5's Qwen3MoeTopKRouter softmaxes, paddleformers' gate is a Linear): torch's
    probabilities against the softmax of Paddle's logits, or torch's logits against the log of Paddle's
    probabilities plus torch's log-sum-exp (the logits they are, when the two are one model); None otherwise (and
    for any output but a 2-D one, a router's [tokens, experts]). What
    both compute, the experts chosen and their weights, is judged after it: a softmax missing where it changes
    them is red there."""
    if a.ndim != 2 or a.shape != b.shape or a.dtype.kind != "f" or not a.size or a.shape[-1] < 2 or \
            (a.min() < 0) == (b.min() < 0):
        return None  # a router's output is [tokens, experts]: an attention's probabilities [b, h, s, s] are not one
    if _distribution(a) == _distribution(b):
        return None
    x = b.astype(np.float64)
    if _distribution(a):
        e = np.exp(x - x.max(-1, keepdims=True))
        return (f"{PROBABILITIES}torch's output is probabilities, Paddle's logits: compared as probabilities (Paddle's "
                "softmax over the last axis)"), (e / e.sum(-1, keepdims=True)).astype(a.dtype)
    t = a.astype(np.float64)
    top = t.max(-1, keepdims=True)
    lse = top + np.log(np.exp(t - top).sum(-1, keepdims=True))
    with np.errstate(divide="ignore"):
        return (f"{PROBABILITIES}torch's output is logits, Paddle's probabilities: compared as logits (the log of Paddle's "
                "plus torch's log-sum-exp over the last axis)"), (np.log(x) + lse).astype(a.dtype)


def in_own_form(value, own):
    """torch's router output `value` in the form this side's `own` output holds (probabilities(): isolate feeds each
    side its own): the log of torch's probabilities where this side returns logits (their softmax is torch's), the
    softmax of torch's logits where it returns probabilities; None where both are in one form."""
    value, own = np.asarray(value), np.asarray(own)
    if value.ndim != 2 or value.shape != own.shape or value.dtype.kind != "f" or not value.size or value.shape[-1] < 2 or \
            (value.min() < 0) == (own.min() < 0) or _distribution(value) == _distribution(own):
        return None
    x = value.astype(np.float64)
    if _distribution(value):
        with np.errstate(divide="ignore"):
            return np.log(x).astype(value.dtype)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(value.dtype)
