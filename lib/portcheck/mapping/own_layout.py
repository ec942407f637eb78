"""A module of a type no layout names that holds tensors of its own besides its children's (timm's VisionTransformer
holding its class token and position table, a Swin attention its relative-position bias table, LeViT's its attention
biases): its layout found by its Paddle counterpart's tensors. Each layout a caller may declare ("same",
"transpose") is tried on every tensor the module holds itself; where each one that fits puts every tensor at the same
Paddle name in the same layout (no tensor is a square matrix, which either fits), that is the module's layout, taken
tensor to tensor as portcheck.mapping.loose takes a tensor held otherwise. Where two fit otherwise, or none, nothing
is taken: the type is left to be declared, as the refusal says. by_shape places such a type as a whole, every module
of it agreeing, as a declared layout would (a router of its own type, its weight [experts, hidden]).

May import portcheck.core and mapping's layouts, loose and tensors; Paddle only through the model handed in."""
import numpy as np

from portcheck.core.keys import ROOT
from portcheck.mapping.layouts import CONFIGS_DIFFER, RULES, layouts_table, lineage, linear_layout, same_layout
from portcheck.mapping.loose import Loose, same_scalar_shapes
from portcheck.mapping.tensors import _rule, own_tensors


def tokens_layout(name, array):
    """A map held [1, C, H, W] by torch and as its flattened tokens [1, H * W, C] by the port (timm's TNT pixel_pos,
    added to the pixel embedding's map before it is flattened; PaddleClas's, added after): the same values."""
    a = np.asarray(array)
    return name, (a.reshape(a.shape[0], a.shape[1], -1).transpose(0, 2, 1) if a.ndim == 4 else a)


OWN_RULES = {**RULES, "tokens": tokens_layout}  # a type of its own's tensors are placed by one of these


def paddle_own(layer) -> dict:
    """{name: shape} of the tensors a Paddle layer holds itself and saves (its non-persistable buffers left out)."""
    skip = getattr(layer, "_non_persistable_buffer_names_set", set())
    out = {n: tuple(p.shape) for n, p in layer.named_parameters(include_sublayers=False)}
    out.update({n: tuple(b.shape) for n, b in layer.named_buffers(include_sublayers=False) if n not in skip})
    return out


def placed(tensors: dict, theirs: dict, rule):
    """{torch name: (Paddle name, its array in Paddle's layout)} under `rule` where every tensor lands on a Paddle
    tensor of its shape (0-d against [1] alike), else None."""
    out = {}
    for name, array in tensors.items():
        pname, value = rule(name, array)
        if pname is None:
            continue
        if pname not in theirs or not (tuple(np.shape(value)) == theirs[pname]
                                       or same_scalar_shapes(np.shape(value), theirs[pname])):
            return None
        out[name] = (pname, np.asarray(value))
    return out


def misfits(torch_model, paddle_model, modules: dict, layouts=None, taken=()) -> str:
    """One line naming each paired torch module whose type no layout names and whose own tensors land on its
    counterpart's names in no layout, a tensor of another size among them (another width: the two models' configs
    differ there), each side's shapes said; "" where there is none. modules as fitted's."""
    table, said = layouts_table(layouts), []
    layers, t_modules = dict(paddle_model.named_sublayers(include_self=True)), dict(torch_model.named_modules())
    for t_name, p_name in modules.items():
        name, target = "" if t_name == ROOT else t_name, "" if p_name in (ROOT, None) else p_name
        module, layer = t_modules.get(name), layers.get(target)
        key = lambda t: f"{name}.{t}" if name else t
        tensors = {t: a for t, a in own_tensors(module).items() if key(t) not in taken} if module is not None else {}
        if not tensors or layer is None or _rule(table, module, type(layer), tensors) is not None:
            continue
        theirs = paddle_own(layer)
        sizes_differ = any(int(np.prod(np.shape(a))) != int(np.prod(theirs[t])) for t, a in tensors.items()
                           if t in theirs)  # the same sizes in other shapes: axes reordered, which a layout says
        if set(tensors) <= set(theirs) and sizes_differ and not any(placed(tensors, theirs, r) for r in RULES.values()):
            shapes = lambda held: ", ".join(f"{t} {list(np.shape(v)) if not isinstance(v, tuple) else list(v)}"
                                            for t, v in held.items())
            said.append(f"torch {name or ROOT} ({type(module).__name__}: {shapes(tensors)}) against Paddle "
                        f"{target or ROOT} ({shapes({t: theirs[t] for t in tensors})})")
    return (f"{len(said)} module(s) of a type of their own hold tensors of other shapes than their counterpart's, in "
            f"either layout: {'; '.join(said[:4])}{'; ...' if len(said) > 4 else ''}: {CONFIGS_DIFFER}") if said else ""


def fitted(torch_model, paddle_model, modules: dict, layouts=None, taken=()) -> dict:
    """{torch key: Loose} of the tensors of each paired torch module whose type no layout names (nor its Paddle
    counterpart's), placed by the one layout every fitting candidate agrees on. modules: {torch module (ROOT the
    model): Paddle module ("" or ROOT the model)}; taken: torch keys paired already (mapping.loose)."""
    table = layouts_table(layouts)
    layers = dict(paddle_model.named_sublayers(include_self=True))
    t_modules = dict(torch_model.named_modules())
    out = {}
    for t_name, p_name in modules.items():
        name = "" if t_name == ROOT else t_name
        target = "" if p_name in (ROOT, None) else p_name
        module, layer = t_modules.get(name), layers.get(target)
        if module is None or layer is None:
            continue
        key = lambda t: f"{name}.{t}" if name else t
        tensors = {t: a for t, a in own_tensors(module).items() if key(t) not in taken}
        if not tensors or _rule(table, module, type(layer), tensors) is not None:
            continue  # nothing of its own, or a layout known for it
        theirs = paddle_own(layer)
        fitting = {how: p for how, rule in OWN_RULES.items() if (p := placed(tensors, theirs, rule)) is not None}
        if set(fitting) != {"tokens"} and \
                any(len(long) != len(set(long)) for long in ([d for d in a.shape if d > 1] for a in tensors.values())):
            continue  # two axes of one length (a square matrix): its shape fits either layout, the caller declares it
        fits = list(fitting.values())
        same = lambda a, b: a.keys() == b.keys() and all(
            a[t][0] == b[t][0] and a[t][1].shape == b[t][1].shape and np.array_equal(a[t][1], b[t][1]) for t in a)
        if not fits or any(not same(fits[0], other) for other in fits[1:]):
            continue  # no layout fits, or two place a tensor otherwise (a square matrix): the caller declares it
        rule = OWN_RULES[next(iter(fitting))]
        for t, (pname, value) in fits[0].items():
            pkey = f"{target}.{pname}" if target else pname
            out[key(t)] = Loose(pkey, pname, rule, f"torch {key(t)} {list(tensors[t].shape)} -> Paddle {pkey}: "
                                                    f"held by its {type(module).__name__} itself, in the one layout "
                                                    "Paddle's shape takes")
    return out


def by_shape(torch_model, layers: dict, modules: dict, layouts=None) -> dict:
    """{torch type name: "same" or "transpose"} for the torch module types no layout is known for (a router of its
    own type: transformers' Glm4MoeTopkRouter, its weight [experts, hidden] and a score bias; GPT-OSS's experts, 3-D
    tensors of the port's names) whose every module's Paddle counterpart (modules: {torch module: Paddle module};
    layers: {name: Paddle layer}) holds tensors of the same names, and of which one of the two rules alone gives
    every one of them its Paddle shape ("transpose" turns a 2-D weight only): the only layout the shapes allow, every
    module of the type agreeing. A square weight fits both: the run settles it (settle.settle_layouts) or the user
    declares it."""
    table, found = layouts_table(layouts), {}
    for name, module in torch_model.named_modules():
        target = layers.get(modules.get(name)) if name else None
        if target is None or any(key in table for key in lineage(type(module))):
            continue
        tensors = own_tensors(module)
        theirs = paddle_own(target)
        if not tensors or set(tensors) != set(theirs) or all(sum(d != 1 for d in a.shape) <= 1
                                                            for a in tensors.values()):
            continue  # a module of vectors alone keeps its layout already (_rule)
        # "transpose" turns a 2-D weight only: where there is none, it is "same" again, not a second way
        ways = (("same", same_layout),) + ((("transpose", linear_layout),) if np.ndim(tensors.get("weight")) == 2
                                           else ())
        fits = [how for how, rule in ways
                if all(tuple(np.shape(rule(t, a)[1])) == theirs[t] for t, a in tensors.items())]
        kind = type(module).__name__
        how = fits[0] if len(fits) == 1 else None
        found[kind] = how if found.get(kind, how) == how else None
    return {kind: how for kind, how in found.items() if how}
