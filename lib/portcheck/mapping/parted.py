"""A Linear's bias its parent holds in parts: timm's EVA and BEiT attention hold `q_bias` and `v_bias` themselves
(k's a zero buffer they do not save) and hand `cat(q_bias, k_bias, v_bias)` to their bias-less `qkv` Linear through
`F.linear`; a port's `qkv` Linear holds the three as its one bias. The torch child is paired with the Paddle Linear
holding its weight and one vector more, as long as the parent's vectors together; the parent with that Linear's
parent. The vector is a tensor of its own on torch's side, `<child>.<the Paddle tensor's name>`, read from the
parts (a constant buffer the parent does not save as it is), filled, recorded and judged as a tensor another module
holds (portcheck.mapping.loose). The order of the parts is settled by the run (settle.settle_parted): each order
tried on the parent, fed torch's recorded input, the first giving torch's output kept for every module of its kind.

May import portcheck.core and mapping.modules; torch and Paddle only through the models handed in."""
import itertools
from dataclasses import dataclass, replace

import numpy as np

from portcheck.core.keys import ROOT
from portcheck.mapping.modules import own_tensors, saved, table


@dataclass(frozen=True)
class Parted:
    """One vector a torch parent holds in parts, which the Paddle counterpart of its child holds whole."""
    child: str         # the torch module computing with it (the bias-less Linear)
    name: str          # the Paddle tensor's name in its layer ("bias")
    paddle_key: str    # the whole Paddle key
    parts: tuple       # ((torch key, a constant's value or None), ...) in the order they are joined
    ways: tuple = ()   # the orders a run may settle, each a tuple of indices into parts; the first is parts' own

    @property
    def why(self) -> str:
        said = " | ".join(k.rpartition(".")[2] + (" (a constant buffer)" if c is not None else "")
                          for k, c in self.parts)
        return f"{self.paddle_key}: [{said}], torch's {self.child.rpartition('.')[0] or ROOT}'s own"


def value(parted, read, grads: bool = False) -> np.ndarray:
    """The joined vector of a Parted (or a mapping.tensors.Tensor carrying its `joined` parts): read(torch key) for
    each part the model trains, a constant's own value (its gradient: zeros, torch computes none for it)."""
    parts = parted.parts if isinstance(parted, Parted) else parted.joined
    return np.concatenate([np.asarray(read(k)).reshape(-1) if c is None else
                           (np.zeros_like(c) if grads else np.asarray(c)).reshape(-1) for k, c in parts])


def find(torch_model, paddle_model, left: list, taken: set, anchor) -> tuple:
    """({torch module: Paddle module}, {torch-side key: Parted}) for each torch module of `left` (names without a
    counterpart) holding a 2-D weight alone whose parent (`left` too) holds vectors the Paddle parent does not, where
    one unpaired Paddle layer under anchor(name) (the prefix its nearest paired ancestor's counterpart gives) holds
    that weight (either way round) and one vector as long as those vectors together, and that layer's parent holds
    the rest of the torch parent's tensors by their names and shapes (BEiT's relative position table), nothing else.
    A non-persistent vector buffer of the parent (k's zeros) is a part where the saved ones fall short."""
    t_modules = dict(torch_model.named_modules())
    layers = dict(paddle_model.named_sublayers(include_self=True))
    left, pairs, found = set(left), {}, {}
    own = lambda layer: {n: tuple(v.shape) for n, v, _ in saved(layer)}  # noqa: E731
    for name in sorted(left):
        if name == ROOT or not name:
            continue
        mine, parent = own_tensors(t_modules[name]), name.rpartition(".")[0]
        if set(mine) != {"weight"} or mine["weight"].ndim != 2 or (parent or ROOT) not in left:
            continue
        holder, width = t_modules[parent], mine["weight"].shape[0]
        weight = {mine["weight"].shape, mine["weight"].shape[::-1]}
        fits = [p for p, layer in layers.items() if p not in taken and p.startswith(anchor(name))
                and len(theirs := own(layer)) == 2 and sorted(len(s) for s in theirs.values()) == [1, 2]
                and next(s for s in theirs.values() if len(s) == 2) in weight
                and next(s for s in theirs.values() if len(s) == 1) == (width,)]
        named = [p for p in fits if p.rpartition(".")[2] == name.rpartition(".")[2]]
        pick = named[0] if len(named) == 1 else fits[0] if len(fits) == 1 else None
        p_parent = None if pick is None else pick.rpartition(".")[0]
        if pick is None or p_parent in pairs.values():
            continue
        theirs = {n: s for n, s in own(layers[p_parent]).items() if not _table(layers[p_parent], n)}
        held = {n: a for n, a in own_tensors(holder).items() if not _table(holder, n)}
        vectors = {f"{parent}.{n}".lstrip("."): a for n, a in held.items() if a.ndim == 1 and n not in theirs}
        rest = {n: tuple(a.shape) for n, a in held.items() if f"{parent}.{n}".lstrip(".") not in vectors}
        if not vectors or rest != theirs:
            continue
        parts = [(k, None) for k in vectors]
        if sum(a.size for a in vectors.values()) != width:
            skip = getattr(holder, "_non_persistent_buffers_set", set())
            constants = [(f"{parent}.{n}".lstrip("."), b.detach().cpu().numpy().copy())
                         for n, b in holder.named_buffers(recurse=False) if n in skip and b is not None and b.ndim == 1
                         and b.is_floating_point()]
            if sum(a.size for a in vectors.values()) + sum(c.size for _, c in constants) != width:
                continue
            parts += constants
        vector = next(n for n, s in own(layers[pick]).items() if len(s) == 1)
        pairs[name], pairs[parent or ROOT] = pick, p_parent or ROOT
        taken = taken | {pick, p_parent}
        ways = tuple(itertools.permutations(range(len(parts)))) if len(parts) > 1 else ((0,),)
        found[f"{name}.{vector}"] = Parted(name, vector, f"{pick}.{vector}", tuple(parts), ways)
    return pairs, found


def _table(module, name: str) -> bool:
    """A buffer of integers the module computes from its config (modules.table): it identifies nothing."""
    buffers = dict(module.named_buffers(include_sublayers=False) if hasattr(module, "named_sublayers")
                   else module.named_buffers(recurse=False))
    return name in buffers and buffers[name] is not None and table(buffers[name])


def parts_of(loose: dict) -> set:
    """The torch keys each Parted among loose's values ({key: Loose or Parted}) joins."""
    return {k for v in loose.values() if isinstance(v, Parted) for k, _ in v.parts}


def ordered(parted: Parted, way: tuple) -> Parted:
    """The Parted with its parts in `way`'s order (indices into its parts), that order first."""
    return replace(parted, parts=tuple(parted.parts[i] for i in way),
                   ways=tuple(tuple(way.index(i) for i in w) for w in parted.ways))


def reader(torch_model):
    """read(torch key) -> its array, of every parameter and buffer the torch model holds (a non-persistent one too)."""
    tensors = {**dict(torch_model.named_parameters()), **dict(torch_model.named_buffers())}
    return lambda k: tensors[k].detach().cpu().numpy()


def held(found: dict, torch_model, paddle_model) -> dict:
    """found ({key: Parted}) each in the order the Paddle model holds already (converted before: compare_backward):
    the first order whose joined vector is the Paddle tensor's values; its own where none is (then judged red)."""
    state, read, out = paddle_model.state_dict(), reader(torch_model), {}
    for key, parted in found.items():
        theirs = state.get(parted.paddle_key)
        out[key] = parted
        for way in parted.ways if theirs is not None else ():
            candidate = ordered(parted, way)
            if np.array_equal(value(candidate, read), np.asarray(theirs.numpy()).reshape(-1)):
                out[key] = candidate
                break
    return out


def described(record: dict, layouts: dict) -> dict:
    """A torch record's mod/ and own/ keys (modules.describe's) with each joined vector of layouts ({key: Tensor})
    described where a port holds it: its child holding it after its weight, its parent no longer holding the parts
    it saves. Two records then pair the child with the Paddle Linear as two live models are paired (find)."""
    from portcheck.mapping.modules import META, NAMES, text
    by_module = {key[len(META):].rpartition("/")[0]: key for key in record if key.startswith(META)}
    out = dict(record)

    def change(module, add=(), drop=()):
        key = by_module.get(module or ROOT)
        if key is None:
            return
        flat, names = [int(x) for x in np.asarray(out[key]).reshape(-1)], (text(out, NAMES + (module or ROOT)) or "")
        shapes, i = [], 2
        for _ in range(flat[1]):
            shapes.append(tuple(flat[i + 1:i + 1 + flat[i]]))
            i += 1 + flat[i]
        held = [(n, s) for n, s in zip(names.split(",") if names else [""] * len(shapes), shapes) if n not in drop]
        held += list(add)
        out[key] = np.array([flat[0], len(held)] + [d for _, s in held for d in (len(s), *s)], dtype=np.int64)
        if names:
            out[NAMES + (module or ROOT)] = np.frombuffer(",".join(n for n, _ in held).encode("utf-8"),
                                                          dtype=np.uint8).copy()
    for tensor in layouts.values():
        if tensor.joined:
            parent = tensor.module.rpartition(".")[0]
            change(parent, drop={k.rpartition(".")[2] for k, c in tensor.joined if c is None})
            change(tensor.module, add=[(tensor.name, tuple(np.shape(tensor.array)))])
    return out


CONSTANT = "constant/"  # a torch record's key: constant/<key>, True where its joined vector's part is a constant


def constants(layouts: dict, read) -> dict:
    """{constant/<key>: bool mask} of each joined vector of layouts ({key: Tensor}) holding a constant part;
    read(torch key): a saved part's array."""
    return {f"{CONSTANT}{k}": np.concatenate([np.full(np.size(c if c is not None else read(n)), c is not None)
                                              for n, c in t.joined])
            for k, t in layouts.items() if t.joined and any(c is not None for _, c in t.joined)}


def trained(torch_record: dict, key: str, *arrays):
    """arrays ((torch's, its float64 twin's, Paddle's) of a record key after a step) without the entries of a part
    torch holds constant (CONSTANT): Paddle trains it, torch does not; its gradient is judged, its value after a step
    is not (an optimizer that normalises the gradient, Adam, moves it by its rounding alone)."""
    mask = torch_record.get(CONSTANT + key.partition("/")[2])
    if mask is None:
        return arrays
    keep = ~np.asarray(mask, bool)
    return tuple(None if a is None or np.shape(a) != keep.shape else np.asarray(a)[keep] for a in arrays)


def constant_lines(torch_record: dict) -> list:
    """One line per tensor trained() judges in part."""
    return [f"{k[len(CONSTANT):]}: {int(np.sum(v))} of its {np.size(v)} values a constant on torch's side (a buffer it "
            "does not save), trained on Paddle's: judged by their gradient; after each step only the values torch "
            "trains are compared" for k, v in torch_record.items() if k.startswith(CONSTANT)]


def joinable(torch_record: dict, paddle_record: dict) -> list:
    """[(torch child, the Paddle layer's vector name, its width, {torch part key: its size})] of each vector find()
    would find, read from two records' mod/ and own/ keys by the names at the same place: the Paddle layer of the
    child's name holding the child's weight and that vector, the torch parent's vectors its Paddle namesake does
    not hold as long as it or short of it by one constant part (which no record holds)."""
    from portcheck.mapping.modules import held_tensors
    t_held, p_held = held_tensors(torch_record) or {}, held_tensors(paddle_record) or {}
    out = []
    for name, (_, mine) in t_held.items():
        parent = name.rpartition(".")[0]
        theirs = p_held.get(name, (None, {}))[1]
        if not name or set(mine) != {"weight"} or len(mine["weight"]) != 2 or parent not in t_held or \
                len(theirs) != 2 or sorted(len(s) for s in theirs.values()) != [1, 2]:
            continue
        vector, width = next((n, s[0]) for n, s in theirs.items() if len(s) == 1)
        if mine["weight"][0] != width or next(s for s in theirs.values() if len(s) == 2) not in \
                {mine["weight"], mine["weight"][::-1]}:
            continue
        others = p_held.get(parent, (None, {}))[1]
        sizes = {f"{parent}.{n}": s[0] for n, s in t_held[parent][1].items() if len(s) == 1 and n not in others}
        if sizes and sum(sizes.values()) <= width:
            out.append((name, vector, width, sizes))
    return out


def marked(torch_record: dict, paddle_record: dict) -> dict:
    """A torch record written apart (a saved record_backward, `portcheck run`'s side) as compare_backward writes it
    beside the Paddle model: each vector its torch parent holds in parts, where the Paddle record's layer of the
    child's name holds the child's weight and that vector (find's form, read from the records' mod/ and own/ keys),
    joined under <child>.<vector> in every kind of key its saved parts have (grad/, state<i>/, final/, the float64
    twin's), a constant part's values zeros (the record holds none: only its gradient is judged), in the order whose
    first gradient is nearest Paddle's (the recorded run tries each); described and masked (CONSTANT) as
    described() and constants() say. The record as it is where no such vector is, or no gradient says the order."""
    out, joined = None, {}
    for name, vector, width, sizes in joinable(torch_record, paddle_record):
        parts = list(sizes)
        first = f"grad/{name}.{vector}"
        if first not in paddle_record or any(f"grad/{k}" not in torch_record for k in parts):
            continue
        slots = parts + ([""] if sum(sizes.values()) < width else [])  # "": the constant the record does not hold
        sizes = {**sizes, "": width - sum(sizes.values())}
        read = lambda k, prefix: np.zeros(sizes[""], np.float32) if not k else \
            np.asarray(torch_record[f"{prefix}{k}"]).reshape(-1)  # noqa: E731
        theirs_grad = np.asarray(paddle_record[first], np.float64).reshape(-1)
        if theirs_grad.size != width or any(np.size(torch_record[f"grad/{k}"]) != sizes[k] for k in parts):
            continue  # a record whose values are not the shapes it describes: judged as it is, its rows say so
        order = min(itertools.permutations(slots), key=lambda o: float(np.max(np.abs(
            np.concatenate([read(k, "grad/") for k in o]) - theirs_grad))))
        prefixes = {key[:-len(parts[0])] for key in torch_record if key.endswith("/" + parts[0])}
        out = dict(torch_record) if out is None else out
        for prefix in prefixes:
            if all(f"{prefix}{k}" in torch_record for k in parts):
                out[f"{prefix}{name}.{vector}"] = np.concatenate([read(k, prefix) for k in order]).astype(
                    np.asarray(torch_record[f"{prefix}{parts[0]}"]).dtype)
                for k in parts:
                    del out[f"{prefix}{k}"]
        constant = np.zeros(sizes[""], np.float32)
        joined[f"{name}.{vector}"] = _Described(name, vector, np.zeros(width, np.float32),
                                                tuple((k, None if k else constant) for k in order))
    if out is None:
        return torch_record
    out.update(described({k: out[k] for k in out if k.startswith(("mod/", "own/"))}, joined))
    out.update(constants(joined, lambda k: torch_record[f"grad/{k}"]))
    return out


@dataclass(frozen=True)
class _Described:
    """What described() and constants() read of a joined vector: mapping.tensors.Tensor's fields of that name."""
    module: str
    name: str
    array: object
    joined: tuple
