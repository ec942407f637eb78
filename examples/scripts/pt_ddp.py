"""Data-parallel training with PyTorch, one process per rank: the kind of script a user starts with torchrun.

    torchrun --nproc_per_node 2 examples/scripts/pt_ddp.py --steps 20

It does not import portcheck: `python -m portcheck run --torch "torchrun --nproc_per_node 2 pt_ddp.py" --paddle
"python -m paddle.distributed.launch --nproc_per_node 2 pd_ddp.py"` checks it against its Paddle port (pd_ddp.py),
rank r against rank r.
"""
import argparse

import numpy as np
import torch
import torch.distributed as dist
from torch import nn


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8, help="the global batch, split over the ranks")
    ap.add_argument("--lr", type=float, default=1e-2)
    args = ap.parse_args()
    dist.init_process_group("gloo")  # CPU
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    rng = np.random.RandomState(0)
    x = rng.randn(256, 10).astype(np.float32)
    y = (x[:, :3].sum(1) > 0).astype(np.int64) + (x[:, 3] > 1).astype(np.int64)
    model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 3))
    model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()

    for step in range(args.steps):
        start = step * args.batch_size % len(x)
        idx = np.arange(start, start + args.batch_size)[rank::world]  # this rank's share of the global batch
        loss = criterion(model(torch.from_numpy(x[idx])), torch.from_numpy(y[idx]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
