"""pt_bert_tagger.py's paddlenlp port: BertForTokenClassification of the same small config (paddlenlp's
type_vocab_size set to transformers' 2). paddlenlp's word embeddings have no padding_idx and its BertModel computes a
pooler the tagger never returns: the library's defaults, which `portcheck run` judges by what they do.
"""
import argparse

import numpy as np
import paddle
from paddlenlp.transformers import BertConfig, BertForTokenClassification

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()
paddle.seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    max_position_embeddings=64, type_vocab_size=2, num_labels=5)
model = BertForTokenClassification(config)
opt = paddle.optimizer.SGD(learning_rate=args.lr, parameters=model.parameters())
rng = np.random.default_rng(0)
for step in range(5):
    ids = rng.integers(1, 100, (4, 12))
    mask = (np.arange(12)[None] < rng.integers(6, 13, 4)[:, None]).astype("int64")
    ids = ids * mask  # 0 is the pad token
    labels = rng.integers(0, 5, (4, 12))
    logits = model(input_ids=paddle.to_tensor(ids), attention_mask=paddle.to_tensor(mask))
    each = paddle.nn.functional.cross_entropy(logits.reshape([-1, 5]), paddle.to_tensor(labels).reshape([-1]),
                                              reduction="none")
    real = paddle.to_tensor(mask).reshape([-1]).astype("float32")
    loss = (each.reshape([-1]) * real).sum() / real.sum()  # the real tokens' mean
    opt.clear_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
