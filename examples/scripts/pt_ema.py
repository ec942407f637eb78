"""Train a small classifier with PyTorch, keeping an exponential moving average (EMA) of its weights, which is the
model it evaluates: the kind of script a user ports to Paddle.

    python examples/scripts/pt_ema.py --decay 0.999

It does not import portcheck: `python -m portcheck run --torch "python pt_ema.py" --paddle "python pd_ema.py"`
checks it, the EMA copy too, against its Paddle port (pd_ema.py) as it is.
"""
import argparse
import copy

import numpy as np
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, features, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--decay", type=float, default=0.999)
    args = ap.parse_args()
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    x = rng.randn(256, 8).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1)

    model = Net(8, 32, 3)
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    for step in range(args.steps):
        start = step * args.batch_size % len(x)
        xb, yb = torch.from_numpy(x[start:start + args.batch_size]), torch.from_numpy(y[start:start + args.batch_size])
        loss = criterion(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(args.decay).add_(p, alpha=1 - args.decay)
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    with torch.no_grad():
        print(f"ema acc {(ema(torch.from_numpy(x)).argmax(-1).numpy() == y).mean():.4f}")


if __name__ == "__main__":
    main()
