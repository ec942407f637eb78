"""Building the twin models from the exported weights, strictly, in either framework.

Paddle's set_state_dict only warns on a missing key or a shape mismatch, so every
load here goes through strict_check first. Each loader imports its own framework,
so a torch script never builds anything with Paddle and vice versa.
"""
import numpy as np

from common import paths, record
from common.errors import PipelineError, require
from common.fileio import load_pickled_arrays
from models.configuration_bert import BertConfig

EXPORT = "python weights/torch_bert_weights.py"
CONVERT = "python weights/torch2paddle.py"
HEAD = "python classifier_weights/generate_classifier_weights.py"


def strict_check(expected: dict, given: dict, what: str):
    """expected/given: {name: shape}. Raise listing every missing, unexpected or misshapen key."""
    missing = sorted(set(expected) - set(given))
    unexpected = sorted(set(given) - set(expected))
    shapes = sorted(f"{k} {tuple(given[k])} != {tuple(expected[k])}"
                    for k in set(expected) & set(given) if tuple(given[k]) != tuple(expected[k]))
    problems = [f"{label}: {', '.join(keys[:5])}" + (f" (and {len(keys) - 5} more)" if len(keys) > 5 else "")
                for label, keys in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", shapes)) if keys]
    if problems:
        raise PipelineError(f"{what} does not fit the model; " + "; ".join(problems))


def strict_state(expected: dict, given: dict, what: str):
    """strict_check on {name: (shape, dtype)}: a resumed optimizer state must fit as exactly as the weights.
    A shape or dtype the framework would accept and fail on, or cast, at the first step is refused here."""
    strict_check({k: s for k, (s, _) in expected.items()}, {k: s for k, (s, _) in given.items()}, what)
    dtypes = sorted(f"{k} {given[k][1]} != {expected[k][1]}" for k in expected if given[k][1] != expected[k][1])
    if dtypes:
        raise PipelineError(f"{what} does not fit the model; dtype mismatch: {', '.join(dtypes[:5])}"
                            + (f" (and {len(dtypes) - 5} more)" if len(dtypes) > 5 else ""))


def read_config(path) -> BertConfig:
    try:
        return BertConfig.from_json(path)
    except ValueError as e:
        raise PipelineError(str(e)) from None


def load_config(**overrides) -> BertConfig:
    config = read_config(require(paths.model_config(), EXPORT))
    for k, v in overrides.items():
        setattr(config, k, v)
    return config


def _torch_load(path, how: str, remedy: str):
    """torch.load through torch's restricted unpickler (weights_only): tensors and plain containers only,
    never code; a payload (UnpicklingError) or a corrupt file (RuntimeError, EOFError) ends in one line."""
    import torch
    path = require(path, how)
    try:
        return path, torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise PipelineError(f"{path} is not a torch file this project wrote "
                            f"({type(e).__name__}: {str(e).splitlines()[0][:200]}); {remedy}") from None


def load_torch_tensors(path, how: str) -> dict:
    """{name: torch.Tensor} from a torch.save'd dict (weights, heads)."""
    import torch
    path, state = _torch_load(path, how, f"run `{how}` again")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise PipelineError(f"{path} is not a dict of tensors; run `{how}` again")
    return state


def load_paddle_arrays(path, how: str) -> dict:
    """{name: numpy array} from a paddle.save'd .pdparams, unpickled by common.fileio's restricted
    unpickler (plain containers and numeric arrays only; paddle.load would run any pickled code)."""
    state = paddle_arrays(load_pickled_arrays(path, how))
    if not isinstance(state, dict):
        raise PipelineError(f"{path} is not a dict of arrays; run `{how}` again")
    state.pop("StructuredToParameterName@@", None)  # paddle.save's name table: not a parameter
    if not all(isinstance(v, np.ndarray) for v in state.values()):
        raise PipelineError(f"{path} is not a dict of arrays; run `{how}` again")
    return state


def load_torch_checkpoint(path, how: str) -> dict:
    """A Step 5 checkpoint ({"model", "optimizer", "scheduler"})."""
    path, state = _torch_load(path, how, "run without --resume")
    if not isinstance(state, dict) or not {"model", "optimizer", "scheduler"} <= set(state):
        raise PipelineError(f"{path} is not a checkpoint this project wrote; run without --resume")
    return state


def paddle_arrays(obj):
    """paddle.save stores a tensor nested in a dict as a (name, ndarray) tuple (a top-level one as the
    ndarray): the plain arrays, as paddle.load would return them, without paddle.load."""
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str) and isinstance(obj[1], np.ndarray):
        return obj[1]
    if isinstance(obj, dict):
        return {k: paddle_arrays(v) for k, v in obj.items()}
    return obj


def read_paddle_checkpoint(path, how: str) -> dict:
    """A Step 5 .pdparams checkpoint as plain arrays, through the restricted unpickler (no paddle needed);
    the model's name table (StructuredToParameterName@@) left out."""
    state = paddle_arrays(load_pickled_arrays(path, how))
    if not isinstance(state, dict) or not {"model", "optimizer", "scheduler"} <= set(state) \
            or not isinstance(state["model"], dict):
        raise PipelineError(f"{path} is not a checkpoint this project wrote; run without --resume")
    state["model"] = {k: v for k, v in state["model"].items() if k != "StructuredToParameterName@@"}
    return state


def load_paddle_checkpoint(path, how: str) -> dict:
    """read_paddle_checkpoint with the arrays turned into Paddle tensors, as paddle.load does."""
    import paddle
    state = read_paddle_checkpoint(path, how)

    def tensors(obj):
        if isinstance(obj, np.ndarray):
            return paddle.to_tensor(obj)
        if isinstance(obj, dict):
            return {k: tensors(v) for k, v in obj.items()}
        return obj
    return {"model": tensors(state["model"]), "optimizer": tensors(state["optimizer"]),
            "scheduler": state["scheduler"]}


def torch_model(head=True, **config_overrides):
    """pt_bert BertForSequenceClassification (head=True) or BertModel, weights loaded strictly."""
    from models import pt_bert

    config = load_config(**config_overrides)
    model = pt_bert.BertForSequenceClassification(config) if head else pt_bert.BertModel(config)
    body = load_torch_tensors(paths.torch_weight(), EXPORT)
    state = {("bert." + k if head else k): v for k, v in body.items()}
    if head:
        state.update(load_torch_tensors(paths.classifier_torch(), HEAD))
    strict_check({k: v.shape for k, v in model.state_dict().items()},
                 {k: v.shape for k, v in state.items()}, str(paths.torch_weight()))
    model.load_state_dict(state, strict=True)
    return model


def paddle_model(head=True, **config_overrides):
    """pd_bert BertForSequenceClassification (head=True) or BertModel, weights loaded strictly."""
    from models import pd_bert

    config = load_config(**config_overrides)
    model = pd_bert.BertForSequenceClassification(config) if head else pd_bert.BertModel(config)
    body = load_paddle_arrays(paths.paddle_weight(), CONVERT)
    state = {("bert." + k if head else k): v for k, v in body.items()}
    if head:
        state.update(load_paddle_arrays(paths.classifier_paddle(), HEAD))
    strict_check({k: v.shape for k, v in model.state_dict().items()},
                 {k: v.shape for k, v in state.items()}, str(paths.paddle_weight()))
    model.set_state_dict(state)
    return model


def paddle_linear_weights(model) -> set:
    """Names of nn.Linear weights, stored [in, out] by Paddle. Decided by module type, not by name or
    shape: a square weight (query, key, value, attention output, pooler) fits either layout."""
    import paddle
    return {f"{prefix}.weight" for prefix, layer in model.named_sublayers() if isinstance(layer, paddle.nn.Linear)}


def torch_fingerprint(model) -> str:
    """sha256 of every parameter as the model holds it now (record.fingerprint)."""
    return record.fingerprint((n, v.detach().cpu().numpy()) for n, v in model.state_dict().items())


def paddle_fingerprint(model) -> str:
    """The same fingerprint as torch_fingerprint gives the torch model a Paddle model was converted from:
    Linear weights are hashed in torch's [out, in] layout."""
    linear = paddle_linear_weights(model)
    return record.fingerprint((n, v.numpy().T if n in linear else v.numpy()) for n, v in model.state_dict().items())
