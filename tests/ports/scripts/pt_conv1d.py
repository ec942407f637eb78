"""A torch training script: GPT-2's MLP written with transformers' Conv1D ([in, out] weights), one of them square,
three SGD steps on fixed batches."""
import argparse

import numpy as np
import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = Conv1D(12, 8)
        self.c_sq = Conv1D(12, 12)
        self.c_proj = Conv1D(3, 12)

    def forward(self, x):
        return self.c_proj(torch.tanh(self.c_sq(torch.tanh(self.c_fc(x)))))


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
