"""A module of a type no layout names that holds tensors of its own besides its children's (timm's VisionTransformer
holding its class token and position table, a Swin attention its relative-position bias table, LeViT's its attention
biases): its layout found by its Paddle counterpart's tensors. Each layout a caller may declare ("same",
"transpose") is tried on every tensor the module holds itself; where each one that fits puts every tensor at the same
Paddle name in the same layout (no tensor is a square matrix, which either fits), that is the module's layout, taken
tensor to tensor as portcheck.mapping.loose takes a tensor held otherwise (a router of its own type, its weight
[experts, hidden] against [hidden, experts]). Where two fit otherwise (a square weight), the run on torch's recorded
input settles it, as it settles a square weight a layer of another type holds (loose.Either, mapping.settle); where
none fits, nothing is taken and the refusal names both sides' shapes.

May import portcheck.core and mapping's layouts, loose, modules and tensors; Paddle only through the model handed in."""
import numpy as np

from portcheck.core.keys import ROOT
from portcheck.mapping.layouts import CONFIGS_DIFFER, IN_WORDS, RULES, layouts_table
from portcheck.mapping.loose import Either, Loose, same_scalar_shapes
from portcheck.mapping.modules import saved
from portcheck.mapping.tensors import _rule, own_tensors


def tokens_layout(name, array):
    """A map held [1, C, H, W] by torch and as its flattened tokens [1, H * W, C] by the port (timm's TNT pixel_pos,
    added to the pixel embedding's map before it is flattened; PaddleClas's, added after): the same values."""
    a = np.asarray(array)
    return name, (a.reshape(a.shape[0], a.shape[1], -1).transpose(0, 2, 1) if a.ndim == 4 else a)


OWN_RULES = {**RULES, "tokens": tokens_layout}  # a type of its own's tensors are placed by one of these
OWN_WORDS = {**IN_WORDS, "tokens": "as its flattened tokens"}  # OWN_RULES, said


def paddle_own(layer) -> dict:
    """{name: shape} of the tensors a Paddle layer holds itself and saves (modules.saved)."""
    return {n: tuple(t.shape) for n, t, _ in saved(layer)}


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


def fitted(torch_model, paddle_model, modules: dict, layouts=None, taken=(), either_way: dict = None) -> dict:
    """{torch key: Loose} of the tensors of each paired torch module whose type no layout names (nor its Paddle
    counterpart's), placed by each layout a caller may declare (RULES: as it is, a weight transposed, the last two axes
    swapped) that gives every tensor its Paddle counterpart's shape; layouts placing every tensor alike are one. One
    layout: taken, the only one the shapes allow (a router's [experts, hidden] weight against [hidden, experts];
    paddleformers' own 3-D experts [E, H, 2I] against [E, 2I, H]), unless a square tensor's is said by no tensor of its
    rank beside it (_witnessed): left to be declared. Two (a square weight, a router as many experts as hidden wide):
    an Either in either_way, taken in the first until the run on torch's recorded input settles it
    (settle.settle_layouts) or the layout the Paddle model holds does (settle.settle_held): never the shape's luck.
    modules: {torch module (ROOT the model): Paddle module ("" or ROOT the model)}; taken: torch keys paired already
    (mapping.loose)."""
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
        theirs, ways, kind = paddle_own(layer), {}, type(module).__name__
        for how, rule in OWN_RULES.items():
            fit = placed(tensors, theirs, rule)
            if fit is not None and not any(_alike(fit, other) for other, _ in ways.values()):
                ways[how] = (fit, rule)
        if not ways or len(ways) == 1 and set(ways) != {"tokens"} and not _witnessed(tensors):
            continue  # no layout fits (misfits says why), or a square tensor whose layout no tensor of its rank says
            # (a map's tokens take one rule alone, whatever its sides)
        held = {how: {key(t): Loose(f"{target}.{pname}" if target else pname, pname, rule,
                                    f"torch {key(t)} {list(tensors[t].shape)} -> Paddle "
                                    f"{f'{target}.{pname}' if target else pname}: held by its {kind} itself, "
                                    + OWN_WORDS[how] + (", the one layout Paddle's shape takes" if len(ways) == 1
                                                       else ""))
                      for t, (pname, _) in fit.items()} for how, (fit, rule) in ways.items()}
        if len(ways) == 1:
            out.update(next(iter(held.values())))
        elif either_way is not None:
            (first, _), (second, _) = list(ways.values())[:2]
            square_ones = [f"{name or ROOT}'s {t} as {pname}" for t, (pname, v) in first.items()
                           if not np.array_equal(v, second[t][1])]
            either_way[t_name] = Either(t_name, target or ROOT, held, (name or ROOT, kind, target or ROOT,
                                                                       type(layer).__name__, square_ones))
            out.update(next(iter(held.values())))  # until the run settles it
    return out


def _witnessed(tensors: dict) -> bool:
    """Whether each square tensor (two axes of one length) has a tensor of its rank beside it that is not square:
    the one layout that fits that one holds for it too (packed experts' gate_up_proj [E, 2I, 2I] beside down_proj
    [E, H, I]); a square matrix alone of its rank (a mixing matrix beside a class token) could be read either way."""
    square = lambda a: len([d for d in a.shape if d > 1]) != len({d for d in a.shape if d > 1})  # noqa: E731
    return all(any(b.ndim == a.ndim and not square(b) for b in tensors.values()) for a in tensors.values()
               if square(a))


def _alike(a: dict, b: dict) -> bool:
    """Two placements (placed's) putting every tensor at the same Paddle name with the same values."""
    return a.keys() == b.keys() and all(a[t][0] == b[t][0] and a[t][1].shape == b[t][1].shape
                                        and np.array_equal(a[t][1], b[t][1]) for t in a)
