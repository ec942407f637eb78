"""Building the twin models from the exported weights, strictly, in either framework.

Paddle's set_state_dict only warns on a missing key or a shape mismatch, so every
load here goes through strict_check first. Each loader imports its own framework,
so a torch script never builds anything with Paddle and vice versa.
"""
from common import paths
from common.errors import PipelineError, require
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
    problems = [f"{label}: {', '.join(keys)}" for label, keys in
                (("missing", missing), ("unexpected", unexpected), ("shape mismatch", shapes)) if keys]
    if problems:
        raise PipelineError(f"{what} does not fit the model; " + "; ".join(problems))


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


def torch_model(head=True, **config_overrides):
    """pt_bert BertForSequenceClassification (head=True) or BertModel, weights loaded strictly."""
    import torch
    from models import pt_bert

    config = load_config(**config_overrides)
    model = pt_bert.BertForSequenceClassification(config) if head else pt_bert.BertModel(config)
    body = torch.load(require(paths.torch_weight(), EXPORT), map_location="cpu", weights_only=True)
    state = {("bert." + k if head else k): v for k, v in body.items()}
    if head:
        state.update(torch.load(require(paths.classifier_torch(), HEAD), map_location="cpu", weights_only=True))
    strict_check({k: v.shape for k, v in model.state_dict().items()},
                 {k: v.shape for k, v in state.items()}, str(paths.torch_weight()))
    model.load_state_dict(state, strict=True)
    return model


def paddle_model(head=True, **config_overrides):
    """pd_bert BertForSequenceClassification (head=True) or BertModel, weights loaded strictly."""
    import paddle
    from models import pd_bert

    config = load_config(**config_overrides)
    model = pd_bert.BertForSequenceClassification(config) if head else pd_bert.BertModel(config)
    body = paddle.load(str(require(paths.paddle_weight(), CONVERT)))
    state = {("bert." + k if head else k): v for k, v in body.items()}
    if head:
        state.update(paddle.load(str(require(paths.classifier_paddle(), HEAD))))
    strict_check({k: v.shape for k, v in model.state_dict().items()},
                 {k: v.shape for k, v in state.items()}, str(paths.paddle_weight()))
    model.set_state_dict(state)
    return model
