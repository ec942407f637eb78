"""One module against several: a fused projection (GPT-2's c_attn computing q, k and v in one Conv1D; paddlenlp's
qkv_proj with its columns ordered per head; a gate and up projection in one Linear) against its parts on the other
side, or against a fusion ordered another way.

Declared once, in `layouts`, keyed as any layout is (a module type or class name, of either side) or by a module's
name (its last part, "c_attn", or the whole of it):

    layouts={"c_attn": Fused(("q", "k", "v"))}                                # [q | k | v]
    layouts={"c_attn": Fused(("q", "k", "v")), "qkv_proj": Fused(("q", "k", "v"), heads=4)}

A Fused module's output columns (its last axis) and its tensors' output columns (the last axis in Paddle's layout:
a Linear's weight [in, out] and its bias) hold its parts: one after the other, or with heads=n, per head (head 0's
q, k, v, then head 1's, ...). Every place the library reads such a module sees its parts as modules of their own,
named <module>.<part>: pairing pairs each part (with another fusion's part, or with a module of the other side),
convert fills each part's columns, compare_forward judges each part's output, compare_backward each part's gradient
and weights. Nothing is computed here: both sides' own runs are cut, never run again another way.

A packed module, Fused(parts, output=False), holds its parts' tensors along their output axis but does not output
them: its forward reads them itself (torch's MultiheadAttention, q, k, v in in_proj_weight [3E, E]). Its output is
judged whole; its parts are modules that never run, each pairing with the module of its name on the other side
(recipes.TORCH_ATTENTION: q_proj, k_proj, v_proj), filled by convert and judged by their gradients and weights.
"""
import functools
import inspect
import math
import re
from dataclasses import dataclass

import numpy as np

from portcheck.mapping.modules import META, own_modules

KEY = "fused/"  # a record's key per fused module: fused/<module>/<part,part,...>, its value [heads] (0: none)


@dataclass(frozen=True)
class Fused:
    """How a fused module's output columns hold its parts (see the module docstring)."""
    parts: tuple = ("q", "k", "v")
    heads: int = 0  # 0: the parts one after the other; n: per head, each head's parts one after the other
    # False: the module's output is not its parts' columns; its forward reads the packed tensors without running
    # them as modules (torch's MultiheadAttention: in_proj_weight [3E, E], q, k, v along its first axis, read by
    # F.multi_head_attention_forward, which returns the attention's output). Its parts are then modules that
    # never run, judged by their tensors (gradients, weights after each step); its output stays whole
    output: bool = True
    # each part's share of the columns (of a head's, with heads=n), when the parts differ in width: paddleformers'
    # qkv_proj per key-value group, [q of the group's 2 query heads | k | v], is widths=(2, 1, 1), heads=kv heads.
    # () or all equal: parts of one width
    widths: tuple = ()

    def __post_init__(self):
        from portcheck.core.errors import PipelineError
        parts = self.parts
        if isinstance(parts, int):
            object.__setattr__(self, "parts", parts := tuple(str(i) for i in range(parts)))
        if not (isinstance(parts, (tuple, list)) and len(parts) > 1 and all(
                isinstance(p, str) and re.fullmatch(r"\w+", p) for p in parts) and len(set(parts)) == len(parts)):
            raise PipelineError(f"Fused: parts must be two or more distinct names (letters, digits, _), got {parts!r} "
                                "[PC309]")
        object.__setattr__(self, "parts", tuple(parts))
        if not isinstance(self.heads, int) or self.heads < 0:
            raise PipelineError(f"Fused: heads must be a whole number (0: no heads), got {self.heads!r} [PC310]")
        if not isinstance(self.output, bool):
            raise PipelineError(f"Fused: output must be True or False, got {self.output!r} [PC311]")
        widths = self.widths
        if not (isinstance(widths, (tuple, list)) and (not widths or len(widths) == len(parts)) and all(
                isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths)):
            raise PipelineError(f"Fused: widths must be one whole number above 0 per part ({len(parts)}: each part's "
                                f"share of the columns), or (), got {widths!r} [PC324]")
        object.__setattr__(self, "widths", () if len(set(widths)) <= 1 else tuple(widths))

    @property
    def shares(self) -> tuple:
        """Each part's share of the columns (of a head's): widths, or 1 each."""
        return self.widths or (1,) * len(self.parts)

    def columns(self, width: int) -> list:
        """[index array of each part's columns] of an output `width` columns wide, or None when the width does not
        divide (the module holds something else there)."""
        shares, h = self.shares, max(self.heads, 1)
        if width % (sum(shares) * h):
            return None
        d = width // (sum(shares) * h)
        # per head: head i's block holds each part's share * d columns in turn; one after the other (heads=0 is one
        # head): part p's columns are one run
        block = np.arange(width).reshape(h, sum(shares) * d)
        starts = np.cumsum((0,) + shares) * d
        return [block[:, starts[p]:starts[p + 1]].reshape(-1) for p in range(len(shares))]


def specs(model, layouts) -> dict:
    """{module name: Fused} for the model's modules a layouts entry names as fused (by type, class name or a base's,
    the module's last name part, or its whole name)."""
    declared = {k: v for k, v in (layouts or {}).items() if isinstance(v, Fused)}
    if not declared:
        return {}
    named = model.named_modules() if hasattr(model, "named_modules") and not hasattr(model, "named_sublayers") \
        else model.named_sublayers(include_self=True)
    out = {}
    for name, module in named:
        keys = [name, name.rpartition(".")[2]] + [k for t in type(module).__mro__ for k in (t, t.__name__)]
        spec = next((declared[k] for k in keys if k in declared), None)
        # a module holding no tensor of its own holds no parts (a name both sides share: Paddle's self_attn)
        if spec is not None and name and _own_shapes(module):
            out[name] = spec
    return out


def _own_shapes(module) -> list:
    """The shapes of the tensors a module of either framework holds itself (pairing's)."""
    return own_modules(module)[0][3]


def mark(record, fused: dict, model):
    """Add each fused module's fused/ key to a record (a dict or a spill.Spill), and each part's mod/ key (its
    tensors' shapes, the output axis divided): the record says itself how to cut. A packed module's (output=False)
    own mod/ key then holds no tensors: a container of its parts, which never ran."""
    modules = dict(model.named_modules() if not hasattr(model, "named_sublayers")
                   else model.named_sublayers(include_self=True))
    for name, spec in fused.items():
        module = modules[name]
        children = len(list(module.children()))
        record[f"{KEY}{name}/{','.join(spec.parts)}"] = np.array(
            [spec.heads] + ([int(spec.output), *spec.widths] if spec.widths else [] if spec.output else [0]),
            dtype=np.int64)
        if not spec.output:  # no output to cut: the record holds the module as a container of its parts, never run
            record[f"{META}{name}/{type(module).__name__}"] = np.array([children + len(spec.parts), 0],
                                                                      dtype=np.int64)
        for p, part in enumerate(spec.parts):
            shapes = part_shapes(module, spec, p)
            flat = [0 if not spec.output else children, len(shapes)] + [d for s in shapes for d in (len(s), *s)]
            record[f"{META}{name}.{part}/{type(module).__name__}"] = np.array(flat, dtype=np.int64)
    return record


def part_shapes(module, spec: Fused, p: int = 0) -> list:
    """The shapes of the tensors part p of a fused module holds, in the module's own layout: the output axis
    divided by the parts' shares (torch's Linear holds [out, in], and so does a packed module: in_proj_weight
    [3E, E])."""
    shapes = [list(s) for s in _own_shapes(module)]
    axis = 0 if _torch_linear(module) or (not spec.output and not hasattr(module, "named_sublayers")) else -1
    for s in shapes:
        a = axis if len(s) > 1 else -1
        s[a] = s[a] * spec.shares[p] // sum(spec.shares)
    return shapes


def _torch_linear(module) -> bool:
    import sys
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(module, torch.nn.Linear)


def declared(record, output=True) -> dict:
    """{module name: Fused} a record's fused/ keys declare, those whose output is their parts' columns (what is cut);
    output=False: those whose parts never run (packed)."""
    out = {}
    for key in record:
        if key.startswith(KEY):
            name, _, parts = key[len(KEY):].rpartition("/")
            # [heads], [heads, 0] for output=False, [heads, output, *widths] for parts of unequal width
            value = [int(v) for v in np.asarray(record[key]).reshape(-1)]
            spec = Fused(tuple(parts.split(",")), value[0], len(value) < 2 or bool(value[1]), tuple(value[2:]))
            if spec.output == output:
                out[name] = spec
    return out


def packed_parts(record) -> set:
    """The parts <module>.<part> of a record's packed modules (Fused(output=False)): modules that never run."""
    return {f"{name}.{part}" for name, spec in declared(record, output=False).items() for part in spec.parts}


_SPLIT = re.compile(r"^((?:f64:)?(?:out|in)/)([^#\[:]*)(#\d+)?(.*)$")  # a module call's output or first input


def cut(record, tensors=True):
    """The record with every fused module (its fused/ keys) seen as its parts: out/<module>.<part> each part's
    columns of the output, in/<module>.<part> the module's first input, mod/ each part's tensor shapes; with
    tensors, every other key <kind>/<module>.<tensor> (a gradient, a weight after a step) cut into
    <kind>/<module>.<part>.<tensor> too. A record without fused/ keys is returned as it is."""
    fused = declared(record)
    if not fused:
        return record
    out = {}
    for key in record:
        if key.startswith(KEY):
            out[key] = record[key]  # kept: a cut record cut again is the same record, and says what was cut
            continue
        call = _SPLIT.match(key)
        module = call.group(2) if call else None
        if call and module in fused:
            prefix, _, number, rest = call.groups()
            value = record[key]
            columns = fused[module].columns(np.shape(value)[-1]) if np.ndim(value) else None
            for p, part in enumerate(fused[module].parts):
                out[f"{prefix}{module}.{part}{number or ''}{rest}"] = \
                    value if columns is None or prefix.endswith("in/") else np.ascontiguousarray(value[..., columns[p]])
            continue
        if key.startswith(META) and key[len(META):].rpartition("/")[0] in fused:
            continue  # the whole: its parts' mod/ keys (mark) stand for it
        kind, slash, name = key.partition("/")
        module, _, tensor = name.rpartition(".")
        # a part's own mod/ key (mark's) is no tensor: cut by columns where its length happens to divide, it was
        # read as another module's description
        if tensors and slash and module in fused and not key.startswith(("out/", "in/", "f64:", META)):
            value = record[key]
            columns = fused[module].columns(np.shape(value)[-1]) if np.ndim(value) else None
            if columns is not None:
                for p, part in enumerate(fused[module].parts):
                    out[f"{kind}/{module}.{part}.{tensor}"] = np.ascontiguousarray(value[..., columns[p]])
                continue
        out[key] = record[key]
    return out


def part_key(key: str, part: str) -> str:
    """A fused module's record key (out/<module>#2[0]) as its part's (out/<module>.<part>#2[0])."""
    prefix, module, number, rest = _SPLIT.match(key).groups()
    return f"{prefix}{module}.{part}{number or ''}{rest}"


def live(pairs, fused: dict):
    """(key, tensor) of a run's hook, each fused module's output as its parts' columns (cut's keys), its first
    input once per part; the rest as they are."""
    for key, tensor in pairs:
        call = _SPLIT.match(key)
        if not (fused and call and call.group(2) in fused):
            yield key, tensor
            continue
        spec = fused[call.group(2)]
        columns = spec.columns(tensor.shape[-1]) if tensor.ndim else None
        for p, part in enumerate(spec.parts):
            yield part_key(key, part), tensor if columns is None or key.startswith("in/") else tensor[..., columns[p]]


def joined(key: str, shape: tuple, spec: Fused, value):
    """The whole output of a fused module (record key `key`, of `shape`) made of its parts' values, value(part's
    key) each (None when it has none): None unless every part's is there, of its columns' shape."""
    columns = spec.columns(shape[-1]) if len(shape) else None
    if columns is None:
        return None
    values = [value(part_key(key, part)) for part in spec.parts]
    if any(v is None or tuple(v.shape) != (*shape[:-1], len(c)) for v, c in zip(values, columns)):
        return None
    whole = np.empty(shape, dtype=values[0].dtype)
    for v, c in zip(values, columns):
        whole[..., c] = v
    return whole


def join(spec: Fused, arrays: list, out=None):
    """The tensor of a fused module (in Paddle's layout: the parts along the last axis) made of its parts' tensors,
    in the spec's part order, each its columns; None unless each is as wide as the columns the spec places it in.
    out: an array of its shape and dtype to fill, else a new one."""
    width = sum(a.shape[-1] for a in arrays)
    columns = spec.columns(width) if len({a.shape[:-1] for a in arrays}) == 1 else None
    if columns is None or any(len(c) != a.shape[-1] for c, a in zip(columns, arrays)):
        return None
    # columns() lays the parts in h blocks, each part's share one run in every block: copied block-wise, never
    # column by column (a billion parameters' up_gate_proj per column is 12288 columns)
    lead, h = arrays[0].shape[:-1], max(spec.heads, 1)
    if out is None or out.shape != (*lead, width) or out.dtype != arrays[0].dtype:
        out = np.empty((*lead, width), dtype=arrays[0].dtype)
    blocks, start = out.reshape(*lead, h, width // h), 0
    for a in arrays:
        w = a.shape[-1] // h
        blocks[..., start:start + w] = a.reshape(*lead, h, w)
        start += w
    return out


def joining(specs: dict, keys) -> dict:
    """{<module>.<tensor>: (its Fused, [<module>.<part>.<tensor> of each part, in the spec's order])} of each tensor of
    a Paddle fused module (specs: {module: Fused}) whose parts every one of `keys` holds: the tensors convert fills
    by joining (join_parts) and each isolated step's start joins the same way."""
    keys = set(keys)
    out = {}
    for key in keys:
        part_module, _, tensor = key.rpartition(".")
        name, _, part = part_module.rpartition(".")
        spec = specs.get(name)
        if spec is None or part not in spec.parts:
            continue
        parts = [f"{name}.{p}.{tensor}" for p in spec.parts]
        if all(k in keys for k in parts):
            out[f"{name}.{tensor}"] = (spec, parts)
    return out


def join_parts(spec: Fused, arrays: list):
    """join's tensor; where the parts make none, a PipelineError saying why (PC318)."""
    from portcheck.core.errors import PipelineError
    out = join(spec, arrays)
    if out is None:
        heads = f" of {spec.heads} heads" if spec.heads else ""
        raise PipelineError(f"Fused{spec.parts}: its parts' tensors {[list(a.shape) for a in arrays]} do not "
                            f"make one tensor of {len(arrays)} parts{heads} [PC318]")
    return out


def joined_state(state: dict, specs: dict) -> dict:
    """{Paddle key: array in Paddle's layout} with each Paddle fused module's tensor made of its parts' (joining,
    join_parts), their own keys gone: what convert sets, from arrays already in Paddle's layout."""
    out = dict(state)
    for whole, (spec, keys) in joining(specs, state).items():
        out[whole] = join_parts(spec, [out.pop(k) for k in keys])
    return out


def taken(function):
    """`function` (convert, compare_forward: each takes layouts=, changes nothing before it pairs) run once more when its pairing
    refuses with ties that one module of a side, holding n times what n tied modules of the other hold, settles
    (GPT-2's c_attn against paddlenlp's q_proj, k_proj and v_proj, its c_proj then fitting them and out_proj):
    with that module declared Fused(those parts), its columns one after the other, as the refusal would have told
    the user to paste (the refusal's `fusions`, data). The run again pairs, fills and judges each part; per head
    or in another order, its parts are red, never green. Said in one line: the result's fused_found (a State's
    `said`, a report's `outputs_said`); anything else it raises is raised as it is."""
    from portcheck.core.errors import PipelineError
    signature = inspect.signature(function)

    @functools.wraps(function)
    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except PipelineError as e:
            bound = signature.bind(*args, **kwargs)
            found = settling(e, bound.arguments.get("layouts"))
            if not found:
                raise
            bound.arguments["layouts"] = {**(bound.arguments.get("layouts") or {}), **found}
            return said_taken(function(*bound.args, **bound.kwargs), found)
    return run


def shown(fusions: dict):
    """The refusal of a run whose pairing's ties a fused module settles (pairing.Pairing.fusions, the ties settled
    by the run's values), carrying them as data for taken() to declare; its line, if it reaches the user, the
    layouts= that pairs it."""
    from portcheck.core.errors import PipelineError
    entries = _entries(fusions)
    error = PipelineError(f"{_held_together(fusions)}: if its columns hold them one after the other, "
                          f"layouts={{{entries}}} (heads=n if they go per head) [PC450]")
    error.fusions = fusions
    return error


def unjudged(fusions: dict) -> str:
    """The line of two saved records whose pairing's ties a fused module settles (pairing.Pairing.fusions): no model
    is at hand to cut it into its parts, so its output is judged nowhere; compare_forward judges each part."""
    entries = _entries(fusions)
    return (f"{_held_together(fusions)}: its output is not judged from records; compare_forward with "
            f"layouts={{{entries}}} judges each part [PC451]")


def _held_together(fusions: dict) -> str:
    return "; ".join(f"{k} pairs with nothing, and holds what the other side's {', '.join(v)} hold together"
                     for k, v in fusions.items())


def _entries(fusions: dict) -> str:
    return ", ".join(entry(k, (tuple(v), True)) for k, v in fusions.items())


def settling(error, layouts) -> dict:
    """{module: Fused} of a pairing's refusal (its `fusions`, data) that `layouts` does not declare yet."""
    return {k: Fused(tuple(v)) for k, v in getattr(error, "fusions", {}).items() if k not in (layouts or {})}


def said_taken(result, found: dict):
    """result (a State, a ForwardReport, a BackwardReport) holding `found` as fused_found, said in its one line."""
    line = "the pairing's ties settled by " + ", ".join(f"{k} as portcheck.Fused({v.parts!r})" for k, v in
                                                         found.items()) + \
        ": its columns its parts', one after the other (pass layouts= to say otherwise)"
    result.fused_found = {**(getattr(result, "fused_found", None) or {}), **found}
    report = getattr(result, "forward", None) or result
    if isinstance(getattr(report, "outputs_said", None), list):
        report.outputs_said.append(line)
    else:
        result.said = "; ".join(x for x in (getattr(result, "said", ""), line) if x)
    return result


def entry(key: str, how: tuple) -> str:
    """A layouts entry declaring a fused module, as module_pairs.pair_modules suggests it: how = (its parts, whether its
    output is their columns)."""
    parts, output = how[:2]
    widths = how[2] if len(how) > 2 and len(set(how[2])) > 1 else ()
    return f"{key!r}: portcheck.Fused({parts!r}{'' if output else ', output=False'}" + \
        (f", widths={widths!r}" if widths else "") + ")"


def summed(name: str, mine: list, theirs: dict, siblings: dict):
    """(the Paddle module's last name, (parts, True, widths)) where an unpaired Paddle module (theirs: {name: its
    tensors' sizes}) holds what torch module `name` (mine: its sizes) and its unpaired siblings next to it (siblings:
    {name: sizes}, in definition order) hold together, parts of unequal width (paddleformers' qkv_proj [64, 128]
    against q_proj [64, 64], k_proj and v_proj [32, 64]): widths their shares. None where no such module is."""
    names = list(siblings)
    if name not in names:
        return None
    i = names.index(name)
    for other, total in theirs.items():
        if not total or len(total) != len(mine):
            continue
        for a in range(max(0, i - 3), i + 1):  # two to four parts next to each other, this one among them
            for group in (names[a:b] for b in range(max(a + 2, i + 1), min(len(names), a + 4) + 1)):
                if all(len(siblings[g]) == len(mine) for g in group) and \
                        all(sum(siblings[g][k] for g in group) == total[k] for k in range(len(mine))):
                    first = [siblings[g][0] for g in group]
                    return other.rpartition(".")[2], (tuple(g.rpartition(".")[2] for g in group), True,
                                                      tuple(w // math.gcd(*first) for w in first))
    return None


def held_together(fusions: dict) -> str:
    """convert's advice for modules one module of the other side holds together (fusions: {its last name: (parts,
    output[, widths])}): the layouts= that declares each, parts of unequal width going per head too where they are
    per key-value group (paddleformers' qkv_proj: heads= its key-value heads)."""
    if not fusions:
        return ""
    unequal = any(len(v) > 2 and len(set(v[2])) > 1 for v in fusions.values())
    return ("one module holds what several of the other side hold together: if its columns hold them one after the "
            "other, layouts={" + ", ".join(entry(k, v) for k, v in fusions.items()) + "} (heads=n if they go per head"
            + ("; parts of unequal width per key-value group, [q of the group's heads | k | v] as paddleformers' "
               "qkv_proj: heads= the key-value heads" if unequal else "") + ") makes them one model there")
