"""A tiny language model in torch, written as users write one: torch's own encoder layer and attention (q, k and v
packed in one in_proj_weight), a plain loop.

tests/test_run_packed.py checks it against pd_lm.py with `python -m portcheck run`."""
import argparse

import numpy as np
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--vocab", type=int, default=13)
parser.add_argument("--dim", type=int, default=8)
parser.add_argument("--heads", type=int, default=2)
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, heads, dropout):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.encoder = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout, batch_first=True)
        self.pool = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(0.1))  # 0-d, the port's [1] (CLIP's logit_scale)

    def forward(self, ids):
        h = self.encoder(self.wte(ids))
        h = h + self.pool(h, h, h, need_weights=False)[0]
        return self.lm_head(h) * self.logit_scale.exp()


torch.manual_seed(0)
model = TinyLM(args.vocab, args.dim, args.heads, args.dropout)
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
loss_fn = nn.CrossEntropyLoss()
rng = np.random.default_rng(0)
for step in range(args.steps):
    ids = torch.from_numpy(rng.integers(0, args.vocab, (4, 7)))
    logits = model(ids[:, :-1])
    loss = loss_fn(logits.reshape(-1, args.vocab), ids[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
