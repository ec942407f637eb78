"""A small token classifier trained with PyTorch in one process: the model pd_tp.py splits across two ranks.

    python examples/scripts/pt_tp.py --steps 20

`python -m portcheck run --torch "python pt_tp.py" --paddle "python -m paddle.distributed.launch --nproc_per_node 2
pd_tp.py"` judges its Paddle port, split in tensor parallel, against this one process.
"""
import argparse

import numpy as np
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, vocab=32, hidden=16, ffn=48, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.up = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.down = nn.Linear(ffn, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, ids):
        h = self.embed(ids)
        h = self.norm(h + self.down(self.act(self.up(h))))
        return self.head(h.mean(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-2)
    args = ap.parse_args()
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    ids = rng.randint(0, 32, size=(256, 6))
    labels = ids[:, 0] % 3
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()
    for step in range(args.steps):
        start = step * args.batch_size % len(ids)
        idx = slice(start, start + args.batch_size)
        loss = criterion(model(torch.from_numpy(ids[idx])), torch.from_numpy(labels[idx]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
