"""A small CNN with BatchNorm trained by SGD with Nesterov momentum, its EMA kept by torch's AveragedModel, whose
buffers (the running statistics) follow the model's: a script as people write them.

    python pt_train.py --steps 10
"""
import argparse

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def make_model():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(16, 5))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    x = rng.randn(40, 3, 8, 8).astype(np.float32)
    y = rng.randint(0, 5, 40)
    model = make_model()
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    for step in range(args.steps):
        start = step * 8 % len(x)
        loss = nn.functional.cross_entropy(model(torch.from_numpy(x[start:start + 8])),
                                           torch.from_numpy(y[start:start + 8]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ema.update_parameters(model)
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
