"""Weights read strictly, in either framework: every key and shape checked, and no file run as code.

Paddle's set_state_dict only warns on a missing key or a shape mismatch, so a load goes through strict_check
first. A torch file is read by torch's restricted unpickler (weights_only), a .pdparams by portcheck.core.fileio's
(plain containers and numeric arrays only; paddle.load would run any pickled code). `how` is the command or
advice that makes the file again, said in every refusal.
"""
import pickle
import re

import numpy as np

from portcheck.core.errors import PipelineError, first_line, remedy, require
from portcheck.core.fileio import load_pickled_arrays


SHOWN = 10  # keys named per family of problems; a checkpoint of another model would otherwise fill a screen


def named(items: list, sep: str = ", ") -> str:
    return sep.join(items[:SHOWN]) + (f" (and {len(items) - SHOWN} more)" if len(items) > SHOWN else "")


def strict_check(expected: dict, given: dict, what: str):
    """expected/given: {name: shape}. Raise listing the missing, unexpected and misshapen keys, every family in
    one line (the first SHOWN of each named, the rest counted): a checkpoint's author fixes them in one pass, not
    one run per key."""
    missing = sorted(set(expected) - set(given))
    unexpected = sorted(set(given) - set(expected))
    shapes = sorted(f"{k} {tuple(given[k])} != {tuple(expected[k])}"
                    for k in set(expected) & set(given) if tuple(given[k]) != tuple(expected[k]))
    problems = [f"{label}: {named(keys)}"
                for label, keys in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", shapes)) if keys]
    if problems:
        raise PipelineError(f"{what} does not fit the model; " + "; ".join(problems) + " [PC230]")


def strict_state(expected: dict, given: dict, what: str):
    """strict_check on {name: (shape, dtype)}: a resumed optimizer state must fit as exactly as the weights.
    A shape or dtype the framework would accept and fail on, or cast, at the first step is refused here."""
    strict_check({k: s for k, (s, _) in expected.items()}, {k: s for k, (s, _) in given.items()}, what)
    dtypes = sorted(f"{k} {given[k][1]} != {expected[k][1]}" for k in expected if given[k][1] != expected[k][1])
    if dtypes:
        raise PipelineError(f"{what} does not fit the model; dtype mismatch: {named(dtypes)} [PC213]")


def torch_reason(e: Exception) -> str:
    """Why torch.load refused a file, in one line. Its weights_only refusal opens with advice to turn
    the protection off; what matters is the line naming what the file holds (ANSI codes dropped)."""
    if not isinstance(e, pickle.UnpicklingError):
        return first_line(e)
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).split("WeightsUnpickler error:")[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith(
        ("Weights only load failed", "Check the documentation", "Please file an issue"))]
    found = lines[0].split(". ")[0] if lines else "refused"
    return f"torch's weights_only loader refused it: {found[:200]}"


def _torch_load(path, how: str, fix: str):
    """torch.load through torch's restricted unpickler (weights_only): tensors and plain containers only,
    never code; a payload (UnpicklingError) or a corrupt file (RuntimeError, EOFError) ends in one line."""
    import torch
    path = require(path, how)
    try:
        return path, torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise PipelineError(f"{path} is not a torch file this project wrote ({torch_reason(e)}); {fix} "
                            "[PC216]") from None


def load_torch_tensors(path, how: str) -> dict:
    """{name: torch.Tensor} from a torch.save'd dict (weights, heads)."""
    import torch
    path, state = _torch_load(path, how, remedy(how, "again"))
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise PipelineError(f"{path} is not a dict of tensors; {remedy(how, 'again')} [PC214]")
    return state


def check_arrays(arrays: dict, path, how: str):
    """Weights as exported are float32 and finite; {name: numpy array or torch tensor}."""
    for name, value in arrays.items():
        dtype = str(value.dtype).removeprefix("torch.")  # before any conversion: numpy has no bfloat16
        problem = f"is {dtype}, not float32" if dtype != "float32" else \
            "holds NaN or Inf" if not np.isfinite(np.asarray(value)).all() else None
        if problem:
            raise PipelineError(f"{path}: {name} {problem}; {remedy(how, 'again')} [PC217]")


def load_paddle_arrays(path, how: str) -> dict:
    """{name: numpy array} from a paddle.save'd .pdparams, unpickled by portcheck.core.fileio's restricted
    unpickler (plain containers and numeric arrays only; paddle.load would run any pickled code)."""
    state = paddle_arrays(load_pickled_arrays(path, how))
    if not isinstance(state, dict):
        raise PipelineError(f"{path} is not a dict of arrays; {remedy(how, 'again')} [PC215]")
    state.pop("StructuredToParameterName@@", None)  # paddle.save's name table: not a parameter
    if not all(isinstance(v, np.ndarray) for v in state.values()):
        raise PipelineError(f"{path} is not a dict of arrays; {remedy(how, 'again')} [PC215]")
    return state


def paddle_arrays(obj):
    """paddle.save stores a tensor nested in a dict as a (name, ndarray) tuple (a top-level one as the
    ndarray): the plain arrays, as paddle.load would return them, without paddle.load."""
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str) and isinstance(obj[1], np.ndarray):
        return obj[1]
    if isinstance(obj, dict):
        return {k: paddle_arrays(v) for k, v in obj.items()}
    return obj
