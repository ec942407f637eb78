"""pt_mask.py ported to Paddle: its padding mask computed in Paddle's convention (nn.MultiHeadAttention's attn_mask:
True at the tokens to attend), passed to the model beside the loader's ids."""
import argparse

import numpy as np
import paddle
from paddle import nn


class Net(nn.Layer):
    def __init__(self, vocab, dim, heads, classes):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.attn = nn.MultiHeadAttention(dim, heads)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids, tokens):
        h = self.emb(ids)
        h = h + self.attn(h, h, h, attn_mask=tokens[:, None, None, :])
        keep = tokens.unsqueeze(-1).astype("float32")
        return self.head((h * keep).sum(1) / keep.sum(1))


parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()
paddle.seed(0)
model = Net(11, 8, 2, 3)
opt = paddle.optimizer.AdamW(learning_rate=args.lr, parameters=model.parameters())
loss_fn = nn.CrossEntropyLoss()
rng = np.random.default_rng(0)
for step in range(5):
    ids = rng.integers(1, 11, (4, 6)) * (np.arange(6)[None] < rng.integers(2, 7, 4)[:, None])  # 0: the pad token
    y = rng.integers(0, 3, 4)
    ids = paddle.to_tensor(ids)
    loss = loss_fn(model(ids, ids != 0), paddle.to_tensor(y))
    opt.clear_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
