"""Strict weight conversion for any torch/Paddle model pair: the layout follows the torch module's type.

Every torch module that holds parameters or buffers of its own is looked up by type in LAYOUTS; its
Paddle counterpart is found through the name map, must be of the matching Paddle type, and receives each
tensor under its Paddle name in Paddle's layout. Then every key and shape is checked in both directions:
a Paddle key nothing filled, a torch tensor with no Paddle key, or a shape that differs ends the run with
one line naming it. A square Linear weight is transposed because it belongs to a Linear, never because
its shape happens to fit.
"""
import numpy as np

from align.names import resolve
from common.errors import PipelineError


def _linear(name, array):
    return name, (array.T if name == "weight" else array)  # torch [out, in], Paddle [in, out]


def _same(name, array):
    return name, array


def _batch_norm(name, array):
    if name == "num_batches_tracked":  # Paddle keeps no count: its momentum never switches to an average
        return None, None
    return {"running_mean": "_mean", "running_var": "_variance"}.get(name, name), array


def _layouts():
    """torch module type -> (Paddle layer type names it may become, tensor rule). Built on first use, so
    that importing this module does not load either framework."""
    import torch.nn as tnn
    table = {tnn.Linear: (("Linear",), _linear), tnn.Embedding: (("Embedding",), _same),
             tnn.LayerNorm: (("LayerNorm",), _same)}
    for n in (1, 2, 3):
        table[getattr(tnn, f"Conv{n}d")] = ((f"Conv{n}D",), _same)
        table[getattr(tnn, f"ConvTranspose{n}d")] = ((f"Conv{n}DTranspose",), _same)
        table[getattr(tnn, f"BatchNorm{n}d")] = ((f"BatchNorm{n}D", "BatchNorm"), _batch_norm)
    table[tnn.LSTM] = (("LSTM",), _same)  # gate order i, f, g, o on both sides; names weight_ih_l0, ..._reverse
    table[tnn.GRU] = (("GRU",), _same)
    try:  # transformers' GPT-2-style Conv1D already holds [in, out], as Paddle's Linear does
        from transformers.pytorch_utils import Conv1D
        table[Conv1D] = (("Linear",), _same)
    except ImportError:
        pass
    return table


def own_tensors(module) -> dict:
    """The parameters and buffers a module holds itself (not its children's), as numpy arrays."""
    out = {n: p.detach().cpu().numpy() for n, p in module.named_parameters(recurse=False)}
    out.update({n: b.detach().cpu().numpy() for n, b in module.named_buffers(recurse=False) if b is not None})
    return out


def plan(torch_model, paddle_model, name_map=None) -> dict:
    """{torch key: (Paddle key, layout rule, the tensor's own name, numpy array)} for every parameter and buffer
    the Paddle model takes (num_batches_tracked has none), with every module's type and counterpart checked;
    compare_backward maps gradients and updated weights through the same rules."""
    mapped = resolve(name_map)
    layouts = _layouts()
    paddle_layers = dict(paddle_model.named_sublayers(include_self=True))
    out = {}
    for name, module in torch_model.named_modules():
        tensors = own_tensors(module)
        if not tensors:
            continue
        rule = next((layouts[t] for t in type(module).__mro__ if t in layouts), None)
        if rule is None:
            raise PipelineError(f"torch module {name or '(the model)'} is a {type(module).__name__}, whose Paddle "
                                "layout this converter does not know: map it by hand (a name_map cannot change "
                                "a layout) or add its type to align/convert.py's layouts")
        kinds, rule = rule
        target = mapped(name)
        layer = paddle_layers.get(target)
        if layer is None:
            raise PipelineError(f"torch module {name or '(the model)'} ({type(module).__name__}) has no counterpart "
                                f"{target!r} in the Paddle model: give a name_map that names it")
        if type(layer).__name__ not in kinds:
            raise PipelineError(f"torch {name} is a {type(module).__name__} but Paddle {target} is a "
                                f"{type(layer).__name__}: the name map pairs different layers")
        for tname, array in tensors.items():
            pname = rule(tname, array)[0]  # the name only (a transpose is a view)
            if pname is not None:
                out[f"{name}.{tname}" if name else tname] = (f"{target}.{pname}" if target else pname, rule, tname, array)
    return out


def convert(torch_model, paddle_model, name_map=None, path=None) -> dict:
    """{Paddle state-dict key: numpy array} holding torch_model's weights in paddle_model's names and layout.

    name_map: how a torch module's name becomes its Paddle counterpart's (align.names.resolve): None (the
    same names), a dict of name prefixes, a list of (regex, replacement) rules, or a callable.
    path: also write the result there as a .pdparams (paddle.save), through the project's safe writer.
    Raises common.errors.PipelineError, one line, on a module type whose layout is unknown, a module with no
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
    for torch_key, (key, rule, tname, array) in plan(torch_model, paddle_model, name_map).items():
        if key in out:
            raise PipelineError(f"Paddle key {key} is filled twice (from {origin[key]} and {torch_key}): "
                                "the name map sends two torch modules to one Paddle module")
        out[key], origin[key] = np.ascontiguousarray(rule(tname, array)[1]), torch_key
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
    from common.fileio import atomic_write
    atomic_write(path, lambda tmp: paddle.save({k: paddle.to_tensor(v) for k, v in state.items()}, str(tmp)))


def load_into(paddle_model, state: dict):
    """Set a converted state on the Paddle model (every key was checked by convert)."""
    paddle_model.set_state_dict(state)
    return paddle_model
