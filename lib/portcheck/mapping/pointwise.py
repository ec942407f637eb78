"""A 1x1 convolution against a Linear: one matrix, held [out, in, 1, 1] by the convolution and [in, out] by Paddle's
Linear ([out, in] by torch's and paddle.compat's). A classifier head one side computes as a 1x1 Conv2d on the pooled
[N, C, 1, 1] map and the other as a Linear on [N, C] (timm's conv_head against a PaddleClas head) is paired as the
run pairs it; its weight is converted as the reshape it is, never refused as two kinds of layer. Only a convolution
whose every kernel axis is 1, of one group, is such a matrix; and, against a Linear on the flattened map, one whose
kernel covers the whole map it reads (no padding, no dilation, one group: timm's VGG ConvMlp, 7 x 7 on a 7 x 7 map),
whose weight flattens as the map does, channel first. A kernel smaller than the map gives an output of another shape,
red where it is judged.

May import portcheck.core and mapping's layouts and loose; torch and Paddle only through the models handed in."""
import numpy as np

from portcheck.core.keys import ROOT
from portcheck.mapping.layouts import held_as_torch
from portcheck.mapping.loose import Loose


def _pointwise(kernel, groups) -> bool:
    kernel = tuple(kernel) if isinstance(kernel, (tuple, list)) else (kernel,)
    return kernel and all(int(k) == 1 for k in kernel) and int(groups or 1) == 1


def _unpadded(module) -> bool:
    """A convolution whose every window is the kernel's own: no padding, no dilation, one group (its kernel covering
    the whole map it reads is then a matrix on the flattened map: timm's VGG ConvMlp fc1, 7 x 7 on the 7 x 7 map,
    against PaddleClas's Linear on the flattened features)."""
    padding, dilation = getattr(module, "padding", 0), getattr(module, "dilation", 1)
    zero = padding == "valid" or all(int(p) == 0 for p in (padding if isinstance(padding, (tuple, list)) else
                                                            (padding,)))
    ones = all(int(d) == 1 for d in (dilation if isinstance(dilation, (tuple, list)) else (dilation,)))
    return zero and ones and int(getattr(module, "groups", 1) or 1) == 1 and \
        getattr(module, "padding_mode", "zeros") == "zeros"


def _is(kind: type, name: str) -> bool:
    return any(k.__name__ == name for k in kind.__mro__)


def rules(module, layer):
    """(torch's weight -> Paddle's, the axes of 1 it drops or adds) for a 1x1 convolution paired with a Linear, or a
    Linear with a 1x1 convolution; None for any other pair."""
    conv = lambda kind: next((f"Conv{n}d" for n in (1, 2, 3) if _is(kind, f"Conv{n}d") or _is(kind, f"Conv{n}D")),
                             None)
    as_torch = type(layer) in held_as_torch()  # paddle.compat's Linear keeps torch's [out, in]
    if conv(type(module)) and _is(type(layer), "Linear") and not getattr(module, "transposed", False) and \
            (_pointwise(module.kernel_size, module.groups) or _unpadded(module)):
        # [out, in, k...] flattened as the map is (channel first): [out, in * k...]
        return lambda w: w.reshape(w.shape[0], -1) if as_torch else w.reshape(w.shape[0], -1).T
    if _is(type(module), "Linear") and conv(type(layer)) and \
            _pointwise(getattr(layer, "_kernel_size", ()), getattr(layer, "_groups", 1)):
        ones = (1,) * len(layer._kernel_size)
        return lambda w: w.reshape(*w.shape, *ones)
    return None


def held_pointwise(out: dict, wrong: dict, modules: dict, layers: dict, torch_model, shapes: dict, loose: dict):
    """convert.plan's pairs of `wrong` that are a 1x1 convolution against a Linear (either way), taken out of `wrong`
    and paired tensor to tensor in `loose` (compare_backward's torch side takes the same rule), each weight reshaped.
    out: {torch key: (Paddle key, tensors.Tensor, array)}; shapes: {Paddle key: shape}."""
    t_modules = dict(torch_model.named_modules())
    for name in list(wrong):
        target = modules.get(name or ROOT)
        module, layer = t_modules.get(name), layers.get(target)
        if module is None or layer is None:
            continue
        weight = rules(module, layer)
        if weight is None:
            continue
        held = {}
        for key, (_, tensor, array) in out.items():
            if tensor.module != name:
                continue
            p_key = f"{target}.{tensor.name}" if target else tensor.name
            value = weight(np.asarray(array)) if tensor.name == "weight" else np.asarray(array)
            if shapes.get(p_key) != tuple(value.shape):
                held = {}
                break
            rule = (lambda n, a, w=weight: (n, w(np.asarray(a)))) if tensor.name == "weight" else \
                (lambda n, a: (n, np.asarray(a)))
            held[key] = Loose(p_key, tensor.name, rule, f"torch {key} {list(np.shape(array))} -> Paddle {p_key} "
                                                        f"{list(value.shape)}: a convolution's matrix (a 1x1 "
                                                        "kernel, or one as large as its map) against a Linear's, "
                                                        "reshaped")
        if held:
            wrong.pop(name)
            loose.update(held)
