"""Each layer's cached keys and values, read from any form a library keeps them in, and judged torch's against
Paddle's by the measured rule: the same values in another axis order read as such, and the values at left-padded
positions, which no real token reads, left out and counted (portcheck.core.unread). May import core, mapping and
forward."""
import numpy as np

from portcheck.core import calibrated, unread
from portcheck.forward.judging import judge_one
from portcheck.mapping.trace import is_tensor, values

NAMES = ("keys", "values", "cross-attention keys", "cross-attention values")  # a layer's cached tensors, in order


def cache_tensors(past) -> tuple:
    """((keys, values[, cross-attention keys, cross-attention values]) per layer) of a cache, the framework's
    tensors: a tuple per layer (transformers' legacy one, paddlenlp's; its tensors in nested tuples, paddle's Cache
    and StaticCache, read in order), a tensor per layer holding its keys and values stacked on a first axis of 2, a
    transformers Cache (its key_cache and value_cache, or its layers' keys and
    values; an EncoderDecoderCache's self-attention cache, then its cross-attention one); () for what is none of
    these."""
    if past is None:
        return ()
    if hasattr(past, "self_attention_cache") and hasattr(past, "cross_attention_cache"):
        own, cross = cache_tensors(past.self_attention_cache), cache_tensors(past.cross_attention_cache)
        return tuple(a + b for a, b in zip(own, cross)) if len(cross) == len(own) else own
    if hasattr(past, "key_cache") and hasattr(past, "value_cache"):
        layers = [(k, v) for k, v in zip(past.key_cache, past.value_cache)]
    elif hasattr(past, "layers") and all(hasattr(x, "keys") and hasattr(x, "values") for x in past.layers):
        layers = [(x.keys, x.values) for x in past.layers]
    elif isinstance(past, (tuple, list)) and all(isinstance(x, (tuple, list)) for x in past):
        layers = [tuple(flat(x)) for x in past]
    elif isinstance(past, (tuple, list)) and past and all(is_tensor(x) and tuple(x.shape)[:1] == (2,) for x in past):
        layers = [(x[0], x[1]) for x in past]  # each layer's keys and values stacked on a first axis (CTRL's)
    else:
        return ()
    return tuple(layer for layer in layers if len(layer) in (2, 4) and all(is_tensor(t) for t in layer))


def cache_layers(past) -> list:
    """cache_tensors' layers as numpy arrays, copied."""
    return [tuple(np.array(values(t), copy=True) for t in layer) for layer in cache_tensors(past)]


def flat(value) -> list:
    """The tensors of nested tuples, in order."""
    if is_tensor(value):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat(v)]
    return []


def cache_rows(step: int, mine: list, twin: list, theirs: list, padded=None, cross_padded=None) -> tuple:
    """(each layer's cached keys, then values (then its cross-attention keys and values), torch's against
    Paddle's: [KeyResult], the values left out). padded, cross_padded: [batch, length] True at the left padding of
    the sequence the self-attention cache holds, of the prompt the cross-attention one holds: left out of the
    rule."""
    if len(mine) != len(theirs) or len(twin) != len(mine):
        return [calibrated.unjudged(f"step {step}: cache", (), f"torch's cache holds {len(mine)} layers, paddle's "
                                    f"{len(theirs)}" + ("" if len(twin) == len(mine) else
                                                        f", torch's float64 twin's {len(twin)}"))], 0
    rows, left_out = [], 0
    for i, (a, w, b) in enumerate(zip(mine, twin, theirs)):
        if len(a) != len(b):
            rows.append(calibrated.unjudged(f"step {step}: layer {i} cache", (), f"torch's layer holds {len(a)} "
                                            f"cached tensors, paddle's {len(b)}"))
            continue
        for j in range(min(len(a), len(w))):
            row, n = judged_cache(f"step {step}: layer {i} {NAMES[j]}", a[j], w[j], b[j],
                                  padded if j < 2 else cross_padded)
            rows.append(row)
            left_out += n
    return rows, left_out


def judged_cache(name: str, a: np.ndarray, ref: np.ndarray, b: np.ndarray, padded=None) -> tuple:
    """(torch's cached tensor [batch, heads, length, dim] against Paddle's, the values left out), Paddle's read in
    torch's layout where it holds the length second (paddlenlp's [batch, length, heads, dim]): by the cache's length,
    torch's axis 2, not by the values (a bug must not be read as another layout); where heads and length are equal,
    the closer reading. padded ([batch, length], True at left padding): those positions of the length axis take
    torch's value on the other side and in its float64 run, and are counted."""
    if a.ndim != 4 or b.ndim != 4:
        return judge_one(name, a, ref, b), 0
    length, swapped = a.shape[2], b.transpose(0, 2, 1, 3)
    readings = [x for x, held in ((b, b.shape[2] == length), (swapped, b.shape[1] == length)) if held
                and x.shape == a.shape]
    if not readings:
        return judge_one(name, a, ref, b), 0
    at = None if padded is None else unread.positions(a.shape, padded, axis=2)
    kept = lambda x: x if at is None else np.where(at, a, x)
    pick = min(readings, key=lambda x: float(np.max(np.abs(kept(x).astype(np.float64) - a)))) \
        if len(readings) > 1 else readings[0]
    row = judge_one(name, a, None if ref is None else kept(ref), kept(pick))
    if pick is swapped and not row.by_design:
        row.by_design = (f"by design: Paddle's cache {list(b.shape)} holds the length second, read as torch's "
                         f"[batch, heads, length, dim]")
    return row, 0 if at is None else int(at.sum())
