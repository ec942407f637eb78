"""Train a small regression MLP on random data with AdamW (torch's default weight decay), a schedule chosen by
--sched (ReduceLROnPlateau on the validation loss, MultiStepLR or OneCycleLR) and an EMA of the weights, which is
the model it evaluates: a script as people write them.

    python pt_plateau.py --sched plateau --epochs 4
"""
import argparse
import copy

import numpy as np
import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self, features=6, hidden=16, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Dropout(dropout),
                                 nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sched", choices=("plateau", "multistep", "onecycle"), default="plateau")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.03)
    ap.add_argument("--decay", type=float, default=0.9)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--head-bias", type=float, help="the head's initial bias (default: the layer's own init)")
    args = ap.parse_args()
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    x = rng.randn(96, 6).astype(np.float32)
    y = (x @ rng.randn(6).astype(np.float32) + 0.1 * rng.randn(96).astype(np.float32)).astype(np.float32)
    x_val, y_val = torch.from_numpy(x[64:]), torch.from_numpy(y[64:])
    x, y = x[:64], y[:64]
    steps_per_epoch = len(x) // args.batch_size

    model = Regressor(dropout=args.dropout)
    if args.head_bias is not None:
        with torch.no_grad():
            model.net[-1].bias.fill_(args.head_bias)
    ema = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    if args.sched == "plateau":
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=0)
    elif args.sched == "multistep":
        scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.5)
    else:
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr,
                                                        total_steps=args.epochs * steps_per_epoch)
    criterion = nn.MSELoss()
    for epoch in range(args.epochs):
        model.train()
        order = np.random.RandomState(epoch).permutation(len(x))
        for i in range(steps_per_epoch):
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            xb, yb = torch.from_numpy(x[idx]), torch.from_numpy(y[idx])
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.sched == "onecycle":
                scheduler.step()
            with torch.no_grad():
                for e, p in zip(ema.parameters(), model.parameters()):
                    e.copy_(args.decay * e + (1 - args.decay) * p)
        ema.eval()
        with torch.no_grad():
            val = criterion(ema(x_val), y_val).item()
        if args.sched == "plateau":
            scheduler.step(val)
        elif args.sched == "multistep":
            scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.4f} val_loss {val:.4f} acc {1.0 / (1.0 + val):.4f}")


if __name__ == "__main__":
    main()
