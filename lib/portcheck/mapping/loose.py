"""Tensors one side holds as a module and the other as a bare parameter of the parent: a projection torch computes
in a child `Linear` (transformers' CLIP `text_projection`) that the port holds as a parameter `[in, out]` of the
model and multiplies itself (paddlenlp's), or the converse, and a scalar 0-d on one side, `[1]` on the other
(CLIP's `logit_scale`). Each is paired tensor to tensor, in Paddle's layout: no module of the other side stands for
it, so no name map could say it. Also tensors held otherwise by the module's own counterpart (held_otherwise): a
Paddle layer of a type of its own holding a Linear's tensors all the same (paddlenlp's Linear3D, OPTLMHead's
decoder_weight), and a parameter with axes merged (portcheck.mapping.regroup: XLNet's q).

May import portcheck.core, portcheck.mapping.layouts, .modules, .regroup and .two_levels; torch and Paddle only
inside the functions handed their models."""
import collections
import functools
import itertools
import math
from types import SimpleNamespace
from dataclasses import dataclass, replace

import numpy as np

from portcheck.core.calibrated import same_but_ones
from portcheck.core.diff import UNPAIRED
from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT
from portcheck.mapping.layouts import RULES, layouts_table, linear_layout, same_layout
from portcheck.mapping import regroup
from portcheck.mapping.two_levels import held_twice
from portcheck.mapping.modules import META, held_tensors, redescribed


@dataclass(frozen=True)
class Loose:
    """One torch tensor whose Paddle counterpart is held by another module than its own's counterpart."""
    paddle_key: str   # the whole Paddle state-dict key it fills
    paddle_name: str  # that key's last part
    rule: object      # torch array -> Paddle's layout (a Linear's weight transposed into a bare [in, out])
    why: str          # the one line report.pairs() and the docs say


def reshaped(rule, shape):
    """rule, then the array as `shape` (a 0-d scalar as Paddle's [1], or the converse): the same one value."""
    def to(name, array):
        pname, array = rule(name, array)
        return pname, np.reshape(array, shape)
    return to


def same_scalar_shapes(a, b) -> bool:
    """A 0-d tensor against a [1] (or [1, 1]) one: one value, a parameter each framework shapes its own way; or a
    vector against itself with axes of 1 (transformers' ConvBERT SeparableConv1D bias [out, 1] against paddlenlp's
    [out]): the same values in the same order, whatever axes of 1 either side adds."""
    return same_but_ones(a, b)


def frozen(module) -> bool:
    """A module whose own tensors are all parameters no optimizer moves (requires_grad False), buffers none."""
    skip = getattr(module, "_non_persistent_buffers_set", set())
    own = list(module.named_parameters(recurse=False))
    return bool(own) and not any(p.requires_grad for _, p in own) and \
        not any(b is not None and n not in skip for n, b in module.named_buffers(recurse=False))


def _own(layer) -> dict:
    return {n: tuple(p.shape) for n, p in layer.named_parameters(include_sublayers=False)}


def _parent(name: str, modules: dict) -> str:
    """The nearest ancestor of a torch module that has a counterpart (ROOT for the model)."""
    while name:
        name = name.rpartition(".")[0]
        if name and name in modules:
            return name
    return ROOT


def apart(torch_held: dict, paddle_held: dict) -> tuple:
    """({torch module: [its own tensor shapes the other side holds in another form]}, the same of Paddle's, {torch
    modules}, {Paddle modules} whose tensors the other side holds as bare parameters of the parent, {torch key: the
    whole Paddle key} of the first two forms' tensors), by names at the
    same place: a torch Linear (or Conv1D) `X.NAME` where Paddle has no `X.NAME` but its `X` holds `NAME` or
    `NAME_weight` (and `NAME_bias`) of those shapes in Paddle's layout, or, once every name is read, a tensor no
    name finds by the one of its shapes `X` holds that torch's `X` does not hold by name and no module took (CLIP's
    visual_projection against paddlenlp's vision_projection; find's rule); a torch `X` holding a 2-D `NAME`
    where Paddle's `X.NAME` is a Linear of that weight and torch has no module `X.NAME`; and a scalar `NAME` 0-d in one
    `X` and [1] in the other's. The run pairs calls by order and shape, and such a projection is a call on one side
    only: it would pair with the next call of its shape (torch's visual_projection with the port's
    text_projection, a pooler's dense with the port's pooler holding dense_weight). mark() says it in the records.
    torch_held, paddle_held: modules.held_tensors of each side's record ({module: (class, {tensor: shape})}), so
    that two saved records, or the records of two processes (`portcheck run`), are read as two live models are."""
    drop_t, drop_p, alone_t, alone_p, at = {}, {}, set(), set(), {}
    join = lambda x, n: f"{x}.{n}" if x else n
    unnamed = []  # (module, its parent, the shapes each tensor may have, those found by name): the shapes' turn next
    twice = []  # (a Linear child taken, its parent): held_twice's turn last

    def taken(name, parent, found):
        alone_t.add(name)
        drop_p.setdefault(parent or ROOT, []).extend(paddle_held[parent][1][n] for n in found.values())
        at.update({f"{name}.{t}": join(parent, n) for t, n in found.items()})
        twice.append((name, parent))
    for name, (kind, held) in torch_held.items():
        mine = paddle_held.get(name)
        parent, _, last = name.rpartition(".")
        if name and kind in ("Linear", "Conv1D") and "weight" in held and name not in paddle_held and \
                parent in paddle_held:
            theirs = paddle_held[parent][1]
            # each tensor's shapes it may have there (without an array: an lm_head is gigabytes): a Linear's weight
            # in either layout, [in, out] as the port multiplies x @ W or [out, in] read with transpose_y
            wants = {t: {s[::-1], s} if kind == "Linear" and t == "weight" else {s} for t, s in held.items()}
            names = {t: ([last, f"{last}_weight"] if t == "weight" else [f"{last}_{t}"]) for t in wants}
            found = {t: next((n for n in names[t] if theirs.get(n) in wants[t]), None) for t in wants}
            if paddle_held[parent][0] == kind and all(theirs.get(t) in wants[t] for t in wants):
                continue  # Paddle's X is the layer itself (a pooler Linear against torch's pooler holding its dense)
            if found and all(found.values()):
                taken(name, parent, found)
            elif found:
                unnamed.append((name, parent, wants, found))
        if mine is None:
            continue
        for tname, shape in held.items():
            kind_, child = paddle_held.get(join(name, tname), (None, {}))
            if len(shape) == 2 and join(name, tname) not in torch_held and kind_ == "Linear" and \
                    set(child) == {"weight"} and child["weight"] in (shape, shape[::-1]):
                drop_t.setdefault(name or ROOT, []).append(shape)
                alone_p.add(join(name, tname))
                at[join(name, tname)] = join(join(name, tname), "weight")
            theirs = mine[1].get(tname)
            # a scalar (one value): the 0-d one identifies nothing already; a vector with axes of 1 pairs as it is
            if theirs is not None and math.prod(shape) == 1 and same_scalar_shapes(shape, theirs):
                (drop_t.setdefault(name or ROOT, []).append(shape) if len(shape) else
                 drop_p.setdefault(name or ROOT, []).append(theirs))
    # every name first, then each tensor no name found by the one tensor of its shapes the parent holds that neither
    # torch's parent holds by that name nor a module took (find's rule: CLIP's visual_projection against
    # paddlenlp's vision_projection)
    for name, parent, wants, found in unnamed:
        own = torch_held.get(parent, (None, {}))[1]
        free = [n for n in paddle_held[parent][1] if n not in own and join(parent, n) not in at.values()]
        for t in [t for t, n in found.items() if n is None]:
            fits = [n for n in free if paddle_held[parent][1][n] in wants[t] and n not in found.values()]
            if len(fits) != 1:
                break
            found[t] = fits[0]
        else:
            taken(name, parent, found)
    for child, parent in twice:  # a tensor of the parent the child holds too (two_levels): the child's counterpart
        mine = torch_held.get(parent, (None, {}))[1]
        for own, its in held_twice(mine, torch_held[child][1], paddle_held[parent][1], drop_p.get(parent or ROOT, ())):
            drop_t.setdefault(parent or ROOT, []).append(mine[own])
            at[join(parent, own)] = at[f"{child}.{its}"]
    return drop_t, drop_p, alone_t, alone_p, at


UNNAMED = ("a projection held as a Linear on one side and a bare parameter of its parent on the other "
           "(portcheck.mapping.loose) is not told apart in records that keep no tensor names (own/ keys): record "
           "both sides again with this version, or judge with compare_forward [PC486]")


def changes(torch_record, paddle_record):
    """{side: {mod/ key: its value with apart()'s tensors taken out and its modules described as pairing with
    none}}: what the pairing reads of them is then what the two sides share. Read from the records alone (their
    mod/ and own/ keys), as two live models are; None where a record keeps no tensor names (UNNAMED says it)."""
    t_held, p_held = held_tensors(torch_record), held_tensors(paddle_record)
    if t_held is None or p_held is None:
        return None
    drop_t, drop_p, alone_t, alone_p, _ = apart(t_held, p_held)
    out = {}
    for side, record, drop, alone in (("torch", torch_record, drop_t, alone_t),
                                      ("paddle", paddle_record, drop_p, alone_p)):
        out[side] = {}
        for key in [k for k in record if k.startswith(META)]:
            name = key[len(META):].rpartition("/")[0]
            if name in drop or name in alone:
                out[side][key] = redescribed(record[key], drop.get(name, ()), name in alone)
    return out


def held_at(torch_record, paddle_record) -> dict:
    """{torch key: the whole Paddle key} of each torch Linear's tensor the Paddle counterpart of its parent holds as a
    bare parameter of the same name, and of each bare 2-D parameter Paddle's Linear of its name holds (apart()'s
    forms), read from two records not yet marked: where two records written apart (a saved record_backward,
    `portcheck run`'s sides) find each gradient's counterpart. A torch record written alone holds a Linear's weight in
    Paddle's layout, [in, out], as the bare one is; a bare one as it is (as_held: transposed where the shape says)."""
    t_held, p_held = held_tensors(torch_record), held_tensors(paddle_record)
    return {} if t_held is None or p_held is None else apart(t_held, p_held)[4]


def mark(torch_record, paddle_record) -> bool:
    """changes() made in each record (records of the caller's own run); False where a record keeps no names."""
    found = changes(torch_record, paddle_record)
    for record, side in ((torch_record, "torch"), (paddle_record, "paddle")):
        for key, value in (found or {}).get(side, {}).items():
            record[key] = value
    return found is not None


def marked(torch_record, paddle_record) -> tuple:
    """(torch's, Paddle's, a line or None): two saved records as mark() reads them, each changed key laid over the
    record (a caller's record is never written to), or as they are with UNNAMED where one keeps no tensor names."""
    found = changes(torch_record, paddle_record)
    if found is None:
        return torch_record, paddle_record, UNNAMED
    over = lambda record, side: collections.ChainMap(found[side], record) if found[side] else record
    return over(torch_record, "torch"), over(paddle_record, "paddle"), None


def as_held(value, shape, transposed=False):
    """One side's tensor in the other side's `shape`, by this module's rules: a scalar or a vector with axes of 1
    (same_scalar_shapes) and axes merged (regroup.merged) reshaped, the same values in row-major order; a 2-D tensor
    the other holds the other way round, transposed, only where `transposed` (a pair this module found tensor to
    tensor: a Linear's weight against a bare parameter; a shape alone never says it). None where none fits."""
    value = np.asarray(value)
    if value.shape == tuple(shape):
        return value
    if same_scalar_shapes(value.shape, tuple(shape)) or regroup.merged(value.shape, tuple(shape)):
        return value.reshape(shape)
    if transposed and value.ndim == 2 and value.shape[::-1] == tuple(shape):
        return np.ascontiguousarray(value.T)
    return None


def held_by_type(torch_record, paddle_record, modules: dict) -> dict:
    """{torch key: the whole Paddle key} of each torch Linear's tensor whose Paddle counterpart (modules: {torch
    module: Paddle module}, ROOT the models), a layer holding them under other names, every one of its tensors
    claimed (otherwise(): OPTLMHead's decoder_weight [vocab, hidden]), read from two records' mod/ and own/ keys
    (torch's shapes in its own layout); {} where a record keeps no names. No framework is imported (`portcheck run`'s
    Paddle side never imports torch, so layouts_table's known types are not read: a known layer holds a Linear's
    names, or shapes no Linear's fill). A square weight under another name fits either layout: taken where the
    torch record keeps the layout its caller declared for the Paddle type (LAYOUT) as torch's [in, out] (one held
    [out, in] is the judge's to read transposed: in_torchs_shapes), else left out here and said where the weights
    are set (convert's PC455, run's too: square_held) and where they are judged (PC452)."""
    out, _, flipped = _by_type(torch_record, paddle_record, modules)
    return {k: v for k, v in out.items() if k not in flipped}


def square_held(torch_record, paddle_record, modules: dict) -> dict:
    """{torch module: PC455's line} of each torch Linear whose Paddle counterpart, a layer of another type, holds its
    square weight under another name (held_by_type leaves it out: either layout fits), read from two records as
    held_by_type reads them: what `portcheck run` says, where no layouts= reaches the Paddle side's placing."""
    return {found[0]: either_line(*found, then="; portcheck run cannot place it: compare the two models with "
                                  "compare_forward and compare_backward, passing that layouts=")
            for found in _by_type(torch_record, paddle_record, modules)[1]}


def either_line(name, mine, target, kind, either, then="") -> str:
    """PC455's line: torch `name` (a `mine`) against Paddle `target` (a `kind`) holding `either`, a square weight
    under another name, which either layout fits; `then`: what the caller adds before the code."""
    return (f"torch {name} is a {mine} and Paddle {target} a {kind} holding {', '.join(either)}, square: either "
            f"layout fits; pass layouts={{'{kind}': 'same'}} if it holds torch's [out, in] (read as F.linear reads "
            f"it, x @ W.T), or 'transpose' for [in, out] (x @ W){then} [PC455]")


def unplaced_line(name, mine, target, kind, either) -> str:
    """PC452's line: a square weight under another name (either_line's) in two saved records, the torch one
    keeping no layout for the Paddle type: what the gradient's row says, and how to record it."""
    return (f"{UNPAIRED} on paddle: Paddle {target} (a {kind}) holds {', '.join(either)}, square: either layout "
            f"fits, and the torch record declares neither; record it with record_backward(..., layouts={{'{kind}': "
            f"'same'}}) if {kind} holds torch's [out, in] (x @ W.T), or 'transpose' for [in, out] (x @ W) [PC452]")


LAYOUT = "layout/"  # a torch record's key: layout/<type name>/<'same' or 'transpose'>, an empty array


def keeping(layouts) -> dict:
    """The LAYOUT keys of the layouts a caller declared by a type's rule ("same", "transpose"): what a torch record
    written alone keeps, so that two saved records settle what only the declaration does (a square weight under
    another name: _by_type). A Fused entry is kept by its fused/ key (portcheck.mapping.fused)."""
    return {f"{LAYOUT}{getattr(k, '__name__', k)}/{how}": np.zeros(0, np.float32)
            for k, how in (layouts or {}).items() if isinstance(how, str)}


def kept(record) -> dict:
    """{type name: "same" or "transpose"} of a record's LAYOUT keys (a key of another form declares nothing)."""
    found = (k[len(LAYOUT):].rpartition("/") for k in record if k.startswith(LAYOUT))
    return {kind: how for kind, _, how in found if kind and how in RULES}


def _by_type(torch_record, paddle_record, modules: dict) -> tuple:
    """(held_by_type's {torch key: Paddle key}, [(torch module, its class, Paddle module, its class, what either
    layout fits)] of each square weight under another name no LAYOUT key settles, {torch keys} of the square weights
    a LAYOUT key says Paddle holds as torch's [out, in]: a torch record written alone holds a Linear's [in, out])."""
    t_held, p_held = held_tensors(torch_record), held_tensors(paddle_record)
    out, squares, flipped, declared = {}, [], set(), kept(torch_record)
    for name, (kind, held) in (t_held or {}).items() if p_held is not None else ():
        target = modules.get(name or ROOT)
        target = "" if target in (None, ROOT) else target
        p_kind, theirs = p_held.get(target, (None, {})) if (name or ROOT) in modules else (None, {})
        if kind != "Linear" or not theirs or p_kind == "Linear" or all(t in theirs for t in held):
            continue
        zeros = lambda shape: np.broadcast_to(np.zeros((), np.float32), shape)  # shapes alone: no memory taken
        tensors = {f"{name}.{t}" if name else t: SimpleNamespace(name=t, array=zeros(shape), rule=linear_layout,
                                                                 paddle_name=t, module=name, module_type=kind)
                   for t, shape in held.items()}
        found, either = otherwise(tensors, target, theirs)
        if either and p_kind in declared:  # each tensor by its own rule alone: the weight [in, out] as recorded
            found, either = otherwise(tensors, target, theirs, declared=True)
            flipped |= {k for k in found if tensors[k].name == "weight" and declared[p_kind] == "same"}
        out.update({k: how.paddle_key for k, how in found.items()})
        squares += [(name or ROOT, kind, target or ROOT, p_kind, either)] if either else []
    return out, squares, flipped


def in_torchs_shapes(torch_record, paddle_record, modules: dict, renamed: dict, counterpart) -> tuple:
    """(Paddle's record, renamed, {torch record key: PC452's line}) for two records written apart (a saved
    record_backward, `portcheck run`'s sides), judged as compare_backward's, whose torch side records each tensor in
    Paddle's shape: renamed (backward.renames) with held_by_type's keys ("/" and the whole Paddle key), and each
    tensor (grad/, state<i>/, final/) whose torch counterpart holds the same values in another shape by as_held's
    rules laid over in torch's shape (a reshape; a transpose only for a tensor paired tensor to tensor by this
    module, "/" in renamed), or the other way round where the torch record's LAYOUT key says so (a square weight
    under another name, held [out, in]); each tensor of a square weight no LAYOUT key settles, the line its row
    says. counterpart(torch key, modules, renamed): the Paddle record key (backward._counterpart). The caller's
    record is never written to."""
    by_type, squares, flipped = _by_type(torch_record, paddle_record, modules)
    flipped -= set(renamed)  # a torch record written beside its Paddle model (compare_backward) holds it as Paddle does
    renamed = {**{t: "/" + p for t, p in by_type.items()}, **renamed}
    over, found = {}, {t for t, p in renamed.items() if p.startswith("/")}
    t_held = held_tensors(torch_record) or {}
    unplaced = {t if square[0] == ROOT else f"{square[0]}.{t}": unplaced_line(*square) for square in squares
                for t in t_held.get("" if square[0] == ROOT else square[0], (None, {}))[1]}
    why = {}
    for key, value in torch_record.items():
        if not key.partition("/")[0].startswith(("grad", "state", "final")):
            continue
        p_key, tensor = counterpart(key, modules, renamed), key.partition("/")[2]
        theirs = paddle_record.get(p_key) if p_key else None
        if tensor in unplaced:
            why[key] = unplaced[tensor]
        if theirs is not None and tensor in flipped:
            over[p_key] = np.ascontiguousarray(np.asarray(theirs).T)
        elif theirs is not None and np.shape(theirs) != np.shape(value):
            fits = as_held(theirs, np.shape(value), transposed=tensor in found)
            if fits is not None:
                over[p_key] = fits
    return (collections.ChainMap(over, paddle_record) if over else paddle_record), renamed, why


def find(torch_model, paddle_model, modules: dict, left: list, own_tensors, known_type) -> dict:
    """{torch key: Loose} for the tensors of torch modules `left` without a counterpart that the Paddle counterpart
    of their parent holds as bare parameters (a Linear's weight [out, in] as [in, out], or as it is where the
    parent holds that shape and reads it with transpose_y; its bias as it is), and for 2-D bare parameters of a
    torch module (of a type no layout rule knows) that an unpaired Paddle Linear child of its counterpart holds
    ([in, out] as torch multiplies x @ W; [out, in] transposed where the shape says so).
    modules: {torch module: Paddle module} (ROOT for the models); own_tensors(module): its tensors as arrays;
    known_type(module): whether a layout rule knows its type. A module is taken only when every tensor it holds
    finds one, by its name (`proj` as `proj`, `proj_weight`, `proj_bias`), else by the one unclaimed shape."""
    layers = dict(paddle_model.named_sublayers(include_self=True))
    t_modules = dict(torch_model.named_modules())
    paddle_of = lambda t: "" if modules.get(t) in (None, ROOT) else modules[t]
    claimed = {}  # Paddle key: the torch key filling it
    out = {}
    torch_held = lambda t: set(own_tensors(t_modules["" if t == ROOT else t]))  # the parent's own names
    for by_name in (True, False):  # every name first, then the one unclaimed shape each (visual_ against vision_)
        for name in left:
            module = t_modules.get(name)
            if module is None or type(module).__name__ not in ("Linear", "Conv1D") or any(k.startswith(f"{name}.")
                                                                                          for k in out):
                continue
            parent = _parent(name, modules)
            target = paddle_of(parent)
            layer = layers.get(target)
            if layer is None:
                continue
            key_of = lambda n: ".".join(p for p in (target, n) if p)
            free = {n: s for n, s in _own(layer).items() if n not in torch_held(parent) and key_of(n) not in claimed}
            last = name.rpartition(".")[2]
            found = {}
            for tname, array in own_tensors(module).items():
                linear = type(module).__name__ == "Linear"
                names = (last, f"{last}_{tname}") if tname == "weight" else (f"{last}_{tname}",)
                # Paddle's layout [in, out] first (a square weight is read so), else torch's [out, in] as it is
                for rule in ([linear_layout, same_layout] if linear and tname == "weight" else
                             [linear_layout if linear else same_layout]):
                    shape = tuple(rule(tname, array)[1].shape)
                    fits = [n for n in names if free.get(n) == shape] if by_name else \
                        [n for n, s in free.items() if s == shape and key_of(n) not in
                         {v.paddle_key for v in found.values()}]
                    if fits:
                        break
                if len(fits) != 1:
                    break
                found[f"{name}.{tname}"] = Loose(key_of(fits[0]), fits[0], rule, f"torch {name} "
                                                 f"({type(module).__name__}) -> Paddle {key_of(fits[0])} (a bare "
                                                 f"parameter {list(shape)} of its parent)")
            else:
                if found:
                    out.update(found)
                    claimed.update((v.paddle_key, k) for k, v in found.items())
    # a container of a type of its own holding tables, left without a counterpart, whose tables the counterpart of its
    # parent holds (transformers' ViTEmbeddings holding cls_token and position_embeddings against a port holding
    # cls_token and pos_embed on the model itself): each by its name, else by the one free parameter of its shape
    for name in left:
        module = t_modules.get(name)
        if module is None or known_type(module) or any(k.startswith(f"{name}.") for k in out):
            continue
        parent = _parent(name, modules)
        target = paddle_of(parent)
        layer = layers.get(target)
        if layer is None:
            continue
        key_of = lambda n: ".".join(p for p in (target, n) if p)
        free = {n: s for n, s in _own(layer).items() if n not in torch_held(parent) and key_of(n) not in claimed}
        tensors = {t: tuple(np.shape(a)) for t, a in own_tensors(module).items()}
        found = {t: t for t, shape in tensors.items() if free.get(t) == shape}
        for t, shape in tensors.items():
            fits = [n for n, s in free.items() if s == shape and n not in found.values() and n not in tensors]
            if t not in found and len(fits) == 1:
                found[t] = fits[0]
        if not tensors or len(found) != len(tensors):
            continue
        for t, n in found.items():
            out[f"{name}.{t}"] = Loose(key_of(n), n, same_layout, f"torch {name}.{t} {list(tensors[t])} (held by "
                                       f"{type(module).__name__}) -> Paddle {key_of(n) if target else n} (a parameter "
                                       f"of {target or 'the model'} itself)")
            claimed[key_of(n)] = f"{name}.{t}"
    p_taken = {p for p in modules.values()}
    for name, module in t_modules.items():
        if known_type(module):
            continue
        target = paddle_of(name or ROOT)
        if (name or ROOT) not in modules or target not in layers:
            continue
        prefix = f"{target}." if target else ""
        children = {n: layers[n] for n in layers if n.startswith(prefix) and "." not in n[len(prefix):] and n
                    and n not in p_taken and type(layers[n]).__name__ == "Linear"
                    and set(_own(layers[n])) == {"weight"}}
        for tname, array in own_tensors(module).items():
            if array.ndim != 2:
                continue
            shape = tuple(array.shape)
            either = (shape, shape[::-1])
            fits = [n for n, c in children.items() if n[len(prefix):] == tname and _own(c)["weight"] in either] or \
                [n for n, c in children.items() if _own(c)["weight"] in either]
            if len(fits) != 1 or f"{fits[0]}.weight" in claimed:
                continue
            rule = same_layout if _own(children[fits[0]])["weight"] == shape else \
                (lambda n, a: (n, a.T))  # torch's [out, in], read as F.linear(x, W) reads it
            key = f"{fits[0]}.weight"
            t_key = f"{name}.{tname}" if name else tname
            out[t_key] = Loose(key, "weight", rule, f"torch {t_key} (a bare parameter {list(shape)}) -> Paddle "
                               f"{fits[0]} (Linear)")
            claimed[key] = t_key
    return out


def taken_as(out: dict, loose: dict, either: "Either", how: str):
    """An Either's tensors taken in layout `how` ("transpose" or "same"): loose and out (convert.plan's {torch key:
    (Paddle key, tensors.Tensor, array)}) changed so, in place."""
    for key, held in either.ways[how].items():
        loose[key] = held
        if key in out:
            tensor, array = out[key][1], out[key][2]
            out[key] = (held.paddle_key, replace(tensor, paddle_name=held.paddle_name, rule=held.rule, kinds=None,
                                                 moved_to=held.paddle_key), array)


def axis_orders(x: tuple, y: tuple) -> tuple:
    """The orders p of x's axes other than its own that make y's shape (np.transpose(a, p).shape == y): one side's
    [batch, hidden, seq] against the other's [batch, seq, hidden], or a square [batch, 16, 16] either way."""
    x, y = tuple(x), tuple(y)
    if len(x) != len(y) or sorted(x) != sorted(y) or not 2 <= len(x) <= 5:
        return ()
    return _orders(x, y)


@functools.lru_cache(maxsize=1024)  # the pairing and the judging ask of every square output, a ResNet's ~120 times
def _orders(x: tuple, y: tuple) -> tuple:
    return tuple(p for p in itertools.permutations(range(len(x))) if p != tuple(range(len(x)))
                 and tuple(x[i] for i in p) == y)


def in_axis_order(value, own, here=None):
    """torch's `value` in the axis order this side holds the same values in (`own`, what this side computed): the
    order whose values are nearer own's by ten times than every other's (the pairing's rule for a value settling a
    tie, pairing.Pairing's "(by value)"), or None when no other order is (the same layout, or nothing near).
    here: max |value - own| in float64 where the caller has it already (one shape), not computed again."""
    value, own = np.asarray(value), np.asarray(own)
    orders = axis_orders(value.shape, own.shape)
    if not orders or value.dtype.kind != "f" or own.dtype.kind != "f":
        return None
    far = lambda p: _largest(np.transpose(value, p), own) if value.size else 0.0
    if value.shape != own.shape:
        here = np.inf
    elif here is None:
        here = far(tuple(range(value.ndim)))
    if here == 0.0:
        return None
    # every square feature map of a clean port comes here: an order whose values at a few spread positions are
    # already not ten times nearer than the layout's own is out (a subset's max is at most the whole's), so most
    # are settled without a float64 copy of the whole value in each order
    spread = tuple(slice(None, None, max(1, n // 8)) for n in own.shape)
    if all(_largest(np.transpose(value, p)[spread], own[spread]) * 10 >= here for p in orders):
        return None
    found = sorted((far(p), p) for p in orders)
    best = found[0][0]
    if all(best * 10 < d for d, _ in [*found[1:], (here, None)]):
        return found[0][1]
    return None


def _largest(x, y) -> float:
    """max |x - y| in float64 (both widened inside the subtraction, exact), one temporary."""
    d = np.subtract(x, y, dtype=np.float64)
    return float(np.abs(d, out=d).max())


def otherwise(tensors: dict, target: str, theirs: dict, declared: bool = False) -> tuple:
    """({torch key: Loose}, the tensors either layout fits) for a torch module whose Paddle counterpart `target`
    holds its tensors all the same, in a layer of another type no layout is declared for (paddlenlp's Linear3D: a
    Linear's weight [in, out] and bias, its output head-split; OPTLMHead: an lm_head's weight [vocab, hidden] as
    decoder_weight), or under other names (declared: each tensor's own rule alone). tensors: {torch key:
    tensors.Tensor} of the module; theirs: {the Paddle layer's own tensor name: shape}. Each tensor takes its rule's
    name where that holds its shape in the rule's layout; else the one Paddle tensor of its shape in the rule's
    layout or, undeclared, torch's (a Linear's weight held [out, in]). ({}, [...]) where a square weight under
    another name fits either way: the type's layout is the user's to declare."""
    out, claimed, either = {}, set(), []
    for key, t in tensors.items():
        shape = lambda rule: tuple(np.shape(rule(t.name, t.array)[1]))
        rules = [t.rule] + ([same_layout] if t.rule is linear_layout and t.name == "weight" and not declared else [])
        # a square weight fits its own name in either layout: the type does not say which, the run or the user does
        if theirs.get(t.paddle_name) == shape(t.rule) and not (len(rules) > 1 and shape(rules[0]) == shape(rules[1])):
            name, rule = t.paddle_name, t.rule
        else:
            fits = [(n, r) for r in rules for n, s in theirs.items() if s == shape(r) and n not in claimed]
            if len(fits) != 1:
                either += [f"{t.module}'s {t.name} as {fits[0][0]}"] if len({n for n, _ in fits}) == 1 else []
                return {}, either
            name, rule = fits[0]
        claimed.add(name)
        whole = f"{target}.{name}" if target else name
        out[key] = Loose(whole, name, rule, f"torch {key} ({t.module_type}) -> Paddle {whole} {list(shape(rule))}, "
                         f"{'transposed' if rule is linear_layout and t.name == 'weight' else 'as it is'}")
    return (out, []) if len(claimed) == len(theirs) else ({}, [])


@dataclass(frozen=True)
class Either:
    """A torch Linear whose Paddle counterpart, a layer of another type, holds its square weight: {"transpose": its
    tensors with the weight [in, out], "same": held [out, in]} ({torch key: Loose} each), to be settled by the run
    or by the weights the Paddle model holds (mapping.settle); said: either_line's arguments, where neither can."""
    module: str
    target: str
    ways: dict
    said: tuple

    def line(self, then="") -> str:
        return either_line(*self.said, then=then)


def held_otherwise(out: dict, wrong: dict, modules: dict, layers: dict, shapes: dict, loose: dict,
                   either_way: dict = None):
    """convert.plan's pairs where the Paddle side holds a tensor otherwise, each paired tensor to tensor (in `loose`,
    so that compare_backward's torch side takes the same rule): a parameter of merged axes (regroup.merged: XLNet's
    q [hidden, heads, head size] against [hidden, hidden]) reshaped, and a module of `wrong` whose Paddle layer of
    another type holds its tensors all the same (otherwise), taken out of `wrong`. out: {torch key: (Paddle key,
    tensors.Tensor, array)}; shapes: {Paddle key: shape}; changed in place. A square weight such a layer holds fits
    either layout: refused with PC455's line, or, either_way a dict, put there as an Either (taken transposed until
    settled: mapping.settle.settle_layouts)."""
    for key, (p_key, tensor, array) in list(out.items()):
        if p_key in shapes and regroup.merged(np.shape(tensor.to_paddle(array)), shapes[p_key]):
            loose[key] = Loose(p_key, tensor.paddle_name, reshaped(tensor.rule, shapes[p_key]),
                               f"torch {key} {list(np.shape(array))} -> Paddle {p_key} {list(shapes[p_key])}: the "
                               "same values, axes merged")
    own = lambda p: {n: tuple(v.shape) for n, v in layers[p].named_parameters(include_sublayers=False)}
    known = {k for kinds, _ in layouts_table().values() if kinds for k in kinds}  # a Paddle Embedding is no Linear
    # in the model's order: what is said of the first is the same every run
    for name in dict.fromkeys([t.module for p_key, t, _ in out.values() if p_key not in shapes and not t.moved_to]
                              + list(wrong)):
        target = modules.get(name or ROOT)
        if target is None or target not in layers or name in wrong and type(layers[target]).__name__ in known:
            continue
        held, either = otherwise({k: t for k, (_, t, _) in out.items() if t.module == name}, target, own(target),
                                 declared=name not in wrong)
        if either:
            kind = type(layers[target]).__name__
            mine = next(t.module_type for _, t, _ in out.values() if t.module == name)
            if either_way is None:
                raise PipelineError(either_line(name, mine, target, kind, either))
            tensors = {k: t for k, (_, t, _) in out.items() if t.module == name}
            ways = {how: otherwise({k: replace(t, rule=rule) if t.name == "weight" else t for k, t in tensors.items()},
                                   target, own(target), declared=True)[0]
                    for how, rule in (("transpose", linear_layout), ("same", same_layout))}
            if not all(ways.values()):
                raise PipelineError(either_line(name, mine, target, kind, either))
            either_way[name] = Either(name, target, ways, (name, mine, target, kind, either))
            held = ways["transpose"]
        if held:
            wrong.pop(name, None)
            loose.update(held)
    for key, how in loose.items():
        if key in out and not out[key][1].moved_to:
            tensor = replace(out[key][1], paddle_name=how.paddle_name, rule=how.rule, kinds=None,
                             moved_to=how.paddle_key)
            out[key] = (how.paddle_key, tensor, out[key][2])
