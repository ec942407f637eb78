"""Tag tokens with transformers' BertForTokenClassification (a small config built here, no download): a torch
script a user ports to paddlenlp. Its batches are padded (token 0), the loss averaged over the real tokens.

It does not import portcheck: `python -m portcheck run --torch "python pt_bert_tagger.py" --paddle "python
pd_bert_tagger.py"` checks it against its paddlenlp port as it is (docs/run.md: padding_idx measured, the pooler
paddlenlp computes and never returns).
"""
import argparse

import numpy as np
import torch
from transformers import BertConfig, BertForTokenClassification

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()
torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    max_position_embeddings=64, num_labels=5)
model = BertForTokenClassification(config)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
rng = np.random.default_rng(0)
for step in range(5):
    ids = rng.integers(1, 100, (4, 12))
    mask = (np.arange(12)[None] < rng.integers(6, 13, 4)[:, None]).astype("int64")
    ids = ids * mask  # 0 is the pad token
    labels = rng.integers(0, 5, (4, 12))
    out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
    each = torch.nn.functional.cross_entropy(out.logits.reshape(-1, 5), torch.from_numpy(labels).reshape(-1),
                                             reduction="none")
    real = torch.from_numpy(mask).reshape(-1).float()
    loss = (each * real).sum() / real.sum()  # the real tokens' mean
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
