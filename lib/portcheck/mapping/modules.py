"""A model's modules in definition order, as a record holds them: each module's mod/ key (its class, its children,
the shapes of the tensors it holds itself), written from a model of either framework and read back. Imports numpy
and portcheck.core; torch and Paddle only through the models handed in."""
import functools
import re

import numpy as np

from portcheck.core.keys import ROOT
from portcheck.mapping import settings
from portcheck.mapping.held import apart

META = "mod/"      # a record's key per module: mod/<name>/<class>, its children and tensor shapes (int64)
ALONE = -2         # children, said of a module whose tensors the other side holds bare (mapping.loose): pairs none
ACT = "act/"       # act/<name>: the activation a Paddle module applies to its own output (legacy BatchNorm(act=))
NAMES = "own/"     # own/<name>: the names of the tensors a module holds itself, in mod/'s order (utf-8, comma-joined)


def table(buffer) -> bool:
    """A buffer of integers or booleans: a table of indices or a mask its module computes from the config (Swin's
    relative_position_index), which one framework saves and the other keeps out of its state dict. It identifies no
    module (convert fills it as a buffer, from the torch module's own, or refuses it naming it)."""
    return not any(k in str(buffer.dtype) for k in ("float", "bfloat", "complex"))


def saved(module) -> list:
    """[(name, tensor, is a buffer)] of what a module of either framework saves itself, not its children's: its
    parameters, then its persistent buffers (transformers' position_ids, Paddle's non-persistable buffers, rebuilt by
    the model and never saved, left out). The one reader of a module's own tensors: pairing, layouts and records all
    read them here."""
    if hasattr(module, "named_sublayers"):
        skip = getattr(module, "_non_persistable_buffer_names_set", set())
        own = module.named_parameters(include_sublayers=False)
        buffers = module.named_buffers(include_sublayers=False)
    else:
        skip = getattr(module, "_non_persistent_buffers_set", set())
        own = module.named_parameters(recurse=False)
        buffers = module.named_buffers(recurse=False)
    return [(n, p, False) for n, p in own] + [(n, b, True) for n, b in buffers if b is not None and n not in skip]


def own_tensors(module) -> dict:
    """The parameters and persistent buffers a torch module holds itself (not its children's), as numpy arrays
    (saved: a non-persistent buffer, transformers' position_ids, is rebuilt by the model: nothing to convert)."""
    return {n: t.detach().cpu().numpy() for n, t, _ in saved(module)}


def own_modules(model):
    """[(name, module, children, shapes of the tensors it holds itself, their names)] in definition order, either
    framework. A 0-d tensor (BatchNorm's num_batches_tracked, which Paddle does not keep) identifies nothing, nor does
    a table of indices (table)."""
    named = model.named_sublayers(include_self=True) if hasattr(model, "named_sublayers") else model.named_modules()
    out = []
    for name, module in named:
        tensors = [(n, t) for n, t, buffer in saved(module) if not (buffer and len(t.shape) and table(t))]
        cut = apart(type(module), [n for n, _ in tensors], "paddle") if hasattr(module, "named_sublayers") else None
        if cut is not None:  # described as the torch layer it stands for holds them: one tensor, its parts' first axes
            parts = [t for n, t in tensors if n in cut[1]]
            tensors = [(n, t) for n, t in tensors if n not in cut[1]] + \
                [(cut[0], np.empty((sum(int(t.shape[0]) for t in parts), *parts[0].shape[1:]), np.int8))]
        out.append((name, module, len(list(module.children())), [tuple(t.shape) for _, t in tensors],
                    [n for n, _ in tensors]))
    return out


def describe(model) -> dict:
    """{mod/<name>/<class>: int64 [children, tensors, ndim, sizes..., ...]} for every module in definition
    order: what pairing needs of a model, kept in its record so that two saved records pair alone; and each
    module's settings (settings.keyed: cfg/<name>), what its graph's node shows."""
    out = {}
    for name, module, children, shapes, names in own_modules(model):
        flat = [children, len(shapes)] + [d for s in shapes for d in (len(s), *s)]
        out[f"{META}{name or ROOT}/{type(module).__name__}"] = np.array(flat, dtype=np.int64)
        if names:
            out[f"{NAMES}{name or ROOT}"] = np.frombuffer(",".join(names).encode("utf-8"), dtype=np.uint8).copy()
        act = getattr(module, "_act", None) if hasattr(module, "named_sublayers") else None
        if isinstance(act, str) and act:
            out[f"{ACT}{name or ROOT}"] = np.frombuffer(act.encode("utf-8"), dtype=np.uint8).copy()
    return {**out, **settings.keyed(model)}


def redescribed(flat, dropped=(), alone=False):
    """describe's array without the tensor shapes `dropped` (each once), and with ALONE children where `alone`."""
    flat = [int(x) for x in np.asarray(flat).reshape(-1)]
    shapes, i, left = [], 2, list(map(tuple, dropped))
    for _ in range(flat[1]):
        n = flat[i]
        shape = tuple(flat[i + 1:i + 1 + n])
        i += 1 + n
        if shape in left:
            left.remove(shape)
        else:
            shapes.append(shape)
    out = [ALONE if alone else flat[0], len(shapes)] + [d for s in shapes for d in (len(s), *s)]
    return np.array(out, dtype=np.int64)


def held_tensors(record):
    """{module name ("" the model): (its class, {tensor name: shape})} from a record's mod/ and own/ keys, as
    describe wrote them; None for a record with mod/ keys and no own/ key (written before own/ keys were kept). A
    module whose own/ names do not match its shapes (a fused module's, cut into parts) holds none here."""
    out, named, holds = {}, False, False
    for key in record:
        if not key.startswith(META):
            continue
        name, _, kind = key[len(META):].rpartition("/")
        names = text(record, NAMES + name)
        named |= names is not None
        flat = [int(x) for x in np.asarray(record[key]).reshape(-1)]
        holds |= flat[1] > 0
        shapes, i = [], 2
        for _ in range(flat[1]):
            shapes.append(tuple(flat[i + 1:i + 1 + flat[i]]))
            i += 1 + flat[i]
        names = names.split(",") if names else []
        out["" if name == ROOT else name] = (kind, dict(zip(names, shapes)) if len(names) == len(shapes) else {})
    return None if holds and not named else out


def text(record, key):
    """A record's utf-8 value (an act/ or fn/ key's) as a string, or None when it has none."""
    return bytes(np.asarray(record[key], dtype=np.uint8)).decode("utf-8", "replace") if key in record else None


def decode(flat) -> tuple:
    """(children, layout-free tensor shapes) from describe's array."""
    flat = [int(x) for x in np.asarray(flat).reshape(-1)]
    children, count, shapes, i = flat[0], flat[1], [], 2
    for _ in range(count):
        n = flat[i]
        shapes.append(tuple(flat[i + 1:i + 1 + n]))
        i += 1 + n
    return children, tuple(sorted(tuple(sorted(s)) for s in shapes if len(s)))


def held(shapes: tuple) -> tuple:
    """decode's tensor shapes as a pairing compares them: a vector one framework shapes [n, 1] and the other [n]
    (transformers' ConvBERT SeparableConv1D bias against paddlenlp's), or a scalar [1] against 0-d, is one tensor."""
    vector = lambda s: tuple(d for d in s if d != 1) if sum(d != 1 for d in s) <= 1 else s
    return tuple(sorted(v for v in map(vector, shapes) if v))


ACTIVATION = re.compile(r"relu|gelu|silu|swish|sigmoid|tanh|elu$|mish|softplus|softsign|hardswish|activation|glu$")
CONTAINERS = {"sequential", "modulelist", "layerlist", "moduledict", "layerdict"}
ALIASES = {f"convtranspose{n}d": f"conv{n}dtranspose" for n in (1, 2, 3)}


@functools.lru_cache(maxsize=4096)  # the pairing asks of every pair of calls: a transformer's, ~20000 times
def family(kind: str) -> str:
    """A class name as a kind of computation both frameworks share: Conv2d and Conv2D alike, every activation one
    family (a port that swaps one activation for another is paired, and judged)."""
    k = kind.lower()
    if ACTIVATION.search(k):
        return "activation"
    if k in CONTAINERS:
        return "container"
    return ALIASES.get(k, k)


def stranded(left: dict, free: list, modules: dict, fused: bool = False) -> str:
    """The advice for torch modules left without a counterpart ({name: sizes of the tensors it holds itself}) where
    no unpaired Paddle module ({free}: each one's sizes) holds tensors of their sizes, so no name_map can pair them
    (transformers' BigBird classification head, a dense and gelu on the first token, against paddlenlp's, which reads
    the pooler): the models differ there, and what can be compared is the part both hold, the paired torch module
    holding most of the model with none of them inside ({modules}: torch name: Paddle name). "" where a free module
    of their sizes is left: a name_map can pair them. fused: a layouts entry of Fused parts is offered after it, which
    may make the two the same there: no claim that they differ."""
    if any(sorted(sizes) in [sorted(f) for f in free] for sizes in left.values()):
        return ""
    if fused:
        return "no unpaired Paddle module holds tensors of their sizes, so no name_map can pair them"
    inside = lambda t: [n for n in modules if n.startswith(t + ".")]
    whole = [t for t in modules if t != ROOT and not any(n == t or n.startswith(t + ".") for n in left)]
    best = max(whole, key=lambda t: len(inside(t)), default=None)
    path = lambda side, name: side + "".join(f".{p}" if p.isidentifier() else f"[{p}]" for p in name.split("."))
    part = f"; compare the part both hold, e.g. compare_forward({path('torch_model', best)}, " \
           f"{path('paddle_model', modules[best])}, ...)" if best and inside(best) and modules[best] else ""
    return ("no unpaired Paddle module holds tensors of their sizes, so no name_map can pair them: the two models "
            f"differ there (another head or block, not a port of it){part}")
