"""A tiny padded-sequence classifier in PyTorch, its padding mask computed by the script in torch's convention
(nn.MultiheadAttention's key_padding_mask: True at the pads), passed to the model beside the loader's ids."""
import argparse

import numpy as np
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, vocab, dim, heads, classes):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids, pads):
        h = self.emb(ids)
        h = h + self.attn(h, h, h, key_padding_mask=pads, need_weights=False)[0]
        keep = (~pads).unsqueeze(-1).float()
        return self.head((h * keep).sum(1) / keep.sum(1))


parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()
torch.manual_seed(0)
model = Net(11, 8, 2, 3)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
loss_fn = nn.CrossEntropyLoss()
rng = np.random.default_rng(0)
for step in range(5):
    ids = rng.integers(1, 11, (4, 6)) * (np.arange(6)[None] < rng.integers(2, 7, 4)[:, None])  # 0: the pad token
    y = rng.integers(0, 3, 4)
    ids = torch.from_numpy(ids)
    loss = loss_fn(model(ids, ids == 0), torch.from_numpy(y))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
