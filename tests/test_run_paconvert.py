"""`python -m portcheck run` on a training script and its PaConvert output (tests/ports/scripts): every Linear of the
port a paddle.compat.nn.Linear holding torch's [out, in], one of them square. The Paddle side refused to start from
torch's weights ("torch fc1.weight [8, 12] vs Paddle fc1.weight [12, 8]", PC831); it reads and sets such a layer in
Paddle's classic layout, as the torch side writes its record: green as written, a plant red where it is."""
import sys
from pathlib import Path

import pytest

from portcheck.core.fileio import load_npy
from portcheck.scripts import run
from test_run_scripts import paddle_planted

HERE = Path(__file__).resolve().parent / "ports" / "scripts"
STEPS = 3


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    run.prepare(out)
    statuses = {side: run.run_side(side, [sys.executable, str(HERE / f"{'pt' if fw == 'torch' else 'pd'}_mlp.py")],
                                   out, STEPS) for side, fw in run.SIDES}
    return out, statuses


def test_paconverts_script_starts_from_torchs_weights_and_is_green(pair, tmp_path):
    code, said = paddle_planted(pair, tmp_path, HERE / "pd_mlp.py", (), STEPS)
    assert code == 0 and "green: the same run" in said, said
    assert "paddle paddle.manual_seed(0)" in said, said  # PaConvert's name for paddle.seed: before, "none set"
    record = load_npy(tmp_path / "out" / "paddle" / "record.npy")
    assert record["state0/fc1.weight"].shape == (8, 12)  # Paddle's classic layout, as torch's record holds it


def test_a_plant_in_paconverts_script_is_red_where_it_is(pair, tmp_path):
    code, said = paddle_planted(pair, tmp_path, HERE / "pd_mlp.py", [(
        "        return self.head(paddle.tanh(self.fc2(paddle.tanh(self.fc1(x)))))",
        "        return self.head(paddle.tanh(self.fc2(paddle.nn.functional.relu(self.fc1(x)))))")], STEPS)
    assert code != 0 and "the runs part at (model) (before fc2)" in said, said


@pytest.fixture(scope="module")
def conv1d_pair(tmp_path_factory):
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("run") / "out"
    run.prepare(out)
    statuses = {side: run.run_side(side, [sys.executable, str(HERE / f"{'pt' if fw == 'torch' else 'pd'}_conv1d.py")],
                                   out, STEPS) for side, fw in run.SIDES}
    return out, statuses


def test_transformers_conv1d_against_compat_linears_starts_as_convert_fills_it(conv1d_pair, tmp_path):
    """GPT-2's Conv1D holds [in, out], as a classic Paddle Linear; a compat Linear holds torch's Linear's [out, in]:
    convert transposes each Conv1D weight into it, the square one too. Before: the Paddle side started it as a
    torch.nn.Linear's record, "torch c_fc.weight [8, 12] vs Paddle c_fc.weight [12, 8]" [PC831]."""
    code, said = paddle_planted(conv1d_pair, tmp_path, HERE / "pd_conv1d.py", (), STEPS)
    assert code == 0 and "green: the same run" in said, said


@pytest.mark.parametrize("line, planted, where", [
    ("        return self.c_proj(paddle.tanh(self.c_sq(paddle.tanh(self.c_fc(x)))))",
     "        return self.c_proj(paddle.tanh(self.c_sq(paddle.nn.functional.relu(self.c_fc(x)))))",
     "(model) (before c_sq)"),
    ("        return self.c_proj(paddle.tanh(self.c_sq(paddle.tanh(self.c_fc(x)))))",  # Conv1D's order on compat's
     "        return self.c_proj(paddle.tanh(paddle.matmul(paddle.tanh(self.c_fc(x)), self.c_sq.weight) + "
     "self.c_sq.bias))", "(model) (before c_proj)")], ids=["activation", "square weight read as [in, out]"])
def test_a_plant_in_the_conv1d_port_is_red_where_it_is(conv1d_pair, tmp_path, line, planted, where):
    code, said = paddle_planted(conv1d_pair, tmp_path, HERE / "pd_conv1d.py", [(line, planted)], STEPS)
    assert code != 0 and f"the runs part at {where}" in said, said
