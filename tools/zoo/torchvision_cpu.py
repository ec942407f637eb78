"""torchvision's classification models beside the CPU build of torch.

PyPI's torchvision wheel is built for CUDA torch: its compiled ops (nms, roi_align, deform_conv2d: detection only)
do not load beside CPU torch, and its import then fails where it registers their fake and autograd kernels
("operator torchvision::nms does not exist"). The classification models use none of those ops, so the
registrations of an op that does not exist are skipped while torchvision is imported, and nothing else is changed:
torch's registration functions are put back at once. The same lines work in a user's own script (docs/zoo.md).
"""
import contextlib
import importlib
import sys


@contextlib.contextmanager
def _missing_ops_skipped():
    import torch.library as library
    saved = library.register_fake, library.register_autograd, library.Library.impl

    def register_fake(op, fn=None, /, **kwargs):
        def apply(f):
            try:
                return saved[0](op, f, **kwargs)
            except RuntimeError:  # the op's kernel did not load: nothing to register it on
                return f
        return apply if fn is None else apply(fn)

    def register_autograd(op, *args, **kwargs):
        try:
            return saved[1](op, *args, **kwargs)
        except RuntimeError:
            return None

    def impl(lib, op, fn=None, *args, **kwargs):
        try:
            return saved[2](lib, op, fn, *args, **kwargs)
        except RuntimeError:
            return fn
    library.register_fake, library.register_autograd, library.Library.impl = register_fake, register_autograd, impl
    try:
        yield
    finally:
        library.register_fake, library.register_autograd, library.Library.impl = saved


def import_torchvision():
    """torchvision, imported with its missing compiled ops' registrations skipped (its models work; its detection
    ops do not)."""
    if "torchvision" in sys.modules:
        return sys.modules["torchvision"]
    with _missing_ops_skipped():
        return importlib.import_module("torchvision")
