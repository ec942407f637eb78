"""Train a small CNN on random images with AdamW over three parameter groups (the convolution at twice the lr, the
matrices decayed, the biases not), a warmup-cosine LambdaLR and gradient clipping: a script as people write them.

    python pt_groups.py --steps 12
"""
import argparse
import math

import numpy as np
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, channels=2, width=8, classes=3):
        super().__init__()
        self.conv = nn.Conv2d(channels, 4, 3, padding=1)
        self.act = nn.ReLU()
        self.fc1 = nn.Linear(4 * 6 * 6, width)
        self.fc2 = nn.Linear(width, width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        h = self.act(self.conv(x)).flatten(1)
        h = torch.tanh(self.fc1(h))
        h = torch.tanh(self.fc2(h))
        return self.head(h)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--clip", type=float, default=0.5)
    args = ap.parse_args()
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    x = rng.randn(64, 2, 6, 6).astype(np.float32)
    y = rng.randint(0, 3, 64).astype(np.int64)

    model = Net()
    conv = list(model.conv.parameters())
    matrices = [p for n, p in model.named_parameters() if p.ndim == 2]
    biases = [p for n, p in model.named_parameters() if p.ndim == 1 and not n.startswith("conv")]
    optimizer = torch.optim.AdamW([{"params": conv, "lr": 2 * args.lr, "weight_decay": 0.01},
                                   {"params": matrices, "weight_decay": 0.05},
                                   {"params": biases, "weight_decay": 0.0}], lr=args.lr)
    warmup = 2

    def schedule(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (args.steps - warmup)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    criterion = nn.CrossEntropyLoss()
    model.train()
    for step in range(args.steps):
        start = step * args.batch_size % len(x)
        xb = torch.from_numpy(x[start:start + args.batch_size])
        yb = torch.from_numpy(y[start:start + args.batch_size])
        loss = criterion(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        scheduler.step()
        if step % 4 == 0:
            print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.6f}")


if __name__ == "__main__":
    main()
