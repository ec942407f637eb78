"""A wine classifier in torch, written as users write one: a shuffled DataLoader, gradient accumulation, an
auxiliary loss.

tests/test_run_loaders.py checks it against pd_wine.py with `python -m portcheck run`."""
import argparse

import torch
from sklearn.datasets import load_wine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--aux", type=float, default=0.1, help="the auxiliary loss's weight")
parser.add_argument("--workers", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(0)
x, y = load_wine(return_X_y=True)
x = (x - x.mean(0)) / x.std(0)
data = TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)

model = nn.Sequential(nn.Linear(13, 32), nn.Tanh(), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
loss_fn = nn.CrossEntropyLoss()
brier = nn.MSELoss()  # an auxiliary loss: the Brier score of the predicted probabilities

for epoch in range(args.epochs):
    for i, (xb, yb) in enumerate(loader):
        out = model(xb)
        loss = loss_fn(out, yb)
        loss = (loss + args.aux * brier(out.softmax(-1), nn.functional.one_hot(yb, 3).float())) / args.accum
        loss.backward()
        if (i + 1) % args.accum == 0:
            opt.step()
            opt.zero_grad()
    print(f"epoch {epoch} loss {loss.item() * args.accum:.4f}")
