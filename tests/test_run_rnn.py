"""`python -m portcheck run` on an LSTM pair: Paddle's RNN layers list each weight under two names (weight_ih_l0
and 0.cell.weight_ih: one tensor), torch's under one. The Paddle model is filled from torch's weights and judged
green; a parameter the port adds is refused in one line naming it."""
import contextlib
import io
import shutil
import sys

import pytest

from portcheck import run
from portcheck.errors import PipelineError

STEPS = 2
MODEL = {"torch": """import numpy as np, torch
from torch import nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.head = nn.LSTM(4, 8, num_layers=2, batch_first=True), nn.Linear(8, 3)
    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.RandomState(0)
for _ in range(STEPS):
    x, y = torch.from_numpy(rng.rand(6, 5, 4).astype(np.float32)), torch.from_numpy(rng.randint(0, 3, 6))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""", "paddle": """import numpy as np, paddle
from paddle import nn
paddle.seed(0)
class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.rnn, self.head = nn.LSTM(4, 8, num_layers=2), nn.Linear(8, 3)
    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])
model = Net()
opt = paddle.optimizer.Adam(1e-2, parameters=model.parameters())
rng = np.random.RandomState(0)
for _ in range(STEPS):
    x, y = paddle.to_tensor(rng.rand(6, 5, 4).astype(np.float32)), paddle.to_tensor(rng.randint(0, 3, 6))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.clear_grad(); loss.backward(); opt.step()
"""}
# a parameter the Paddle port adds (a learned output scale torch's model lacks)
ADDED = ("        return self.head(self.rnn(x)[0][:, -1])\n",
         "        return self.head(self.rnn(x)[0][:, -1]) * self.scale\n")


def script(tmp_path, side, plant=None):
    text = MODEL[side].replace("STEPS", str(STEPS + 1))
    if plant:
        text = text.replace(*plant).replace("nn.Linear(8, 3)\n", "nn.Linear(8, 3)\n"
                                            "        self.scale = self.create_parameter([1], default_initializer="
                                            "nn.initializer.Constant(1.0))\n")
    path = tmp_path / f"{side}_{'planted' if plant else 'rnn'}.py"
    path.write_text(text)
    return [sys.executable, str(path)]


@pytest.fixture(scope="module")
def torch_done(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rnn")
    out = tmp / "out"
    run.prepare(out)
    return out, {side: run.run_side(side, script(tmp, fw), out, STEPS) for side, fw in run.SIDES}


def test_an_lstm_pair_is_filled_from_torchs_weights_and_green(torch_done):
    out, statuses = torch_done
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run.judge(out, statuses, STEPS)
    assert code == 0 and "green: the same run" in printed.getvalue(), printed.getvalue()


def test_a_parameter_the_port_adds_is_refused_naming_it(torch_done, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(torch_done[0], out)
    with pytest.raises(PipelineError, match=r"cannot start from the torch model's weights .*Paddle scale no torch "
                                            r"tensor fills") as e:
        run.run_side("paddle", script(tmp_path, "paddle", ADDED), out, STEPS)
    assert "rnn.0.cell" not in str(e.value), e.value
