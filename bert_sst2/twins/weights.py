"""Building the twin models from the exported weights, strictly, in either framework.

Paddle's set_state_dict only warns on a missing key or a shape mismatch, so every
load here goes through strict_check first. Each loader imports its own framework,
so a torch script never builds anything with Paddle and vice versa.
"""
import pickle
import re

import numpy as np

from portcheck import record

from bert_sst2 import paths
from portcheck.errors import PipelineError, first_line, remedy, require
from portcheck.fileio import load_pickled_arrays
from models.configuration_bert import BertConfig, read_vocab

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


def read_config(path, fix: str = "correct it (the fields are Hugging Face's BertConfig's)") -> BertConfig:
    try:
        return BertConfig.from_json(path)
    except ValueError as e:
        raise PipelineError(f"{e}; {fix}") from None


def load_config(**overrides) -> BertConfig:
    config = read_config(require(paths.model_config(), EXPORT), remedy(EXPORT, "again"))
    for k, v in overrides.items():
        setattr(config, k, v)
    return config


def check_vocab(path, config: BertConfig, how: str = EXPORT):
    """path, once read_vocab finds it usable by both tokenizers with this config."""
    try:
        read_vocab(require(path, how), config)
    except ValueError as e:
        raise PipelineError(f"{e}; {remedy(how, 'again')}") from None
    return path


def vocab() -> str:
    """The exported vocab.txt, checked against the exported config, as the tokenizers take it."""
    return str(check_vocab(paths.vocab(), load_config()))


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
        raise PipelineError(f"{path} is not a torch file this project wrote ({torch_reason(e)}); {fix}") from None


def load_torch_tensors(path, how: str) -> dict:
    """{name: torch.Tensor} from a torch.save'd dict (weights, heads)."""
    import torch
    path, state = _torch_load(path, how, remedy(how, "again"))
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise PipelineError(f"{path} is not a dict of tensors; {remedy(how, 'again')}")
    return state


def check_arrays(arrays: dict, path, how: str):
    """Weights this project wrote are float32 and finite; {name: numpy array or torch tensor}."""
    for name, value in arrays.items():
        dtype = str(value.dtype).removeprefix("torch.")  # before any conversion: numpy has no bfloat16
        problem = f"is {dtype}, not float32" if dtype != "float32" else \
            "holds NaN or Inf" if not np.isfinite(np.asarray(value)).all() else None
        if problem:
            raise PipelineError(f"{path}: {name} {problem}; {remedy(how, 'again')}")


def load_paddle_arrays(path, how: str) -> dict:
    """{name: numpy array} from a paddle.save'd .pdparams, unpickled by common.fileio's restricted
    unpickler (plain containers and numeric arrays only; paddle.load would run any pickled code)."""
    state = paddle_arrays(load_pickled_arrays(path, how))
    if not isinstance(state, dict):
        raise PipelineError(f"{path} is not a dict of arrays; {remedy(how, 'again')}")
    state.pop("StructuredToParameterName@@", None)  # paddle.save's name table: not a parameter
    if not all(isinstance(v, np.ndarray) for v in state.values()):
        raise PipelineError(f"{path} is not a dict of arrays; {remedy(how, 'again')}")
    return state


def load_torch_checkpoint(path, how: str, fix: str = "run without --resume") -> dict:
    """A Step 5 checkpoint ({"model", "optimizer", "scheduler"})."""
    path, state = _torch_load(path, how, fix)
    if not isinstance(state, dict) or not {"model", "optimizer", "scheduler"} <= set(state):
        raise PipelineError(f"{path} is not a checkpoint this project wrote; {fix}")
    return state


def paddle_arrays(obj):
    """paddle.save stores a tensor nested in a dict as a (name, ndarray) tuple (a top-level one as the
    ndarray): the plain arrays, as paddle.load would return them, without paddle.load."""
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str) and isinstance(obj[1], np.ndarray):
        return obj[1]
    if isinstance(obj, dict):
        return {k: paddle_arrays(v) for k, v in obj.items()}
    return obj


def read_paddle_checkpoint(path, how: str, fix: str = "run without --resume") -> dict:
    """A Step 5 .pdparams checkpoint as plain arrays, through the restricted unpickler (no paddle needed);
    the model's name table (StructuredToParameterName@@) left out."""
    state = paddle_arrays(load_pickled_arrays(path, how))
    if not isinstance(state, dict) or not {"model", "optimizer", "scheduler"} <= set(state) \
            or not isinstance(state["model"], dict):
        raise PipelineError(f"{path} is not a checkpoint this project wrote; {fix}")
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
    state = {}
    for path, how, prefix, is_head in _parts(head, paths.torch_weight(), EXPORT, paths.classifier_torch()):
        part = load_torch_tensors(path, how)
        check_arrays(part, path, how)
        state.update(_fit(model.state_dict(), part, prefix, is_head, path))
    model.load_state_dict(state, strict=True)
    return model


def _parts(head: bool, weights, how: str, classifier) -> list:
    """(file, the command that makes it, its keys' prefix in the model, is the head) of each file a model loads."""
    return [(weights, how, "bert." if head else "", False)] + ([(classifier, HEAD, "", True)] if head else [])


def _fit(model_state: dict, part: dict, prefix: str, is_head: bool, path) -> dict:
    """part's keys as the model names them, strictly checked against the model's keys of that file
    (the head's classifier.*, the body's the rest), so a problem is reported by the file that has it."""
    state = {prefix + k: v for k, v in part.items()}
    expected = {k: v.shape for k, v in model_state.items() if k.startswith("classifier.") == is_head}
    strict_check(expected, {k: v.shape for k, v in state.items()}, str(path))
    return state


def paddle_model(head=True, **config_overrides):
    """pd_bert BertForSequenceClassification (head=True) or BertModel, weights loaded strictly."""
    from models import pd_bert

    config = load_config(**config_overrides)
    model = pd_bert.BertForSequenceClassification(config) if head else pd_bert.BertModel(config)
    state = {}
    for path, how, prefix, is_head in _parts(head, paths.paddle_weight(), CONVERT, paths.classifier_paddle()):
        part = load_paddle_arrays(path, how)
        check_arrays(part, path, how)
        state.update(_fit(model.state_dict(), part, prefix, is_head, path))
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
