"""Building the twin models from the exported weights, strictly, in either framework.

Paddle's set_state_dict only warns on a missing key or a shape mismatch, so every
load here goes through strict_check first. Each loader imports its own framework,
so a torch script never builds anything with Paddle and vice versa.
"""
import numpy as np

from bert_sst2 import paths
from models.configuration_bert import BertConfig, read_vocab
from portcheck.core import record
from portcheck.core.errors import PipelineError, remedy, require
from portcheck.core.fileio import load_pickled_arrays
from portcheck.mapping.weights import (_torch_load, check_arrays, load_paddle_arrays, load_torch_tensors,  # noqa: F401
                               paddle_arrays, strict_check, strict_state)

EXPORT = "python weights/torch_bert_weights.py"
CONVERT = "python weights/torch2paddle.py"
HEAD = "python classifier_weights/generate_classifier_weights.py"


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


def load_torch_checkpoint(path, how: str, fix: str = "run without --resume") -> dict:
    """A Step 5 checkpoint ({"model", "optimizer", "scheduler"})."""
    path, state = _torch_load(path, how, fix)
    if not isinstance(state, dict) or not {"model", "optimizer", "scheduler"} <= set(state):
        raise PipelineError(f"{path} is not a checkpoint this project wrote; {fix}")
    return state


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
    """sha256 of every parameter as the model holds it now (portcheck.record.model_fingerprint)."""
    return record.model_fingerprint(model)


def paddle_fingerprint(model) -> str:
    """The same fingerprint as torch_fingerprint gives the torch model a Paddle twin was converted from."""
    return record.model_fingerprint(model)
