"""Strict weight conversion for any torch/Paddle model pair: the layout follows the module's type.

Every torch module that holds parameters or buffers of its own is looked up by type in the layout table (or
the caller's `layouts`, keyed by a torch type or a Paddle one); its Paddle counterpart is found by
portcheck.mapping.pairing (the name map's entries as given, the rest aligned), must be of the matching Paddle type,
and receives each tensor under its Paddle name in Paddle's layout. Every key, shape and dtype is checked in
both directions first: Paddle keys nothing filled, torch tensors with no Paddle key, and shapes or dtypes that
differ end the run with one line naming every one of them. Only then is each Paddle tensor set, in place, one
at a time. A square Linear weight is transposed because it belongs to a Linear, never because its shape
happens to fit.
"""
from dataclasses import dataclass, replace

import numpy as np

from portcheck.mapping import experts, fused, loose as loose_tensors, pairing
from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping.fused import Fused
from portcheck.mapping.layouts import (CONFIGS_DIFFER, config_fields, layouts_table, linear_held, linear_layout,
                                       same_layout)
from portcheck.mapping.modules import stranded
from portcheck.mapping.names import named_exist, parent_of_paired
from portcheck.mapping.settle import SETTLED, settle_by_run  # noqa: F401 (SETTLED: documented here, docs/pairing.md)
from portcheck.mapping.state import Joined, State, names_of_one_tensor, numpy_dtype, save_pdparams
from portcheck.mapping.trace import check_models
from portcheck.mapping.weights import named


def _own_ids(module) -> list:
    """The identities of the tensors own_tensors reads: a tensor two modules hold (a tied weight) is one."""
    skip = getattr(module, "_non_persistent_buffers_set", set())
    return [id(p) for _, p in module.named_parameters(recurse=False)] + \
        [id(b) for n, b in module.named_buffers(recurse=False) if b is not None and n not in skip]


def own_tensors(module) -> dict:
    """The parameters and persistent buffers a module holds itself (not its children's), as numpy arrays. A
    non-persistent buffer (transformers' position_ids) is rebuilt by the model, not saved: nothing to convert."""
    out = {n: p.detach().cpu().numpy() for n, p in module.named_parameters(recurse=False)}
    skip = getattr(module, "_non_persistent_buffers_set", set())
    out.update({n: b.detach().cpu().numpy() for n, b in module.named_buffers(recurse=False)
                if b is not None and n not in skip})
    return out


@dataclass(frozen=True)
class Tensor:
    """One torch parameter or buffer as a port sees it: its module, its own name, the Paddle name it takes,
    the layout rule that turns its array into Paddle's, and the Paddle layer types its module may become."""
    module: str
    name: str
    paddle_name: str
    rule: object
    kinds: tuple
    module_type: str
    array: object  # its value when the layouts were read (numpy, torch's layout)
    tie: str = ""  # the first torch key of the same tensor (a head's weight tied to the embedding's), else its own
    source: str = ""  # the torch key it is read from, when it is one part of a fused module's tensor (fused.Fused)
    moved_to: str = ""  # the whole Paddle key, when another module than its own's counterpart holds it (mapping.loose)

    def to_paddle(self, array):
        return self.rule(self.name, np.asarray(array))[1]

    @property
    def transposed(self) -> bool:
        """A Linear's weight: torch [out, in], Paddle [in, out]."""
        return self.rule is linear_layout and self.name == "weight"


def _lineage(kind: type) -> list:
    """A class and its bases, each as itself then its name, nearest first: a layout declared for a layer applies
    to its subclasses (paddlenlp's GPTLayerNorm is a LayerNorm), and a subclass pairs as its base layer."""
    return [key for k in kind.__mro__ for key in (k, k.__name__)]


def _rule(table, module, paddle_kind=None, tensors=None):
    """(Paddle types, rule) for a torch module: a layout declared for the Paddle type it pairs with (or a base of
    it) first, then its own type's (or a base's); a type no one declared whose tensors each have at most one axis
    longer than 1 (a norm's scale; a bias [out, 1]: nothing to transpose) keeps its layout. None when unknown."""
    for key in _lineage(paddle_kind) if isinstance(paddle_kind, type) else ():
        if table.get(key, (0,))[0] is None:
            return table[key]
    rule = next((table[key] for key in _lineage(type(module)) if key in table), None)
    vector, tensors = lambda a: sum(d != 1 for d in a.shape) <= 1, own_tensors(module) if tensors is None else tensors
    if rule is None and all(vector(a) for a in tensors.values()):
        return None, same_layout
    return rule or linear_held(tensors, paddle_kind)


def torch_layouts(torch_model, layouts=None, paddle_kinds=None, loose=None) -> dict:
    """{torch key: Tensor} for every parameter and buffer the Paddle side holds (num_batches_tracked has no
    Paddle counterpart), from the torch model alone: a torch-side script writes its tensors in Paddle's
    layout with it. paddle_kinds: {torch module: the Paddle layer type it pairs with}, for layouts declared by
    a Paddle type; loose: {torch key: mapping.loose.Loose}, the tensors another module than their own's counterpart
    holds. Every module type with no known layout ends the run, all named at once."""
    table = layouts_table(layouts)
    out, unknown, first = {}, {}, {}
    tied, cut, loose = _ties(torch_model, paddle_kinds), fused.specs(torch_model, layouts), loose or {}
    packed = experts.paired_slices(torch_model, paddle_kinds or {})
    for name, module in torch_model.named_modules():
        tensors = own_tensors(module)
        key_of = lambda t: f"{name}.{t}" if name else t
        ids = dict(zip(tensors, _own_ids(module)))
        for tname, array in list(tensors.items()):
            held = ids[tname]
            if key_of(tname) in loose:  # paired tensor to tensor: its rule is the pairing's, not its module's
                how = loose[key_of(tname)]
                out[key_of(tname)] = Tensor(name, tname, how.paddle_name, how.rule, None, type(module).__name__,
                                            array, first.setdefault(held, key_of(tname)), key_of(tname), how.paddle_key)
                del tensors[tname]
        if not tensors or name in tied:
            continue
        if name in packed:  # each expert's slice of each tensor, a Linear of its own (mapping.experts)
            out.update({f"{m}.weight": Tensor(m, "weight", "weight", rule, ("Linear",), type(module).__name__,
                                              tensors[t], f"{m}.weight", key_of(t)) for m, t, rule in packed[name]})
            continue
        rule = _rule(table, module, (paddle_kinds or {}).get(name), tensors)
        if rule is None:
            unknown.setdefault(type(module).__name__, []).append(name or "(the model)")
            continue
        kinds, rule = rule
        kept = [f"{name}.{t} {list(a.shape)}" for t, a in tensors.items() if rule is linear_layout and t != "weight"
                and len(a.shape) > 1]
        if kept:  # "transpose" is a Linear's rule: a declared type's [out, in] tensor of its own name would pass as is
            raise PipelineError(f"layouts: {type(module).__name__} is declared 'transpose', which transposes a "
                                f"Linear's weight only: {', '.join(kept)} would be kept as it is; declare 'same' if "
                                "Paddle keeps it so, or add the type to portcheck/mapping/layouts.py's table "
                                "(layouts_table) with its rule [PC319]")
        for tname, array in tensors.items():
            held = ids[tname]
            pname = rule(tname, array)[0]  # the name only (a transpose is a view)
            key = f"{name}.{tname}" if name else tname
            if pname is None:
                continue
            if name not in cut:
                out[key] = Tensor(name, tname, pname, rule, kinds, type(module).__name__, array,
                                  first.setdefault(held, key), key)
                continue
            for p, part in enumerate(cut[name].parts):  # each part's columns, in Paddle's layout
                out[f"{name}.{part}.{tname}"] = Tensor(f"{name}.{part}", tname, pname, _part(rule, cut[name], p),
                                                       kinds, type(module).__name__, array, f"{name}.{part}.{tname}", key)
    if unknown:
        said = "; ".join(f"{', '.join(names[:3])}{' ...' if len(names) > 3 else ''} ({kind})"
                         for kind, names in unknown.items())
        first = next(iter(unknown))
        raise PipelineError(f"torch module(s) {said}: this converter does not know their Paddle layout: pass "
                            f"layouts={{'{first}': 'same'}} (or 'transpose'; keyed by the torch type or the Paddle "
                            "one it pairs with) if their tensors keep their names, or add the type to "
                            "portcheck/mapping/layouts.py's table (layouts_table) [PC011]")
    return out


def _part(rule, spec: Fused, p: int):
    """rule, then part p's columns of the last axis (a Linear's weight [in, out] and its bias, in Paddle's layout)."""
    def part(name, array):
        pname, array = rule(name, array)
        columns = spec.columns(array.shape[-1])
        if columns is None:
            raise PipelineError(f"Fused{spec.parts}: {name}'s last axis ({array.shape[-1]}) does not hold "
                                f"{len(spec.parts)} parts{f' of {spec.heads} heads' if spec.heads else ''} [PC302]")
        return pname, array[..., columns[p]]
    return part


def _kinds(kind: type) -> list:
    """A class's name and its bases' up to the framework's own Module or Layer (shared by every layer)."""
    return [k.__name__ for k in kind.__mro__ if k.__name__ not in ("Module", "Layer", "object")]


def _ties(torch_model, paired=None) -> set:
    """The torch modules whose every tensor is tied to one a paired module holds (paired: {torch module: ...},
    None: none known yet): a tied head against Paddle's matmul with the embedding's weight, a `shared` embedding
    each half of the other side holds under its own name. Their tensors are filled through that module."""
    if paired is None:
        return set()
    modules = dict(torch_model.named_modules())
    held = {i for name in paired if name in modules for i in _own_ids(modules[name])}
    return {name for name, m in modules.items() if name not in paired and (ids := _own_ids(m)) and set(ids) <= held}


def paddle_key(tensor: Tensor, target: str) -> str:
    """The Paddle state-dict key of a torch tensor whose module pairs with the Paddle module `target`."""
    return f"{target}.{tensor.paddle_name}" if target else tensor.paddle_name


class _Shapes(dict):
    """A record of a run that keeps each output's shape and dtype, not its values (a read-only view of one zero):
    a conversion pairs by shapes and order, its models not holding the same weights yet, so no value can tell it
    anything; at LLM size the values would be every activation of both runs held at once."""
    keeps_values = False  # trace.Recorder links no output to another, and keeps no tensor alive to do so

    def __setitem__(self, key, value):
        if key.startswith(("out/", "in/")):
            value = np.asarray(value)
            value = np.broadcast_to(np.zeros((), value.dtype), value.shape)
        super().__setitem__(key, value)


def pair_modules(torch_model, paddle_model, name_map=None, inputs=None, layouts=None, copies=None,
                 doubt=None, ran=None, loose=None) -> tuple:
    """({torch module: Paddle module ("" for the model itself)}, [each torch module holding tensors left without
    a counterpart, said]), by portcheck.mapping.pairing: on the models' run over `inputs` when given (run order, output
    shapes; in eval mode, so BatchNorm's statistics stay), else on their definition order. copies, a dict if
    given, receives pairing.Pairing.copies(): the Paddle modules filled with copies of a torch module's tensors.
    doubt, a list if given, receives the groups of modules only the run's order paired ([[(torch module, Paddle
    module), ...]], pairing.Pairing.doubtful: convert settles them by the run); without it they are settled by
    the weights the Paddle model holds, where it holds torch's (_held). ran, a dict if given, receives {"Paddle":
    the Paddle modules the run over `inputs` called} (none without inputs: nothing shows a module unused). loose, a
    dict if given, receives {torch key: mapping.loose.Loose}: tensors held as a module on one side, a bare parameter
    of the parent on the other."""
    from portcheck.mapping.trace import eval_mode, ran_on, trace
    with eval_mode(torch_model), eval_mode(paddle_model):
        whole = [experts.mark(fused.mark(ran_on(side, trace(m, inputs, _Shapes()), inputs), fused.specs(m, layouts),
                                         m), m, paddle_model) for side, m in (("torch", torch_model), ("Paddle", paddle_model))]
        loose_tensors.mark(*whole)
        named_exist(name_map, *whole)  # an entry naming no module is refused, as compare_forward refuses it
        paired = pairing.pair(*(fused.cut(r) for r in whole), name_map, weights_only=True)
    if ran is not None and inputs is not None:
        ran["Paddle"] = {module_of(split_key(k)[1]) for k in whole[1] if k.startswith("out/")}
    modules = paired.modules()
    if copies is not None:
        copies.update(paired.copies())
    groups = [[(module_of(t), module_of(p)) for t, p in g] for g in paired.doubtful]
    if doubt is not None:  # convert: its Paddle model's weights are not torch's yet, its run settles them
        doubt.extend(groups if inputs is not None else [])
    else:  # compare_backward: the Paddle model holds torch's weights already
        for group in groups:
            _held(group, torch_model, paddle_model, modules)
    for name, spec in fused.specs(torch_model, layouts).items():  # a fused module is paired when its parts are
        if spec.output and all(f"{name}.{part}" in modules for part in spec.parts):
            modules[name] = modules[f"{name}.{spec.parts[0]}"]
    modules.update(experts.paired(torch_model, paddle_model, modules))
    layers = dict(paddle_model.named_sublayers(include_self=True))

    taken = {module_of(p) for p in paired.pairs.values()}
    shapes = lambda pairs: ", ".join(f"{k} {list(v.shape)}" for k, v in pairs)

    def config(name, module):
        """The Paddle layer this torch module would be but for its tensors' sizes (the same name, else the one
        unpaired layer of its kind holding as many tensors of the same ranks), or None."""
        ranks = lambda tensors: sorted(len(v.shape) for v in tensors)
        mine = ranks(own_tensors(module).values())
        fits = lambda layer: ranks(v for _, v in layer.named_parameters(include_sublayers=False)) == mine
        like = layers.get(name)
        if like is not None and fits(like):
            return name
        kinds = _kinds(type(module))
        found = [n for n, layer in layers.items() if n not in taken and fits(layer) and any(
            pairing.alike(k, kind) for k in _kinds(type(layer)) for kind in kinds)]
        named_alike = [n for n in found if n.rpartition(".")[2] == name.rpartition(".")[2]]
        if len(named_alike) == 1:
            return named_alike[0]
        # else by place: the one such layer under its nearest paired ancestor's counterpart, against the one torch
        # module of its kind left there (torchvision's squeezenet features.0 against paddle.vision's _conv)
        prefix, t_prefix = anchor(name), t_anchor(name)
        here = [n for n in found if n.startswith(prefix)]
        mine = [n for n, m in t_modules.items() if n not in t_taken and n.startswith(t_prefix) and own_tensors(m)
                and _kinds(type(m))[0] == kinds[0]]
        return here[0] if len(here) == 1 and mine == [name] else None

    t_modules = dict(torch_model.named_modules())
    t_taken = set(modules)
    sizes = lambda tensors: [int(np.prod(v.shape)) for v in tensors]

    def anchor(name):
        """The Paddle counterpart of the nearest paired torch ancestor, as a name prefix ("" for the model)."""
        name = t_anchor(name).rstrip(".")
        p = modules.get(name or ROOT)
        return "" if p in (None, ROOT) else p + "."

    def t_anchor(name):
        """The nearest paired torch ancestor, as a name prefix ("" for the model)."""
        while name:
            name = name.rpartition(".")[0]
            if name and name in modules:
                return name + "."
        return ""

    def fusion(name, module):
        """(module a Fused entry names, (its parts, whether its output is theirs)) when this torch module holds n
        times what n unpaired modules of the other side hold together (GPT-2's c_attn against q_proj, k_proj and
        v_proj), or it is one of n torch modules an unpaired Paddle one holds n times (gate_proj and up_proj against
        gate_up_fused_proj)."""
        mine, prefix = sizes(own_tensors(module).values()), anchor(name)
        near = {n: sizes(v for _, v in layer.named_parameters(include_sublayers=False)) for n, layer in layers.items()
                if n not in taken and n.startswith(prefix)}
        groups = {}
        for n, theirs in near.items():
            if theirs and len(theirs) == len(mine):
                groups.setdefault((n.rpartition(".")[0], tuple(theirs)), []).append(n)
        for (_, theirs), group in groups.items():
            ratio = mine[0] // theirs[0]
            if ratio >= 2 and len(group) >= ratio and all(m == ratio * t for m, t in zip(mine, theirs)):
                parts = tuple(n.rpartition(".")[2] for n in group[:ratio])
                # its output is its parts' columns when it is as wide as theirs together; else its forward reads the
                # packed tensors itself (torch's MultiheadAttention and its in_proj_weight): output=False
                width = {np.shape(v)[-1] for k, v in whole[0].items() if k.startswith("out/") and np.ndim(v)
                         and module_of(split_key(k)[1]) == name}
                part = [v.shape[-1] for _, v in layers[group[0]].named_parameters(include_sublayers=False)][0]
                return name.rpartition(".")[2], (parts, width in (set(), {ratio * part}))  # no run: nothing says
        parent = name.rpartition(".")[0]
        siblings = [n for n, m in t_modules.items() if n.rpartition(".")[0] == parent and n not in t_taken
                    and sizes(own_tensors(m).values()) == mine]
        for n, theirs in near.items():
            ratio = theirs[0] // mine[0] if theirs and mine else 0
            if ratio >= 2 and len(siblings) >= ratio and len(theirs) == len(mine) and \
                    all(t == ratio * m for m, t in zip(mine, theirs)):
                return n.rpartition(".")[2], (tuple(s.rpartition(".")[2] for s in siblings[:ratio]), True)
        return fused.summed(name, mine, near, {n: sizes(own_tensors(m).values()) for n, m in t_modules.items()
                                               if n.rpartition(".")[0] == parent and n not in t_taken})

    def said(name, module):
        if name in paired.missing:
            return f"{name} ({type(module).__name__}) -> {paired.missing[name]!r}"
        like = layers.get(name)  # the same name on the Paddle side, which the tensors' shapes kept apart
        return f"{name} ({type(module).__name__}" + (
            f": {shapes(own_tensors(module).items())}; Paddle {name}: "
            f"{shapes(like.named_parameters(include_sublayers=False)) or 'none'}" if like is not None else "") + ")"
    tied = _ties(torch_model, {"" if t == ROOT else t for t in modules})
    left = [(n or ROOT, m) for n, m in torch_model.named_modules()
            if own_tensors(m) and (n or ROOT) not in modules and n not in tied]
    # a table torch holds and never trains, which the port computes in its forward instead (transformers' RoFormer
    # sinusoidal positions against paddlenlp's): nothing of it to fill; what reads it is judged
    frozen = [n for n, m in left if n not in paired.missing and loose_tensors.frozen(m)]
    if ran is not None:
        ran["frozen"] = frozen
    left = [(n, m) for n, m in left if n not in frozen]
    table = layouts_table(layouts)
    found = loose_tensors.find(torch_model, paddle_model, modules, [n for n, _ in left if n not in paired.missing],
                               own_tensors, lambda m: any(k in table for k in _lineage(type(m))))
    # a head torch ties to its embedding that the port holds as a bare parameter of its own, by the head's name
    # (paddlenlp's lm_head_weight): filled from the one tensor, the port then training two (compare_backward)
    found.update({k: v for k, v in loose_tensors.find(torch_model, paddle_model, modules, sorted(tied), own_tensors,
                                                      lambda m: True).items()
                  if v.paddle_name.startswith(k.rpartition(".")[0].rpartition(".")[2])})
    if loose is not None:
        loose.update(found)
    left = [(n, m) for n, m in left if not all(f"{n}.{t}" in found for t in own_tensors(m))]
    configs = {n: c for n, m in left if n not in paired.missing and (c := config(n, m)) is not None}
    held = {n: f for n, m in left if n not in configs and n not in paired.missing and (f := fusion(n, m))}
    fusions = dict(held.values())
    missing = [said(n, m) for n, m in left if n not in configs]
    problems = []
    if configs:  # no map pairs tensors of other sizes: the two models were built from different configs
        out_shape = lambda record, n: next((f"; output {list(np.shape(v))}" for k, v in record.items()
                                            if k.startswith("out/") and split_key(k)[1] == n), "")
        problems.append(f"{len(configs)} torch module(s) differ in shape from their Paddle counterpart: " + "; ".join(
            f"torch {n} ({shapes(own_tensors(dict(left)[n]).items())}{out_shape(whole[0], n)}) against Paddle {p} "
            f"({shapes(layers[p].named_parameters(include_sublayers=False))}{out_shape(whole[1], p)})"
            + "".join(f", {field} {a} against {b}" for field, a, b in config_fields(dict(left)[n], layers[p]))
            for n, p in list(configs.items())[:6]) + f": {CONFIGS_DIFFER}, which no name_map can stand in for")
    rest = {n: sizes(own_tensors(m).values()) for n, m in left if n not in configs and n not in held}
    if missing:  # all at once: one run names every module left without a counterpart
        named = " (the name map names no Paddle module of that name)" if paired.missing else ""
        problems.append(f"{len(missing)} torch module(s) have no counterpart in the Paddle model{named}: "
                        f"{'; '.join(missing[:12])}{'; ...' if len(missing) > 12 else ''}: " + "; ".join(x for x in (
                            ((not paired.missing and stranded(rest, [sizes(v for _, v in x.named_parameters(
                                include_sublayers=False)) for n, x in layers.items() if n not in taken], modules,
                                bool(fusions))
                              or "give a name_map entry for each") + ("" if inputs is not None else
                                                                       ", or inputs= to pair them by a run"))
                            if rest or paired.missing else "", fused.held_together(fusions)) if x))
    lost = {name: [part for part in spec.parts if f"{name}.{part}" not in modules]
            for name, spec in fused.specs(torch_model, layouts).items()}
    lost = {name: parts for name, parts in lost.items() if parts}
    if lost:  # a layouts entry of more or fewer parts than the tensors hold: its parts fit no Paddle module
        name, parts = next(iter(lost.items()))
        spec, like = fused.specs(torch_model, layouts)[name], layers.get(f"{name}.{parts[0]}")
        problems.append(f"{len(lost)} fused module(s)' parts pair with no Paddle module: torch {name}'s "
                        f"{', '.join(parts)} (its Fused declares {len(spec.parts)} parts: "
                        f"{', '.join(str(s) for s in fused.part_shapes(t_modules[name], spec))} each"
                        + (f"; Paddle {name}.{parts[0]}: "
                           f"{shapes(like.named_parameters(include_sublayers=False))}" if like is not None else "")
                        + "): declare as many parts as its tensors hold, in their order")
    missing = "; and ".join(problems)
    return {t: "" if p == ROOT else p for t, p in modules.items()}, missing


def _held(group: list, torch_model, paddle_model, modules: dict) -> bool:
    """Settle a group only the run's order paired by the weights the Paddle model holds, when it holds torch's
    already (compare_backward's plan, after convert): each torch module takes the one candidate holding its values
    (sorted, so that a layout's transpose keeps them), modules changed so. False when that is not one each."""
    t_modules, layers = dict(torch_model.named_modules()), dict(paddle_model.named_sublayers(include_self=True))
    if not all(t in t_modules and p in layers for t, p in group):
        return False
    values = lambda tensors: [np.sort(np.asarray(v).reshape(-1)) for v in tensors]
    mine = {t: values(own_tensors(t_modules[t]).values()) for t, _ in group}
    theirs = {p: values(v.numpy() for _, v in layers[p].named_parameters(include_sublayers=False)) for _, p in group}
    same = lambda a, b: len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))
    chosen = {t: [p for p in theirs if same(mine[t], theirs[p])] for t in mine}
    if any(len(ps) != 1 for ps in chosen.values()) or len({ps[0] for ps in chosen.values()}) != len(chosen):
        return False
    modules.update((t, ps[0]) for t, ps in chosen.items())
    return True


def plan(torch_model, paddle_model, name_map=None, layouts=None, inputs=None, paddle_kinds=None,
         paired=None, copies=None, doubt=None, ran=None, loose=None) -> dict:
    """{torch key: (Paddle key, Tensor, numpy array)} for every parameter and buffer the Paddle model takes,
    with every module's counterpart and type checked; compare_backward maps gradients and updated weights
    through the same rules. paddle_kinds, a dict if given, receives {torch module: the Paddle type it pairs
    with} (what a torch-side record needs for layouts declared by a Paddle type); paired, a dict if given,
    {torch module: its Paddle module} ("" for the model itself); copies, a dict if given, {torch module: the other
    Paddle modules it runs as} (pairing.Pairing.copies); loose, a dict if given, {torch key: mapping.loose.Loose}."""
    check_models(torch_model, paddle_model)
    loose = {} if loose is None else loose
    modules, missing = pair_modules(torch_model, paddle_model, name_map, inputs, layouts, copies, doubt, ran, loose)
    if paired is not None:
        paired.update(modules)
    layers = dict(paddle_model.named_sublayers(include_self=True))
    for name, spec in fused.specs(paddle_model, layouts).items():  # a Paddle fused module's parts are its own
        layers.update({f"{name}.{part}": layers[name] for part in spec.parts})
    kinds = {"" if t == ROOT else t: type(layers[p]) for t, p in modules.items() if p in layers}
    if paddle_kinds is not None:
        paddle_kinds.update(kinds)
    tensors = torch_layouts(torch_model, layouts, kinds, loose)  # an unknown layout first: no pairing makes it known
    out, wrong = {}, {}
    for key, tensor in tensors.items():
        if tensor.moved_to:
            out[key] = (tensor.moved_to, tensor, tensor.array)
            continue
        if tensor.module not in kinds:
            continue
        target, kind = modules[tensor.module or ROOT], kinds[tensor.module].__name__
        if tensor.kinds is not None and not set(tensor.kinds) & {k.__name__ for k in kinds[tensor.module].__mro__}:
            wrong[tensor.module] = f"torch {tensor.module} is a {tensor.module_type} but Paddle {target} is a {kind}"
        out[key] = (paddle_key(tensor, target), tensor, tensor.array)
    shapes = {k: tuple(v.shape) for k, v in paddle_model.state_dict().items()}
    for key, (p_key, tensor, array) in out.items():  # 0-d against [1], [n, 1] against [n]: one rule for every use
        if sum(d != 1 for d in np.shape(array)) <= 1 and p_key in shapes and \
                loose_tensors.same_scalar_shapes(np.shape(tensor.to_paddle(array)), shapes[p_key]):
            out[key] = (p_key, replace(tensor, rule=loose_tensors.reshaped(tensor.rule, shapes[p_key])), array)
    loose_tensors.held_otherwise(out, wrong, modules, layers, shapes, loose)  # axes merged, a layer of another type
    if wrong:  # before the modules left over: a wrong pair leaves another one without its counterpart
        # a Paddle type holding the torch layer's tensors all the same is taken above (loose.otherwise): these do not
        raise PipelineError(f"{'; '.join(list(wrong.values())[:6])}{'; ...' if len(wrong) > 6 else ''}: the pairing "
                            "joins different layers, whose tensors are not each other's; give name_map entries for "
                            "the right pairs [PC012]")
    if missing:
        raise PipelineError(missing + " [PC315]")
    return out


@fused.taken
def convert(torch_model, paddle_model, name_map=None, path=None, layouts=None, inputs=None, keep=()) -> "State":
    """Set paddle_model's weights to torch_model's, in Paddle's names and layout, one tensor at a time, and
    return them as {Paddle state-dict key: numpy array} (a State, read from the torch model on demand).

    name_map: None (every module paired automatically, portcheck.mapping.pairing), or how some torch modules' names
    become their Paddle counterparts' (align.names.resolve): a dict of name prefixes, a list of (regex,
    replacement) rules, or a callable; the modules it renames are paired as it says, the rest automatically.
    inputs: a batch both models take (as compare_forward's): pairs modules by their run order and output
    shapes, more surely than the definition order used without it.
    path: also write the converted weights there as a .pdparams (paddle.save), through the project's safe writer.
    layouts: {module type or class name, torch's or Paddle's: "same" or "transpose"} for module types whose
    layout this converter does not know (transformers' ViTEmbeddings holding cls_token; paddlenlp's
    LlamaLMHead, a Linear's weight in [in, out]: "transpose" from torch's Linear). A type no one declared
    whose tensors each have at most one axis longer than 1 (an RMSNorm's scale) keeps its layout. A
    portcheck.Fused value, keyed by a type, a class name or a module name, declares a fused module whose output
    columns hold parts the other side computes in modules of their own, or orders another way (fused: GPT-2's
    c_attn; recipes.paddlenlp_gpt); with output=False, tensors packing parts its forward reads itself
    (recipes.TORCH_ATTENTION: torch's in_proj_weight).
    Raises portcheck.core.errors.PipelineError, one line, on a module type whose layout is unknown, a module with no
    Paddle counterpart or of another type, a pairing two candidates make ambiguous, and on the keys, shapes and
    dtypes that do not match in either direction, every one of them named in that line; the Paddle model is then
    left as it was. Every check is made before the first tensor is set, and each is set in place: the peak is
    both models and one tensor, never a second copy of the weights (docs/bench/llm.md).
    A buffer the Paddle model saves and the torch one does not (paddlenlp saves embeddings.position_ids,
    transformers keeps it out of its state dict) is filled from the torch module's own buffer of that name
    when it holds the same values, and refused when they differ; one torch does not hold at all (its forward
    computes it) is refused, naming it, unless keep= lists its Paddle key: then Paddle's own value stays, and
    compare_forward judges what reads it (an integer input exactly). A Paddle tensor no torch tensor fills whose
    module the run over `inputs` never calls (paddlenlp's token-classification model's pooler) keeps Paddle's own
    value, as `portcheck run` keeps it: named in state.kept, with its one line in state.said.
    paddle_model.set_state_dict(convert(...)), the older use, still works.
    """
    params = paddle_model.state_dict()  # the model's own tensors, not copies
    same = names_of_one_tensor(params)
    # every problem is gathered before any is said: one run names them all (a port's first conversion usually
    # has several, and fixing them one run at a time costs a model load each)
    state, origin, problems, modules, copies, doubt, ran, held = {}, {}, [], {}, {}, [], {}, {}
    planned = plan(torch_model, paddle_model, name_map, layouts, inputs, paired=modules, copies=copies, doubt=doubt,
                   ran=ran, loose=held)
    for torch_key, (key, tensor, array) in planned.items():
        # a torch module the name map says runs as several Paddle modules fills each (Pairing.copies)
        for key in [key] + [paddle_key(tensor, other) for other in copies.get(tensor.module or ROOT, ())]:
            if key in state and state[key][0].tie == tensor.tie:
                continue  # one torch tensor tied in two modules, both paired with the Paddle module holding it once
            if key in state:  # the pairing is one to one: only a layout's renaming can send two tensors to one key
                problems.append(f"Paddle key {key} is filled twice (from {origin[key]} and {torch_key})")
                continue
            state[key], origin[key] = (tensor, array), torch_key
    # a Paddle fused module's tensors, each made of its parts' columns
    for whole, (spec, keys) in fused.joining(fused.specs(paddle_model, layouts), state).items():
        state[whole] = (Joined(spec, [state.pop(k) for k in keys]), None)
        origin[whole] = " + ".join(origin.pop(k) for k in keys)
    problems += [f"keep= names no Paddle key: {named(sorted(set(keep) - set(params)))}"] if set(keep) - set(params) else []
    unfilled = [k for k in params if not any(a in state for a in same[k]) and k not in keep]
    unused = [k for k in unfilled if "Paddle" in ran and (k.rpartition(".")[0] or ROOT) not in ran["Paddle"]]
    unfilled = [k for k in unfilled if k not in unused]
    buffers, said = _one_sided_buffers(torch_model, paddle_model, unfilled, modules, params)
    for key, (torch_key, tensor) in buffers.items():
        state[key], origin[key] = (tensor, tensor.array), torch_key
    unfilled = [k for k in unfilled if k not in buffers and k not in said]
    problems += list(said.values())
    state = State(state, origin)
    state.kept = unused
    state.said = "; ".join(
        ([f"Paddle's {named(unused)}: no torch tensor; unused by its forward on inputs: kept at Paddle's own value"]
         if unused else []) +
        ([f"torch's {named(ran['frozen'])}: never trained, no Paddle counterpart (the port computes it in its "
          "forward): nothing to fill, judged through what reads it"] if ran.get("frozen") else []) +
        ([f"held otherwise, paired tensor to tensor: {named([h.why for h in held.values()], '; ')}"] if held else []))
    unknown = [origin[k] for k in state if k not in params]
    problems += [f"Paddle keys no torch tensor fills: {named(unfilled)}"] if unfilled else []
    problems += [f"torch tensors with no Paddle key: {named(unknown)}"] if unknown else []
    for key in state:
        if key not in params:
            continue
        value, want = state.view(key), params[key]
        if loose_tensors.same_scalar_shapes(value.shape, want.shape):  # 0-d against [1], [n, 1] against [n]: reshaped
            tensor, array = state._tensors[key]
            state._tensors[key] = (replace(tensor, rule=loose_tensors.reshaped(tensor.rule, tuple(want.shape))), array)
            continue
        if tuple(value.shape) != tuple(want.shape):
            problems.append(f"{origin[key]} -> {key}: shape {tuple(value.shape)} (after the layout rule) vs "
                            f"Paddle {tuple(want.shape)}")
        if value.dtype != numpy_dtype(want):
            problems.append(f"{origin[key]} -> {key}: dtype {value.dtype} vs Paddle {numpy_dtype(want)} "
                            "(convert both models to one dtype first)")
    if problems:
        raise PipelineError(f"keys, shapes or dtypes do not match ({len(problems)} problem(s), the Paddle model "
                            "left as it was): " + named(problems, "; ") + " [PC014]")
    # a group only the run's order paired is settled by the models' run, each order tried on the converted rest:
    # the Paddle model's own values kept to be put back if values cannot settle it
    before = {k: np.array(params[k].numpy()) for k in state if k in params} if doubt else {}
    for key in state:
        params[key].set_value(state[key])  # one contiguous array at a time, freed before the next
    if doubt:
        try:
            settle_by_run(torch_model, paddle_model, inputs, state, params, modules, doubt)
        except PipelineError:
            for key, value in before.items():
                params[key].set_value(value)
            raise
    if path is not None:
        save_pdparams({k: params[k] for k in state}, path)
    # the tensor's other names too, so that set_state_dict(convert(...)) finds every key it looks for
    state.aliases = {a: k for k in state for a in same[k] if a != k and a not in state}
    return state


def _one_sided_buffers(torch_model, paddle_model, unfilled: list, modules: dict, params: dict) -> tuple:
    """Of the Paddle keys no torch tensor fills, the buffers (not parameters): ({Paddle key: (torch key, Tensor)}
    for each the paired torch module holds as a buffer it does not save, with the same values; {Paddle key:
    the problem}) for each whose values differ, or that torch does not hold (its forward computes it)."""
    # a parameter that does not train (stop_gradient: paddlenlp's CTRL sinusoidal pos_encoding, which transformers
    # computes into a plain tensor) is one more buffer: the model builds it, no optimizer moves it
    buffers = {f"{name}.{b}" if name else b: (name, b) for name, layer in paddle_model.named_sublayers(include_self=True)
               for b in [*getattr(layer, "_buffers", {}),
                         *(n for n, p in layer.named_parameters(include_sublayers=False) if p.stop_gradient)]}
    by_paddle = {p: t for t, p in modules.items()}
    torch_modules = dict(torch_model.named_modules())
    layers = dict(paddle_model.named_sublayers(include_self=True))
    layer_buffers = lambda layer: getattr(layers[layer], "_buffers", {})
    filled, said = {}, {}
    for key in (k for k in unfilled if k in buffers):
        layer, name = buffers[key]
        want = np.asarray(params[key].numpy())
        t_module = by_paddle.get(layer) or parent_of_paired(layer, by_paddle)
        t_module = ROOT if t_module is None and layer == "" else t_module
        module = torch_modules.get("" if t_module == ROOT else t_module)
        value = getattr(module, "_buffers", {}).get(name)
        t_key = ".".join(n for n in ("" if t_module == ROOT else t_module, name) if n)
        if value is None:
            said[key] = (f"Paddle {'buffer' if name in layer_buffers(layer) else 'parameter that does not train'} "
                         f"{key} {list(want.shape)} {want.dtype} has no torch tensor (the torch model computes it in "
                         f"its forward): pass keep=['{key}'] to leave Paddle's own value, which compare_forward "
                         "judges through what reads it")
            continue
        array = value.detach().cpu().numpy()
        if array.shape != want.shape or array.dtype != want.dtype or not np.array_equal(array, want):
            said[key] = (f"Paddle buffer {key} {list(want.shape)} {want.dtype} differs from torch's unsaved buffer "
                         f"{t_key} {list(array.shape)} {array.dtype}: build it as torch does")
            continue
        filled[key] = (t_key, Tensor(t_key.rpartition(".")[0], name, name, same_layout, None, type(module).__name__, array))
    return filled, said
