"""The small pair docs/own_model.md's blocks take through the guide's five steps: each framework's own code for one
task, as a port holds it, written once per framework under other module names.

The data: scikit-learn's breast-cancer set (569 samples, 30 features, two classes; bundled, read offline), split
once by a fixed permutation, standardized by the training split's statistics inside each framework's own Dataset.
The model: a small MLP (Linear, BatchNorm1d, GELU, Dropout off, Linear). The loss: cross-entropy with class
weights. The optimizer: momentum SGD with weight decay on a cosine schedule. The metric: accuracy and macro F1.
Needs numpy, torch, paddlepaddle and scikit-learn. tests/test_five_steps.py plants a bug at each step on this pair.
"""
import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch and Paddle load)
import numpy as np
import paddle
import torch
from sklearn.datasets import load_breast_cancer

from portcheck.pipeline import data

FEATURES, LABELS = (a.astype(t) for a, t in zip(load_breast_cancer(return_X_y=True), ("float32", "int64")))
SPLIT = np.random.RandomState(0).permutation(len(LABELS))
TRAIN, TEST = SPLIT[:384], SPLIT[384:]        # 12 batches of 32; 185 test samples
STATS = FEATURES[TRAIN].mean(0), FEATURES[TRAIN].std(0)      # the training split's, float32
CLASS_WEIGHTS = (len(TRAIN) / (2 * np.bincount(LABELS[TRAIN]))).astype("float32")  # the classes are 37% / 63%
HP = {"epochs": 4, "batch": 32, "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3, "bp_steps": 4, "order_seed": 1}
ORDERS = [TRAIN[np.random.RandomState(HP["order_seed"] + e).permutation(len(TRAIN))] for e in range(HP["epochs"])]
SEEDS = {"split": 0, "order": HP["order_seed"], "weights": 0}


def dataloader(side, indices, stats=STATS, batch=HP["batch"]):
    """side's DataLoader over the samples at `indices`, in that order (no shuffle), standardized in that framework."""
    tensor = torch.from_numpy if side == "torch" else paddle.to_tensor
    mean, std = (np.asarray(s, "float32") for s in stats)
    io = torch.utils.data if side == "torch" else paddle.io

    class Samples(io.Dataset):
        def __len__(self):
            return len(indices)

        def __getitem__(self, i):
            return (tensor(FEATURES[indices[i]]) - tensor(mean)) / tensor(std), int(LABELS[indices[i]])
    return io.DataLoader(Samples(), batch_size=batch, shuffle=False)


def first_batch():
    """(features, labels) of the first epoch's first batch, as numpy arrays: Steps 1, 3 and 4 run on it."""
    features, labels = next(iter(dataloader("torch", ORDERS[0])))
    return features.numpy(), labels.numpy()


def torch_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(30, 32), torch.nn.BatchNorm1d(32), torch.nn.GELU(),
                               torch.nn.Dropout(0.0), torch.nn.Linear(32, 2))


class PaddleNet(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.hidden, self.norm = paddle.nn.Linear(30, 32), paddle.nn.BatchNorm1D(32)
        self.act, self.drop = paddle.nn.GELU(), paddle.nn.Dropout(0.0)
        self.head = paddle.nn.Linear(32, 2)

    def forward(self, x):
        return self.head(self.drop(self.act(self.norm(self.hidden(x)))))


def cross_entropy(side):
    """Cross-entropy with class weights. torch's: the weights in the output's dtype, as the float64 run (the
    measured rule's yardstick) calls it on float64 outputs too."""
    if side == "torch":
        return lambda out, y: torch.nn.functional.cross_entropy(out, y, torch.from_numpy(CLASS_WEIGHTS).to(out.dtype))
    weight = paddle.to_tensor(CLASS_WEIGHTS)
    return lambda out, y: paddle.nn.functional.cross_entropy(out, y, weight=weight)


def scores(predictions, labels, average="macro", classes=2):
    """Accuracy and F1 for either framework's tensors: macro F1 (per class, then the mean) or micro (pooled)."""
    tp, fp, fn = [], [], []
    for c in range(classes):
        p, y = predictions == c, labels == c
        tp.append(int((p & y).sum()))
        fp.append(int((p & ~y).sum()))
        fn.append(int((~p & y).sum()))
    if average == "micro":
        f1 = 2 * sum(tp) / (2 * sum(tp) + sum(fp) + sum(fn))
    else:
        f1 = sum(2 * a / (2 * a + b + c) for a, b, c in zip(tp, fp, fn)) / classes
    return {"accuracy": int((predictions == labels).sum()) / len(labels), "f1": f1}


def optimizer(side, steps):
    """(optimizer factory, scheduler factory), as record_backward takes them: momentum SGD with weight decay and a
    cosine schedule over `steps`; Paddle's Momentum with an L2Decay, the schedule its learning rate."""
    if side == "torch":
        return (lambda params: torch.optim.SGD(params, lr=HP["lr"], momentum=HP["momentum"],
                                               weight_decay=HP["weight_decay"]),
                lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps))
    return (lambda params: paddle.optimizer.Momentum(
                learning_rate=paddle.optimizer.lr.CosineAnnealingDecay(HP["lr"], steps), momentum=HP["momentum"],
                parameters=params, weight_decay=paddle.regularizer.L2Decay(HP["weight_decay"])),
            lambda opt: opt._learning_rate)


def centroid_predictions():
    """(predictions, labels) of a nearest-centroid classifier on the test split, fitted on the standardized training
    split: real and imperfect, the errors spread unevenly over the two classes (so macro and micro F1 differ)."""
    x = (FEATURES.astype(np.float64) - STATS[0]) / STATS[1]
    centroids = np.stack([x[TRAIN][LABELS[TRAIN] == c].mean(0) for c in range(2)])
    return ((x[TEST, None] - centroids[None]) ** 2).sum(-1).argmin(1).astype("int64"), LABELS[TEST]


def evaluate(side, model):
    """{"accuracy": .., "f1": ..} of `model` on the test split, in one batch, without gradients."""
    with (torch.no_grad if side == "torch" else paddle.no_grad)():
        features, labels = next(data.each_batch(dataloader(side, TEST, batch=len(TEST))))  # its reader shut
        return scores(model(features).argmax(-1), labels)
