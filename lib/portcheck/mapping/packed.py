"""torch's PackedSequence against a padded batch: torch's RNNs fed pack_padded_sequence return the real tokens only,
packed time step by time step ([total tokens, H]); Paddle's RNNs read the padded batch and its sequence_length= and
return it padded ([B, T, H], or [T, B, H] time-major). A record keeps torch's packed output as it is (its data, the
values torch computed) under the output's key, and beside it, under PACKED + that key, where each row sits in the
padded batch ([rows, 2]: its sequence, its time step). The pairing reads the padded extent it stands for
(padded_extent: an output as long as the longest sequence, or longer, fits), and the judge reads the Paddle output at
those places (as_packed): the two are judged on the real tokens, never on the padding either side fills its own way.

May import core only; torch is never imported here (a record made beside a torch model hands its objects in)."""
import numpy as np

PACKED = "packed/"  # a record's key: packed/<output key>, int64 [rows, 2], each packed row's (sequence, time step)


def is_packed(value) -> bool:
    """torch's PackedSequence (read by what it holds, so that neither framework is imported for it)."""
    return isinstance(value, tuple) and all(hasattr(value, f) for f in ("data", "batch_sizes", "sorted_indices"))


def positions(sequence) -> np.ndarray:
    """[rows, 2] int64: the (sequence, time step) of each row of a PackedSequence's data, in its order: time step t
    holds batch_sizes[t] rows, the i-th of them sequence sorted_indices[i] (i itself where it was packed sorted)."""
    sizes = np.asarray(sequence.batch_sizes.detach().cpu().numpy(), dtype=np.int64)
    order = sequence.sorted_indices
    order = np.arange(int(sizes[0]) if sizes.size else 0) if order is None else \
        np.asarray(order.detach().cpu().numpy(), dtype=np.int64)
    steps = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    ranks = np.concatenate([np.arange(n, dtype=np.int64) for n in sizes]) if sizes.size else steps
    return np.stack([order[ranks], steps], axis=1)


def extent(where) -> tuple:
    """(sequences, the longest's time steps) of a packed output's positions."""
    where = np.asarray(where)
    return (int(where[:, 0].max()) + 1, int(where[:, 1].max()) + 1) if where.size else (0, 0)


def fits(rows: tuple, padded_extent: tuple, theirs: tuple) -> bool:
    """Whether the other side's output shape `theirs` is the padded batch a packed output of shape `rows` ([rows,
    ...features]) stands for: [B, T, ...features] or [T, B, ...features], T at least the longest sequence's."""
    batch, steps = padded_extent
    theirs, features = tuple(theirs), tuple(rows)[1:]
    if len(theirs) != len(features) + 2 or theirs[2:] != features:
        return False
    return (theirs[0] == batch and theirs[1] >= steps) or (theirs[1] == batch and theirs[0] >= steps)


def _orders(where, shape) -> list:
    """The index pairs that read a padded output of `shape` at the packed positions: (sequence, step) batch first,
    (step, sequence) time first, those that fit."""
    batch, steps = extent(where)
    out = []
    if len(shape) >= 2 and shape[0] >= batch and shape[1] >= steps:
        out.append((where[:, 0], where[:, 1]))
    if len(shape) >= 2 and shape[1] >= batch and shape[0] >= steps:
        out.append((where[:, 1], where[:, 0]))
    return out


def as_packed(where, value, near=None):
    """The other side's padded output `value` read at a packed output's positions: [rows, ...features], as torch's
    packed data holds them; batch first where that fits, else time first, and where both fit (B == T), the one
    nearer `near` (torch's packed values). None where neither fits."""
    where, value = np.asarray(where), np.asarray(value)
    reads = [value[index] for index in _orders(where, value.shape)] if where.size else []
    if len(reads) > 1 and near is not None and np.shape(near) == reads[0].shape:
        reads.sort(key=lambda r: _far(r, near))
    return reads[0] if reads else None


def as_padded(where, rows, own):
    """The packed rows written into a copy of this side's padded output `own` at their places (its padding kept as
    it is): what a run fed torch's values hands on. Batch first or time first, whichever read of `own` is nearer
    the rows; None where neither fits."""
    where, own = np.asarray(where), np.array(own)
    orders = _orders(where, own.shape) if where.size else []
    if not orders or own[orders[0]].shape != np.shape(rows):
        return None
    orders.sort(key=lambda index: _far(own[index], rows))
    own[orders[0]] = rows
    return own


def _far(a, b) -> float:
    return float(np.abs(np.subtract(a, b, dtype=np.float64)).max()) if np.size(a) else 0.0
