"""`python -m portcheck run` on an LSTM pair called as transformers' and paddlenlp's models are: Paddle's RNN layers
list each weight under two names (weight_ih_l0 and 0.cell.weight_ih: one tensor), torch's under one; the batch is
tensors and flags, positional and keyword (x, None, labels=, return_dict=True), the loss computed inside the
model; the LSTM drops out between its layers inside the framework's kernel, attention in train mode
(scaled_dot_product_attention's dropout_p). The Paddle model is filled from
torch's weights, each module judged on torch's values too, the data and the steps green; a parameter the port adds is
refused in one line naming it."""
import contextlib
import io
import shutil
import sys

import pytest

from portcheck.scripts import run, judge_run
from portcheck.core.errors import PipelineError

STEPS = 2
# as transformers' and paddlenlp's models are called: tensors and flags, positional and keyword, the loss computed
# inside from labels=, attention with its own dropout in train mode (scaled_dot_product_attention's dropout_p)
MODEL = {"torch": """import numpy as np, torch
from torch import nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.head = nn.LSTM(4, 8, num_layers=2, batch_first=True, dropout=0.2), nn.Linear(8, 3)
        self.loss = nn.CrossEntropyLoss()
    def forward(self, x, mask=None, labels=None, return_dict=False):
        h = self.rnn(x)[0]
        q = h.reshape(h.shape[0], h.shape[1], 2, 4).transpose(1, 2)  # [batch, heads, time, 4]
        a = nn.functional.scaled_dot_product_attention(q, q, q, None, 0.5 if self.training else 0.0)
        logits = self.head(a.transpose(1, 2).reshape(h.shape)[:, -1])
        loss = self.loss(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits} if return_dict else (loss, logits)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.RandomState(0)
for _ in range(STEPS):
    x, y = torch.from_numpy(rng.rand(6, 5, 4).astype(np.float32)), torch.from_numpy(rng.randint(0, 3, 6))
    loss = model(x, None, labels=y, return_dict=True)["loss"]
    opt.zero_grad(); loss.backward(); opt.step()
""", "paddle": """import numpy as np, paddle
from paddle import nn
paddle.seed(0)
class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.rnn, self.head = nn.LSTM(4, 8, num_layers=2, dropout=0.2), nn.Linear(8, 3)
        self.loss = nn.CrossEntropyLoss()
    def forward(self, x, mask=None, labels=None, return_dict=False):
        h = self.rnn(x)[0]
        q = h.reshape([h.shape[0], h.shape[1], 2, 4])  # [batch, time, heads, 4]
        a = nn.functional.scaled_dot_product_attention(q, q, q, None, 0.5 if self.training else 0.0)
        logits = self.head(a.reshape(h.shape)[:, -1])
        loss = self.loss(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits} if return_dict else (loss, logits)
model = Net()
opt = paddle.optimizer.Adam(1e-2, parameters=model.parameters())
rng = np.random.RandomState(0)
for _ in range(STEPS):
    x, y = paddle.to_tensor(rng.rand(6, 5, 4).astype(np.float32)), paddle.to_tensor(rng.randint(0, 3, 6))
    loss = model(x, None, labels=y, return_dict=True)["loss"]
    opt.clear_grad(); loss.backward(); opt.step()
"""}
# a parameter the Paddle port adds (a learned output scale torch's model lacks)
ADDED = ("        logits = self.head(a.reshape(h.shape)[:, -1])\n",
         "        logits = self.head(a.reshape(h.shape)[:, -1]) * self.scale\n")


def script(tmp_path, side, plant=None):
    text = MODEL[side].replace("STEPS", str(STEPS + 1))
    if plant:
        text = text.replace(*plant).replace("nn.CrossEntropyLoss()\n", "nn.CrossEntropyLoss()\n"
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
    said = printed.getvalue()
    assert code == 0 and "green: the same run" in said, said
    assert "forward, each module on torch's values: every paired module within its rule" in said, said
    assert "data: every value equal" in said, said


def test_a_parameter_the_port_adds_is_refused_naming_it(torch_done, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(torch_done[0], out)
    with pytest.raises(PipelineError, match=r"cannot start from the torch model's weights .*Paddle scale no torch "
                                            r"tensor fills") as e:
        run.run_side("paddle", script(tmp_path, "paddle", ADDED), out, STEPS)
    assert "rnn.0.cell" not in str(e.value), e.value


def test_a_red_run_that_names_no_place_says_what_it_could_not_judge():
    """A first forward the recorder could not run on torch's values (a nested argument) leaves the report red with
    no module where the runs part: the line says what was not judged, never "the runs part at None"."""
    from types import SimpleNamespace
    stopped = SimpleNamespace(forward=SimpleNamespace(isolation_stopped={"paddle": "not run: a nested argument"}),
                              unjudged=[])
    assert judge_run.unplaced_why(stopped) == ("the first forward on torch's values was not judged (the paddle run: not "
                                         "run: a nested argument): a check that compared less than asked")
    rest = SimpleNamespace(forward=SimpleNamespace(isolation_stopped={}), unjudged=[])
    assert "None" not in judge_run.unplaced_why(rest)


def test_an_attentions_own_dropout_is_off_while_the_recorder_says_so():
    """wrapping.no_attention_dropout: scaled_dot_product_attention's dropout_p (positional or keyword) is 0 while the
    run's dropout is off, and as the script asked once it is not (the steps after N, --full's training)."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace
    from portcheck.scripts.wrapping import no_attention_dropout
    q = torch.rand(2, 2, 5, 4)
    plain = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    run_ = SimpleNamespace(side="torch", dropout_off=True, sites=False)
    attention = no_attention_dropout(run_, torch.nn.functional.scaled_dot_product_attention)
    assert torch.equal(attention(q, q, q, None, 0.5), plain) and torch.equal(attention(q, q, q, dropout_p=0.5), plain)
    run_.dropout_off = False
    torch.manual_seed(0)
    assert not torch.equal(attention(q, q, q, None, 0.5), plain)


def test_a_recurrent_layers_mode_and_dropout_are_compared():
    """Each side's module_config: a recurrent layer's mode (LSTM, GRU, RNN_TANH, RNN_RELU: torch's nonlinearity,
    Paddle's activation) and its dropout between layers, which no weight shows: one configuration line each when
    the port leaves it out, none when it keeps it."""
    torch, paddle = pytest.importorskip("torch"), pytest.importorskip("paddle")
    from portcheck.scripts import runconfig
    from portcheck.scripts.hooks_paddle import PaddleSide
    from portcheck.scripts.hooks_torch import TorchSide
    t = TorchSide(False).module_config(torch.nn.ModuleDict({"lstm": torch.nn.LSTM(4, 8, 2, dropout=0.2),
                                                            "rnn": torch.nn.RNN(4, 8, nonlinearity="relu")}))

    def said(dropout, activation):
        p = PaddleSide().module_config(paddle.nn.LayerDict({"lstm": paddle.nn.LSTM(4, 8, 2, dropout=dropout),
                                                            "rnn": paddle.nn.SimpleRNN(4, 8, activation=activation)}))
        return runconfig.differences({"modules": t}, {"modules": p}, {"lstm": "lstm", "rnn": "rnn"}, {})

    assert said(0.2, "relu") == []
    assert said(0.0, "tanh") == ["lstm (LSTM): dropout torch 0.2 vs paddle 0",
                                 "rnn (RNN): mode torch RNN_RELU vs paddle RNN_TANH"]


def test_a_convolutions_padding_is_compared_in_torchs_form():
    """Each side's module_config (portcheck.mapping.settings): a convolution's padding in torch's form whatever form
    Paddle was given it in (an int, one per axis, two per axis, a string), so a correct port says nothing; a padding
    the port changed is one configuration line."""
    torch, paddle = pytest.importorskip("torch"), pytest.importorskip("paddle")
    from portcheck.scripts import runconfig
    from portcheck.scripts.hooks_paddle import PaddleSide
    from portcheck.scripts.hooks_torch import TorchSide
    t = TorchSide(False).module_config(torch.nn.ModuleDict({
        "a": torch.nn.Conv2d(3, 4, 3, padding=1), "b": torch.nn.Conv2d(3, 4, 3, padding=(1, 2)),
        "c": torch.nn.Conv1d(3, 4, 3, padding="same"), "d": torch.nn.Conv2d(3, 4, 3)}))

    def said(a, b, c, d):
        p = PaddleSide().module_config(paddle.nn.LayerDict({
            "a": paddle.nn.Conv2D(3, 4, 3, padding=a), "b": paddle.nn.Conv2D(3, 4, 3, padding=b),
            "c": paddle.nn.Conv1D(3, 4, 3, padding=c), "d": paddle.nn.Conv2D(3, 4, 3, padding=d)}))
        return runconfig.differences({"modules": t}, {"modules": p}, {k: k for k in "abcd"}, {})

    assert said(1, [1, 2], "SAME", 0) == [] and said([1, 1], [1, 1, 2, 2], "same", [0, 0]) == []
    assert said([[0, 0], [0, 0], [1, 1], [1, 1]], [1, 2], 1, 0) == ["c (Conv1d): padding torch same vs paddle [1]"]
    assert said(0, [1, 2], "same", 1) == ["a (Conv2d): padding torch [1, 1] vs paddle [0, 0]",
                                          "d (Conv2d): padding torch [0, 0] vs paddle [1, 1]"]
