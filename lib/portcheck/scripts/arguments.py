"""What the recorder reads of the user's script's own objects: a model call's arguments (the tensors in them as
numpy, keyed by their place; another framework's batch put in their place; the call as compare.Arguments holds
it), the dicts of tensors it keeps beside the model (Tensors), and what its frames on the stack hold (the name it
holds an object by, the Trainer stepping its optimizer). Imports numpy and the standard library only.
"""
import sys
from pathlib import Path

import numpy as np


def to_numpy(t) -> np.ndarray:
    if hasattr(t, "detach"):
        t = t.detach().cpu()
    return np.array(t.numpy(), copy=True)


def probabilities(x) -> bool:
    """x holds probabilities over its last axis (each row >= 0, summing to 1, or to 0 where a row is masked out): an
    attention's weights, as a dropout called on them sees them."""
    if not (hasattr(x, "numpy") and hasattr(x, "shape")) or len(x.shape) < 2 or x.shape[-1] < 2:
        return False
    a = to_numpy(x)
    if a.dtype.kind != "f" or not a.size:
        return False
    sums = a.sum(-1, dtype=np.float64)
    return bool(a.min() >= 0 and np.all((np.abs(sums - 1) < 1e-3) | (sums == 0)))


# how a script's own argument is torch's in its framework's convention (own -> torch's): a bool mask True where
# torch's is False (torch's src_key_padding_mask True at the pads, Paddle's attn_mask True at the tokens to attend),
# or its last two axes swapped
CONVENTIONS = {"negated": np.logical_not, "transposed": lambda a: np.swapaxes(a, -1, -2)}


def as_torchs(value: np.ndarray, kind: str) -> np.ndarray:
    """value, the script's own argument, in torch's convention (kind: convention's "negated", "transposed" or
    both, comma-separated)."""
    for part in kind.split(", "):
        value = CONVENTIONS[part](value)
    return value


def convention(own: np.ndarray, torchs: np.ndarray):
    """How the script's own bool argument is torch's value in another convention ("negated", "transposed",
    "negated, transposed"), or None: the same, or not so (a value that differs otherwise is fed torch's)."""
    if own.dtype != np.bool_ or torchs.dtype != np.bool_ or (own.shape == torchs.shape and np.array_equal(own, torchs)):
        return None
    for kind in ("negated", "transposed", "negated, transposed"):
        if own.ndim >= (2 if "transposed" in kind else 1) and np.array_equal(as_torchs(own, kind), torchs):
            return kind
    return None


def flat(value, prefix, out):
    """The tensors of a call's arguments, {prefix/<position or name>: array}; positions of nested tuples as a.b."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        out[prefix] = to_numpy(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            flat(v, f"{prefix}/{k}", out)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            flat(v, f"{prefix}/{i}", out)


def replaced(value, prefix, given: dict, to_tensor):
    """The call's arguments with each tensor replaced by given[its key] (another framework's batch), if there."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        return to_tensor(given[prefix]) if prefix in given else value
    if isinstance(value, dict):
        return type(value)({k: replaced(v, f"{prefix}/{k}", given, to_tensor) for k, v in value.items()})
    if isinstance(value, (tuple, list)):
        return type(value)(replaced(v, f"{prefix}/{i}", given, to_tensor) for i, v in enumerate(value))
    return value


class Unbuilt(Exception):
    """A model call's argument the recorder cannot take apart into arrays (an object holding tensors)."""


def arrays(value, prefix, batch: dict):
    """A call's arguments as compare.Arguments holds them: each tensor as numpy, batch[its key] where batch has it
    (torch's batch of the call), in the lists, tuples and dicts it was in; a number or a flag as the script gave it;
    Unbuilt for anything else (an object holding tensors)."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        return batch[prefix] if prefix in batch else to_numpy(value)
    if isinstance(value, dict):
        return type(value)({k: arrays(v, f"{prefix}/{k}", batch) for k, v in value.items()})
    if isinstance(value, (tuple, list)):
        return type(value)(arrays(v, f"{prefix}/{i}", batch) for i, v in enumerate(value))
    if value is None or isinstance(value, (bool, str, int, float, np.generic)):
        return value
    raise Unbuilt(type(value).__name__)


class Tensors:
    """A dict of tensors the script keeps beside the model, keyed as its state (an EMA's shadow weights), read and
    set as a module's state is (first_call.kept_modules): the script's own dict, its entries as they are when read."""
    kind = "dict of tensors"

    def __init__(self, held: dict):
        self.held = held

    def state_dict(self) -> dict:
        return dict(self.held)

    def load_state_dict(self, state: dict):  # torch's sides (hooks_torch.load): each tensor set in place
        for k, v in state.items():
            if k in self.held:
                self.held[k].data.copy_(v)

    def double(self):  # torch's float64 run: the entries widened, as the model is
        for k, v in self.held.items():
            self.held[k] = v.double()
        return self


def on_stack() -> list:
    """What the script's functions on the stack hold, and their objects' attributes: a dict of Paddle tensors is not
    tracked by gc (its tensors are not), so gc.get_objects does not list it."""
    out, frame, here = [], sys._getframe(1), str(Path(__file__).parent.parent)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(here):
            held = list(frame.f_locals.values())
            out += held
            for v in held:
                attrs = getattr(v, "__dict__", None) if not isinstance(v, type) else None
                out += list(attrs.values()) if isinstance(attrs, dict) else []
        frame = frame.f_back
    return out


def held_as(obj, depth: int = 3) -> str:
    """The name the script holds obj by: a variable of a function on the stack (the recorder's own frames passed
    over); else the attribute of the object holding it, after that object's own name (timm's ModelEmaV2 held as
    model_ema holds its copy as .module: model_ema.module); a container's key; its class's if none."""
    import gc
    frame, here = sys._getframe(1), str(Path(__file__).parent.parent)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(here):
            name = next((k for k, v in frame.f_locals.items() if v is obj and k != "self"), None)
            if name:
                return name
        frame = frame.f_back
    owner, attr = holder(obj)
    if owner is not None and depth:
        return f"{held_as(owner, depth - 1)}.{attr}"
    for ref in gc.get_referrers(obj):
        name = next((k for k, v in ref.items() if v is obj and isinstance(k, str)), None) \
            if isinstance(ref, dict) else None
        if name:
            return name
    return type(obj).__name__


def _attributes(obj) -> dict:
    attrs = getattr(obj, "__dict__", None) if not isinstance(obj, type) else None
    return attrs if isinstance(attrs, dict) else {}


def holder(obj) -> tuple:
    """(the script's object holding obj as an attribute or a submodule, that attribute's name), or (None, None): an
    EMA class of the script's or a library's (timm's ModelEmaV2: .module; PaddleDetection's ModelEMA: its dict of
    tensors). The recorder's own objects, frames, modules' globals and containers are passed over."""
    import gc
    import types
    here = __name__.partition(".")[0]  # the library's own objects: never the script's holder
    skip = (dict, types.FrameType, types.ModuleType, list, tuple, set, types.FunctionType, types.MethodType, type)
    theirs = lambda o: not isinstance(o, skip) and type(o).__module__.partition(".")[0] != here

    def owner(d: dict):  # the object whose attributes d is, or holding d as one (a module's _modules), directly or
        for o in gc.get_referrers(d):  # through its __dict__
            if theirs(o) and (_attributes(o) is d or any(v is d for v in _attributes(o).values())):
                return o
            if isinstance(o, dict) and any(v is d for v in o.values()):
                found = next((oo for oo in gc.get_referrers(o) if theirs(oo) and _attributes(oo) is o), None)
                if found is not None:
                    return found
        return None
    for ref in gc.get_referrers(obj):
        if isinstance(ref, dict):  # an instance's __dict__, or a module's _modules / a layer's _sub_layers
            attr = next((k for k, v in ref.items() if v is obj and isinstance(k, str)), None)
            found = owner(ref) if attr else None
        else:
            attr = next((k for k, v in _attributes(ref).items() if v is obj), None) if theirs(ref) else None
            found = ref if attr else None
        if found is not None:
            return found, attr
    return None, None


def decay_of(obj):
    """The decay an EMA holder was given (its .decay; torch's AveragedModel: get_ema_multi_avg_fn(decay)'s, read from
    the function's closure), a float, or None."""
    import inspect
    d = getattr(obj, "decay", None)
    if d is None:
        fn = getattr(obj, "multi_avg_fn", None) or getattr(obj, "avg_fn", None)
        fn = inspect.unwrap(fn) if callable(fn) else None  # under torch.no_grad()'s wrapper
        code = getattr(fn, "__code__", None)
        cells = dict(zip(code.co_freevars, fn.__closure__ or ())) if code is not None else {}
        try:
            d = cells["decay"].cell_contents if "decay" in cells else None
        except ValueError:  # an empty cell
            d = None
    return float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def trainer_on_stack():
    """The transformers or paddlenlp Trainer whose training loop is on the stack (its optimizer stepping), or None."""
    frame = sys._getframe(1)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if any(c.__name__ == "Trainer" and c.__module__.startswith(("transformers.", "paddlenlp."))
               for c in type(obj).__mro__):
            return obj
        frame = frame.f_back
    return None
