"""The guide's value pairs (Steps 2 and 3): a loss, a metric and a loader's batches, each side computing or recording
its own as a user's script does, the pair handed in and judged as the hand-in judges it."""
import numpy as np
import paddle
import torch

from portcheck import record_value
from portcheck.forward.twin import F64
from tools.zoo.checks.judging import folder, merged, pair_judgement
from tools.zoo.checks.tiny import mlp, seeded_pair, wine


def loss_fn(side, spec):
    """A loss as each framework's functional API takes it; spec: (function name, keyword arguments, what the
    output goes through first, the dtype it is computed in, what the value is divided by)."""
    F = torch.nn.functional if side == "torch" else paddle.nn.functional
    name, kwargs, first, dtype, divide = spec
    tensor = torch.tensor if side == "torch" else paddle.to_tensor
    kwargs = {k: tensor(np.asarray(v, dtype)) if isinstance(v, list) else v for k, v in kwargs.items()}

    def cast(t):
        return t.to(getattr(torch, dtype)) if side == "torch" else t.astype(dtype)

    def fn(out, target):
        out = cast(out)
        if first == "log_softmax":
            out = F.log_softmax(out, -1)
        elif first == "softmax":
            out = F.softmax(out, -1)
        elif first == "sigmoid":
            out = F.sigmoid(out)
        if target.dtype not in (torch.int64, paddle.int64):
            target = cast(target)
        return getattr(F, name)(out, target, **kwargs) / divide
    return fn


def loss(case, plant) -> list:
    """The guide's Step 3: each side's loss on a small model's output and the same targets (record_value),
    the loss pair handed in and judged by the measured rule."""
    rng = np.random.RandomState(0)
    x = rng.randn(16, 6).astype("float32")
    classes = 5
    target = case["target"]
    if target == "classes":
        y = rng.randint(0, classes, 16).astype("int64")
        if case.get("ignored"):
            y[::4] = case["ignored"]
    elif target == "probabilities":
        y = rng.dirichlet(np.ones(classes), 16).astype("float32")
    elif target == "counts":  # Poisson targets
        y = rng.poisson(2.0, (16, classes)).astype("float32")
    else:  # values (regression, or 0/1 labels for BCE)
        y = (rng.rand(16, classes) > 0.5).astype("float32") if target == "binary" else \
            rng.randn(16, classes).astype("float32")
    dtype = case["dtype"]
    t_spec = (case["torch"][0], case["torch"][1], case.get("first"), dtype, 1.0)
    p_spec = ((plant or {}).get("paddle_name", case["paddle"][0]), merged(case["paddle"][1], plant, "paddle"),
              (plant or {}).get("first", case.get("first")), dtype,
              (plant or {}).get("divide", case.get("divide", 1.0)))
    pt, pd = seeded_pair(lambda side: mlp(side, (6, 12, classes)), x)
    t_fn, p_fn = loss_fn("torch", t_spec), loss_fn("paddle", p_spec)
    t = record_value(pt.eval(), x, lambda out: t_fn(out, torch.from_numpy(y)))
    p = record_value(pd.eval(), x, lambda out: p_fn(out, paddle.to_tensor(y)))
    with folder() as f:
        return [pair_judgement(f, "loss", {"loss": t["value"]}, {"loss": p["value"]}, 3,
                               exact={"loss": t[F64 + "value"]})]


def _tensor_ops(side):
    if side == "torch":
        return dict(eq=lambda a, b: a == b, f=lambda t, d: t.to(getattr(torch, d)), stack=torch.stack,
                    sum=lambda t: t.sum(), mean=lambda t: t.mean(), sqrt=torch.sqrt)
    return dict(eq=lambda a, b: a == b, f=lambda t, d: t.astype(d), stack=paddle.stack,
                sum=lambda t: t.sum(), mean=lambda t: t.mean(), sqrt=paddle.sqrt)


def metric_fn(side, name, dtype, classes):
    """Each framework's own tensor code for a metric, computed in `dtype` (the way a user writes it in the
    framework the training runs in)."""
    o = _tensor_ops(side)

    def counts(p, y):
        tp, fp, fn = [], [], []
        for c in range(classes):
            pc, yc = o["f"](o["eq"](p, c), dtype), o["f"](o["eq"](y, c), dtype)
            tp.append(o["sum"](pc * yc))
            fp.append(o["sum"](pc * (1 - yc)))
            fn.append(o["sum"]((1 - pc) * yc))
        return o["stack"](tp), o["stack"](fp), o["stack"](fn)

    def f1(p, y, average):
        tp, fp, fn = counts(p, y)
        if average == "micro":
            return 2 * o["sum"](tp) / (2 * o["sum"](tp) + o["sum"](fp) + o["sum"](fn))
        per_class = 2 * tp / (2 * tp + fp + fn)
        if average == "weighted":
            support = tp + fn
            return o["sum"](per_class * support) / o["sum"](support)
        return o["mean"](per_class)

    def precision(p, y, recall=False):
        tp, fp, fn = counts(p, y)
        return o["mean"](tp / (tp + (fn if recall else fp)))

    def mcc(scores, y, at_half=True):
        """Matthews' correlation of the thresholded scores with the labels."""
        p = o["f"]((scores >= 0.5) if at_half else (scores > 0.5), dtype)
        t = o["f"](o["eq"](y, 1), dtype)
        tp, tn, fp, fn = (o["sum"](a * b) for a, b in ((p, t), (1 - p, 1 - t), (p, 1 - t), (1 - p, t)))
        return (tp * tn - fp * fn) / o["sqrt"]((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))

    def accuracy(scores, y, at_half=True):
        p = o["f"]((scores >= 0.5) if at_half else (scores > 0.5), "int64")
        return o["mean"](o["f"](o["eq"](p, y), dtype))

    def auc(scores, y, ties=0.5):
        """The probability a positive outranks a negative, ties counted half (Mann-Whitney)."""
        s = o["f"](scores, dtype)
        pos, neg = o["f"](o["eq"](y, 1), dtype), o["f"](o["eq"](y, 0), dtype)
        greater = o["f"](s[:, None] > s[None, :], dtype) + ties * o["f"](s[:, None] == s[None, :], dtype)
        pairs = pos[:, None] * neg[None, :]
        return o["sum"](greater * pairs) / o["sum"](pairs)

    return {"accuracy": lambda p, y: accuracy(p, y), "accuracy >": lambda p, y: accuracy(p, y, False),
            "macro f1": lambda p, y: f1(p, y, "macro"), "micro f1": lambda p, y: f1(p, y, "micro"),
            "weighted f1": lambda p, y: f1(p, y, "weighted"), "auc": auc,
            "auc, ties as 0": lambda p, y: auc(p, y, 0.0), "macro precision": precision,
            "macro recall": lambda p, y: precision(p, y, True), "mcc": mcc, "mcc >": lambda p, y: mcc(p, y, False)}[name]


def metric(case, plant) -> list:
    """The guide's Step 2 metric pair on real imperfect predictions: a nearest-centroid classifier on sklearn's
    digits (10 classes) or its binary scores (digit 0 or not; rounded to 0.05 so that ties occur), each side
    computing the metric on its own tensors (portcheck.pipeline.data.record_metric), judged exactly."""
    from portcheck.pipeline import data
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    order = np.random.RandomState(case.get("seed", 0)).permutation(len(y))
    train, test = order[:1000], order[1000:]
    centroids = np.stack([x[train][y[train] == c].mean(0) for c in range(10)])
    distances = ((x[test, None] - centroids[None]) ** 2).sum(-1)
    if case["input"] == "scores":
        # a score rounded to one decimal, as a calibrated model's reported scores are: some are exactly 0.5
        predictions = np.round(1 / (1 + np.exp(distances[:, 0] / 100 - distances[:, 1:].min(1) / 100)) * 10) / 10
        predictions, labels = predictions.astype(case["dtype"]), (y[test] == 0).astype("int64")
    else:
        predictions, labels = distances.argmin(1).astype("int64"), y[test].astype("int64")
    name_t, name_p = case["torch"], (plant or {}).get("paddle", case["paddle"])
    t = data.record_metric(metric_fn("torch", name_t, case["dtype"], 10), predictions, labels, framework="torch")
    p = data.record_metric(metric_fn("paddle", name_p, case["dtype"], 10), predictions, labels, framework="paddle")
    with folder() as f:
        return [pair_judgement(f, "metric", t, p, 2)]


def loader(side, settings, x, y):
    """side's own Dataset and DataLoader over (x, y): a seeded order (a Sampler of the user's), shuffle,
    drop_last and a collate function that pads each sample's features (cut to a length of its own) as a
    sequence batch would be."""
    io = torch.utils.data if side == "torch" else paddle.io
    lengths = 5 + np.arange(len(y)) % 9
    pad = settings.get("pad", 0.0)

    class Samples(io.Dataset):
        def __len__(self):
            return len(y)

        def __getitem__(self, i):
            return x[i, :lengths[i]] if "collate" in settings else x[i], y[i]

    def collate(batch):  # pads to the longest sample of the batch, as a tokenizer's pad does
        width = max(len(f) for f, _ in batch)
        features = np.full((len(batch), width), pad, "float32")
        for row, (f, _) in enumerate(batch):
            features[row, :len(f)] = f
        tensor = torch.from_numpy if side == "torch" else paddle.to_tensor
        return tensor(features), tensor(np.array([label for _, label in batch]))

    class Order(io.Sampler):  # the user's sampler: samples sorted by their first feature (a bucketing order)
        def __init__(self, descending=False):
            self.order = np.argsort(x[:, 0], kind="stable")[::-1 if descending else 1]

        def __iter__(self):
            return iter(self.order.tolist())

        def __len__(self):
            return len(self.order)

    kw = {"batch_size": 16, "drop_last": settings.get("drop_last", False),
          "collate_fn": collate if "collate" in settings else None}
    if settings.get("shuffle"):
        kw["shuffle"] = True
    if settings.get("sampler"):
        sampler = Order(settings["sampler"] == "descending")
        if side == "torch":
            kw["sampler"] = sampler
        else:  # Paddle takes a sampler through its batch sampler
            kw = {"batch_sampler": paddle.io.BatchSampler(sampler=sampler, batch_size=16,
                                                          drop_last=kw["drop_last"]), "collate_fn": kw["collate_fn"]}
    return io.DataLoader(Samples(), **kw)


def loaders(case, plant) -> list:
    """The guide's Step 2 data pair: each side's loader recorded as the README's block does
    (data.record_batches(loader, batches=case's), every batch when None), judged exactly."""
    from portcheck.pipeline import data
    x, y = wine()
    if case.get("torch", {}).get("shuffle"):  # shuffled on both sides: each framework's own seeded generator
        torch.manual_seed(0)
        paddle.seed(0)
    t = data.record_batches(loader("torch", case["torch"], x, y), batches=case.get("batches"),
                            names=("features", "labels"))
    p = data.record_batches(loader("paddle", merged(case["paddle"], plant, "paddle"), x, y),
                            batches=case.get("batches"), names=("features", "labels"))
    with folder() as f:
        return [pair_judgement(f, "data", t, p, 2)]
