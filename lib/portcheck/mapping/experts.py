"""Packed experts: one torch module holding every expert's weights in 3-D tensors, the expert first (transformers 5's
Qwen3MoeExperts: gate_up_proj [E, 2I, H], down_proj [E, H, I], read by its forward with F.linear, one expert at a
time), against a port holding one module per expert (paddleformers' experts.N.up_gate_proj [H, 2I] and
experts.N.down_proj [I, H]).

Each record sees such a module as a list of E experts, <module>.<i>, each holding its tensors as Linears that never
run, <module>.<i>.<tensor>, of their slice's shape ([2I, H], torch's Linear layout): the pairing pairs them child by
child by the expert's index (mapping.lists), never by the routing; convert fills the Paddle Linear each pairs with
from its slice, transposed as a Linear's weight. The packed module's output stays whole (it is every expert's
routed sum). Imports numpy and mapping.modules."""
import numpy as np

from portcheck.mapping.modules import META


def candidates(model) -> dict:
    """{module name: (experts, [its tensors' names])} of a torch model's modules holding two or more tensors of
    their own, every one 3-D with one first axis of 2 or more (the expert), and no child holding any. A Paddle
    model has none here (its 3-D experts are its own layout)."""
    if hasattr(model, "named_sublayers"):
        return {}
    out = {}
    for name, module in model.named_modules():
        own = dict(module.named_parameters(recurse=False))
        if len(own) < 2 or not name or any(True for c in module.children() for _ in c.parameters()):
            continue
        shapes = [tuple(p.shape) for p in own.values()]
        if all(len(s) == 3 for s in shapes) and len({s[0] for s in shapes}) == 1 and shapes[0][0] >= 2:
            out[name] = (shapes[0][0], list(own))
    return out


def packed(model, other) -> dict:
    """candidates() where the Paddle model `other` holds a list of as many modules (children 0 .. E-1) whose first
    holds a tensor of each slice's size: packed experts (XLNet's q, k, v [hidden, heads, head size] are not: the
    port holds no such list). None of a Paddle model's."""
    found = candidates(model)
    if not found or other is None:
        return {}
    lists = {}  # {its length: [the sizes of the tensors its first child holds]} of the Paddle model's lists
    for _, layer in other.named_sublayers(include_self=True):
        names = [n for n, _ in layer.named_children()]
        if len(names) >= 2 and names == [str(i) for i in range(len(names))]:
            first = getattr(layer, names[0])
            lists.setdefault(len(names), []).append(sorted(int(np.prod(p.shape)) for p in first.parameters()))
    modules = dict(model.named_modules())
    out = {}
    for name, (n, tensors) in found.items():
        slices = [int(np.prod(getattr(modules[name], t).shape[1:])) for t in tensors]
        if any(all(held.count(size) >= slices.count(size) for size in slices) for held in lists.get(n, ())):
            out[name] = (n, tensors)
    return out


def mark(record, model, other):
    """Each packed module (packed(), against the Paddle model `other`) of the model said in its record as a list of
    experts, each holding its tensors as Linears that never run (the module docstring); the record returned."""
    found = packed(model, other)
    if not found:
        return record
    modules = dict(model.named_modules())
    for name, (n, tensors) in found.items():
        kind = type(modules[name]).__name__
        for key in [k for k in record if k.startswith(f"{META}{name}/")]:
            del record[key]
        record[f"{META}{name}/{kind}"] = np.array([n, 0], dtype=np.int64)  # a container of its experts
        own = dict(modules[name].named_parameters(recurse=False))
        for i in range(n):
            record[f"{META}{name}.{i}/{kind}"] = np.array([len(tensors), 0], dtype=np.int64)
            for t in tensors:
                shape = tuple(own[t].shape[1:])
                record[f"{META}{name}.{i}.{t}/Linear"] = np.array([0, 1, len(shape), *shape], dtype=np.int64)
    return record


def sliced(i: int):
    """The tensor rule of expert i's slice: a Linear's weight, torch [out, in], Paddle [in, out]."""
    def rule(name, array):
        return "weight", np.ascontiguousarray(np.asarray(array)[i].T)
    return rule


def slices(name: str, n: int, tensors: list) -> list:
    """[(expert i's Linear of a tensor, <name>.<i>.<tensor>; the tensor; its rule)] of a packed module."""
    return [(f"{name}.{i}.{t}", t, sliced(i)) for i in range(n) for t in tensors]


def paired(torch_model, paddle_model, modules: dict) -> dict:
    """{packed module: the Paddle list its experts are in} for each packed module every slice of which the pairing
    paired ({torch module: Paddle module}): the module is paired when its experts are, as a fused one is."""
    out = {}
    for name, found in packed(torch_model, paddle_model).items():
        held = [modules.get(m) for m, _, _ in slices(name, *found)]
        if all(held):
            out[name] = held[0].rpartition(".")[0].rpartition(".")[0]
    return out
