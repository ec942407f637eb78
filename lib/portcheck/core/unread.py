"""Values no real token reads: those held at the left padding of a batch of prompts. A padding query attends to
nothing, and each library fills that row its own way; what follows from it (the padding's hidden states, its keys and
values in the next layer's cache, its logits) differs between two correct ports and is read by no real token. While
`padding(masks)` holds, a value judged (forward.judging.judge_against, calibrated.own_error) takes torch's value at
each such position on the other side and in its float64 run, and the values so left out are counted. A real token
that reads the padding is still judged: its own value differs. Imports numpy alone."""
import contextlib
import contextvars
from dataclasses import dataclass, field

import numpy as np

_HELD = contextvars.ContextVar("portcheck_unread", default=None)


@dataclass
class Padding:
    """The left padding of the run being judged: masks [batch, length] (True at a padded position, one per sequence
    length the run holds: the prompt's, an encoder's), and how many values were left out of the rule so far."""
    masks: list = field(default_factory=list)
    left_out: int = 0


@contextlib.contextmanager
def padding(masks):
    """Within the block, every value judged leaves out its values at the padded positions of `masks` (arrays
    [batch, length], True or nonzero where a position is padding; those with no padding ignored). Yields the Padding,
    whose left_out counts the values left out."""
    held = Padding([np.asarray(m).astype(bool) for m in masks if np.asarray(m).ndim == 2 and np.asarray(m).any()])
    token = _HELD.set(held)
    try:
        yield held
    finally:
        _HELD.reset(token)


def positions(shape, mask=None, axis=None):
    """A boolean array of `shape`, True at each value held at a padded position, or None (no padding held, or no
    axis of the shape as long as a mask). mask and axis: that mask [batch, length] read along that axis; else each
    held mask along every axis after the first as long as it. The first axis is the batch, or the batch with another
    axis folded into it, batch first (BLOOM's [batch * heads, ...])."""
    held = _HELD.get()
    masks = [np.asarray(mask).astype(bool)] if mask is not None else [] if held is None else held.masks
    if len(shape) < 2 or not masks:
        return None
    out = None
    for m in masks:
        batch, length = m.shape
        if not batch or shape[0] % batch:
            continue
        rows = np.repeat(m, shape[0] // batch, axis=0)
        for ax in ([axis] if axis is not None else range(1, len(shape))):
            if shape[ax] == length:
                at = rows.reshape([shape[0]] + [length if i == ax else 1 for i in range(1, len(shape))])
                out = at if out is None else out | at
    return None if out is None or not out.any() else np.broadcast_to(out, tuple(shape))


def filled(a, other, counted: bool = False):
    """`other` with `a`'s values at the padded positions of the padding held (positions(a.shape)); as it is when none
    is held or the shapes differ. counted: the values left out added to the Padding's count."""
    if other is None or a is None or np.shape(a) != np.shape(other):
        return other
    at = positions(np.shape(a))
    if at is None:
        return other
    if counted:
        _HELD.get().left_out += int(at.sum())
    return np.where(at, a, other)
