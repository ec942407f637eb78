"""pt_ddp.py ported to Paddle: data-parallel training, one process per rank, started with Paddle's launcher.

    python -m paddle.distributed.launch --nproc_per_node 2 examples/scripts/pd_ddp.py --steps 20
"""
import argparse

import numpy as np
import paddle
import paddle.distributed as dist
from paddle import nn


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8, help="the global batch, split over the ranks")
    ap.add_argument("--lr", type=float, default=1e-2)
    args = ap.parse_args()
    dist.init_parallel_env()  # CPU: the launcher's gloo
    rank, world = dist.get_rank(), dist.get_world_size()
    paddle.seed(0)

    rng = np.random.RandomState(0)
    x = rng.randn(256, 10).astype(np.float32)
    y = (x[:, :3].sum(1) > 0).astype(np.int64) + (x[:, 3] > 1).astype(np.int64)
    model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1D(32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 3))
    model = paddle.DataParallel(model)
    optimizer = paddle.optimizer.AdamW(learning_rate=args.lr, parameters=model.parameters(), weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()

    for step in range(args.steps):
        start = step * args.batch_size % len(x)
        idx = np.arange(start, start + args.batch_size)[rank::world]  # this rank's share of the global batch
        loss = criterion(model(paddle.to_tensor(x[idx])), paddle.to_tensor(y[idx]))
        optimizer.clear_grad()
        loss.backward()
        optimizer.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {float(loss):.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
