"""PaConvert 3.3.1's port of pt_plateau.py (paconvert --in_dir pt_plateau.py), as it wrote it but the lines marked
"fixed by hand". Train a small regression MLP on random data with AdamW (torch's default weight decay), a schedule
chosen by --sched (ReduceLROnPlateau on the validation loss, MultiStepLR or OneCycleLR) and an EMA of the weights,
which is the model it evaluates.

    python pd_plateau.py --sched plateau --epochs 4
"""
import argparse
import copy

import numpy as np
import paddle


class Regressor(paddle.nn.Module):
    def __init__(self, features=6, hidden=16, dropout=0.1):
        super().__init__()
        self.net = paddle.nn.Sequential(
            paddle.compat.nn.Linear(features, hidden),
            paddle.nn.Tanh(),
            paddle.nn.Dropout(dropout),
            paddle.compat.nn.Linear(hidden, hidden),
            paddle.nn.Tanh(),
            paddle.compat.nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--sched", choices=("plateau", "multistep", "onecycle"), default="plateau"
    )
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.03)
    ap.add_argument("--decay", type=float, default=0.9)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument(
        "--head-bias",
        type=float,
        help="the head's initial bias (default: the layer's own init)",
    )
    args = ap.parse_args()
    paddle.manual_seed(0)
    rng = np.random.RandomState(0)
    x = rng.randn(96, 6).astype(np.float32)
    y = (
        x @ rng.randn(6).astype(np.float32) + 0.1 * rng.randn(96).astype(np.float32)
    ).astype(np.float32)
    x_val, y_val = paddle.from_numpy(x[64:]), paddle.from_numpy(y[64:])
    x, y = x[:64], y[:64]
    steps_per_epoch = len(x) // args.batch_size
    model = Regressor(dropout=args.dropout)
    if args.head_bias is not None:
        with paddle.no_grad():
            model.net[-1].bias.fill_(args.head_bias)
    ema = copy.deepcopy(model)
    optimizer = paddle.optimizer.AdamW(
        parameters=model.parameters(), learning_rate=args.lr, weight_decay=0.01  # fixed by hand: torch's default
    )
    if args.sched == "plateau":
        tmp_lr = paddle.optimizer.lr.ReduceOnPlateau(
            factor=0.5, patience=0, learning_rate=optimizer.get_lr()
        )
        optimizer.set_lr_scheduler(tmp_lr)
        scheduler = tmp_lr
    elif args.sched == "multistep":
        tmp_lr = paddle.optimizer.lr.MultiStepDecay(
            milestones=[2, 3], gamma=0.5, learning_rate=optimizer.get_lr()
        )
        optimizer.set_lr_scheduler(tmp_lr)
        scheduler = tmp_lr
    else:
        tmp_lr = paddle.optimizer.lr.OneCycleLR(
            max_learning_rate=args.lr, total_steps=args.epochs * steps_per_epoch,
            end_learning_rate=args.lr / 25 / 1e4,  # fixed by hand: torch's max_lr / div_factor / final_div_factor
        )
        optimizer.set_lr_scheduler(tmp_lr)
        scheduler = tmp_lr
    criterion = paddle.nn.MSELoss()
    for epoch in range(args.epochs):
        model.train()
        order = np.random.RandomState(epoch).permutation(len(x))
        for i in range(steps_per_epoch):
            idx = order[i * args.batch_size : (i + 1) * args.batch_size]
            xb, yb = paddle.from_numpy(x[idx]), paddle.from_numpy(y[idx])
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.sched == "onecycle":
                scheduler.step()
            with paddle.no_grad():
                for e, p in zip(ema.parameters(), model.parameters()):
                    e.copy_(args.decay * e + (1 - args.decay) * p)
        ema.eval()
        with paddle.no_grad():
            val = criterion(ema(x_val), y_val).item()
        if args.sched == "plateau":
            scheduler.step(val)
        elif args.sched == "multistep":
            scheduler.step()
        print(
            f"epoch {epoch} loss {loss.item():.4f} val_loss {val:.4f} acc {1.0 / (1.0 + val):.4f}"
        )


if __name__ == "__main__":
    main()
