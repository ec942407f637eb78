"""A contestant's own hand-in, written with reprod_log for a model that is not ours, judged as the guide
judges it (each key's mean <= the pair's threshold) with the strict verdict beside it."""
import re
import shutil

import numpy as np
import pytest

from conftest import error_line, run

SCRIPT = "pipeline/check_log_reprod.py"


def two_models():
    """The same two-layer MLP in each framework, with the same weights (Paddle's Linear holds [in, out])."""
    import paddle
    import torch
    rng = np.random.RandomState(0)
    w1, b1, w2, b2 = (rng.randn(*s).astype("float32") * 0.5 for s in ((16, 8), (16,), (3, 16), (3,)))
    pt = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    pt.load_state_dict({"0.weight": torch.from_numpy(w1), "0.bias": torch.from_numpy(b1),
                        "2.weight": torch.from_numpy(w2), "2.bias": torch.from_numpy(b2)})
    pd = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 3))
    pd.set_state_dict({"0.weight": w1.T.copy(), "0.bias": b1, "2.weight": w2.T.copy(), "2.bias": b2})
    x, y = rng.randn(4, 8).astype("float32"), np.array([0, 2, 1, 0])
    t_logits = pt(torch.from_numpy(x))
    p_logits = pd(paddle.to_tensor(x))
    t_loss = torch.nn.functional.cross_entropy(t_logits, torch.from_numpy(y))
    p_loss = paddle.nn.functional.cross_entropy(p_logits, paddle.to_tensor(y))
    return ({"logits": t_logits.detach().numpy(), "loss": t_loss.detach().numpy()},
            {"logits": p_logits.numpy(), "loss": p_loss.numpy()})


def write_pair(folder, name, torch_values: dict, paddle_values: dict, threshold=1e-6):
    """As a contestant's scripts do: ReprodLogger on each side, ReprodDiffHelper's report for the log."""
    from reprod_log import ReprodDiffHelper, ReprodLogger
    for side, values in (("torch", torch_values), ("paddle", paddle_values)):
        logger = ReprodLogger()
        for key, value in values.items():
            logger.add(key, value)
        logger.save(str(folder / f"{name}_{side}.npy"))
    helper = ReprodDiffHelper()
    helper.compare_info(helper.load_info(str(folder / f"{name}_torch.npy")),
                        helper.load_info(str(folder / f"{name}_paddle.npy")))
    helper.report(path=str(folder / f"{name}_diff.log"), diff_threshold=threshold)


@pytest.fixture(scope="module")
def hand_in(tmp_path_factory):
    folder = tmp_path_factory.mktemp("contestant") / "log_reprod"
    folder.mkdir()
    t, p = two_models()
    write_pair(folder, "forward", {"logits": t["logits"]}, {"logits": p["logits"]})
    # torch gives a 0-d loss, reprod_log's examples (and Paddle before 2.5) a [1] one: the same scalar
    write_pair(folder, "loss", {"loss": t["loss"].reshape(())}, {"loss": p["loss"].reshape(1)})
    return folder


def line(out: str, name: str) -> str:
    return next(l for l in out.splitlines() if l.startswith(f"{name}: "))


def test_both_verdicts_green_and_what_was_not_handed_in_red(hand_in):
    """Two green pairs are not a green hand-in: three of the five the guide lists as handed in are missing (issue
    36: less than the guide names is never green; data and lr are judged when present, issue 47). A reviewer asking
    for a partial hand-in says so with --only."""
    proc = run(SCRIPT, hand_in, home=hand_in.parent, check=1)
    for pair in ("forward", "loss"):
        assert re.match(rf"{pair}: green \| guide green \(mean <= 1e-06: .*\| strict green", line(proc.stdout, pair))
    assert "forward_diff.log: every logged value is the recomputed one (1 keys)" in proc.stdout
    assert "not handed in: metric, bp_align, train_align: RED" in proc.stdout
    assert "3 pair(s) red" in proc.stdout
    proc = run(SCRIPT, hand_in, "--only", "forward,loss", home=hand_in.parent, check=0)
    assert "same run not proven" in proc.stdout and "RED" not in proc.stdout
    assert "partial hand-in: only forward, loss asked for (--only)" in proc.stdout
    assert "every pair green (partial: --only forward,loss)" in proc.stdout
    proc = run(SCRIPT, hand_in, "--only", "forward,lr", home=hand_in.parent, check=1)
    assert "not handed in: lr: RED | the guide asks for every one of its pairs (asked for by --only)" in proc.stdout


def test_mean_under_max_over_is_green_for_the_guide_red_when_strict(hand_in, tmp_path):
    """A public ResNet-18 pair showed mean 6.8e-7, max 3.3e-6: the guide passes it at 1e-6."""
    folder = tmp_path / "h"
    shutil.copytree(hand_in, folder)
    grad = np.zeros(1000, dtype="float32")
    spike = grad.copy()
    spike[7] = 5e-6  # mean 5e-9, max 5e-6
    write_pair(folder, "backward", {"grad_fc.weight": grad}, {"grad_fc.weight": spike})  # a pair of its own: 1e-6
    proc = run(SCRIPT, folder, "--only", "forward,loss,backward", home=tmp_path, check=0)
    bp = line(proc.stdout, "backward")
    assert "guide green" in bp and "strict RED (grad_fc.weight: max diff 5.000e-06 > 1.000e-06" in bp, bp
    run(SCRIPT, folder, "--only", "forward,loss,backward", "--strict", home=tmp_path, check=1)
    run("pipeline/check_pair.py", folder / "backward_torch.npy", folder / "backward_paddle.npy", home=tmp_path, check=0)
    run("pipeline/check_pair.py", folder / "backward_torch.npy", folder / "backward_paddle.npy", "--strict",
        home=tmp_path, check=1)


def test_a_tampered_diff_log_is_red_with_both_values(hand_in, tmp_path):
    folder = tmp_path / "h"
    shutil.copytree(hand_in, folder)
    log = folder / "forward_diff.log"
    text = log.read_text()
    logged = re.search(r"mean diff: check passed: True, value: (\S+)", text).group(1)
    log.write_text(text.replace(f"value: {logged}", "value: 1e-09", 1))  # a nicer figure, by hand
    out = run(SCRIPT, folder, home=tmp_path, check=1).stdout
    assert f"RED: does not match the pair: logits mean logged 1e-09, recomputed {float(logged)!r}" in out, out


def test_nan_passes_reprod_logs_rule_but_fails_here(hand_in, tmp_path):
    folder = tmp_path / "h"
    shutil.copytree(hand_in, folder)
    t, _ = two_models()
    broken = t["logits"].copy()
    broken[0, 0] = np.nan
    write_pair(folder, "forward", {"logits": t["logits"]}, {"logits": broken})
    forward = line(run(SCRIPT, folder, home=tmp_path, check=1).stdout, "forward")
    assert "guide green" in forward and "NaN passes reprod_log's rule" in forward, forward
    assert "strict RED (logits: 1 NaN and 0 Inf in paddle)" in forward, forward


def test_a_real_difference_fails_the_guide(hand_in, tmp_path):
    folder = tmp_path / "h"
    shutil.copytree(hand_in, folder)
    t, p = two_models()
    write_pair(folder, "forward", {"logits": t["logits"]}, {"logits": p["logits"] * 1.001})  # e.g. a wrong epsilon
    forward = line(run(SCRIPT, folder, home=tmp_path, check=1).stdout, "forward")
    assert forward.startswith("forward: RED | guide RED (mean <= 1e-06: 0/1 keys; failed: logits mean"), forward


def test_threshold_flag(hand_in, tmp_path):
    assert "--threshold" in error_line(run(SCRIPT, hand_in, "--threshold", "forward=inf", home=tmp_path, check=2))
    out = run(SCRIPT, hand_in, "--threshold", "forward=1e-12", home=tmp_path, check=1).stdout
    assert "forward: RED | guide RED (mean <= 1e-12" in out


def test_check_pair_writes_nothing_unless_asked_and_never_over_a_contestants_log(hand_in, tmp_path):
    folder = tmp_path / "h"
    shutil.copytree(hand_in, folder)
    before = {f.name: f.read_bytes() for f in folder.iterdir()}
    pair = (folder / "forward_torch.npy", folder / "forward_paddle.npy")
    out = run("pipeline/check_pair.py", *pair, home=tmp_path, check=0).stdout
    assert "guide green" in out and "strict green" in out
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before  # no file without --log
    line_ = error_line(run("pipeline/check_pair.py", *pair, "--log", folder / "forward_diff.log", home=tmp_path, check=2))
    assert "was not written by this command" in line_
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before
    mine = tmp_path / "mine.log"
    run("pipeline/check_pair.py", *pair, "--log", mine, home=tmp_path, check=0)
    run("pipeline/check_pair.py", *pair, "--log", mine, home=tmp_path, check=0)  # its own log: rewritten
    assert sorted(f.name for f in tmp_path.iterdir()) == ["h", "mine.log"]  # that file and no other
    assert "given as both sides" in error_line(run("pipeline/check_pair.py", pair[0], pair[0], home=tmp_path, check=2))


def test_a_hostile_folder_cannot_forge_a_line_or_cost_memory(hand_in, tmp_path):
    """A pair's file name holding a newline cannot start a line of its own ("forward: guide green"), and a
    diff log of gigabytes is read only as far as a diff log goes (guide.LOG_BYTES)."""
    from portcheck.pipeline import guide
    folder = tmp_path / "h"
    folder.mkdir()
    forged = "x\nforward: guide green | strict green\n  no forward_diff.log beside it"
    for side in ("torch", "paddle"):
        shutil.copy(hand_in / f"forward_{side}.npy", folder / f"{forged}_{side}.npy")
    out = run(SCRIPT, folder, home=tmp_path, check=1).stdout  # red: the guide's pairs are not there
    assert not any(l.startswith(("forward: ", "  no forward_diff.log")) for l in out.splitlines()), out
    big = tmp_path / "big_diff.log"
    with open(big, "wb") as f:
        f.truncate(guide.LOG_BYTES * 64)  # sparse: 256 MB that reads as NULs
    assert len(guide.read_log(big)) == guide.LOG_BYTES
