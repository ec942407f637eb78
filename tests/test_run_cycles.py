"""`python -m portcheck run`'s configuration names a torch scheduler that cycles the optimizer's momentum (OneCycleLR's
cycle_momentum=True, its default), which Paddle's OneCycleLR never does, in compare_backward's one line
(optimizers.cycled_momentum): red with it, green with cycle_momentum=False. Each case's runs are made once (module scope)."""
import sys

import pytest

from portcheck.mapping import pairing
from portcheck.scripts import run, judge_run
from portcheck.gradients.backward import renames
from portcheck.gradients.optimizers import cycled_momentum, CYCLES_MOMENTUM
from portcheck.core.fileio import load_npy
from portcheck.scripts.side_files import RECORD
from test_run_scripts import judged

STEPS = 3
TORCH = '''"""A small classifier trained with momentum SGD under OneCycleLR."""
import argparse

import numpy as np
import torch
from torch import nn

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--cycle-momentum", type=int, choices=(0, 1), default=1)
args = ap.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
rng = np.random.RandomState(0)
x, y = torch.from_numpy(rng.randn(32, 8).astype("float32")), torch.from_numpy(rng.randint(0, 3, 32))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=20, max_momentum=0.9,
                                                cycle_momentum=bool(args.cycle_momentum))
for step in range(20):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    scheduler.step()
'''
PADDLE = '''"""The torch script's Paddle port: paddle.optimizer.lr.OneCycleLR (its lr alone) on Momentum."""
import numpy as np
import paddle
from paddle import nn

paddle.seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
rng = np.random.RandomState(0)
x, y = paddle.to_tensor(rng.randn(32, 8).astype("float32")), paddle.to_tensor(rng.randint(0, 3, 32))
scheduler = paddle.optimizer.lr.OneCycleLR(max_learning_rate=0.1, total_steps=20, end_learning_rate=0.1 / 25 / 1e4)
optimizer = paddle.optimizer.Momentum(scheduler, momentum=0.9, parameters=model.parameters())
for step in range(20):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    scheduler.step()
'''


@pytest.fixture(scope="module", params=[1, 0], ids=["cycle_momentum=True", "cycle_momentum=False"])
def one_cycle(request, tmp_path_factory):
    """(torch's cycle_momentum, the configuration's differences, the whole run judged: (exit code, summary)). The
    configuration is judged from the torch and Paddle runs alone (judge_run.configuration), so the red case makes those
    two; the green one makes every run, as the whole run must be green (run.judge)."""
    folder = tmp_path_factory.mktemp("cycle")
    (folder / "pt_cycle.py").write_text(TORCH)
    (folder / "pd_cycle.py").write_text(PADDLE)
    argv = {"torch": [sys.executable, str(folder / "pt_cycle.py"), "--cycle-momentum", str(request.param)],
            "paddle": [sys.executable, str(folder / "pd_cycle.py")]}
    out = folder / "out"
    run.prepare(out)
    sides = run.SIDES[:2] if request.param else run.SIDES  # torch's run, then Paddle's
    statuses = {side: run.run_side(side, argv[fw], out, STEPS) for side, fw in sides}
    t, p = (load_npy(out / side / RECORD) for side in ("torch", "paddle"))
    config = judge_run.configuration(t, p, statuses, STEPS, pairing.pair(t, p).modules(), renames(t))
    return request.param, config, None if request.param else judged(out, statuses, STEPS)


def test_a_scheduler_cycling_torchs_momentum_is_named_in_backwards_line(one_cycle):
    cycles, config, whole = one_cycle
    line = f"scheduler: {cycled_momentum({CYCLES_MOMENTUM + 'OneCycleLR': True})[0]}"
    if cycles:  # a configuration difference is a red run (run.judge): test_run_scripts' plants
        assert config == [line], config
    else:
        code, said = whole
        assert config == [] and code == 0 and "cycles the optimizer's momentum" not in said, said
        assert "the same: every paired module's settings, the optimizer, clipping, the loss, " in said
