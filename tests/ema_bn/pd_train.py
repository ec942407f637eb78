"""pt_train.py ported to Paddle: the CNN, SGD with Nesterov momentum, and the EMA, which copies the model at its first
update and then averages the weights, its running statistics following the model's (Paddle holds a BatchNorm's
statistics as parameters that take no gradient, so they are copied, not averaged).

    python pd_train.py --steps 10
"""
import argparse
import copy

import numpy as np
import paddle
from paddle import nn


def make_model():
    return nn.Sequential(nn.Conv2D(3, 8, 3, padding=1, bias_attr=False), nn.BatchNorm2D(8, momentum=0.9), nn.ReLU(),
                         nn.MaxPool2D(2), nn.Conv2D(8, 16, 3, padding=1), nn.BatchNorm2D(16, momentum=0.9), nn.ReLU(),
                         nn.AdaptiveAvgPool2D(1), nn.Flatten(), nn.Linear(16, 5))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    paddle.seed(0)
    rng = np.random.RandomState(0)
    x = rng.randn(40, 3, 8, 8).astype(np.float32)
    y = rng.randint(0, 5, 40)
    model = make_model()
    ema = copy.deepcopy(model)
    optimizer = paddle.optimizer.Momentum(0.05, momentum=0.9, use_nesterov=True, parameters=model.parameters(),
                                          weight_decay=paddle.regularizer.L2Decay(5e-4))
    for step in range(args.steps):
        start = step * 8 % len(x)
        loss = nn.functional.cross_entropy(model(paddle.to_tensor(x[start:start + 8])),
                                           paddle.to_tensor(y[start:start + 8]))
        optimizer.clear_grad()
        loss.backward()
        optimizer.step()
        with paddle.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.set_value(p if step == 0 or p.stop_gradient else e * 0.9 + p * 0.1)
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
