"""What both sides of the ResNet-18 example share: the two models, the one fact a port of them writes (the
name map), the fake batch, the training settings and the files. Each builder imports only its own framework.

transformers' ResNetForImageClassification and paddle.vision's resnet18 are the same network under other
names; RESNET_MAP pairs them (portcheck.names.resolve's regex-rule form). It is optional: with no map, portcheck.pairing
finds the same pairs from a run (tests/test_pairing.py); the scripts keep it as the example of writing one.
"""
import os
from pathlib import Path

import numpy as np

from portcheck import fileio, record
from portcheck.errors import PipelineError

ROOT = Path(__file__).resolve().parents[2]  # the repository the example's scripts run from
FOLDER = "examples/resnet18"
CLASSES = 10
BATCH, SIDE = 8, 64              # small images; batch statistics over at least 8 x 2 x 2 values per channel
SEED = 0        # the weights
# The fake batch. Seed 0 puts one input of layer4.1's first ReLU at -1.9e-6, within rounding of the ReLU's kink:
# Paddle's lands on the other side, and bn1.bias's gradient differs by 3.96e-4 in that one channel (26531 x torch's
# own fp32 error); the check names the gradient and the kink. A kink is not smooth, so no tolerance covers it: a
# port meeting one takes another batch. Seeds 1 and 2 are clean at one thread and at two (README.md).
DATA_SEED = 2
# Step 4: momentum SGD with weight decay and a step schedule, as ResNets are trained
LR, MOMENTUM, WEIGHT_DECAY, STEP_SIZE, GAMMA, STEPS = 0.01, 0.9, 1e-4, 2, 0.5, 5
HPARAMS = {"lr": LR, "momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY, "step_size": STEP_SIZE, "gamma": GAMMA,
           "steps": STEPS}

EXPORT = f"python {FOLDER}/export_weights.py"
CONVERT = f"python {FOLDER}/convert_weights.py"


def _stage(m):
    return f"layer{int(m.group(1)) + 1}.{m.group(2)}"


# transformers' module names -> paddle.vision's
RESNET_MAP = [
    (r"^resnet\.embedder\.embedder\.convolution$", "conv1"), (r"^resnet\.embedder\.embedder\.normalization$", "bn1"),
    (r"^resnet\.embedder\.pooler$", "maxpool"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)\.shortcut\.convolution$", lambda m: _stage(m) + ".downsample.0"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)\.shortcut\.normalization$", lambda m: _stage(m) + ".downsample.1"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)\.layer\.(\d)\.convolution$",
     lambda m: f"{_stage(m)}.conv{int(m.group(3)) + 1}"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)\.layer\.(\d)\.normalization$",
     lambda m: f"{_stage(m)}.bn{int(m.group(3)) + 1}"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)$", _stage),
    (r"^resnet\.pooler$", "avgpool"), (r"^classifier\.1$", "fc"),
]


def work() -> Path:
    """Where generated files go: the repository, or BERT_ALIGN_HOME (the repository's one such variable)."""
    return Path(os.environ.get("BERT_ALIGN_HOME", ROOT)).resolve()


def shown(path) -> str:
    return fileio.shown(path, work(), ROOT)


def folder():
    return work() / FOLDER


def step_dir(n: int):
    return folder() / f"Step{n}"


def torch_weight():
    return folder() / "weights" / "torch_resnet18.bin"


def paddle_weight():
    return folder() / "weights" / "paddle_resnet18.pdparams"


def log_reprod():
    return folder() / "log_reprod"


def fake_batch():
    """(images float32 [BATCH, 3, SIDE, SIDE], labels int64 [BATCH]), the same on every run."""
    rng = np.random.RandomState(DATA_SEED)
    return rng.randn(BATCH, 3, SIDE, SIDE).astype("float32"), rng.randint(0, CLASSES, BATCH).astype("int64")


def inputs_fingerprint() -> str:
    images, labels = fake_batch()
    return record.fingerprint([("images", images), ("labels", labels)])


def new_torch_model():
    """transformers' ResNet-18 with seeded random weights; BatchNorm's statistics and affine terms drawn as a
    trained model would have them, so eval mode uses them (fresh ones are 0 and 1: a wrong one would hide).
    Gains below 1 keep activations from growing block after block, as a trained ResNet's do: with gains up to
    1.5 the logits reach 5.4 and two correct fp32 runs differ by 9.8e-7 in mean, at the guide's 1e-6."""
    import torch
    from transformers import ResNetConfig, ResNetForImageClassification
    torch.manual_seed(SEED)
    model = ResNetForImageClassification(ResNetConfig(
        depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512], layer_type="basic",
        downsample_in_first_stage=False, num_labels=CLASSES))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1), m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.0), m.bias.uniform_(-0.1, 0.1)
    return model


def torch_model():
    """(transformers' ResNet-18 holding the exported weights, their fingerprint): every key and shape checked."""
    import torch
    from portcheck.weights import check_arrays, load_torch_tensors, strict_check
    model = new_torch_model()
    state = load_torch_tensors(torch_weight(), EXPORT)
    check_arrays({k: v for k, v in state.items() if v.dtype == torch.float32}, torch_weight(), EXPORT)
    strict_check({k: v.shape for k, v in model.state_dict().items()}, {k: v.shape for k, v in state.items()},
                 shown(torch_weight()))
    model.load_state_dict(state, strict=True)
    return model, record.state_fingerprint({k: v.numpy() for k, v in state.items()})


def paddle_model():
    """(paddle.vision's resnet18 holding the converted weights, the fingerprint of the torch weights they were
    converted from): every key and shape checked (Paddle's own set_state_dict only warns), the file read by
    the restricted unpickler and held to the record convert_weights.py wrote for it."""
    import paddle
    from portcheck.weights import check_arrays, load_paddle_arrays, strict_check
    model = paddle.vision.models.resnet18(num_classes=CLASSES)
    state = load_paddle_arrays(paddle_weight(), CONVERT)
    check_arrays({k: v for k, v in state.items() if v.dtype.kind == "f"}, paddle_weight(), CONVERT)
    strict_check({k: v.shape for k, v in model.state_dict().items()}, {k: v.shape for k, v in state.items()},
                 shown(paddle_weight()))
    made = record.load(paddle_weight())
    if made is None or made.get("result") != record.state_fingerprint(state) or "weights" not in made["depends"]:
        raise PipelineError(f"{shown(paddle_weight())} is not the file {CONVERT} wrote (its run record "
                            f"does not describe it): run `{CONVERT}` again")
    model.set_state_dict(state)
    return model, made["depends"]["weights"]


def torch_training():
    """Step 4's (loss, optimizer, scheduler) on the torch side, as align.record_backward takes them."""
    import torch
    return (lambda out, labels: torch.nn.functional.cross_entropy(out.logits, labels),
            lambda params: torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY),
            lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=STEP_SIZE, gamma=GAMMA))


def paddle_training():
    """The same on the Paddle side: torch's SGD(momentum, weight_decay) is Momentum with an L2Decay
    regularizer, StepLR is StepDecay, which the optimizer holds as its learning rate (the scheduler stepped)."""
    import paddle
    return (paddle.nn.functional.cross_entropy,
            lambda params: paddle.optimizer.Momentum(
                learning_rate=paddle.optimizer.lr.StepDecay(LR, step_size=STEP_SIZE, gamma=GAMMA), momentum=MOMENTUM,
                parameters=params, weight_decay=paddle.regularizer.L2Decay(WEIGHT_DECAY)),
            lambda opt: opt._learning_rate)


def depends(weights: str, **flags) -> dict:
    """What each side's run record binds: the torch weights' fingerprint (the Paddle side: those its weights
    were converted from), the inputs, and the flags."""
    return {"weights": weights, "inputs": inputs_fingerprint(), "flags": flags}
