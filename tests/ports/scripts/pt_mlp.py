"""A torch training script: an MLP whose middle Linear is square, three SGD steps on fixed batches."""
import argparse

import numpy as np
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 12)
        self.fc2 = nn.Linear(12, 12)
        self.head = nn.Linear(12, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


torch.manual_seed(0)
model = MLP()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rng = np.random.default_rng(0)
for step in range(args.steps):
    x = torch.from_numpy(rng.standard_normal((4, 8)).astype("float32"))
    y = torch.from_numpy(rng.integers(0, 3, (4,)))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
