"""PaConvert 3.3.1's port of pt_groups.py (paconvert --in_dir pt_groups.py), as it wrote it but the lines marked
"fixed by hand". Train a small CNN on random images with AdamW over three parameter groups (the convolution at
twice the lr, the matrices decayed, the biases not), a warmup-cosine LambdaLR and gradient clipping.

    python pd_groups.py --steps 12
"""
import argparse
import math

import numpy as np
import paddle


class Net(paddle.nn.Module):
    def __init__(self, channels=2, width=8, classes=3):
        super().__init__()
        self.conv = paddle.nn.Conv2d(channels, 4, 3, padding=1)
        self.act = paddle.nn.ReLU()
        self.fc1 = paddle.compat.nn.Linear(4 * 6 * 6, width)
        self.fc2 = paddle.compat.nn.Linear(width, width)
        self.head = paddle.compat.nn.Linear(width, classes)

    def forward(self, x):
        h = self.act(self.conv(x)).flatten(1)
        h = paddle.tanh(self.fc1(h))
        h = paddle.tanh(self.fc2(h))
        return self.head(h)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--clip", type=float, default=0.5)
    args = ap.parse_args()
    paddle.manual_seed(0)
    rng = np.random.RandomState(0)
    x = rng.randn(64, 2, 6, 6).astype(np.float32)
    y = rng.randint(0, 3, 64).astype(np.int64)
    model = Net()
    conv = list(model.conv.parameters())
    matrices = [p for n, p in model.named_parameters() if p.ndim == 2]
    biases = [
        p
        for n, p in model.named_parameters()
        if p.ndim == 1 and not n.startswith("conv")
    ]
    optimizer = paddle.optimizer.AdamW(
        parameters=[
            {"params": conv, "learning_rate": 2.0, "weight_decay": 0.01},  # fixed by hand: Paddle's key, a multiple
            {"params": matrices, "weight_decay": 0.05},
            {"params": biases, "weight_decay": 0.0},
        ],
        learning_rate=args.lr,
        weight_decay=0.0,
    )
    warmup = 2

    def schedule(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (args.steps - warmup)))

    tmp_lr = paddle.optimizer.lr.LambdaDecay(
        lr_lambda=schedule, learning_rate=optimizer.get_lr()
    )
    optimizer.set_lr_scheduler(tmp_lr)
    scheduler = tmp_lr
    criterion = paddle.nn.CrossEntropyLoss()
    model.train()
    for step in range(args.steps):
        start = step * args.batch_size % len(x)
        xb = paddle.from_numpy(x[start : start + args.batch_size])
        yb = paddle.from_numpy(y[start : start + args.batch_size])
        loss = criterion(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        paddle.nn.utils.clip_grad_norm_(
            parameters=model.parameters(), max_norm=args.clip
        )
        optimizer.step()
        scheduler.step()
        if step % 4 == 0:
            # fixed by hand: Paddle's schedule has no get_last_lr
            print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_lr():.6f}")


if __name__ == "__main__":
    main()
