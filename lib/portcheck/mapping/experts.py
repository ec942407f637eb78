"""Packed experts: one torch module holding every expert's weights in 3-D tensors, the expert first (transformers 5's
Qwen3MoeExperts: gate_up_proj [E, 2I, H], down_proj [E, H, I], read by its forward with F.linear, one expert at a
time), against a port holding one module per expert (paddleformers' experts.N.up_gate_proj [H, 2I] and
experts.N.down_proj [I, H]).

Each record sees such a module as a list of E experts, <module>.<i>, each holding its tensors as Linears that never
run, <module>.<i>.<tensor>, of their slice's shape ([2I, H], torch's Linear layout): the pairing pairs them child by
child by the expert's index (mapping.lists), never by the routing; convert fills the Paddle Linear each pairs with
from its slice, transposed as a Linear's weight. The packed module's output stays whole (it is every expert's
routed sum); the choice of experts its block hands it is kept beside the record (Routed), for a port whose router
returns its top k. Either side recorded alone is marked from the two records (marked): the packed module read from
its record's mod/ and own/ keys as from the model. Imports numpy and mapping.modules."""
import collections
from collections.abc import Mapping

import numpy as np

from portcheck.mapping import modules
from portcheck.mapping.modules import META


def _own(source) -> dict:
    """{module name: (its class, {tensor name: shape} of the tensors it holds itself)} of a torch model, or of its
    record (mod/ and own/ keys, modules.held_tensors: a side recorded alone, judged apart from its model): one reader
    of both, modules.own_modules."""
    if isinstance(source, Mapping):
        return {name: (kind, {t: tuple(s) for t, s in tensors.items()})
                for name, (kind, tensors) in (modules.held_tensors(source) or {}).items()}
    return {name: (type(module).__name__, dict(zip(names, shapes)))
            for name, module, _, shapes, names in modules.own_modules(source)}


def _found(source) -> dict:
    """{module name: (experts, {tensor name: shape}, its class)} of candidates()."""
    if hasattr(source, "named_sublayers"):
        return {}
    own = _own(source)
    above = set()  # every module a child of which (at any depth) holds a tensor
    for name, (_, tensors) in own.items():
        if tensors:
            parts = name.split(".")
            above.update(".".join(parts[:i]) for i in range(1, len(parts)))
    out = {}
    for name, (kind, tensors) in own.items():
        shapes = list(tensors.values())
        if len(shapes) < 2 or not name or name in above:
            continue
        if all(len(s) == 3 for s in shapes) and len({s[0] for s in shapes}) == 1 and shapes[0][0] >= 2:
            out[name] = (shapes[0][0], tensors, kind)
    return out


def candidates(source) -> dict:
    """{module name: (experts, [its tensors' names])} of a torch model's modules holding two or more tensors of
    their own, every one 3-D with one first axis of 2 or more (the expert), and no child holding any; source: the
    model, or its record (a side recorded alone). A Paddle model has none here (its 3-D experts are its own
    layout)."""
    return {name: (n, list(tensors)) for name, (n, tensors, _) in _found(source).items()}


def packed(model, other) -> dict:
    """candidates() where the Paddle model `other` holds a list of as many modules (children 0 .. E-1) whose first
    holds a tensor of each slice's size: packed experts (XLNet's q, k, v [hidden, heads, head size] are not: the
    port holds no such list). None of a Paddle model's. model and other: the models, or their records."""
    found = _found(model)
    if not found or other is None:
        return {}
    lists = _lists(other)
    out = {}
    for name, (n, tensors, _) in found.items():
        for split in ((), halves(list(tensors))):  # gate_up_proj [E, 2I, H] against the port's gate_proj and up_proj
            shapes = [_rows(tensors[t][1:], part) for _, t, part in _leaves(list(tensors), split)]
            sizes = [a * b for a, b in shapes]
            if any(all(held.count(x) >= sizes.count(x) for x in sizes) for held in lists.get(n, ())):
                out[name] = (n, list(tensors), split)
                break
    return out


def _lists(other) -> dict:
    """{its length: [the sizes of the tensors its first child holds]} of the Paddle model's lists (children 0 .. n-1),
    read from the model, or from a record of it (its mod/ keys: a tensor-parallel rank's, at their full sizes)."""
    out = {}
    if isinstance(other, Mapping):
        meta = {k[len(META):].rpartition("/")[0]: other[k] for k in other if k.startswith(META)}
        children = {}
        for name in meta:
            parent, _, last = name.rpartition(".")
            children.setdefault(parent, []).append(last)
        for parent, names in children.items():
            if len(names) >= 2 and sorted(names, key=lambda n: (len(n), n)) == [str(i) for i in range(len(names))]:
                prefix = f"{parent}.0"
                sizes = [int(np.prod(shape)) for name, flat in meta.items()
                         if name == prefix or name.startswith(prefix + ".") for shape in _shapes(flat)]
                out.setdefault(len(names), []).append(sorted(sizes))
        return out
    for _, layer in other.named_sublayers(include_self=True):
        names = [n for n, _ in layer.named_children()]
        if len(names) >= 2 and names == [str(i) for i in range(len(names))]:
            first = getattr(layer, names[0])
            out.setdefault(len(names), []).append(sorted(int(np.prod(p.shape)) for p in first.parameters()))
    return out


def _shapes(flat) -> list:
    """The shapes of the tensors a module holds itself, from its mod/ key (modules.describe's array)."""
    flat = [int(x) for x in np.asarray(flat).reshape(-1)]
    shapes, i = [], 2
    for _ in range(flat[1] if len(flat) > 1 else 0):
        shapes.append(tuple(flat[i + 1:i + 1 + flat[i]]))
        i += 1 + flat[i]
    return shapes


HALVES = {"gate_up_proj": ("gate_proj", "up_proj")}  # a packed tensor's halves along its rows, as its forward chunks


def halves(tensors: list) -> tuple:
    """The tensors of a packed module held as two halves by the port (transformers' gate_up_proj, chunked gate then
    up, against paddleformers' experts' gate_proj and up_proj): those HALVES names."""
    return tuple(t for t in tensors if t in HALVES)


def _leaves(tensors: list, split: tuple) -> list:
    """[(the Linear's last name, the tensor, which half of its rows: None for all, 0 or 1)] of one expert."""
    return [(h, t, k) if t in split else (t, t, None) for t in tensors
            for k, h in (enumerate(HALVES[t]) if t in split else [(None, t)])]


def _rows(shape: tuple, half) -> tuple:
    return shape if half is None else (shape[0] // 2, *shape[1:])


def mark(record, model, other):
    """Each packed module (packed(), against the Paddle model `other`, or a record of it) of the model said in its
    record as a list of experts, each holding its tensors as Linears that never run (the module docstring); the record
    returned. model: the torch model, or that record itself (a side recorded alone). other None: every candidates()
    module, each tensor whole (a side recorded alone: which of its modules route)."""
    found = packed(model, other) if other is not None else \
        {name: (n, tensors, ()) for name, (n, tensors) in candidates(model).items()}
    if not found:
        return record
    own = _found(model)
    for name, (n, tensors, split) in found.items():
        kind, shapes = own[name][2], own[name][1]
        key = f"{META}{name}/{kind}"
        for old in [k for k in record if k.startswith(f"{META}{name}/") and k != key]:
            record.pop(old, None)  # (a record marked(): a key its file holds twice stays below the overlay)
        record[key] = np.array([n, 0], dtype=np.int64)  # a container of its experts
        leaves = _leaves(tensors, split)
        for i in range(n):
            record[f"{META}{name}.{i}/{kind}"] = np.array([len(leaves), 0], dtype=np.int64)
            for leaf, t, half in leaves:
                shape = _rows(shapes[t][1:], half)
                record[f"{META}{name}.{i}.{leaf}/Linear"] = np.array([0, 1, len(shape), *shape], dtype=np.int64)
    return record


def marked(torch_record, paddle_record):
    """torch_record with its packed experts said as the lists of experts the Paddle record's port holds (mark), read
    from the two records alone (each side recorded apart: record_forward's, record_backward's, saved and loaded), as
    the in-process comparisons mark theirs from the models; the changed keys laid over it (the caller's record is
    never written to). A record marked already, or holding none, is returned as it is."""
    if not packed(torch_record, paddle_record):
        return torch_record
    return mark(collections.ChainMap({}, torch_record), torch_record, paddle_record)


def sliced(i: int, half=None):
    """The tensor rule of expert i's slice (its first or second half of rows, half 0 or 1): a Linear's weight,
    torch [out, in], Paddle [in, out]."""
    def rule(name, array):
        x = np.asarray(array)[i]
        x = x if half is None else x[half * (x.shape[0] // 2):(half + 1) * (x.shape[0] // 2)]
        return "weight", np.ascontiguousarray(x.T)
    return rule


def slices(name: str, n: int, tensors: list, split: tuple = ()) -> list:
    """[(expert i's Linear of a tensor or of its half, <name>.<i>.<leaf>; the tensor; its rule)] of a packed
    module."""
    return [(f"{name}.{i}.{leaf}", t, sliced(i, half)) for i in range(n) for leaf, t, half in _leaves(tensors, split)]


def paired_slices(torch_model, paired: dict) -> dict:
    """{packed module: slices()} of a torch model's candidates() whose every slice the pairing paired (paired: {torch
    module: ...}, convert's): what convert fills from them, the torch model alone at hand."""
    out = {}
    for name, (n, tensors) in candidates(torch_model).items():
        for split in ((), halves(tensors)):
            found = slices(name, n, tensors, split)
            if all(m in paired for m, _, _ in found):
                out[name] = found
    return out


def paired(torch_model, paddle_model, modules: dict) -> dict:
    """{packed module: the Paddle list its experts are in} for each packed module every slice of which the pairing
    paired ({torch module: Paddle module}): the module is paired when its experts are, as a fused one is."""
    out = {}
    for name, found in packed(torch_model, paddle_model).items():
        held = [modules.get(m) for m, _, _ in slices(name, *found)]
        if all(held):
            out[name] = held[0].rpartition(".")[0].rpartition(".")[0]
    return out


ROUTE = "route/"  # route/<module>: the experts torch's block handed its packed experts, [tokens, k]; :weights, theirs


class Routed:
    """While a torch model runs (with Routed(model, other, record): ...), each packed module's choice of experts
    written into `record`: the integer [tokens, k] argument its block hands it (transformers 5's
    self.experts(hidden_states, top_k_index, top_k_weights)) and the float one of its shape, as ROUTE keys. A port
    whose router returns its top k (paddleformers' TopkRouter) is compared on that (forward.routing). other None:
    every candidates() module (a side recorded alone: compare_backward's, whose port is not at hand). prefix: before
    each key (torch's float64 run's: its weights kept float64, the yardstick of the float32 run's)."""

    def __init__(self, model, other, record, prefix=""):
        found = candidates(model) if other is None else packed(model, other)
        self.modules = {n: m for n, m in model.named_modules() if n in found} if found else {}
        self.record, self.handles, self.prefix = record, [], prefix

    def __enter__(self):
        for name, module in self.modules.items():
            self.handles.append(module.register_forward_pre_hook(self._hook(name), with_kwargs=True))
        return self

    def _hook(self, name):
        key = f"{self.prefix}{ROUTE}{name}"

        def hook(module, args, kwargs):
            if key in self.record:  # its first call alone
                return None
            given = [a for a in [*args[1:], *kwargs.values()] if hasattr(a, "dtype") and getattr(a, "ndim", 0) == 2]
            index = next((a for a in given if not a.is_floating_point()), None)
            weights = next((a for a in given if a.is_floating_point() and index is not None and
                            a.shape == index.shape), None)
            if weights is not None:
                weights = weights.detach().cpu()
                self.record[key] = index.detach().cpu().numpy().astype(np.int64)
                self.record[f"{key}:weights"] = (weights if str(weights.dtype) == "torch.float64" else
                                                 weights.float()).numpy()
            return None
        return hook

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        return False
