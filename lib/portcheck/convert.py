"""Strict weight conversion for any torch/Paddle model pair: the layout follows the torch module's type.

Every torch module that holds parameters or buffers of its own is looked up by type in LAYOUTS; its
Paddle counterpart is found through the name map, must be of the matching Paddle type, and receives each
tensor under its Paddle name in Paddle's layout. Then every key and shape is checked in both directions:
a Paddle key nothing filled, a torch tensor with no Paddle key, or a shape that differs ends the run with
one line naming it. A square Linear weight is transposed because it belongs to a Linear, never because
its shape happens to fit.
"""
from dataclasses import dataclass

import numpy as np

from portcheck.errors import PipelineError
from portcheck.names import resolve


def _linear(name, array):
    return name, (array.T if name == "weight" else array)  # torch [out, in], Paddle [in, out]


def _same(name, array):
    return name, array


RENAMES = {"running_mean": "_mean", "running_var": "_variance"}  # BatchNorm's statistics, torch -> Paddle


def _batch_norm(name, array):
    if name == "num_batches_tracked":  # Paddle keeps no count: its momentum never switches to an average
        return None, None
    return RENAMES.get(name, name), array


def _renamed(names: dict, rule=_same):
    """A rule that gives some tensors another name on the Paddle side."""
    def rename(name, array):
        return rule(names.get(name, name), array)
    return rename


RULES = {"same": _same, "transpose": _linear}  # what a user's `layouts` may name


def _layouts(extra=None):
    """torch module type -> (Paddle layer type names it may become, tensor rule). Built on first use, so
    that importing this module does not load either framework. extra: the caller's own {torch module type
    or its class name: "same" or "transpose"} for modules this table does not know (a model's own norm,
    an embeddings module holding a parameter itself); their Paddle type is not checked."""
    import torch.nn as tnn
    table = {tnn.Linear: (("Linear",), _linear), tnn.Embedding: (("Embedding",), _same),
             tnn.LayerNorm: (("LayerNorm",), _same), tnn.GroupNorm: (("GroupNorm",), _same),
             tnn.PReLU: (("PReLU",), _renamed({"weight": "_weight"}))}
    for n in (1, 2, 3):
        table[getattr(tnn, f"Conv{n}d")] = ((f"Conv{n}D",), _same)
        table[getattr(tnn, f"ConvTranspose{n}d")] = ((f"Conv{n}DTranspose",), _same)
        table[getattr(tnn, f"BatchNorm{n}d")] = ((f"BatchNorm{n}D", "BatchNorm"), _batch_norm)
        table[getattr(tnn, f"InstanceNorm{n}d")] = ((f"InstanceNorm{n}D",), _renamed({"weight": "scale"}))
    table[tnn.LSTM] = (("LSTM",), _same)  # gate order i, f, g, o on both sides; names weight_ih_l0, ..._reverse
    table[tnn.GRU] = (("GRU",), _same)
    try:  # transformers' GPT-2-style Conv1D already holds [in, out], as Paddle's Linear does
        from transformers.pytorch_utils import Conv1D
        table[Conv1D] = (("Linear",), _same)
    except ImportError:
        pass
    for key, how in (extra or {}).items():
        if how not in RULES or not isinstance(key, (type, str)):
            raise PipelineError(f"layouts: {key!r}: {how!r} must be one of {', '.join(map(repr, RULES))}, keyed by a "
                                "torch module type or its class name")
        table[key] = (None, RULES[how])
    return table


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

    def to_paddle(self, array):
        return self.rule(self.name, np.asarray(array))[1]

    @property
    def transposed(self) -> bool:
        """A Linear's weight: torch [out, in], Paddle [in, out]."""
        return self.rule is _linear and self.name == "weight"


def torch_layouts(torch_model, layouts=None) -> dict:
    """{torch key: Tensor} for every parameter and buffer the Paddle side holds (num_batches_tracked has no
    Paddle counterpart), from the torch model alone: a torch-side script writes its tensors in Paddle's
    layout with it. A module type with no known layout ends the run, naming the module."""
    table = _layouts(layouts)
    out = {}
    for name, module in torch_model.named_modules():
        tensors = own_tensors(module)
        if not tensors:
            continue
        rule = table.get(type(module).__name__) or next((table[t] for t in type(module).__mro__ if t in table), None)
        if rule is None:
            raise PipelineError(f"torch module {name or '(the model)'} is a {type(module).__name__}, whose Paddle "
                                "layout this converter does not know: pass layouts={"
                                f"'{type(module).__name__}': 'same'}} (or 'transpose') if its tensors keep their "
                                "names, or add its type to portcheck/convert.py's table")
        kinds, rule = rule
        for tname, array in tensors.items():
            pname = rule(tname, array)[0]  # the name only (a transpose is a view)
            if pname is not None:
                out[f"{name}.{tname}" if name else tname] = Tensor(name, tname, pname, rule, kinds,
                                                                   type(module).__name__, array)
    return out


def paddle_key(tensor: Tensor, mapped) -> str:
    """The Paddle state-dict key of a torch tensor, its module renamed by the name map."""
    target = mapped(tensor.module)
    return f"{target}.{tensor.paddle_name}" if target else tensor.paddle_name


def plan(torch_model, paddle_model, name_map=None, layouts=None) -> dict:
    """{torch key: (Paddle key, Tensor, numpy array)} for every parameter and buffer the Paddle model takes,
    with every module's counterpart and type checked; compare_backward maps gradients and updated weights
    through the same rules."""
    check_models(torch_model, paddle_model)
    mapped = resolve(name_map)
    paddle_layers = dict(paddle_model.named_sublayers(include_self=True))
    out, targets, missing = {}, {}, []
    for key, tensor in torch_layouts(torch_model, layouts).items():
        if tensor.module not in targets:
            targets[tensor.module] = target = mapped(tensor.module)
            layer = paddle_layers.get(target)
            if layer is None:
                missing.append(f"{tensor.module or '(the model)'} ({tensor.module_type}) -> {target!r}")
            elif tensor.kinds is not None and type(layer).__name__ not in tensor.kinds:
                raise PipelineError(f"torch {tensor.module} is a {tensor.module_type} but Paddle {target} is a "
                                    f"{type(layer).__name__}: the name map pairs different layers")
        out[key] = (paddle_key(tensor, mapped), tensor, tensor.array)
    if missing:  # all at once: one run of the map names every module it leaves without a counterpart
        raise PipelineError(f"{len(missing)} torch module(s) have no counterpart in the Paddle model: "
                            f"{'; '.join(missing[:12])}{'; ...' if len(missing) > 12 else ''}: "
                            "give a name_map that names them")
    return out


def framework(model):
    """"torch", "paddle" or None (not a model)."""
    if hasattr(model, "named_sublayers"):
        return "paddle"
    return "torch" if hasattr(model, "named_modules") else None


def framework_of(model) -> str:
    """A model's framework, or one line saying the `model` given is not one."""
    side = framework(model)
    if side is None:
        raise PipelineError(f"model is a {type(model).__name__}, not a torch.nn.Module or a paddle.nn.Layer: "
                            "pass the model itself")
    return side


def check_models(torch_model, paddle_model):
    """One line unless the first is a torch module and the second a Paddle layer (the usual slip: swapped)."""
    given = framework(torch_model), framework(paddle_model)
    if given == ("paddle", "torch"):
        raise PipelineError("the models are swapped: pass the torch model first, then the Paddle one")
    for side, model, want in (("torch_model", torch_model, "torch"), ("paddle_model", paddle_model, "paddle")):
        if framework(model) != want:
            raise PipelineError(f"{side} is a {type(model).__name__}, not a "
                                f"{'torch.nn.Module' if want == 'torch' else 'paddle.nn.Layer'}: pass the model itself")


def convert(torch_model, paddle_model, name_map=None, path=None, layouts=None) -> dict:
    """{Paddle state-dict key: numpy array} holding torch_model's weights in paddle_model's names and layout.

    name_map: how a torch module's name becomes its Paddle counterpart's (align.names.resolve): None (the
    same names), a dict of name prefixes, a list of (regex, replacement) rules, or a callable.
    path: also write the result there as a .pdparams (paddle.save), through the project's safe writer.
    layouts: {torch module type or class name: "same" or "transpose"} for module types whose layout this
    converter does not know (transformers' ViTEmbeddings holding cls_token, a model's own RMSNorm).
    Raises portcheck.errors.PipelineError, one line, on a module type whose layout is unknown, a module with no
    Paddle counterpart or of another type, and any key or shape that does not match in either direction.
    """
    state = paddle_model.state_dict()
    paddle_state = {k: tuple(v.shape) for k, v in state.items()}
    # Paddle's RNN layers list each weight twice (weight_ih_l0 and 0.cell_fw.weight_ih: one tensor); a key is
    # filled when any name of its tensor is
    aliases = {}
    for k, v in state.items():
        aliases.setdefault(getattr(v, "name", k), []).append(k)
    same = {k: group for group in aliases.values() for k in group}
    out, origin = {}, {}
    for torch_key, (key, tensor, array) in plan(torch_model, paddle_model, name_map, layouts).items():
        if key in out:
            raise PipelineError(f"Paddle key {key} is filled twice (from {origin[key]} and {torch_key}): "
                                "the name map sends two torch modules to one Paddle module")
        out[key], origin[key] = np.ascontiguousarray(tensor.to_paddle(array)), torch_key
    unfilled = [k for k in paddle_state if not any(a in out for a in same[k])]
    unknown = [origin[k] for k in out if k not in paddle_state]
    if unfilled or unknown:
        raise PipelineError("keys do not match: " + "; ".join(
            part for part in (f"Paddle keys no torch tensor fills: {', '.join(unfilled[:5])}" if unfilled else "",
                              f"torch tensors with no Paddle key: {', '.join(unknown[:5])}" if unknown else "") if part))
    for key, value in out.items():
        if tuple(value.shape) != paddle_state[key]:
            raise PipelineError(f"{origin[key]} -> {key}: shape {tuple(value.shape)} (after the layout rule) vs "
                                f"Paddle {paddle_state[key]}")
    if path is not None:
        save_pdparams(out, path)
    return out


def save_pdparams(state: dict, path):
    import paddle
    from portcheck.fileio import atomic_write
    atomic_write(path, lambda tmp: paddle.save({k: paddle.to_tensor(v) for k, v in state.items()}, str(tmp)))


def load_into(paddle_model, state: dict):
    """Set a converted state on the Paddle model (every key was checked by convert)."""
    paddle_model.set_state_dict(state)
    return paddle_model
