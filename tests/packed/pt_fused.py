"""A tiny causal language model in torch whose attention computes q, k and v in one Linear, its output chunked into
q, then k, then v: pt_qkv.py with the fused side on torch's.

tests/test_run_packed.py checks it against pd_split.py (q, k and v Linears) with `python -m portcheck run
--layouts`."""
import argparse
import math

import numpy as np
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--vocab", type=int, default=13)
parser.add_argument("--dim", type=int, default=8)
parser.add_argument("--heads", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        split = lambda y: y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = map(split, self.qkv(x).chunk(3, dim=-1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        h = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        return self.out(h)


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.attn = Attention(dim, heads)
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, ids):
        h = self.wte(ids)
        h = h + self.attn(h)
        return self.lm_head(self.norm(h))


torch.manual_seed(0)
model = TinyLM(args.vocab, args.dim, args.heads)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
rng = np.random.default_rng(0)
for step in range(args.steps):
    ids = torch.from_numpy(rng.integers(0, args.vocab, (4, 7)))
    logits = model(ids[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, args.vocab), ids[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
