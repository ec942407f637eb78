"""Train a small classifier on scikit-learn's wine data with PyTorch: the kind of script a user ports to Paddle.

    python examples/scripts/pt_train.py --epochs 30 --lr 3e-3

It does not import portcheck: `python -m portcheck run --torch "python pt_train.py" --paddle "python pd_train.py"`
checks it against its Paddle port (pd_train.py) as it is.
"""
import argparse
import math
import random

import numpy as np
import torch
from sklearn.datasets import load_wine
from torch import nn


class Net(nn.Module):
    def __init__(self, features, hidden, classes, dropout):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.bn1 = nn.BatchNorm1d(hidden)
        self.act = nn.GELU()
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        x = self.drop(self.act(self.bn1(self.fc1(x))))
        x = self.drop(self.act(self.norm(self.fc2(x))))
        return self.head(x)


def batches(x, y, batch_size, shuffle, seed):
    order = np.random.RandomState(seed).permutation(len(x)) if shuffle else np.arange(len(x))
    for start in range(0, len(x), batch_size):
        idx = order[start:start + batch_size]
        yield torch.from_numpy(x[idx]), torch.from_numpy(y[idx])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    data = load_wine()
    x, y = data.data.astype(np.float32), data.target.astype(np.int64)
    split = np.random.RandomState(args.seed).permutation(len(x))
    train, test = split[:140], split[140:]
    mean, std = x[train].mean(0), x[train].std(0)
    x = (x - mean) / std

    model = Net(x.shape[1], 64, 3, dropout=0.1)
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if not (n.endswith("weight") and p.ndim > 1)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, eps=1e-8)
    steps = args.epochs * math.ceil(len(train) / args.batch_size)
    warmup = lambda s: (s + 1) / args.warmup if s < args.warmup else \
        0.5 * (1 + math.cos(math.pi * (s - args.warmup) / max(1, steps - args.warmup)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    step = 0
    for epoch in range(args.epochs):
        model.train()
        for xb, yb in batches(x[train], y[train], args.batch_size, True, args.seed + epoch):
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
            optimizer.step()
            scheduler.step()
            step += 1
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.6f}")
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(xb).argmax(-1) == yb).sum())
                          for xb, yb in batches(x[test], y[test], 64, False, 0))
        print(f"epoch {epoch} acc {correct / len(test):.4f}")


if __name__ == "__main__":
    main()
