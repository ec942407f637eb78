"""docs/run.md's Limits, held to the code: what the page says `portcheck run` reads, it reads; what it says it does
not do, it refuses in one line."""
import subprocess
import sys

import pytest

from portcheck import hooks_paddle, runconfig


# {Paddle optimizer: (torch's counterpart, the kind of weight decay both apply)}
OPTIMIZERS = {"SGD": ("SGD", "L2"), "Adam": ("Adam", "L2"), "Momentum": ("SGD", "L2"), "AdamW": ("AdamW", "decoupled")}


def grouped(name: str, bias_decay: float):
    """The torch and Paddle optimizers' configurations as the recorders read them, for one Linear whose weight and
    bias are two dict groups (weight_decay 0.01 and bias_decay)."""
    import paddle
    import torch
    from portcheck import hooks_torch
    m = paddle.nn.Linear(3, 2)
    t = torch.nn.Linear(3, 2)
    extra = {"momentum": 0.9} if name == "Momentum" else {}
    p_opt = getattr(paddle.optimizer, name)(learning_rate=0.1, **extra, parameters=[
        {"params": [m.weight], "weight_decay": 0.01}, {"params": [m.bias], "weight_decay": bias_decay}])
    t_opt = getattr(torch.optim, OPTIMIZERS[name][0])(lr=0.1, **extra, params=[
        {"params": [t.weight], "weight_decay": 0.01}, {"params": [t.bias], "weight_decay": 0.0}])
    return ({"optimizer": hooks_torch.TorchSide(False).optimizer_config(t_opt, t)},
            {"optimizer": hooks_paddle.PaddleSide().optimizer_config(p_opt, m)})


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_paddle_optimizers_dict_parameter_groups_and_their_weight_decay(name):
    """Each group's weight_decay read as Paddle applies it (SGD and Adam: each parameter's regularizer; Momentum: an
    L2 decay in its own update; AdamW: decoupled), against torch's same groups: the same; a group's decay planted
    (the bias's 0.02 for 0) is red, naming the parameter."""
    kind = OPTIMIZERS[name][1]
    t, p = grouped(name, 0.0)
    assert p["optimizer"]["weight_decay"] == {"weight": [0.01, kind], "bias": [0.0, kind]}, p
    root = {runconfig.ROOT: runconfig.ROOT}  # the Linears are the models, paired as the forward pairs them
    assert runconfig.differences(t, p, root, {}) == []
    t, p = grouped(name, 0.02)
    assert runconfig.differences(t, p, root, {}) == [
        f"optimizer: weight decay of bias torch 0 ({kind}) vs paddle 0.02 ({kind})"]


TORCH = """import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = model(torch.ones(2, 3, 8)).square().mean(); loss.backward(); opt.step(); opt.zero_grad()
"""
PADDLE = """import paddle
model = paddle.nn.Sequential(paddle.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0))
opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
for _ in range(2):
    loss = model(paddle.ones([2, 3, 8])).square().mean(); loss.backward(); opt.step(); opt.clear_grad()
"""


def test_a_packed_attention_layer_is_refused_in_one_line_in_scripts_mode(tmp_path):
    """torch's nn.MultiheadAttention holds q, k and v packed in in_proj_weight, Paddle's MultiHeadAttention three
    Linears: convert and compare_forward pair them (tests/test_pairing2.py), `portcheck run` cannot start Paddle's
    model from torch's weights and says so in one line, naming the packed tensor."""
    (tmp_path / "pt.py").write_text(TORCH)
    (tmp_path / "pd.py").write_text(PADDLE)
    proc = subprocess.run([sys.executable, "-m", "portcheck", "run", "--torch", f"{sys.executable} pt.py", "--paddle",
                           f"{sys.executable} pd.py", "--steps", "1", "--out", "out"],
                          capture_output=True, text=True, cwd=tmp_path)
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and line.startswith("error: the Paddle script cannot be checked: its model cannot "
                                                    "start from the torch model's weights"), proc.stderr[-2000:]
    assert "in_proj_weight has no Paddle counterpart" in line and "q_proj.weight no torch tensor fills" in line, line
    said = line.partition("cannot be checked: ")[2]  # the refusal, said once: not also relayed from the script
    assert (proc.stdout + proc.stderr).count(said) == 1, proc.stdout + proc.stderr
