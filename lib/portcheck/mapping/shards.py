"""A single-card Paddle state split into one rank's shard of a tensor-parallel model, by the layouts fleet's layers
declare on their own tensors: ColumnParallelLinear's weight on its columns (axis 1 of Paddle's [in, out]) and its
bias, RowParallelLinear's weight on its rows (its bias whole, added once after the all-reduce),
VocabParallelEmbedding's rows, and any tensor a model marks is_distributed with a split_axis (paddlenlp's
LlamaLMHead). A fused tensor packed [q | k | v] splits per part, which only the model's own split knows: load it
with paddlenlp's from_pretrained(..., tensor_parallel_degree=, tensor_parallel_rank=). Imports numpy and
portcheck.core; Paddle only through the model handed in."""
import numpy as np

from portcheck.core.errors import PipelineError


def split_axes(model) -> dict:
    """{state key: the axis its tensor is split on across the ranks} for every distributed tensor of `model`."""
    return {name: int(getattr(p, "split_axis", 0)) for name, p in model.named_parameters()
            if getattr(p, "is_distributed", False)}


def differences(state: dict, model) -> list:
    """One line for each key of a rank's shard and its model that differs: a key on one side only, a shape."""
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    lines = [f"{k}: in the shard, not in the rank's model" for k in state if k not in own]
    lines += [f"{k}: in the rank's model, not in the shard" for k in own if k not in state]
    lines += [f"{k}: the shard's {list(np.shape(state[k]))}, the rank's model {list(own[k])}"
              for k in own if k in state and tuple(np.shape(state[k])) != own[k]]
    return lines


def shard(state: dict, model, rank: int, degree: int) -> dict:
    """Rank `rank`'s part of a single-card state (numpy arrays by Paddle key) for its model of `degree` ranks:
    each distributed tensor cut in `degree` equal parts on its split axis, the rest whole. A size that `degree`
    does not divide is one line."""
    axes, out = split_axes(model), {}
    for key, value in state.items():
        value = np.asarray(value)
        axis = axes.get(key)
        if axis is None or value.ndim <= axis:
            out[key] = value
            continue
        if value.shape[axis] % degree:
            raise PipelineError(f"{key} {list(value.shape)}: axis {axis} ({value.shape[axis]}) does not split in "
                                f"{degree} equal parts; give a degree that divides it [PC322]")
        out[key] = np.ascontiguousarray(np.split(value, degree, axis=axis)[rank])
    return out


def checked_shard(state: dict, model, rank: int, degree: int) -> dict:
    """shard(), its keys and shapes checked against the rank's model before any run: every difference one line,
    all of them in one refusal (a checkpoint split for another degree, a layer the port splits otherwise)."""
    part = shard(state, model, rank, degree)
    lines = differences(part, model)
    if lines:
        raise PipelineError(f"rank {rank} of {degree}: the shard does not fit its model ({len(lines)} "
                            f"differ): {'; '.join(lines)} [PC323]")
    return part
