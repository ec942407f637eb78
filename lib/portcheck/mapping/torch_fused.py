"""A torch module holding what sibling Paddle layers hold apart (timm's and a hand-written ViT's qkv against a port's
q, k and v), its layout declared by no one: found by sizes (inferred.torch_groups), paired in its first candidate
layout, then settled by the run as settle.settle_fused settles a Paddle module holding torch's parts: each candidate's
columns set in the Paddle parts of the first such module in the run, its Paddle parent fed torch's parent's recorded
input, the first candidate whose parent computes torch's within SETTLED kept for every module of its kind.

May import portcheck.core and portcheck.mapping (fused, inferred, layouts, settle, state, tensors); torch and
Paddle only through the models handed in."""
from dataclasses import replace

import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping import inferred
from portcheck.mapping.layouts import layouts_table
from portcheck.mapping.tensors import _part, _rule, own_tensors


def found(torch_model, paddle_model, layouts=None) -> dict:
    """{torch module: its candidate layouts (inferred.candidates)} of inferred.torch_groups, each candidate making
    every Paddle part's tensors in their shapes; a module none fits is left to the pairing's refusal."""
    t_modules = dict(torch_model.named_modules())
    p_modules = dict(paddle_model.named_sublayers(include_self=True))
    table, out = layouts_table(layouts), {}
    for name, (parts, shares) in inferred.torch_groups(torch_model, paddle_model, layouts).items():
        rule = _rule(table, t_modules[name], type(p_modules[parts[0]]))
        if rule is None:
            continue
        mine = dict(rule[1](t, a) for t, a in own_tensors(t_modules[name]).items())
        theirs = [{n: tuple(v.shape) for n, v in p_modules[p].named_parameters(include_sublayers=False)}
                  for p in parts]
        if any(set(t) != set(mine) for t in theirs):
            continue
        width = next(iter(mine.values())).shape[-1]
        ways = [spec for spec in inferred.candidates(tuple(p.rpartition(".")[2] for p in parts), shares, width)
                if (columns := [spec.columns(np.shape(a)[-1]) for a in mine.values()]) and None not in columns
                and all(tuple(np.shape(a)[:-1]) + (len(c[i]),) == t[n]
                        for (n, a), c in zip(mine.items(), columns) for i, t in enumerate(theirs))]
        if ways:
            out[name] = ways
    return out


def held(torch_model, paddle_model, layouts=None) -> dict:
    """{torch module: Fused} of found() in the layout the Paddle model holds already (converted before): the one
    candidate whose columns of each torch tensor, in Paddle's layout, are the Paddle parts' tensors."""
    t_modules = dict(torch_model.named_modules())
    p_modules = dict(paddle_model.named_sublayers(include_self=True))
    table, out = layouts_table(layouts), {}
    for name, ways in found(torch_model, paddle_model, layouts).items():
        parts = [f"{name.rpartition('.')[0]}.{p}".lstrip(".") for p in ways[0].parts]
        rule = _rule(table, t_modules[name], type(p_modules[parts[0]]))[1]
        mine = dict(rule(t, a) for t, a in own_tensors(t_modules[name]).items())
        theirs = [{n: np.asarray(v.numpy()) for n, v in p_modules[p].named_parameters(include_sublayers=False)}
                  for p in parts]
        for spec in ways:  # several holding are one tensor (one key-value group): the first stands for them
            if all(np.array_equal(a[..., spec.columns(a.shape[-1])[i]], t[n])
                   for n, a in mine.items() for i, t in enumerate(theirs)):
                out[name] = spec
                break
    return out


def settle(torch_model, paddle_model, inputs, state, params: dict, found_: dict) -> tuple:
    """Each torch module of found_ ({torch module: its candidate layouts}, paired and filled by convert in the
    first) in the layout whose run gives torch's values; state and the Paddle model changed to it. Returns
    ({torch module: Fused}, the lines saying each); a kind no candidate brings within ties' reach raises a
    PipelineError naming each candidate and how far its run was."""
    from portcheck.mapping.settle import _parent_run, _until_judged, first_settled, settled_line
    from portcheck.mapping.trace import eval_mode
    keys = {}  # {torch module: [(Paddle key, part index)]}
    for key, (tensor, _) in state._tensors.items():
        module, _, part = tensor.module.rpartition(".")
        if module in found_ and part in found_[module][0].parts:
            keys.setdefault(module, []).append((key, found_[module][0].parts.index(part)))
    kinds = {}  # modules whose tensors have one shape, settled as one
    for name in keys:
        shapes = tuple(sorted((state._tensors[k][0].name, np.shape(state._tensors[k][1])) for k, _ in keys[name]))
        kinds.setdefault((found_[name][0].parts, shapes), []).append(name)
    parent = lambda name: name.rpartition(".")[0] or ROOT  # noqa: E731
    with eval_mode(torch_model), eval_mode(paddle_model):
        t_record = _until_judged(torch_model, inputs, [[parent(n) for n in ns] for ns in kinds.values()])
    order = {m: i for i, m in enumerate(dict.fromkeys(module_of(split_key(k)[1]) for k in t_record
                                                      if k.startswith("out/")))}
    chosen, said = {}, []
    for names in kinds.values():
        judged = min(names, key=lambda n: order.get(parent(n), len(order)))

        def run(spec, judged=judged):
            for key, p in keys[judged]:
                tensor, array = state._tensors[key]
                params[key].set_value(np.ascontiguousarray(_part(tensor.rule.whole, spec, p)(tensor.name, array)[1]))
            return _parent_run(paddle_model, inputs, t_record, judged, keys[judged][0][0].rpartition(".")[0],
                               then=f"torch's {judged} holds what Paddle's {', '.join(found_[judged][0].parts)} "
                                    "hold apart; its layout is settled by a run")
        best, far = first_settled(found_[judged], run)
        if best is None:
            raise PipelineError(
                f"torch's {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} hold what Paddle's "
                f"{', '.join(found_[judged][0].parts)} hold apart, but no layout of their columns gives torch's "
                f"{parent(judged)} on the run over inputs=: "
                + "; ".join(f"{inferred.said(s)} {d:.2g}" for s, d in far.items())
                + " of its scale apart; declare the layout (layouts={'<module>': portcheck.Fused(...)}) if the port "
                "reads them in another way [PC458]")
        for name in names:
            for key, p in keys[name]:
                tensor, array = state._tensors[key]
                state._tensors[key] = (replace(tensor, rule=_part(tensor.rule.whole, best, p)), array)
                params[key].set_value(np.ascontiguousarray(state[key]))
        chosen.update((n, best) for n in names)
        said.append(settled_line(names, best, far, len(found_[judged]) - len(far), parent(judged), parent(judged)))
    return chosen, said
