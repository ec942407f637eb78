"""pt_tp.py ported to Paddle and split in tensor parallel: fleet's mp_degree over the launcher's ranks, the
embedding's vocabulary, the feed-forward's columns then rows each split across them.

    python -m paddle.distributed.launch --nproc_per_node 2 examples/scripts/pd_tp.py --steps 20
"""
import argparse

import numpy as np
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.distributed import fleet
from paddle.distributed.fleet.meta_parallel import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding


class Net(nn.Layer):
    def __init__(self, vocab=32, hidden=16, ffn=48, classes=3):
        super().__init__()
        self.embed = VocabParallelEmbedding(vocab, hidden)
        self.up = ColumnParallelLinear(hidden, ffn, has_bias=True, gather_output=False)
        self.act = nn.GELU()
        self.down = RowParallelLinear(ffn, hidden, has_bias=True, input_is_parallel=True)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, ids):
        h = self.embed(ids)
        h = self.norm(h + self.down(self.act(self.up(h))))
        return self.head(h.mean(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-2)
    args = ap.parse_args()
    strategy = fleet.DistributedStrategy()
    strategy.hybrid_configs = {"dp_degree": 1, "mp_degree": dist.get_world_size(), "pp_degree": 1}
    fleet.init(is_collective=True, strategy=strategy)  # CPU: the launcher's gloo
    paddle.seed(0)
    rng = np.random.RandomState(0)
    ids = rng.randint(0, 32, size=(256, 6))
    labels = ids[:, 0] % 3
    model = fleet.distributed_model(Net())
    optimizer = fleet.distributed_optimizer(
        paddle.optimizer.AdamW(learning_rate=args.lr, parameters=model.parameters(), weight_decay=0.01))
    criterion = nn.CrossEntropyLoss()
    for step in range(args.steps):  # every rank of the model-parallel group takes the same batch
        start = step * args.batch_size % len(ids)
        idx = slice(start, start + args.batch_size)
        loss = criterion(model(paddle.to_tensor(ids[idx])), paddle.to_tensor(labels[idx]))
        optimizer.clear_grad()
        loss.backward()
        optimizer.step()
        if dist.get_rank() == 0 and step % 5 == 0:
            print(f"step {step} loss {float(loss):.4f}")


if __name__ == "__main__":
    main()
