"""A BatchNorm in training over few values per channel (batch x spatial, under optimizers.FEW_VALUES), judged by what
torch's own float64 run shows there. Over two values its output is +-d / sqrt(d^2 + eps), d the rounding of two
values that almost agree: each fp32 run's rounding there is amplified by a different amount per channel, and torch's
own error at a gradient or a later module is one sample of it, small by luck where Paddle's is not (a conv bias before
such a BatchNorm, whose true gradient is 0: torch 1.9e-7 from its float64 run, Paddle 2.0e-5).

torch's run again, with each such BatchNorm's output moved by torch's own fp32 error there (max |fp32 - float64| at
its output in the first forward, measured in the same call) in signs drawn from a seeded generator of its own, is
torch against itself at the size of its own error at that module: every value it reaches (the modules after it, the
gradients, the steps) is also allowed calibrated.SPREAD x that run's distance from torch's (NOISE keys). A bug the
forward, the running statistics or the optimizer makes before or at the BatchNorm (its epsilon, its momentum) is
not what that run moves, and stays red.

May import portcheck.core, portcheck.forward and portcheck.gradients.against_itself (numpy; torch lazily).
"""
import contextlib

import numpy as np

from portcheck.forward.twin import F64
from portcheck.gradients.against_itself import distance

NOISE = "bn_noise:"  # a torch record's key prefix: its run again with each few-values BatchNorm's output moved


def measured(record: dict, modules: list) -> dict:
    """{module: (torch's own fp32 error at its output in the first forward, that error over its largest output)} of
    each module named, from a torch record holding both runs' out/ keys (each call's: out/<module>, out/<module>#2
    ...); (0, 0) where none is recorded."""
    out = {}
    for module in modules:
        keys = [k for k in record if k.startswith(f"out/{module}") and
                k[len(f"out/{module}"):][:1] in ("", "#", "[") and F64 + k in record]
        err = max((float(np.max(np.abs(np.asarray(record[k], np.float64) - np.asarray(record[F64 + k], np.float64)),
                                initial=0.0)) for k in keys), default=0.0)
        largest = max((float(np.max(np.abs(np.asarray(record[F64 + k], np.float64)), initial=0.0)) for k in keys),
                      default=0.0)
        out[module] = (err, err / largest if largest > 0 else 0.0)
    return out


@contextlib.contextmanager
def moved_by(model, errors: dict, seed: int = 0):
    """Each named torch module in train mode (errors: {module: (error, relative error)}) with its output moved by
    its error and the gradient it sends back by its relative error of that gradient's largest, each element up or
    down as a seeded generator of its own draws (the same on any CPU, torch's global random state untouched)."""
    import torch
    signs = torch.Generator().manual_seed(seed)

    def moved(x, size):
        up = torch.randint(0, 2, x.shape, generator=signs, dtype=torch.bool)
        return x + torch.where(up, size, -size).to(x.dtype)

    def forward(size):
        def hook(module, args, output):
            if not module.training or not isinstance(output, torch.Tensor) or not output.is_floating_point():
                return None
            return moved(output, size)
        return hook

    class Sent(torch.autograd.Function):
        """The input as it is; backward, the gradient it sends back moved by `relative` of its largest (a Function
        of its own, not a module backward hook: an in-place ReLU after the module is then no view's change)."""
        @staticmethod
        def forward(ctx, x, relative):
            ctx.relative = relative
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return moved(g, ctx.relative * float(g.abs().max())), None

    def backward(relative):
        def hook(module, args):
            x = args[0] if args else None
            if not module.training or not isinstance(x, torch.Tensor) or not x.is_floating_point() \
                    or not x.requires_grad:
                return None
            return (Sent.apply(x, relative), *args[1:])
        return hook
    handles = []
    for name, m in model.named_modules():
        if errors.get(name, (0.0, 0.0))[0] > 0:
            handles += [m.register_forward_hook(forward(errors[name][0])),
                        m.register_forward_pre_hook(backward(errors[name][1]))]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def spread(record: dict, key: str):
    """max |torch's run - its run with the BatchNorms over few values moved| at a record key, or None."""
    a, other = record.get(key), record.get(NOISE + key)
    if a is None or other is None or np.shape(a) != np.shape(other):
        return None
    figure = float(distance(a, other)[0])
    return figure if np.isfinite(figure) else None


BY = "with each BatchNorm over few values per channel moved by its own fp32 error there"  # the spread's run, said
