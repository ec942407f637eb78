"""A small classifier in torch written as users write one: each batch seen in two views, an auxiliary
reconstruction loss, the model called with a dict and a temperature, its first layer frozen, one optimizer for the
body and one for the heads, an evaluation before training.

tests/test_run_calls.py checks it against pd_views.py with `python -m portcheck run`."""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--aux", type=float, default=0.5, help="weight of the reconstruction loss")
parser.add_argument("--temperature", type=float, default=2.0)
args = parser.parse_args()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.mid = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)
        self.decode = nn.Linear(16, 8)

    def forward(self, batch, temperature):
        h = torch.tanh(self.mid(torch.tanh(self.embed(batch["x"]))))
        return self.head(h) / temperature, self.decode(h)


torch.manual_seed(0)
rng = np.random.RandomState(0)
x = torch.tensor(rng.randn(64, 8), dtype=torch.float32)
y = torch.tensor(rng.randint(0, 3, 64))
model = Net()
for p in model.embed.parameters():
    p.requires_grad = False
body = torch.optim.SGD([p for n, p in model.named_parameters() if p.requires_grad and n.startswith("mid.")],
                       lr=args.lr)
heads = torch.optim.SGD(list(model.head.parameters()) + list(model.decode.parameters()), lr=args.lr, momentum=0.9)

model.eval()
logits, _ = model({"x": x[48:]}, args.temperature)
print(f"before training: acc {(logits.argmax(1) == y[48:]).float().mean().item():.3f}")
model.train()

for epoch in range(3):
    for i in range(0, 48, 16):
        xb, yb = x[i:i + 16], y[i:i + 16]
        loss = 0
        for view in (xb, xb.flip(1)):
            logits, recon = model({"x": view}, args.temperature)
            loss = loss + F.cross_entropy(logits, yb) + args.aux * F.mse_loss(recon, view)
        body.zero_grad()
        heads.zero_grad()
        loss.backward()
        body.step()
        heads.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
