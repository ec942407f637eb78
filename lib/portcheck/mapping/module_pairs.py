"""Each torch module holding tensors given its Paddle counterpart for a conversion (pair_modules): portcheck.mapping.
pairing on the models' run over the inputs (their output shapes only: the weights are not the same yet), else on
their definition order; a fused module paired when its parts are, packed experts by their index; a group only the
run's order paired settled by the weights the Paddle model holds where it holds torch's already (_held); a tensor one
side holds as a module and the other as a bare parameter found (mapping.loose). Every torch module left without a counterpart is
said at once, with why: built from another config, holding what several Paddle modules hold together (a fused layout
to declare), or nothing the name map names.

May import portcheck.core and mapping's pairing, alignment, tensors, fused, experts, loose, parted, layouts,
modules, names, trace and two_levels.
"""
import numpy as np

from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping import experts, fused, loose as loose_tensors, pairing, parted
from portcheck.mapping.alignment import alike
from portcheck.mapping.layouts import CONFIGS_DIFFER, config_fields, layouts_table, lineage
from portcheck.mapping.modules import saved as own_saved, stranded
from portcheck.mapping.names import named_exist
from portcheck.mapping.tensors import _kinds, _ties, own_tensors
from portcheck.mapping.two_levels import on_two_levels


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
    from portcheck.mapping.trace import eval_mode, ran_on, stopped, stopped_in, trace
    with eval_mode(torch_model), eval_mode(paddle_model):
        whole = [experts.mark(fused.mark(ran_on(side, trace(m, inputs, _Shapes()), inputs), fused.specs(m, layouts),
                                         m), m, paddle_model) for side, m in (("torch", torch_model), ("Paddle", paddle_model))]
        loose_tensors.mark(*whole)
        named_exist(name_map, *whole)  # an entry naming no module is refused, as compare_forward refuses it
        paired = pairing.pair(*(fused.cut(r) for r in whole), name_map, weights_only=True)
    if ran is not None and inputs is not None:
        ran["Paddle"] = {module_of(split_key(k)[1]) for k in whole[1] if k.startswith("out/")}
        # a run stopping partway pairs what ran by the run, the rest by definition order alone: said, never silent
        ran["stopped"] = [f"the {side} model's forward stopped on inputs{' in ' + at if at else ''} ({stopped(r)}): "
                          "the modules after it paired by their definition order, not by the run"
                          for side, r in (("torch", whole[0]), ("Paddle", whole[1])) if stopped(r)
                          for at in [stopped_in(r)]]
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

    def saved(module):
        """What a module saves itself, as a refusal lists it: its parameters, then its buffers said as buffers (an
        index table one side saves differs there, where the parameters alike would print twice the same)."""
        return [(f"{n} (buffer)" if buffer else n, t) for n, t, buffer in own_saved(module)]

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
            alike(k, kind) for k in _kinds(type(layer)) for kind in kinds)]
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
            f": {shapes(saved(module))}; Paddle {name}: "
            f"{shapes(saved(like)) or 'none'}" if like is not None else "") + ")"
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
                               own_tensors, lambda m: any(k in table for k in lineage(type(m))))
    # a head torch ties to its embedding that the port holds as a bare parameter of its own, by the head's name
    # (paddlenlp's lm_head_weight): filled from the one tensor, the port then training two (compare_backward)
    found.update({k: v for k, v in loose_tensors.find(torch_model, paddle_model, modules, sorted(tied), own_tensors,
                                                      lambda m: True).items()
                  if v.paddle_name.startswith(k.rpartition(".")[0].rpartition(".")[2])})
    found.update(on_two_levels(torch_model, found))  # a parent's own tensor its child holds too
    if loose is not None:
        loose.update(found)
    left = [(n, m) for n, m in left if not all(f"{n}.{t}" in found for t in own_tensors(m))]
    # a Linear's bias its parent holds in parts (timm's EVA: q_bias, v_bias and k's zeros): child, parent and vector
    in_parts, vectors = parted.find(torch_model, paddle_model, [n for n, _ in left if n not in paired.missing],
                                    taken | set(modules.values()), anchor)
    modules.update(in_parts)
    if loose is not None:
        loose.update(vectors)
    left = [(n, m) for n, m in left if n not in in_parts]
    configs = {n: c for n, m in left if n not in paired.missing and (c := config(n, m)) is not None}
    # a layer of the same tensors whose output the other side pads or crops elsewhere (TF's "SAME" padding: torch's
    # F.pad before the conv, the port's padded conv then a crop): its weights are the same, its output shape differs
    # until the two meet, where compare_forward judges it
    padded = {n: p for n, p in configs.items() if _padded_elsewhere(dict(left)[n], layers[p])}
    free = [p for p in layers if p not in taken and p not in modules.values() and p not in configs.values()]
    for n, m in left:  # of another name: the one free layer under its block's counterpart padded otherwise alone
        if n not in configs and n not in paired.missing:
            fits = [p for p in free if p.startswith(anchor(n)) and _padded_elsewhere(m, layers[p])]
            if len(fits) == 1 and fits[0] not in padded.values():
                padded[n] = fits[0]
    modules.update((n, p) for n, p in padded.items())
    configs = {n: p for n, p in configs.items() if n not in padded}
    left = [(n, m) for n, m in left if n not in padded]
    held = {n: f for n, m in left if n not in configs and n not in paired.missing and (f := fusion(n, m))}
    fusions = dict(held.values())
    missing = [said(n, m) for n, m in left if n not in configs]
    problems = []
    if configs:  # no map pairs tensors of other sizes: the two models were built from different configs
        out_shape = lambda record, n: next((f"; output {list(np.shape(v))}" for k, v in record.items()
                                            if k.startswith("out/") and split_key(k)[1] == n), "")
        problems.append(f"{len(configs)} torch module(s) differ in shape from their Paddle counterpart: " + "; ".join(
            f"torch {n} ({shapes(saved(dict(left)[n]))}{out_shape(whole[0], n)}) against Paddle {p} "
            f"({shapes(saved(layers[p]))}{out_shape(whole[1], p)})"
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
    halted = [(side, stopped(record)) for side, record in zip(("torch", "Paddle"), whole) if stopped(record)]
    if problems and halted:  # a run that stopped paired nothing after that point: the stop first, as the cause
        problems.insert(0, "; ".join(f"the {side} model stopped on inputs ({error}): its modules after that point "
                                     "never ran, so the run paired none of them" for side, error in halted))
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


def _padded_elsewhere(module, layer) -> bool:
    """A layer holding the torch module's tensors in their very shapes, whose settings differ in padding alone, one
    side's a class of its own (timm's Conv2dSame pads in its forward): a framework's conv against a framework's conv
    whose padding differs is another model, refused naming the setting."""
    mine = sorted(tuple(v.shape) for v in own_tensors(module).values())
    theirs = sorted(tuple(v.shape) for _, v in layer.named_parameters(include_sublayers=False))
    own = not type(module).__module__.startswith("torch.") or not type(layer).__module__.startswith("paddle.")
    return bool(mine) and mine == theirs and own and [f for f, _, _ in config_fields(module, layer)] == ["padding"]
