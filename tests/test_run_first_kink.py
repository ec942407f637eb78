"""A kink in the first forward judged as compare_backward judges it (backward.judged, on_paddles_branch), in scripts
mode (`python -m portcheck run`) and from the hand-in folder (`python -m portcheck check`), issue 47.

The pair: a gate unit summing its inputs, exact in fp32, in another order on each side (torch a + (b + c), Paddle
(a + b) + c, as two kernels may), then a ReLU and a Linear. Its first example sums to -2**-25 in torch (-2**-25 +
2**-30 in float64: torch's side) and +2**-25 in Paddle, within the floor of 0 beside the second example's 3.4: the
ReLU shut in torch, open in Paddle, and the gate's weight (0, no ulp of it moves the sum) gets that example's gradient
in Paddle alone. A correct port, red against torch's own run (from the folder, bp_align's loss_1 15.1 x its
allowance), green against torch's run on Paddle's branch, which the check writes beside bp_align (kink_files.BRANCH); a
momentum plant beside the kink red in both. The scripts' runs are made once (module scope)."""
import contextlib
import io
import shutil
import sys

import numpy as np
import pytest

from portcheck import cli
from portcheck.pipeline import handin, kink_files
from portcheck.scripts import run
from portcheck.gradients.kinks import NEAR, ON_BRANCH
from portcheck.core.fileio import load_npy, save_npy
from portcheck.scripts.side_files import CROSSED, crossed_file
from portcheck.core.report import DIAGNOSTICS

STEPS = 3
BATCH = "[[1.0, 2.0 ** -24 + 2.0 ** -30, -1.0, -3 * 2.0 ** -25, 1.0], [0.4, 0.5, 1.8, 0.7, 1.0]]"
TORCH = f'''"""A gate unit, a ReLU and a Linear trained on one batch with momentum SGD."""
import argparse

import torch
from torch import nn

argparse.ArgumentParser(description=__doc__).parse_args()


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return x[:, :1] + (x[:, 1:2] + x[:, 2:3]) + x[:, 3:4] + self.w * x[:, 4:5]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate, self.act, self.head = Gate(), nn.ReLU(), nn.Linear(1, 2)

    def forward(self, x):
        return self.head(self.act(self.gate(x)))


torch.manual_seed(0)
model = Net()
x, y = torch.tensor({BATCH}), torch.tensor([[1.0, -1.0], [0.5, 0.25]])
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(10):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
'''
PADDLE = f'''"""The torch script's Paddle port, its gate summing in another order."""
import argparse

import paddle
from paddle import nn

argparse.ArgumentParser(description=__doc__).parse_args()


class Gate(nn.Layer):
    def __init__(self):
        super().__init__()
        self.w = self.create_parameter([1], default_initializer=nn.initializer.Constant(0.0))

    def forward(self, x):
        return ((x[:, :1] + x[:, 1:2]) + x[:, 2:3]) + x[:, 3:4] + self.w * x[:, 4:5]


class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.gate, self.act, self.head = Gate(), nn.ReLU(), nn.Linear(1, 2)

    def forward(self, x):
        return self.head(self.act(self.gate(x)))


model = Net()
x, y = paddle.to_tensor({BATCH}), paddle.to_tensor([[1.0, -1.0], [0.5, 0.25]])
optimizer = paddle.optimizer.Momentum(0.1, momentum=0.9, parameters=model.parameters())
for step in range(10):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
'''
BRANCH = f"{DIAGNOSTICS}/bp_align{kink_files.BRANCH}"


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory):
    """The scripts' runs (torch, Paddle, torch's float64 and moved runs) and the check with its taking run: (the
    folder, the statuses, (exit code, summary), [the crossings the taking run was asked for, its record's keys])."""
    folder = tmp_path_factory.mktemp("first_kink")
    (folder / "pt_gate.py").write_text(TORCH)
    (folder / "pd_gate.py").write_text(PADDLE)
    out = folder / "out"
    run.prepare(out)
    argvs = {fw: [sys.executable, str(folder / f"{'pt' if fw == 'torch' else 'pd'}_gate.py")] for fw in ("torch", "paddle")}
    statuses = {side: run.run_side(side, argvs[fw], out, STEPS) for side, fw in run.SIDES}
    made = []

    def again(crossed):
        made.append((crossed, run.taking_run(argvs["torch"], out, STEPS, crossed)))
        return made[-1][1]
    return out, statuses, judged(out, statuses, again), made


def judged(out, statuses, again):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run.judge(out, statuses, STEPS, again=again)
    return code, printed.getvalue()


def checked(top, capsys) -> tuple:
    """(exit code, bp_align's line, everything printed) of the hand-in checker on `top`."""
    code = cli.check(top, only=",".join(run.PAIRS))
    out = capsys.readouterr().out
    return code, next(line for line in out.splitlines() if line.startswith("bp_align:")), out


def test_a_first_forward_kink_is_green_in_scripts_mode_and_from_its_folder(gate_run, capsys):
    out, _, (code, said), made = gate_run
    assert all(any(k.startswith(f"{NEAR}0/") for k in load_npy(out / side / "record.npy")) for side in ("torch", "paddle"))
    assert code == 0 and "green: the same run for the first steps" in said, said
    assert "kink in step 1's forward: gate holds 1 value(s)" in said and ON_BRANCH in said, said
    # one taking run, on the first forward's kink alone, holding the gradients it moves
    assert len(made) == 1 and [(c.step, c.module) for c in made[0][0]] == [(0, "gate")], made
    c = made[0][0][0]
    assert (c.torch[0], c.paddle[0]) == (-2.0 ** -25, 2.0 ** -25), c
    assert any(k.startswith("grad/") for k in made[0][1])
    top = out / "log_reprod"
    assert (top / BRANCH).is_file() and not (top / DIAGNOSTICS / f"bp_align{kink_files.TAKEN}").exists()
    code, line, printed = checked(top, capsys)
    assert code == 0 and line.startswith("bp_align: green"), printed
    assert f"  {kink_files.on_branch_line('bp_align')}" in printed.replace(f"{DIAGNOSTICS}/", ""), printed


@pytest.mark.parametrize("how", ["deleted", "edited", "corrupt"])
def test_without_torchs_run_on_paddles_branch_the_folder_is_red(gate_run, tmp_path, capsys, how):
    top = shutil.copytree(gate_run[0] / "log_reprod", tmp_path / "log_reprod")
    if how == "deleted":
        (top / BRANCH).unlink()
    elif how == "edited":  # a value moved after the check: its record no longer describes the file
        save_npy(top / BRANCH, {k: v * 2 for k, v in load_npy(top / BRANCH).items()})
    else:  # not a value of the pair's key: red whatever its record
        save_npy(top / BRANCH, {"loss_1": np.array([np.nan], np.float32)})
    code, line, printed = checked(top, capsys)
    # and the folder against its manifest (PC151), and its page, green as handed in (PC970)
    assert code == 3 and line.startswith("bp_align: RED"), printed
    if how == "corrupt":
        assert f"{kink_files.BRANCH[1:]} is not torch's run on Paddle's branch" in line, line
    else:
        assert "measured RED (failed: loss_1" in line, line
        left = [s for s in printed.splitlines() if "left out" in s]
        assert left == ([] if how == "deleted" else [
            f"  {BRANCH} left out: its run record does not describe it (edited since its check wrote it, or another "
            "file's); the pair is judged without torch's run on Paddle's branch of the first forward's kinks (run its "
            "check again)"]), printed


def test_a_momentum_plant_beside_the_kink_is_red_in_scripts_mode_and_from_its_folder(gate_run, tmp_path, capsys):
    out, statuses, _, made = gate_run
    mine = tmp_path / "out"
    shutil.copytree(out, mine)
    script = tmp_path / "pd_gate.py"
    script.write_text(PADDLE.replace("momentum=0.9", "momentum=0.8"))
    status = run.run_side("paddle", [sys.executable, str(script)], mine, STEPS)
    asked = []

    def again(crossed):  # the same kink as the clean run's (its first forward is the same): that taking run
        crossed_file(mine / "asked.json", crossed)
        asked.append((mine / "asked.json").read_text() == (out / run.TAKING / CROSSED).read_text())
        return made[0][1]
    code, said = judged(mine, {**statuses, "paddle": status}, again)
    assert asked == [True] and code == 1 and "training: RED, the runs part at" in said and ON_BRANCH in said, said
    top = mine / "log_reprod"
    code, line, printed = checked(top, capsys)  # red twice: bp_align, and the configuration run judged (momentum)
    assert code == 2 and "measured RED (failed: " in line and "config: RED | 1 configuration difference(s)" in printed, \
        printed
    # the clean run's file beside the plant's pair is another run's (its record names that run): left out, still red,
    # and the folder is not as it was handed in (PC151)
    for f in (BRANCH, f"{BRANCH[:-4]}{handin.record.SUFFIX}"):
        shutil.copy(out / "log_reprod" / f, top / f)
    code, line, printed = checked(top, capsys)
    assert code == 3 and "left out: its run record is not the torch side's" in printed, printed


@pytest.mark.parametrize("momentum", [0.9, 0.8])
def test_the_librarys_hand_in_carries_torchs_run_on_paddles_branch(tmp_path, capsys, momentum):
    """The same through the library (backward.judged's report given to handin.judge_and_log): test_kink_branch's MLP,
    its hidden unit at +-2**-30 in the first forward, green from the folder; a momentum plant red."""
    torch = pytest.importorskip("torch")
    paddle = pytest.importorskip("paddle")
    import copy

    from portcheck import record_backward
    from portcheck.gradients.backward import judged as judged_backward
    from test_kink_branch import pair
    pt, pd, x = pair()
    y, start = np.array([[1.0], [-1.0]], "float32"), copy.deepcopy(pt.state_dict())
    losses = (torch.nn.functional.mse_loss, paddle.nn.functional.mse_loss)
    sgd = lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)  # noqa: E731
    t = record_backward(pt, x, y, losses[0], sgd, steps=3)
    p = record_backward(pd, x, y, losses[1], lambda p: paddle.optimizer.Momentum(0.1, momentum=momentum, parameters=p),
                        steps=3)

    def again(crossed, steps=3):
        pt.load_state_dict(start)
        return record_backward(pt, x, y, losses[0], sgd, steps=steps, crossed=crossed)
    report = judged_backward(t, p, again=again)
    assert report.on_branch and report.branch and report.passed == (momentum == 0.9), report.table()
    for side, rec in (("torch", t), ("paddle", p)):
        handin.save_side(tmp_path, "bp_align", side, handin.bp_align(rec), {"inputs": "i"}, side,
                         exact=handin.bp_align(rec, exact=True) if side == "torch" else None)
    verdict = handin.judge_and_log(tmp_path, "bp_align", after_steps=True, top=tmp_path / "log_reprod",
                                   comparison=report)
    assert verdict.passed == report.passed and (tmp_path / "log_reprod" / BRANCH).is_file()
    code = cli.check(tmp_path / "log_reprod", only="bp_align")
    assert code == (momentum != 0.9), capsys.readouterr().out
    (tmp_path / "log_reprod" / BRANCH).unlink()  # judged on torch's own run: red at the gate's gradient's updates
    # and PC151's line; and PC970's where the page, written green, now stands beside a red folder
    assert cli.check(tmp_path / "log_reprod", only="bp_align") == (3 if momentum == 0.9 else 2), capsys.readouterr().out
