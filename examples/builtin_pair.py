"""A pair no one here wrote, through the library alone: each framework's own 2-layer bidirectional LSTM,
converted with no name map, compared module by module (isolated too), trained a few optimizer steps side by side;
then the same pair with one realistic porting bug planted (the LSTM's gates in another order: torch packs them
i, f, g, o), which must be red.

    pip install ./lib                     # portcheck alone: numpy is its only dependency
    python examples/builtin_pair.py       # exit 0: the clean pair green and the planted bug red

Needs numpy, torch and paddlepaddle, nothing else; writes nothing. CI runs it in a venv holding only those.
"""
import argparse

import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch and Paddle load)
import numpy as np
import paddle
import torch

from portcheck import compare_backward, compare_forward, convert
from portcheck.core.errors import run_main


def pair():
    torch.manual_seed(0)
    pt = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
    pd = paddle.nn.LSTM(8, 16, num_layers=2, direction="bidirect")  # batch first, as Paddle's default
    return pt, pd


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    x = np.random.RandomState(0).randn(4, 6, 8).astype("float32")        # [batch, time, features]
    target = np.random.RandomState(1).randn(4, 6, 32).astype("float32")  # [batch, time, 2 x hidden]
    pt, pd = pair()
    state = dict(convert(pt, pd, inputs=x))                              # no name map
    pd.set_state_dict(state)
    forward = compare_forward(pt.eval(), pd.eval(), x, isolate=True)
    mse = (lambda out, y: ((out[0] - y) ** 2).mean(), lambda out, y: ((out[0] - y) ** 2).mean())
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
           lambda ps: paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=ps))
    backward = compare_backward(pt.train(), pd.train(), x, target, loss=mse, optimizer=sgd, steps=3)
    print(f"clean pair: forward {'green' if forward.passed else 'RED'} ({len(forward.paired)} outputs compared, "
          f"isolated: {forward.differing or 'every module within'}); 3 optimizer steps "
          f"{'green' if backward.passed else 'RED'}")
    # the bug: Paddle's input-to-hidden gates of the first layer in i, g, f, o order instead of torch's i, f, g, o
    pt, pd = pair()
    pd.set_state_dict(state)
    i, f, g, o = np.split(np.asarray(state["weight_ih_l0"]), 4)
    pd.weight_ih_l0.set_value(np.concatenate([i, g, f, o]))
    planted = compare_forward(pt.eval(), pd.eval(), x, isolate=True)
    print(f"gates swapped in Paddle's first layer: {'green' if planted.passed else 'RED'}, first diverging "
          f"{planted.first_diverging}")
    if not (forward.passed and backward.passed) or planted.passed:
        raise SystemExit(1)


if __name__ == "__main__":
    run_main(main)
