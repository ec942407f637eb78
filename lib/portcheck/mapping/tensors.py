"""A torch model's tensors as a port sees them, read from the torch model alone: each parameter and persistent buffer
a module holds itself (own_tensors) as a Tensor, with the Paddle name it takes and the layout rule that turns its array
into Paddle's, the rule looked up by the module's type or the Paddle type it pairs with (torch_layouts; a fused
module's parts, packed experts and tensors another module holds taken apart); the Paddle key it fills (paddle_key).
A torch-side script writes its tensors in Paddle's layout with it.

May import portcheck.core and mapping's layouts, modules, fused, parted and experts; torch only through the models handed in.
"""
from dataclasses import dataclass

import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.mapping import experts, fused, parted
from portcheck.mapping.fused import Fused
from portcheck.mapping.layouts import apart, declared, held_rule, layouts_table, lineage, linear_held, \
    linear_layout, part_of, same_layout, stands_for, torch_held
from portcheck.mapping.modules import own_tensors  # noqa: F401 (read from here by most of mapping)


def _own_ids(module) -> list:
    """The identities of the tensors own_tensors reads: a tensor two modules hold (a tied weight) is one."""
    skip = getattr(module, "_non_persistent_buffers_set", set())
    return [id(p) for _, p in module.named_parameters(recurse=False)] + \
        [id(b) for n, b in module.named_buffers(recurse=False) if b is not None and n not in skip]


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
    joined: tuple = ()  # ((torch key, a constant or None), ...): a vector its parent holds in parts (mapping.parted)

    def to_paddle(self, array):
        return self.rule(self.name, np.asarray(array))[1]

    @property
    def transposed(self) -> bool:
        """A Linear's weight: torch [out, in], Paddle [in, out]."""
        return self.rule is linear_layout and self.name == "weight"

    @property
    def in_out(self) -> bool:
        """A Linear's weight as a classic Paddle Linear holds it, [in, out]: torch's Linear's transposed, or a type
        holding it so itself (transformers' Conv1D, kept as it is). A layer holding torch's Linear's [out, in]
        (paddle.compat's) takes its transpose, as convert's rule for the pair (_rule) says."""
        return self.transposed or (self.rule is same_layout and self.name == "weight" and "Linear" in (self.kinds or ())
                                    and np.ndim(self.array) == 2)


def _rule(table, module, paddle_kind=None, tensors=None):
    """(Paddle types, rule) for a torch module: a layout declared for the Paddle type it pairs with (or a base of
    it) first, then the Paddle type's own where it holds torch's layout (layouts.held_rule: paddle.compat's), then
    its own type's (or a base's); a type no one declared whose tensors each have at most one axis
    longer than 1 (a norm's scale; a bias [out, 1]: nothing to transpose) keeps its layout. None when unknown."""
    rule = declared(table, paddle_kind)
    if rule is not None and rule[1] is not torch_held:
        return rule
    held = held_rule(module, paddle_kind)  # a Paddle layer holding torch's own layout (paddle.compat's), by its type
    if held is not None:
        return None, held
    own = next((table[key] for key in lineage(type(module)) if key in table), None)
    if rule is not None:  # a paddle.compat layer against another torch type: the compat Linear holds the transpose
        # of what the classic Linear holds, so a type kept as it is in a classic Linear (transformers' Conv1D,
        # [in, out]) is transposed into it
        return (None, linear_layout) if own is not None and own[1] is same_layout and stands_for(paddle_kind) in \
            own[0] else rule
    rule = own
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
    joined = {k: v for k, v in loose.items() if isinstance(v, parted.Parted)}
    in_parts = parted.parts_of(joined)
    for name, module in torch_model.named_modules():
        tensors = {t: a for t, a in own_tensors(module).items() if (f"{name}.{t}" if name else t) not in in_parts}
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
        whole = apart((paddle_kinds or {}).get(name), tensors, "torch") if rule is torch_held else None
        for tname, array in tensors.items():
            held = ids[tname]
            pname = rule(tname, array)[0]  # the name only (a transpose is a view)
            key = f"{name}.{tname}" if name else tname
            if pname is None:
                continue
            if whole is not None and tname == whole[0]:  # one torch tensor the Paddle layer holds in parts (APART)
                for p, part in enumerate(whole[1]):
                    k = f"{name}.{part}" if name else part
                    out[k] = Tensor(name, tname, part, part_of(rule, p, len(whole[1])), kinds, type(module).__name__,
                                    array, k, key)
                continue
            if name not in cut:
                out[key] = Tensor(name, tname, pname, rule, kinds, type(module).__name__, array,
                                  first.setdefault(held, key), key)
                continue
            for p, part in enumerate(cut[name].parts):  # each part's columns, in Paddle's layout
                out[f"{name}.{part}.{tname}"] = Tensor(f"{name}.{part}", tname, pname, _part(rule, cut[name], p),
                                                       kinds, type(module).__name__, array, f"{name}.{part}.{tname}", key)
    read, modules = parted.reader(torch_model), dict(torch_model.named_modules())
    for key, v in joined.items():  # the vector its parent holds in parts, as torch's child would hold it
        out[key] = Tensor(v.child, v.name, v.name, same_layout, None, type(modules[v.child]).__name__,
                          parted.value(v, read), key, key, v.paddle_key, v.parts)
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
    part.whole = rule  # the rule before the columns: a layout settled later by a run (torch_fused) takes its own
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

