"""compare_backward(isolate=True)'s restarts: Paddle's model starts each step after the first from torch's weights
after the step before, in Paddle's names and layout, each tensor of a Paddle fused module joined from its parts as
convert joins them (mapping.fused.joined_state). Every Paddle tensor is either set by each restart or refused in
one line: one left at Paddle's own value would go on from Paddle's own last step where every other starts from
torch's, and its step would be judged against a step it did not take.

May import portcheck.core and portcheck.mapping (numpy; Paddle through the model handed in).
"""
import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.mapping import fused
from portcheck.mapping.state import names_of_one_tensor, numpy_dtype


def starts(torch_record: dict, planned: dict, paddle_model, layouts, steps: int) -> dict:
    """{step i >= 1: {Paddle key: array}}: torch's tensors after step i - 1 (a torch record's state<i>/ keys) under
    their Paddle keys (planned: convert.plan's), in Paddle's shapes (a 0-d scalar against [1]), each Paddle fused
    module's tensor joined from its parts (layouts' Fused entries of the Paddle model)."""
    shapes = {k: tuple(v.shape) for k, v in paddle_model.state_dict().items()}
    specs = fused.specs(paddle_model, layouts)
    out = {}
    for i in range(1, steps):
        start = {}
        for k, v in torch_record.items():
            if k.startswith(f"state{i}/"):
                key = planned[k.partition("/")[2]][0]
                start[key] = np.reshape(v, shapes.get(key, np.shape(v)))
        out[i] = fused.joined_state(start, specs)
    return out


def restart(model, starts: dict):
    """The function that starts `model` (Paddle's) from starts[i] before each step i >= 1, tensor by tensor in
    place (the optimizer holds the same tensors), refusing before any step a key or shape the model does not hold,
    and at a restart every tensor it does not set that moved since the run started (a parameter a gradient reaches,
    a buffer its forward updates): its step would start from Paddle's own weights. One the steps never move (a
    buffer Paddle holds alone, a module the loss does not reach) keeps its value, as convert left it."""
    params = model.state_dict()
    keys = set().union(*starts.values()) if starts else set()
    wrong = sorted({f"{k} (no Paddle key)" if k not in params else
                    f"{k} {list(np.shape(v))} vs Paddle {list(params[k].shape)}"
                    for start in starts.values() for k, v in start.items()
                    if k not in params or tuple(np.shape(v)) != tuple(params[k].shape)})
    if wrong:
        raise PipelineError(f"compare_backward(isolate=True): each step's start from torch's weights holds "
                            f"{_named(wrong)}, which the Paddle model does not hold so: a fused module's parts not "
                            "joined whole, or a key or shape another layout gives; check layouts= (a portcheck.Fused "
                            "entry for each fused module, on the side that holds it) against convert's [PC496]")
    same = names_of_one_tensor(params)
    unset = [k for k in params if not any(a in keys for a in same[k])]
    before = {k: np.array(params[k].numpy()) for k in unset}

    def start(model, i):
        for k, v in starts[i].items():
            params[k].set_value(np.asarray(v, dtype=numpy_dtype(params[k])))
        moved = [k for k in unset if not np.array_equal(params[k].numpy(), before[k], equal_nan=True)]
        if moved:
            raise PipelineError(f"compare_backward(isolate=True): Paddle's {_named(moved)} moved in step {i} and no "
                                f"torch tensor restarts it, so step {i + 1} would start it from Paddle's own weights "
                                "where every other tensor starts from torch's: pair it with a torch tensor (a fused "
                                "module: a portcheck.Fused entry in layouts=, as convert takes it) [PC495]")
    return start


def _named(keys: list, most: int = 6) -> str:
    return ", ".join(keys[:most]) + (f" and {len(keys) - most} more" if len(keys) > most else "")
