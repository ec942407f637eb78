"""Fused layouts no one declared, found from the two models themselves: a Paddle module holding what sibling torch
modules hold together (paddleformers' qkv_proj against transformers' q_proj, k_proj and v_proj; its up_gate_proj
against gate_proj and up_proj), found by their sizes under a parent of one name on both sides (groups), with every
layout its columns can hold them in (candidates: one after the other, or per n groups for each n dividing their
widths: per key-value group, per head, per column, parts of unequal width kept in their shares). Nothing here
chooses: settle.settle_fused runs each candidate and keeps the one whose run gives torch's values.

May import portcheck.core and mapping's fused and tensors; torch and Paddle only through the models handed in."""
import math

import numpy as np

from portcheck.mapping import fused
from portcheck.mapping.fused import Fused
from portcheck.mapping.tensors import own_tensors

MAX_PARTS = 4  # q, k, v; gate, up: a group of siblings this long at most is tried as one fused module's parts


def _sizes(tensors) -> list:
    return [int(np.prod(np.shape(v))) for v in tensors]


def groups(torch_model, paddle_model, layouts=None) -> dict:
    """{Paddle module: (its torch parts in definition order, each part's share of its columns)} of the Paddle modules
    no torch module of their name stands for, under a parent both models hold by one name, whose every tensor is
    as large as those of 2 to MAX_PARTS torch siblings next to each other (modules of one type that no Paddle module
    of their name stands for) together. A module a layouts entry declares already is left to it."""
    t_modules = dict(torch_model.named_modules())
    p_modules = dict(paddle_model.named_sublayers(include_self=True))
    return _wholes(p_modules, _paddle_sizes, t_modules, lambda m: _sizes(own_tensors(m).values()),
                   _declared(torch_model, paddle_model, layouts))


def torch_groups(torch_model, paddle_model, layouts=None) -> dict:
    """groups() the other way round: {torch module: (its Paddle parts in definition order, each part's share of its
    columns)} of the torch modules no Paddle module of their name stands for (timm's qkv against a port's q, k and
    v apart), under a parent both models hold by one name, whose every tensor is as large as those of 2 to
    MAX_PARTS Paddle siblings next to each other (layers of one type no torch module of their name stands for)
    together."""
    t_modules = dict(torch_model.named_modules())
    p_modules = dict(paddle_model.named_sublayers(include_self=True))
    return _wholes(t_modules, lambda m: _sizes(v for _, v in m.named_parameters(recurse=False)), p_modules,
                   _paddle_sizes, _declared(torch_model, paddle_model, layouts))


def _paddle_sizes(layer) -> list:
    return _sizes(v for _, v in layer.named_parameters(include_sublayers=False))


def _declared(torch_model, paddle_model, layouts) -> set:
    return set(fused.specs(paddle_model, layouts)) | set(fused.specs(torch_model, layouts))


def _wholes(wholes: dict, whole_sizes, parts: dict, part_sizes, declared: set) -> dict:
    """{module of one side (wholes): (the other side's modules it holds together, in definition order, each one's
    share of its columns)}: groups() and torch_groups(), each side's modules by name and the sizes of the tensors
    each holds itself."""
    children = {}
    for name, module in parts.items():
        if name and name not in wholes and name not in declared and part_sizes(module):
            children.setdefault(name.rpartition(".")[0], []).append(name)
    out, taken = {}, set()
    for name, module in wholes.items():
        parent = name.rpartition(".")[0]
        if not name or name in parts or name in declared or parent not in parts or parent not in children:
            continue
        whole = whole_sizes(module)
        if not whole:
            continue
        siblings = [n for n in children[parent] if n not in taken]
        sizes = {n: part_sizes(parts[n]) for n in siblings}
        for a in range(len(siblings)):
            group = next((siblings[a:b] for b in range(a + 2, min(len(siblings), a + MAX_PARTS) + 1)
                          if len({type(parts[n]) for n in siblings[a:b]}) == 1
                          and all(len(sizes[n]) == len(whole) for n in siblings[a:b])
                          and [sum(sizes[n][k] for n in siblings[a:b]) for k in range(len(whole))] == whole), None)
            if group:
                first = [sizes[n][0] for n in group]
                out[name] = (group, tuple(w // math.gcd(*first) for w in first))
                taken.update(group)
                break
    return out


def candidates(parts: tuple, shares: tuple, width: int) -> list:
    """Every Fused whose columns hold `parts` (their last names), in their shares, in an output `width` columns
    wide: one after the other, then per n groups for each n above 1 dividing every part's width (n key-value
    groups, n heads, every column), in that order."""
    unit = width // sum(shares)  # the columns of one share
    groups_of = [n for n in range(1, unit + 1) if unit % n == 0]
    return [Fused(parts, heads=0 if n == 1 else n, widths=shares) for n in groups_of]


def said(spec: Fused) -> str:
    """A candidate layout in words: [q_proj x2 | k_proj | v_proj] one after the other, or per n groups."""
    parts = " | ".join(f"{p} x{s}" if s > 1 else p for p, s in zip(spec.parts, spec.shares))
    return f"[{parts}]" + (f" per {spec.heads} groups" if spec.heads else " one after the other")


def held(torch_model, paddle_model, layouts=None) -> dict:
    """{Paddle module: Fused} of groups() in the layout the Paddle model holds already (compare_backward's models,
    converted before, by convert or by the port's own converter): the one candidate whose tensors, made of the torch
    parts' in Paddle's layout, are the Paddle module's, as settle.settle_held takes a square weight. A module holding
    none of them, or more than one distinct, is left to the pairing's refusal."""
    from portcheck.mapping.layouts import layouts_table
    from portcheck.mapping.tensors import _rule
    table, out = layouts_table(layouts), {}
    t_modules = dict(torch_model.named_modules())
    p_modules = dict(paddle_model.named_sublayers(include_self=True))
    for name, (parts, shares) in groups(torch_model, paddle_model, layouts).items():
        theirs = {n: np.asarray(v.numpy()) for n, v in p_modules[name].named_parameters(include_sublayers=False)}
        rules = [_rule(table, t_modules[p]) for p in parts]
        if any(r is None for r in rules) or not theirs:
            continue
        mine = [{t: r[1](t, a) for t, a in own_tensors(t_modules[p]).items()} for p, r in zip(parts, rules)]
        if any(set(m[t][0] for t in m) != set(theirs) for m in mine):
            continue
        width = next(iter(theirs.values())).shape[-1]
        found = []
        for spec in candidates(tuple(p.rpartition(".")[2] for p in parts), shares, width):
            made = {n: fused.join(spec, [next(a for pn, a in m.values() if pn == n) for m in mine]) for n in theirs}
            if all(v is not None and np.array_equal(v, theirs[n]) for n, v in made.items()):
                found.append(spec)
        if found:  # several holding are one tensor (one key-value group): the first stands for them
            out[name] = found[0]
    return out
