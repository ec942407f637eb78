"""Two sides' module calls aligned, the machinery portcheck.mapping.pairing runs: each side's calls (Call, sequence),
how alike two calls are (similarity: the shapes of the tensors their modules hold, their outputs' shapes, the family
of their classes, their names to break ties), one Needleman-Wunsch pass over both sequences (_align: one best
alignment, and where several differ), and the pairs the structure forbids: containers whose insides do not
correspond (_inconsistent, _unfit), modules holding tensors that keep two containers of one name apart (_blocked).

May import portcheck.core and mapping's modules, lists, loose and regroup.
"""
import functools
from dataclasses import dataclass
from typing import Optional

import numpy as np

from portcheck.core import spill
from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping import loose, packed
from portcheck.mapping.lists import normal as _normal
from portcheck.mapping.modules import ALONE, META, decode, family, held
from portcheck.mapping.regroup import regrouped, tensors_fit


@functools.lru_cache(maxsize=4096)
def alike(a: str, b: str) -> bool:
    """Two class names of one family, or of one stem: a model's prefix on its own subclass of a block
    (transformers' MobileNetV2InvertedResidual and Paddle's InvertedResidual, GPTLayerNorm and LayerNorm), a
    position embedding named Positional on one side and Position on the other."""
    if not a or not b:
        return False
    x, y = (family(k).replace("positional", "position") for k in (a, b))
    return x == y or (min(len(x), len(y)) > 3 and (x.endswith(y) or y.endswith(x)))


@dataclass(frozen=True)
class Call:
    """One module call of one side."""
    name: str           # the call: the module's name, name#2 for its second call; ROOT for the model
    kind: str           # its class name ("" when the record does not say)
    children: int       # -1 when the record does not say
    tensors: tuple      # the layout-free shapes of the tensors its module holds itself
    outputs: tuple      # the shapes of its output tensors in order; () when it did not run
    padded: tuple = ()  # per output, (sequences, time steps) of the padded batch a packed one stands for, else None

    @property
    def module(self) -> str:
        return module_of(self.name)


def sequence(record: dict) -> list:
    """The calls of one side: those that ran, in run order, then the modules holding tensors that did not."""
    meta = {}
    for key in record:
        if key.startswith(META):
            name, _, kind = key[len(META):].rpartition("/")
            meta[name] = (kind, *decode(record[key]))
    outputs, padded = {}, {}
    for key in record:
        if key.startswith("out/"):
            outputs.setdefault(split_key(key)[1], []).append(tuple(spill.shape(record, key)))
            where = record.get(packed.PACKED + key)
            padded.setdefault(split_key(key)[1], []).append(None if where is None else packed.extent(where))
    calls = []
    for name, shapes in outputs.items():
        kind, children, tensors = meta.get(module_of(name), ("", -1, ()))
        extents = tuple(padded[name]) if any(e is not None for e in padded[name]) else ()
        calls.append(Call(name, kind, children, tensors, tuple(shapes), extents))
    ran = {c.module for c in calls}
    calls += [Call(name, kind, children, tensors, ()) for name, (kind, children, tensors) in meta.items()
              if tensors and name not in ran]
    return calls


def _broadcast(x: tuple, y: tuple) -> bool:
    """The same shape, or two that differ only where one is 1, or by leading axes one side lacks where the other
    holds at least [seq, d] (a position table [seq, d] against [batch, seq, d]): numpy's broadcast of one over
    the other."""
    x, y = tuple(x), tuple(y)
    if x == y:
        return True
    if len(x) != len(y) and min(len(x), len(y)) < 2:
        return False
    n = min(len(x), len(y))
    return all(i == j or 1 in (i, j) for i, j in zip(x[len(x) - n:], y[len(y) - n:]))


def reshaped(x: tuple, y: tuple) -> bool:
    """The same values in another shape: one side's [batch * seq, hidden] is the other's [batch, seq, hidden]
    (as many values, the same last axis, so a row is a row on both sides), or the same shape but for axes of 1
    (torchvision's pooled [batch, C, 1, 1] against paddle.vision's reshape to [batch, C]: as a broadcast, every
    value was compared with every other)."""
    x, y = tuple(x), tuple(y)
    squeezed = lambda s: tuple(d for d in s if d != 1)
    return x != y and bool(x) and bool(y) and int(np.prod(x, dtype=np.int64)) == int(np.prod(y, dtype=np.int64)) \
        and ((len(x) != len(y) and x[-1] == y[-1]) or squeezed(x) == squeezed(y))


@functools.lru_cache(maxsize=4096)
def _fits(x: tuple, y: tuple) -> bool:
    """Two output shapes one side's and the other's can be: broadcast, reshaped, or the same axes in another order
    with the batch first on both (a Conv1D run channels-last, [batch, seq, channels], against torch's [batch,
    channels, seq]: judging.judge_against compares it in the order its values say) (similarity's first test)."""
    return _broadcast(x, y) or reshaped(x, y) or any(p[0] == 0 for p in loose.axis_orders(x, y)) or regrouped(x, y)


def _output_fits(t: Call, i: int, theirs: tuple) -> bool:
    """torch call t's output i fits a Paddle output of shape `theirs` (_fits), or, a packed sequence, the padded
    batch it stands for (mapping.packed: torch's LSTM fed a PackedSequence against Paddle's fed sequence_length=)."""
    extent = t.padded[i] if i < len(t.padded) else None
    return _fits(t.outputs[i], theirs) if extent is None else packed.fits(t.outputs[i], extent, theirs)


def similarity(t: Call, p: Call) -> Optional[int]:
    """How alike two calls are (an integer, so that ties are exact), or None when they cannot be each other's."""
    if held(t.tensors) != held(p.tensors) and not tensors_fit(held(t.tensors), held(p.tensors)) or \
            ALONE in (t.children, p.children):
        return None
    # the first outputs fit, or one output fits one of the other's several (an attention returning its weights too)
    if t.outputs and p.outputs and not _output_fits(t, 0, p.outputs[0]) and not (
            1 in (len(t.outputs), len(p.outputs)) and any(_output_fits(t, i, b) for i in range(len(t.outputs))
                                                          for b in p.outputs)):
        return None
    same_family = alike(t.kind, p.kind)
    leaf = 0 in (t.children, p.children)
    if not t.tensors and leaf and (t.children != p.children or not same_family):
        return None  # a leaf computing nothing of its own pairs only with its own kind (GELU with ReLU, not Dropout)
    # the very shapes over shapes that only fit with axes merged (a 1x3 conv's [256, 512, 1, 3] against a 1x1 conv's
    # [256, 1536, 1, 1], as many values): a tie between the two is none
    score = (16 if t.tensors else 2) + 4 * same_family + 2 * (t.outputs == p.outputs and bool(t.outputs)) \
        + (t.tensors == p.tensors and bool(t.tensors))
    # names only break ties, and only where they agree: a shared layer index or word elsewhere in two names
    # says nothing (transformers' layer.1.normalization is paddle's bn2, not downsample.1)
    a, b = _normal(t.name), _normal(p.name)
    if bool(t.outputs) != bool(p.outputs):
        return score  # a name says nothing for a module that ran against one that did not (a tied `shared`)
    return score + (4 if a == b else 2 if a[-1] == b[-1] else 0)


NONE = np.iinfo(np.int64).min // 4  # cannot pair


FIXED = 1 << 20                     # a pair the name map gives: in every best alignment, so the rest keeps its order


def _align(ts: list, ps: list, score, harmless, groups=(lambda t: None, lambda p: None)) -> tuple:
    """One Needleman-Wunsch pass with a gap cost of 0: ([(i, j)] of one best alignment, [(i, [j, ...]) or
    ([i, ...], j) where several best alignments differ], [(i, j)] on another best alignment, not that one's). With
    gaps free, a row of the score table is a running maximum, computed whole. groups: a key for each side's calls;
    only calls of one key can score (a tenth of the pairs of a transformer's calls: the rest cannot pair, and
    scoring them is most of the pairing's time)."""
    n, m = len(ts), len(ps)
    if not n or not m:
        return [], [], []
    s = np.full((n, m), NONE, dtype=np.int64)
    group = {}
    for j, p in enumerate(ps):
        group.setdefault(groups[1](p), []).append(j)
    for i, t in enumerate(ts):
        for j in group.get(groups[0](t), ()):
            v = score(t, ps[j])
            if v is not None:
                s[i, j] = v
    f = np.zeros((n + 1, m + 1), dtype=np.int64)   # f[i, j]: best of ts[:i] against ps[:j]
    for i in range(n):
        f[i + 1, 1:] = np.maximum.accumulate(np.maximum(f[i, 1:], f[i, :-1] + s[i]))
    g = np.zeros((n + 1, m + 1), dtype=np.int64)   # g[i, j]: best of ts[i:] against ps[j:]
    for i in range(n - 1, -1, -1):
        g[i, :-1] = np.maximum.accumulate(np.maximum(g[i + 1, :-1], g[i + 1, 1:] + s[i])[::-1])[::-1]
    on = (s > NONE) & (f[:-1, :-1] + s + g[1:, 1:] == f[n, m])  # (i, j) is on some best alignment
    pairs, i, j = [], n, m
    while i and j:
        if s[i - 1, j - 1] > NONE and f[i - 1, j - 1] + s[i - 1, j - 1] == f[i, j]:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif f[i - 1, j] == f[i, j]:
            i -= 1
        else:
            j -= 1
    ties = [(i, list(js)) for i in range(n) if len(js := np.flatnonzero(on[i])) > 1
            and not harmless("paddle", [ps[j] for j in js])]
    ties += [(list(is_), j) for j in range(m) if len(is_ := np.flatnonzero(on[:, j])) > 1
             and not harmless("torch", [ts[i] for i in is_])]
    traced = set(pairs)
    others = [(int(i), int(j)) for i, j in zip(*np.nonzero(on)) if (i, j) not in traced]
    return pairs[::-1], ties, others


def _inconsistent(pairs: dict, calls: dict) -> set:
    """The pairs of containers whose insides do not correspond: a module holding tensors inside one whose
    counterpart is outside the other (transformers' attention.self holds query, key and value; paddle's
    self_attn holds out_proj too, whose counterpart is outside attention.self: the two compute different things)."""
    # a module called more than once (T5's `shared` embedding, read by the encoder and the decoder under their own
    # names) is inside each of its callers: where it is defined says nothing
    many = {module_of(c) for c in [*pairs, *pairs.values()] if "#" in c}
    holders = [(module_of(t), module_of(p)) for t, p in pairs.items()
               if calls[t].tensors and module_of(t) not in many and module_of(p) not in many]
    inside = lambda name, outer: outer == ROOT or name.startswith(outer + ".")
    bad = set()
    for t, p in pairs.items():
        if calls[t].children > 0 and not calls[t].tensors:
            a, b = module_of(t), module_of(p)
            if any(inside(x, a) != inside(y, b) for x, y in holders):
                bad.add((t, p))
    return bad


def _unfit(pairs: dict, found: list, others: list, ts: list, ps: list, calls: dict) -> set:
    """The pairs _inconsistent refuses among those a tie rests on: each (i, j) of another best alignment (_align's
    others), and each of this one's (found) sharing a call with them, beside the modules holding tensors paired."""
    shared = {i for i, _ in others}, {j for _, j in others}
    candidates = others + [(i, j) for i, j in found if i in shared[0] or j in shared[1]]
    traced = {**pairs, **{ts[i].name: ps[j].name for i, j in found}}
    holders = {t: p for t, p in traced.items() if calls[t].tensors}
    out = set()
    for i, j in candidates:
        t, p = ts[i].name, ps[j].name
        if ts[i].children > 0 and not ts[i].tensors and (t, p) in _inconsistent({**holders, t: p}, calls):
            out.add((t, p))
    return out


def _blocked(pairs: dict, calls: dict, p_calls: dict) -> set:
    """The pairs of differently named modules holding tensors that keep two containers of one name and kind apart:
    one inside the torch container, its counterpart outside the Paddle one, or the other way round. torch's
    TransformerEncoderLayer runs its norms after the attention and a pre-norm port before it: the run's order
    pairs layers.0.norm2 with Paddle's layers.1.norm1, and layers.0 with nothing (the layer whose input is the
    same and whose output is not would go unnamed)."""
    holders = [(t, p) for t, p in pairs.items() if calls[t].tensors]
    inside = lambda name, outer: name.startswith(outer + ".")
    taken, out = set(pairs.values()), set()
    for t, c in calls.items():
        p = p_calls.get(t)
        if t in pairs or p is None or p.name in taken or c.children <= 0 or c.tensors or not alike(c.kind, p.kind):
            continue
        # unless the other side holds nothing else x could be on the container's side (paddlenlp's BigBird applies
        # the embeddings' LayerNorm as its encoder's first step, encoder.norm: no norm inside its embeddings)
        other = lambda x: any(q.tensors == calls[x].tensors and alike(q.kind, calls[x].kind) and inside(
            q.module, p.module) == inside(module_of(x), c.module) for q in p_calls.values())
        out |= {(x, y) for x, y in holders if inside(module_of(x), c.module) != inside(module_of(y), p.module)
                and _normal(module_of(x)) != _normal(module_of(y)) and other(x)}
    return out
