"""pt_wine.py's Paddle port: a shuffled DataLoader, gradient accumulation, an auxiliary loss."""
import argparse

import numpy as np
import paddle
from paddle import nn
from paddle.io import DataLoader, Dataset
from sklearn.datasets import load_wine

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--aux", type=float, default=0.1, help="the auxiliary loss's weight")
args = parser.parse_args()


class Wine(Dataset):
    def __init__(self, x, y):
        self.x, self.y = x.astype(np.float32), y.astype(np.int64)

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


paddle.seed(0)
x, y = load_wine(return_X_y=True)
x = (x - x.mean(0)) / x.std(0)
data = Wine(x, y)
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)

model = nn.Sequential(nn.Linear(13, 32), nn.Tanh(), nn.Linear(32, 3))
opt = paddle.optimizer.Adam(learning_rate=args.lr, parameters=model.parameters())
loss_fn = nn.CrossEntropyLoss()
brier = nn.MSELoss()  # an auxiliary loss: the Brier score of the predicted probabilities

for epoch in range(args.epochs):
    for i, (xb, yb) in enumerate(loader):
        out = model(xb)
        loss = loss_fn(out, yb)
        loss = (loss + args.aux * brier(nn.functional.softmax(out, -1), nn.functional.one_hot(yb, 3))) / args.accum
        loss.backward()
        if (i + 1) % args.accum == 0:
            opt.step()
            opt.clear_grad()
    print(f"epoch {epoch} loss {loss.item() * args.accum:.4f}")
