"""Your own model through portcheck, from two model objects to a log_reprod/ a reviewer re-checks.

    pip install ./lib                     # portcheck alone: numpy is its only dependency
    python examples/quickstart.py         # writes portcheck_quickstart/ in the current folder
    python -m portcheck check portcheck_quickstart/log_reprod --only forward

Needs numpy, torch and paddlepaddle, nothing else (no transformers, paddlenlp or datasets). The two models
below stand for yours: the same small convolutional network, written once for each framework under other
module names.
"""
import argparse
from pathlib import Path

import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch and Paddle load)
import numpy as np
import paddle
import torch

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                             allow_abbrev=False)
ap.add_argument("--out", type=Path, default=Path("portcheck_quickstart"), help="where the run and its hand-in go")
out = ap.parse_args().out


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
        self.classifier = torch.nn.Linear(8, 4)

    def forward(self, x):                                   # x: [B, 3, H, W]
        return self.classifier(self.features(x).flatten(1))  # [B, 4]


class PaddleNet(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.body = paddle.nn.Sequential(paddle.nn.Conv2D(3, 8, 3, padding=1), paddle.nn.BatchNorm2D(8),
                                         paddle.nn.ReLU(), paddle.nn.AdaptiveAvgPool2D(1))
        self.head = paddle.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))


torch.manual_seed(0)
torch_model, paddle_model = TorchNet(), PaddleNet()

import portcheck

x = np.random.RandomState(0).randn(2, 3, 16, 16).astype("float32")          # an array, a tuple or a dict of arrays
steps = portcheck.Handin(out / "log_reprod", sides=out)   # the hand-in, and each side's results beside it
# Paddle gets torch's weights (modules paired with no map: a name_map= pins the pairs it names), every module is
# judged on the same batch, cumulative and isolated, and the guide's forward pair is handed in with its run records
report = steps.forward(torch_model, paddle_model, x)
print(report.pairs())                          # every pair of modules chosen, every module left unpaired
print(report.table())                          # every module: max and mean diff, torch's own fp32 error, diff/err
print(report.passed, report.first_diverging)   # False and the module where the two part, when they do
print(report.differing)                        # every module whose own computation differs (isolate=True)
print(steps)                                   # the forward pair's verdict, and diagnostics/forward_modules.png
# then: python -m portcheck check portcheck_quickstart/log_reprod --only forward
raise SystemExit(0 if report.passed and steps.passed else 1)
