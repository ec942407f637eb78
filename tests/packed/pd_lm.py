"""pt_lm.py's Paddle port: Paddle's encoder layer and attention (q, k and v in three Linears each)."""
import argparse

import numpy as np
import paddle
from paddle import nn

parser = argparse.ArgumentParser()
parser.add_argument("--vocab", type=int, default=13)
parser.add_argument("--dim", type=int, default=8)
parser.add_argument("--heads", type=int, default=2)
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()


class TinyLM(nn.Layer):
    def __init__(self, vocab, dim, heads, dropout):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.encoder = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout)
        self.pool = nn.MultiHeadAttention(dim, heads, dropout=dropout)
        self.lm_head = nn.Linear(dim, vocab, bias_attr=False)
        self.logit_scale = self.create_parameter([1])

    def forward(self, ids):
        h = self.encoder(self.wte(ids))
        h = h + self.pool(h, h, h)
        return self.lm_head(h) * self.logit_scale.exp()


paddle.seed(0)
model = TinyLM(args.vocab, args.dim, args.heads, args.dropout)
opt = paddle.optimizer.Adam(learning_rate=args.lr, parameters=model.parameters())
loss_fn = nn.CrossEntropyLoss()
rng = np.random.default_rng(0)
for step in range(args.steps):
    ids = paddle.to_tensor(rng.integers(0, args.vocab, (4, 7)))
    logits = model(ids[:, :-1])
    loss = loss_fn(logits.reshape([-1, args.vocab]), ids[:, 1:].reshape([-1]))
    opt.clear_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
