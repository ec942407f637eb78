"""Which Paddle module is which torch module, with no name map, or beyond the entries of the one given.

Each side is a sequence of module calls: in run order when the models ran on a batch (a record's out/ keys),
then the modules holding tensors that did not run, in definition order; with no run, the modules holding
tensors in definition order. A call carries what identifies a module across frameworks: the shapes of the
tensors its module holds itself (each shape's sizes sorted, so torch's Linear [out, in] and Paddle's [in, out]
agree), whether it has children, its class and name, and the shapes of its outputs.

The two sequences are aligned as edit distance aligns two strings (Needleman-Wunsch): the order-keeping
pairing of highest total similarity, where leaving a call unpaired costs nothing. A wrapper one side adds, an
activation the other folds into a block, a module called twice or extra containers shift no other pair, as
they would in a positional zip. Calls left over are aligned again among themselves (a shortcut defined before
its block on one side and after it on the other).

Two modules holding different tensor shapes never pair; a module holding tensors never pairs with one holding
none; a leaf holding none pairs only with a leaf of its family (an activation with an activation). Where two
candidates fit equally well and the order cannot separate them, the run's values do: the candidate whose
output is torch's (transformers' MobileNetV2InvertedResidual is Paddle's InvertedResidual, not its inner
Sequential, because the block adds its input); a tie resting on a pair of containers whose insides do not
correspond is none, that pair forbidden first (_unfit). What values cannot settle either is refused, naming the
modules and the name_map that settles it, written as the API takes it. A name_map's entries (names.entries: the
modules it names) are kept as given; the rest is automatic. The root modules are each other's. Outputs of the same
values in another shape ([batch * seq, hidden] against [batch, seq, hidden]) pair. Lists of like modules that
correspond (lists.matched: an MoE's experts) pair child by child, by their index, never by the routing."""
import functools
import re
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from portcheck.core import spill
from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping import loose
from portcheck.mapping.modules import ACT, ALONE, META, decode, family, held, text
from portcheck.mapping.trace import SCALES, applied_rules, scale_rules, scale_said
from portcheck.mapping.names import entries
from portcheck.mapping.regroup import regrouped, tensors_fit
from portcheck.mapping.lists import indexed, inside, keys as list_keys, matched, normal as _normal
from portcheck.mapping.ties import (ambiguity, containers, distance, entry, fusions_of, nearest_of, one_module_each,
                                    outputs_of, same_values, settled_by_name, settled_by_value, tied_calls, ties_said)

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
    outputs = {}
    for key in record:
        if key.startswith("out/"):
            outputs.setdefault(split_key(key)[1], []).append(tuple(spill.shape(record, key)))
    calls = []
    for name, shapes in outputs.items():
        kind, children, tensors = meta.get(module_of(name), ("", -1, ()))
        calls.append(Call(name, kind, children, tensors, tuple(shapes)))
    ran = {c.module for c in calls}
    calls += [Call(name, kind, children, tensors, ()) for name, (kind, children, tensors) in meta.items()
              if tensors and name not in ran]
    return calls


# ---------------------------------------------------------------- similarity and alignment

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


def similarity(t: Call, p: Call) -> Optional[int]:
    """How alike two calls are (an integer, so that ties are exact), or None when they cannot be each other's."""
    if held(t.tensors) != held(p.tensors) and not tensors_fit(held(t.tensors), held(p.tensors)) or \
            ALONE in (t.children, p.children):
        return None
    # the first outputs fit, or one output fits one of the other's several (an attention returning its weights too)
    if t.outputs and p.outputs and not _fits(t.outputs[0], p.outputs[0]) and not (
            1 in (len(t.outputs), len(p.outputs)) and any(_fits(a, b) for a in t.outputs for b in p.outputs)):
        return None
    same_family = alike(t.kind, p.kind)
    leaf = 0 in (t.children, p.children)
    if not t.tensors and leaf and (t.children != p.children or not same_family):
        return None  # a leaf computing nothing of its own pairs only with its own kind (GELU with ReLU, not Dropout)
    score = (16 if t.tensors else 2) + 4 * same_family + 2 * (t.outputs == p.outputs and bool(t.outputs))
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


@dataclass
class Pairing:
    """The calls of two records paired: every pair chosen and every call left unpaired, on both sides."""
    pairs: dict = field(default_factory=dict)        # torch call -> Paddle call, in torch's order
    torch_calls: list = field(default_factory=list)  # [Call] of each side, in its order
    paddle_calls: list = field(default_factory=list)
    named: set = field(default_factory=set)          # torch calls paired by the name map
    settled: dict = field(default_factory=dict)      # torch call -> Paddle call: ties the run's values settled
    doubtful: list = field(default_factory=list)     # [[(torch call, Paddle call), ...]]: pairs only the order chose
    missing: dict = field(default_factory=dict)      # torch module -> the Paddle module the map names, absent
    # torch call -> [the parameter-free torch calls after it] its Paddle call computes too (_composed)
    composed: dict = field(default_factory=dict)
    # torch call -> [the parameter-free Paddle calls after its Paddle call] the torch call computes too
    paddle_composed: dict = field(default_factory=dict)
    # torch call -> the activation torch's forward applies to its output, outside any module (trace.watch), that
    # its Paddle call is judged through (_applied), or the scale rule "*c"/"/c" (trace.scale_rules); Paddle call ->
    # the activation it declares (modules.ACT)
    applied: dict = field(default_factory=dict)
    acts: dict = field(default_factory=dict)
    # {module's last name: its parts}: a module of one side holding what the other side's modules a tie left hold
    # together (ties.fusions_of), the tie settled by the run's values: paired with nothing (fused.taken declares it)
    fusions: dict = field(default_factory=dict)

    @property
    def torch_unpaired(self) -> list:
        within = {c for chain in self.composed.values() for c in chain}
        return [c.name for c in self.torch_calls if c.name not in self.pairs and c.name not in within]

    def composing(self) -> dict:
        """{torch call: the paired torch call it is judged as}: each composed chain's calls, its last one's output
        judged as the first's (the module Paddle's computes: its row is named by it, on its input)."""
        return {c: t for t, chain in self.composed.items() for c in [t, *chain]}

    def judged_as(self, call: str) -> str:
        """The torch call whose output a paired torch call's Paddle counterpart is judged against: its own, or
        the last of those its Paddle call computes too (composed)."""
        return self.composed[call][-1] if call in self.composed else call

    @property
    def paddle_unpaired(self) -> list:
        taken = set(self.pairs.values()) | {c for chain in self.paddle_composed.values() for c in chain}
        return [c.name for c in self.paddle_calls if c.name not in taken]

    def paddle_judged_as(self, call: str) -> str:
        """The Paddle call whose output a torch call is judged against: its pair's, or the last of those the torch
        call computes too (paddle_composed)."""
        return self.paddle_composed[call][-1] if call in self.paddle_composed else self.pairs[call]

    def by_place(self, paddle_module: str, torch_modules) -> Optional[str]:
        """The torch module (of `torch_modules`) where a Paddle module that paired with none stands: its last name
        under the torch module its parent's other children pair under (llama.layers.1.mlp.down_proj:
        model.layers.1.mlp.down_proj, where gate_proj pairs so), or its own name; None where neither is there."""
        parent, _, leaf = paddle_module.rpartition(".")
        under = [module_of(t).rpartition(".")[0] for t, p in self.pairs.items() if "." in module_of(t) and
                 "." in module_of(p) and module_of(p).rpartition(".")[0] == parent]
        return next((f"{t}.{leaf}" for t in under if f"{t}.{leaf}" in torch_modules),
                    paddle_module if paddle_module in torch_modules else None)

    def applied_to(self, keys) -> dict:
        """{torch output key (out/<call>...): the activation it is judged through} of `keys` (applied)."""
        return {k: self.applied[split_key(k)[1]] for k in keys
                if k.startswith("out/") and split_key(k)[1] in self.applied}

    def modules(self) -> dict:
        """torch module -> Paddle module, from their calls. A torch module holding tensors whose calls pair with
        several Paddle modules (one weight torch shares between its calls, one module per call in the port) is
        refused, naming the name_map entry that settles it: the module of its first call, which it is then judged
        against; the others are filled with copies of its tensors (copies())."""
        out, holds = {}, {c.module for c in self.torch_calls if c.tensors}
        for t, p in self.pairs.items():
            out.setdefault(module_of(t), []).append(module_of(p))  # in torch's run order: the first call's first
        chosen = {module_of(t): module_of(p) for t, p in self.pairs.items() if t in self.named}
        split = {t: ps for t, ps in out.items() if len(set(ps)) > 1 and t in holds and chosen.get(t) not in ps}
        if split:
            children = {c.module: c.children for c in self.torch_calls}
            said = [f"torch {t} runs as {len(set(ps))} Paddle modules ({', '.join(dict.fromkeys(ps))})" for t, ps in
                    split.items()]
            first, ps = next(iter(split.items()))
            # one map settling them all: one module's entry pasted alone is refused again at the next one
            one = entry(first, ps[0], max(children.get(first, 0), 0)) if len(split) == 1 else \
                repr([("^" + re.escape(t) + "$", ps[0]) for t, ps in split.items()])
            raise PipelineError(f"{'; '.join(said[:3])}{f'; {len(said) - 3} more' if len(said) > 3 else ''}: "
                                f"{'it holds' if len(split) == 1 else 'each holds'} tensors, one weight torch shares "
                                "between its calls and the Paddle port holds once per call (it trains them apart: "
                                "compare_backward judges that); to fill each with its tensors and judge it against "
                                f"its first call's, name_map={one} [PC316]")
        return {t: chosen[t] if chosen.get(t) in ps else min(ps) for t, ps in out.items()}

    def copies(self) -> dict:
        """{torch module holding tensors: the Paddle modules its later calls pair with, besides modules()'s}: each
        is filled with a copy of its tensors (a weight torch shares between calls, held once per call in the port)."""
        modules, holds, out = self.modules(), {c.module for c in self.torch_calls if c.tensors}, {}
        for t, p in self.pairs.items():
            m, q = module_of(t), module_of(p)
            if m in holds and q != modules[m] and q not in out.get(m, []):
                out.setdefault(m, []).append(q)
        return out

    def _kind(self, call: str) -> str:
        return next((c.kind for c in self.paddle_calls if c.name == call), "")

    def lines(self) -> list:
        """Every pair, then every call left unpaired on each side: what the report says it chose."""
        how = lambda t: " (name map)" if t in self.named else " (by value)" if t in self.settled else \
            f" ({scale_said(self.applied[t])})" if self.applied.get(t, "")[:1] in SCALES else \
            (f" (Paddle {self.pairs[t]} is {self._kind(self.pairs[t])}(act={self.acts.get(self.pairs[t])}): judged "
             f"against torch's {t} followed by {self.applied[t]}, which torch's forward applies to it)"
             if t in self.applied else "")
        out = [f"{' + '.join([t, *self.composed[t]])} -> {p} (Paddle's module computes torch's in turn)"
               if t in self.composed else
               f"{t} -> {' + '.join([p, *self.paddle_composed[t]])} (torch's module computes Paddle's in turn)"
               if t in self.paddle_composed else f"{t} -> {p}{how(t)}" for t, p in self.pairs.items()]
        out.append(f"torch calls unpaired ({len(self.torch_unpaired)}): {', '.join(self.torch_unpaired) or '-'}")
        out.append(f"Paddle calls unpaired ({len(self.paddle_unpaired)}): {', '.join(self.paddle_unpaired) or '-'}")
        return out


def pair(torch_record: dict, paddle_record: dict, name_map=None, weights_only=False) -> Pairing:
    """Pair the module calls of a torch record with a Paddle one (record_forward's, describe's, or a training
    record's first forward). name_map's entries are kept; the rest is aligned (module docstring). Where two
    candidates fit equally well, the run's values settle it (settled_by_value: the one whose output is torch's);
    raises a PipelineError naming the modules and the entry that settles it when they cannot. weights_only:
    ties between calls holding no tensors are left to the alignment (a conversion's weights do not depend on
    them, and its models do not hold the same weights yet: values cannot settle them)."""
    ts, ps = sequence(torch_record), sequence(paddle_record)
    result = Pairing(torch_calls=ts, paddle_calls=ps)
    by_name = {c.name: c for c in ps}
    named, fixed, sent = entries(name_map), {}, {}
    ran = any(k.startswith("out/") for k in torch_record) and any(k.startswith("out/") for k in paddle_record)
    for t in ts:
        target = ROOT if t.module == ROOT else named(t.module)
        if target in (None, ROOT, "") and t.module != ROOT:
            # a prefix sent to the model itself ({"model": "(model)"}): its modules are the Paddle model's; the
            # module itself is left to the alignment, the models' own outputs being judged against each other
            continue
        call = target + t.name[len(t.module):]
        if call in by_name:
            fixed[t.name] = call
            sent.setdefault(target, []).append(t.name)
        elif target not in {c.module for c in ps}:
            result.missing[t.module] = target
    for target, names in sent.items():
        if len({module_of(t) for t in names}) > 1:
            # several torch modules sent to one Paddle module (each half's own embedding on one side, tied, and
            # one `shared` both halves call on the other): each torch call takes the Paddle call whose output is
            # its own, else the next in run order
            free = [c.name for c in ps if c.module == target]
            for t in names:
                d = {p: distance(outputs_of(torch_record, t), outputs_of(paddle_record, p))
                     for p in free} if ran else {}
                fixed[t] = min(free, key=lambda p: (d.get(p, 0), free.index(p))) if free else fixed[t]
                free.remove(fixed[t]) if fixed[t] in free else None
    result.named = {t for t in fixed if module_of(t) != ROOT}

    def harmless(side, candidates):
        """Candidates holding no tensors whose outputs are the same values (nested containers returning one
        tensor): either pairing compares the same thing."""
        if any(c.tensors for c in candidates):
            return False
        record = torch_record if side == "torch" else paddle_record
        first = outputs_of(record, candidates[0].name)
        return bool(first) and all(same_values(first, outputs_of(record, c.name)) for c in candidates[1:])

    forbidden, calls, unsettled, refused, fusions = set(), {c.name: c for c in ts}, set(), [], {}
    from portcheck.mapping.fused import packed_parts  # fused reads pairing's records: imported here, where it is needed
    packed = packed_parts(torch_record)
    fixed_p = set(fixed.values())
    # what can score: a pair the map gives, else two calls holding the same shapes (similarity)
    lists = matched(torch_record, paddle_record)  # child i of a list pairs with child i alone, its rows any count
    at_t = list_keys({c.module for c in ts}, {t: t for t in lists})
    at_p = list_keys({c.module for c in ps}, {p: t for t, p in lists.items()})
    sizes = lambda c: tuple(sorted(int(np.prod(s)) for s in held(c.tensors)))  # the same under merged axes (regroup)
    groups = (lambda t: ("map", fixed[t.name]) if t.name in fixed else (at_t[t.module], sizes(t)),
              lambda p: ("map", p.name) if p.name in fixed_p else (at_p[p.module], sizes(p)))
    grown = None
    while True:
        def score(t, p):
            if t.name in fixed or p.name in fixed_p:
                return FIXED if fixed.get(t.name) == p.name else None
            if (t.name, p.name) in forbidden:
                return None
            return similarity(replace(t, outputs=()), replace(p, outputs=())) if at_t[t.module] else similarity(t, p)
        pairs, first = {}, True
        while True:  # the first pass aligns every call that ran; each next one the modules holding tensors left over
            taken = set(pairs.values())
            # a module that did not run (torch's MultiheadAttention reads out_proj's weight without calling it) has
            # no place in the run's order: in the first pass, a map's or a tie's pair of it would cross every other
            kept = lambda c: (c.tensors or first) and (c.outputs or not (first and ran))
            left_t = [c for c in ts if c.name not in pairs and c.module not in result.missing and kept(c)]
            left_p = [c for c in ps if c.name not in taken and kept(c)]
            if packed:
                # a packed module's parts never run (torch's MultiheadAttention reads q, k and v from in_proj_weight):
                # no order places them, their names do, where the other side holds a module of that very name that
                # fits (Fused(("q_proj", "k_proj", "v_proj"), output=False) against Paddle's q_proj, k_proj, v_proj)
                same = {p.name: p for p in left_p}
                named_here = {t.name: t.name for t in left_t if t.name in packed and t.name in same
                              and t.name not in fixed and score(t, same[t.name]) is not None}
                pairs.update(named_here)
                left_t = [c for c in left_t if c.name not in named_here]
                left_p = [c for c in left_p if c.name not in named_here.values()]
            found, ties, others = _align(left_t, left_p, score, harmless, groups)
            if first and lists and ran and grown is None:  # children one side did not run (lists.inside)
                grown = inside(found, ties, (left_t, left_p), (ts, ps), lists, indexed(torch_record), fixed)
                if grown:
                    fixed.update(grown)
                    fixed_p.update(grown.values())
                    pairs, first = {}, True
                    continue
            # torch calls the map sends to one Paddle call (a head tied to the embedding, each named): nothing to settle
            ties = [(i, j) for i, j in ties if not isinstance(i, list) or
                    any(fixed.get(left_t[k].name) != left_p[j].name for k in i)]
            if weights_only:  # a tie among calls of one module on each side sends the same weights either way
                ties = [tie for tie in ties if any(c.tensors for c in tied_calls(tie, left_t, left_p))
                        and not one_module_each(tie, left_t, left_p)]
            if ties:
                # a tie may rest on a pair joining containers whose insides do not correspond, which _inconsistent
                # forbids after the alignment: torchvision's features.11 (a residual block, its only child the
                # layers) against Paddle's whole `blocks` makes features.11.block -> blocks.10 as good as
                # features.11 -> blocks.10. Forbidden first, the structure decides, not values a bug upstream moves.
                bad = _unfit(pairs, found, others, left_t, left_p, calls) - set(fixed.items()) - forbidden
                if bad:
                    forbidden |= bad
                    pairs, first = {}, True
                    continue
                # a conversion's models do not hold the same weights yet: their values settle nothing
                chosen = (settled_by_value(ties, left_t, left_p, torch_record, paddle_record)
                          if ran and not weights_only else {}) or settled_by_name(ties, left_t, left_p)
                if not chosen:
                    # refused once every tie is found: each one's first candidate taken, as the map the refusal
                    # prints does, so that the ties it would leave are said with it (pasted, it pairs them all)
                    refused += ties_said(ties, left_t, left_p)
                    fusions.update(fusions_of(ties, left_t, left_p, ts, ps))
                    for one, others, torch_one in ties_said(ties, left_t, left_p):  # the first tie's at least
                        t, p = (one.name, others[0].name) if torch_one else (others[0].name, one.name)
                        if t not in chosen and p not in chosen.values():
                            chosen[t] = p
                else:
                    result.settled.update(chosen)
                    result.fusions.update(fusions_of(ties, left_t, left_p, ts, ps, ran=True))
                fixed.update(chosen)  # kept as a map's entries are, and the whole alignment made again
                fixed_p.update(chosen.values())
                pairs, first = {}, True
                continue
            if not found and not first:
                break
            pairs.update((left_t[i].name, left_p[j].name) for i, j in found)
            first = False
        if refused:
            error = PipelineError(ambiguity(refused, ran, fusions, (ts, ps), guessed=weights_only))
            error.fusions = fusions  # {module's last name: its parts}, as data: fused.taken declares them
            raise error
        pairs.update(fixed)  # a map's entries that cross each other are kept too
        bad = (_inconsistent(pairs, calls) | _blocked(pairs, calls, by_name)) - set(fixed.items()) - forbidden
        if bad:
            forbidden |= bad
            continue
        doubt = [g for g in _doubtful(pairs, calls, by_name, fixed) if not {t for t, _ in g} & unsettled]
        if not doubt or weights_only or not ran:
            result.doubtful = doubt  # a conversion's models do not hold the same weights yet: convert settles them
            break
        # the order alone chose them: each call takes the candidate whose output is its own, as a tie does
        index_t, index_p = {c.name: i for i, c in enumerate(ts)}, {c.name: j for j, c in enumerate(ps)}
        ties = [(index_t[t], [index_p[q] for _, q in g]) for g in doubt for t, _ in g]
        chosen = settled_by_value(ties, ts, ps, torch_record, paddle_record)
        unsettled |= {t for g in doubt for t, _ in g if t not in chosen}  # values cannot say: the order stands
        fixed.update(chosen)
        fixed_p.update(chosen.values())
        result.settled.update((t, p) for t, p in chosen.items() if pairs.get(t) != p)
    pairs.update(containers(pairs, ts, ps, _fits) if ran and not weights_only else {})  # the order could not pair
    order = {c.name: k for k, c in enumerate(ts)}
    result.pairs = dict(sorted(pairs.items(), key=lambda kv: order[kv[0]]))
    if ran and not weights_only:
        result.composed = _composed(result, torch_record, paddle_record)
        result.paddle_composed = _composed(result, torch_record, paddle_record, "paddle")
        result.acts = {c.name: text(paddle_record, ACT + c.module) for c in ps if ACT + c.module in paddle_record}
        result.applied = {**{t: rule for t, rule in scale_rules(result.pairs, torch_record, paddle_record).items()
                             if t not in result.composed and t not in result.paddle_composed},
                          **applied_rules(result, torch_record, paddle_record)}
    return result


def _composed(result: Pairing, torch_record: dict, paddle_record: dict, side: str = "torch") -> dict:
    """{torch call: [the calls of `side` after its pair's call of that side]} where the other side's call outputs
    what that one computes and then those: leaves holding no tensors and paired with nothing, each fed the output of
    the one before (Paddle's legacy BatchNorm(act='relu') against torch's BatchNorm2d and the ReLU it runs next;
    side="paddle": timm's BatchNormAct2d against Paddle's BatchNorm2D and ReLU). Taken when the last one's output is
    nearer the other's by APART than any shorter chain's (nearest_of): the run's values say it."""
    mine, record, other = (result.torch_calls, torch_record, paddle_record) if side == "torch" else \
        (result.paddle_calls, paddle_record, torch_record)
    pairs = result.pairs if side == "torch" else {p: t for t, p in result.pairs.items()}
    ran = [c for c in mine if c.outputs]
    free = set(result.torch_unpaired if side == "torch" else result.paddle_unpaired)
    outs = {}
    for key in record:
        if key.startswith("out/"):
            outs.setdefault(split_key(key)[1], []).append(key)
    out = {}
    for i, c in enumerate(ran):
        theirs = pairs.get(c.name)
        if theirs is None or c.module == ROOT:
            continue
        chain, last = [], outs.get(c.name, [None])[0]
        for n in ran[i + 1:]:
            fed = f"in/{n.name}"
            if n.name not in free or n.tensors or n.children != 0 or fed not in record or last is None or \
                    spill.identity(record, fed) != spill.identity(record, last):
                break
            chain.append(n.name)
            last = outs[n.name][0]
        if not chain:
            continue
        if side == "torch" and ACT + module_of(theirs) in other and family(ran[i + 1].kind) == "activation":
            out[c.name] = chain[:1]  # Paddle's module says it holds an activation: its values need not say it too
            continue
        there = outputs_of(other, theirs)
        best = nearest_of({n: distance([record[outs[n][0]]], there) for n in [c.name, *chain]})
        if best is not None and best != c.name:
            out[c.name if side == "torch" else theirs] = chain[:chain.index(best) + 1]
    return out


def _doubtful(pairs: dict, t_calls: dict, p_calls: dict, fixed: dict) -> list:
    """[[(torch call, Paddle call), ...]]: pairs the alignment chose by their order alone. Leaves holding the same
    shapes, siblings on each side, each fitting every other's counterpart, whose names do not say which is which
    (transformers' query and key against k_proj and q_proj, run in the other order: the order pairs query with
    k_proj). Their own outputs cannot tell them apart before the weights are the same; after, each is its own."""
    groups = {}
    for t, p in pairs.items():
        a, b = t_calls.get(t), p_calls.get(p)
        if t in fixed or a is None or b is None or not a.tensors or 0 != a.children or 0 != b.children \
                or "#" in t or "#" in p:
            continue
        where = (a.module.rpartition(".")[0], b.module.rpartition(".")[0], a.tensors, a.outputs, b.outputs)
        groups.setdefault(where, []).append((t, p))
    return [g for g in groups.values() if len(g) > 1 and not all(_normal(t)[-1] == _normal(p)[-1] for t, p in g)
            and all(similarity(t_calls[t], p_calls[q]) is not None for t, _ in g for _, q in g)]
