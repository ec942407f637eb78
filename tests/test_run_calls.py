"""`python -m portcheck run` records every call and every loss as the script makes them (tests/calls/pt_views.py and
its port pd_views.py): each batch seen in two views (two calls of the model a step), an auxiliary loss with its own
target, the model called with a dict and a number (model({"x": x}, 2.0)), its first layer frozen, two optimizers over
two parts of it, and an evaluation forward before training (model.eval(), gradients on), which is no training batch.

All sides run once (as test_run_loaders does it); each planted Paddle script is then run alone against the torch
sides and judged (run.run_side, run.judge), several plants a run where each is named by its own line."""
import functools
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from portcheck.scripts import arguments, recorder, run
from portcheck.core.fileio import load_npy
from test_run_scripts import paddle_planted

HERE = Path(__file__).resolve().parent / "calls"
STEPS = 2


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    run.prepare(out)
    argv = {"torch": [sys.executable, str(HERE / "pt_views.py")], "paddle": [sys.executable, str(HERE / "pd_views.py")]}
    statuses = {side: run.run_side(side, argv[fw], out, STEPS) for side, fw in run.SIDES}
    return out, statuses


def paddle_judged(pair, tmp_path, replace=()):
    """(exit code, summary) of pd_views.py with each (line, planted) of `replace` planted, judged against the torch sides
    (no plant: the pair's own Paddle run)."""
    return paddle_planted(pair, tmp_path, HERE / "pd_views.py", replace, STEPS)


def test_every_call_and_every_loss_is_recorded_and_fed_in_order(pair, tmp_path):
    """Green; each step's two calls and four losses recorded in order, Paddle fed each (its losses torch's), the
    evaluation before training not among them; the two optimizers make one step each time both stepped."""
    code, said = paddle_judged(pair, tmp_path)
    assert code == 0 and "data: every value equal (4 batches" in said and "green: the same run" in said, said
    page = tmp_path / "out" / "log_reprod" / "diagnostics" / "report.html"  # run's page beside its hand-in
    assert 'data-verdict="green"' in page.read_text() and 'id="first-diverging"' not in page.read_text()
    t, p = (load_npy(tmp_path / "out" / side / "record.npy") for side in ("torch", "paddle"))
    x = np.random.RandomState(0).randn(64, 8).astype(np.float32)
    for rec in (t, p):
        assert sorted(k for k in rec if k.startswith("input/")) == [f"input/batch_{c}/args/0/x" for c in range(4)]
        assert sorted(k for k in rec if k.startswith("target/")) == [f"target/batch_{j}" for j in range(8)]
        for step in range(STEPS):  # the evaluation's rows (x[48:]) are no batch: the first is the first step's
            xb = x[16 * step:16 * step + 16]
            np.testing.assert_array_equal(rec[f"input/batch_{2 * step}/args/0/x"], xb)
            np.testing.assert_array_equal(rec[f"input/batch_{2 * step + 1}/args/0/x"], xb[:, ::-1])
            np.testing.assert_array_equal(rec[f"target/batch_{4 * step + 3}"], xb[:, ::-1])  # the second view's aux
            assert rec[f"target/batch_{4 * step}"].dtype == np.int64
    for i in range(STEPS):
        assert abs(float(t[f"loss/{i}"][0]) - float(p[f"loss/{i}"][0])) < 1e-5, (t[f"loss/{i}"], p[f"loss/{i}"])
    config = json.loads((tmp_path / "out" / "paddle" / "status.json").read_text())["config"]
    assert [o["family"] for o in config["optimizers"]] == ["sgd", "sgd+momentum"], config["optimizers"]
    assert config["accumulation"] == {"forward": [2, 2], "backward": [1, 1]}, config["accumulation"]
    assert "embed.weight" not in config["optimizers"][0]["weight_decay"]  # frozen: no optimizer's


def test_a_second_view_an_optimizer_and_a_temperature_planted_are_each_named(pair, tmp_path):
    code, said = paddle_judged(pair, tmp_path, [
        ("for view in (xb, xb.flip(1)):", "for view in (xb, -xb):"),
        ("momentum=0.9,", "momentum=0.5,"),
        ('"--temperature", type=float, default=2.0', '"--temperature", type=float, default=1.0')])
    assert code == 1, said
    assert "data RED: the batches or targets the Paddle script feeds differ: input/batch 1" in said, said
    assert "optimizer 2 (in the order they step): momentum torch 0.9 vs paddle 0.5" in said, said
    check = subprocess.run([sys.executable, "-m", "portcheck", "check", str(tmp_path / "out" / "log_reprod"),
                            "--only", ",".join(("config", *run.PAIRS))], capture_output=True, text=True)
    assert check.returncode == 1 and "optimizer 2 (in the order they step): momentum" in check.stdout, \
        check.stdout + check.stderr  # the hand-in says it too
    # the temperature divides the logits in the model's own forward: its first call, on Paddle's own number
    assert "their own computation differs: (model)" in said and "training: RED, the runs part at (model)[0]" in said, \
        said


def test_an_auxiliary_target_and_a_layer_left_unfrozen_are_each_named(pair, tmp_path):
    code, said = paddle_judged(pair, tmp_path, [
        ("F.mse_loss(recon, view)", "F.mse_loss(recon, xb)"),
        ("p.stop_gradient = True", "p.stop_gradient = False")])
    assert code == 1, said
    assert "data RED: the batches or targets the Paddle script feeds differ: target/batch_3" in said, said
    assert "training: RED, the runs part at" in said and "embed" in said.split("the runs part at")[1][:40], said


def test_a_list_and_a_number_reach_the_first_call():
    """model([x], 0.5, mask={"m": x}, flag=True): the recorder's first-call arguments keep the list, the number, the
    dict and the flag, torch's batch in place of the tensor it recorded there (the Paddle model starts on them, the
    isolated runs make the same call, torch's float64 run with the arrays widened)."""
    from portcheck.forward.twin import float64_inputs
    from portcheck.mapping.trace import Arguments, call

    class Tensor:  # what the recorder reads of a framework's tensor
        shape = (2, 3)

        def numpy(self):
            return np.zeros(self.shape, np.float32)
    given = np.arange(6, dtype=np.float32).reshape(2, 3)
    first = Arguments(arguments.arrays(([Tensor()], 0.5), "args", {"args/0/0": given}),
                      arguments.arrays({"mask": {"m": Tensor()}, "flag": True}, "kwargs", {}))
    seen = []
    call(lambda xs, scale, mask, flag: seen.append((xs, scale, mask, flag)), float64_inputs(first), lambda a: ("tensor", a))
    (xs, scale, mask, flag), = seen
    assert isinstance(xs, list) and xs[0][0] == "tensor" and xs[0][1].dtype == np.float64 and \
        np.array_equal(xs[0][1], given), xs
    assert scale == 0.5 and flag is True and mask["m"][0] == "tensor" and not mask["m"][1].any(), (scale, mask, flag)
    with pytest.raises(arguments.Unbuilt):  # an object holding tensors: the isolated run is not made, saying so
        arguments.arrays((object(),), "args", {})


@pytest.fixture
def recording(tmp_path, monkeypatch):
    """(a torch side's recorder, a two-layer Net) in this process: every module call through the recorder, an
    optimizer holding the Net's parameters (what the recorder reads of one); undone after the test."""
    import torch
    from portcheck.scripts.hooks_torch import TorchSide

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.b(self.a(x))
    model = Net()
    rec = recorder.Run({"side": "torch", "steps": 1, "out": str(tmp_path)}, TorchSide(False))
    rec.optimizers.append(SimpleNamespace(param_groups=[{"params": list(model.parameters())}]))
    own = torch.nn.Module.__call__
    monkeypatch.setattr(torch.nn.Module, "__call__",
                        lambda m, *a, **k: rec.module_call(m, functools.partial(own, m), a, k))
    return rec, model


def test_forward_called_directly_is_refused_saying_so(recording, tmp_path):
    """model.forward(x): the model is never called, its layers are; one true line, not "trains two models"."""
    import torch
    rec, model = recording
    with pytest.raises(recorder.Refused, match=r"it calls Net\.forward\(\) directly .* call model\(x\)"):
        model.forward(torch.zeros(1, 3))
    assert "directly" in json.loads((tmp_path / "status.json").read_text())["error"]


def test_a_model_trained_in_eval_mode_is_refused_saying_so(recording, tmp_path):
    """An evaluation is a call in eval mode; a script whose model stays in eval mode as it trains (from_pretrained
    returns one so) is told so at its first backward(), not "never called a model"."""
    import torch
    rec, model = recording
    model.eval()
    loss = model(torch.zeros(1, 3)).sum()
    assert rec.root is None and not rec.record  # no batch, no first call
    with pytest.raises(recorder.Refused, match=r"it trains its model \(Net\) in eval mode .* call model\.train\(\)"):
        rec.backward(loss)


def test_a_model_whose_optimizer_holds_its_head_alone_is_the_model_trained(tmp_path):
    """Fine-tuning a head by giving the optimizer the head's parameters alone, the body left trainable: the model
    called is the model trained (before: "never called a model whose parameters an optimizer holds", untrue)."""
    script = tmp_path / "pt_head.py"
    script.write_text("import torch\ntorch.manual_seed(0)\n"
                      "model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))\n"
                      "opt = torch.optim.SGD(model[2].parameters(), lr=0.1)\n"
                      "for _ in range(2):\n"
                      "    loss = model(torch.ones(5, 3)).square().mean(); loss.backward(); opt.step(); opt.zero_grad()\n")
    out = tmp_path / "out"
    run.prepare(out)
    status = run.run_side("torch", [sys.executable, str(script)], out, STEPS)
    assert status["root"] == "Sequential" and status["steps"] == STEPS, status


@pytest.fixture(scope="module")
def mask_pair(tmp_path_factory):
    """tests/calls/pt_mask.py and pd_mask.py, every side: each script computes the padding mask in its own
    framework's convention (torch's key_padding_mask True at the pads, Paddle's attn_mask True at the tokens)."""
    out = tmp_path_factory.mktemp("mask") / "out"
    run.prepare(out)
    argv = {fw: [sys.executable, str(HERE / f"{'pt' if fw == 'torch' else 'pd'}_mask.py")] for fw in ("torch", "paddle")}
    return out, {side: run.run_side(side, argv[fw], out, STEPS) for side, fw in run.SIDES}


def test_a_mask_the_script_computes_in_its_own_convention_is_fed_as_computed_and_named(mask_pair, tmp_path):
    """The Paddle model called with its own mask, not torch's (before: fed torch's True-at-the-pads mask, which
    Paddle's attention reads as the tokens to attend: a correct port red at attn); the data pair compares it negated
    back; one line names the convention. The Paddle script passing torch's convention to its attention (the bug a
    port makes) is still fed as computed: red at the attention."""
    code, said = paddle_planted(mask_pair, tmp_path / "clean", HERE / "pd_mask.py", (), STEPS)
    assert code == 0 and "green: the same run" in said, said
    assert "(data: args/1: the Paddle script computes it as torch's negated, its framework's convention (a mask True " \
        "where torch's is False: Paddle's attn_mask True at the tokens to attend, torch's key_padding_mask True at " \
        "the pads): fed as the script computed it, the data pair compares it negated back)" in said, said
    assert "data: every value equal" in said, said
    code, said = paddle_planted(mask_pair, tmp_path / "planted", HERE / "pd_mask.py",
                                [("model(ids, ids != 0)", "model(ids, ids == 0)")], STEPS)
    assert code == 1 and "training: RED, the runs part at attn" in said and "negated" not in said, said
    # the same bool mask on both sides: the data pair equal (handed in as 0 and 1: reprod_log subtracts numbers)
    assert "data: green | exact green" in said, said
