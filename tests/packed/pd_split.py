"""pt_fused.py's Paddle port: q, k and v in three Linears of their own."""
import argparse
import math

import numpy as np
import paddle
from paddle import nn

parser = argparse.ArgumentParser()
parser.add_argument("--vocab", type=int, default=13)
parser.add_argument("--dim", type=int, default=8)
parser.add_argument("--heads", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()


class Attention(nn.Layer):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        split = lambda y: y.reshape([b, t, self.heads, d // self.heads]).transpose([0, 2, 1, 3])
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose([0, 1, 3, 2]) / math.sqrt(d // self.heads)
        scores = scores + paddle.triu(paddle.full([t, t], float("-inf")), 1)
        h = (nn.functional.softmax(scores, -1) @ v).transpose([0, 2, 1, 3]).reshape([b, t, d])
        return self.out(h)


class TinyLM(nn.Layer):
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


paddle.seed(0)
model = TinyLM(args.vocab, args.dim, args.heads)
opt = paddle.optimizer.AdamW(learning_rate=args.lr, parameters=model.parameters())
rng = np.random.default_rng(0)
for step in range(args.steps):
    ids = paddle.to_tensor(rng.integers(0, args.vocab, (4, 7)))
    logits = model(ids[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape([-1, args.vocab]), ids[:, 1:].reshape([-1]))
    opt.clear_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
