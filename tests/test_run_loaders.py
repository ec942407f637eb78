"""`python -m portcheck run` on scripts that shuffle with their framework's DataLoader and accumulate gradients
(tests/loaders/pt_wine.py and its port pd_wine.py, 2 micro-batches per step, an auxiliary loss beside the
classifier's): green as written, each one-line plant red and named.

All sides run once (as test_run_scripts does it); each planted Paddle script is then run alone against the torch
sides and judged (run.run_side, run.judge)."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from portcheck.scripts import run, runconfig
from portcheck.core.fileio import load_npy
from test_run_scripts import paddle_planted

HERE = Path(__file__).resolve().parent / "loaders"
STEPS = 2
NORMALISED = "x = (x - x.mean(0)) / x.std(0)"
ACCUM = ("--accum", "2")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Both scripts shuffled by their DataLoader, 2 micro-batches per step; torch's loader with 2 workers (its sampler
    drawn in the main process)."""
    out = tmp_path_factory.mktemp("run") / "out"
    run.prepare(out)
    argv = {"torch": [sys.executable, str(HERE / "pt_wine.py"), *ACCUM, "--workers", "2"],
            "paddle": [sys.executable, str(HERE / "pd_wine.py"), *ACCUM]}
    statuses = {side: run.run_side(side, argv[fw], out, STEPS) for side, fw in run.SIDES}
    return out, statuses


def paddle_judged(pair, tmp_path, replace=(), flags=ACCUM):
    """(exit code, summary) of pd_wine.py with each (line, planted) of `replace` planted, judged against the torch
    sides (no plant: the pair's own Paddle run, judged)."""
    own = not replace and flags == ACCUM
    return paddle_planted(pair, tmp_path, HERE / "pd_wine.py", replace, STEPS, None if own else flags)


def test_each_micro_batch_in_torchs_order_is_fed(pair, tmp_path):
    """The correct port: Paddle's RandomSampler draws torch's order, each micro-batch is recorded and fed (the loss
    backward() was last called on, the step's second micro-batch's, is torch's): green."""
    code, said = paddle_judged(pair, tmp_path)
    assert code == 0 and f"data: every value equal ({2 * STEPS} batches" in said, said
    assert f"(data: Paddle's RandomSampler given torch's RandomSampler order for the {STEPS} step(s))" in said, said
    t, p = (load_npy(tmp_path / "out" / side / "record.npy") for side in ("torch", "paddle"))
    assert sorted(k for k in p if k.startswith("input/")) == [f"input/batch_{c}/args/0" for c in range(2 * STEPS)]
    assert not np.array_equal(t["input/batch_0/args/0"], t["input/batch_1/args/0"])
    for i in range(STEPS):
        assert abs(float(t[f"loss/{i}"][0]) - float(p[f"loss/{i}"][0])) < 1e-6, (t[f"loss/{i}"], p[f"loss/{i}"])


def test_a_distributed_batch_sampler_is_given_torchs_order(pair, tmp_path):
    """paddlenlp's form of a shuffled loader, with 2 workers: green, and the workers end with the script (the recorder
    stops it after step N: a worker blocked on its queue outlived it)."""
    code, said = paddle_judged(pair, tmp_path, [(
        "DataLoader(data, batch_size=args.batch_size, shuffle=True)",
        "DataLoader(data, batch_sampler=paddle.io.DistributedBatchSampler(data, args.batch_size, shuffle=True), "
        "num_workers=2)")])
    assert code == 0 and "(data: Paddle's DistributedBatchSampler(shuffle=True) given torch's RandomSampler order" \
        in said, said
    script = str(tmp_path / "pd_wine.py").encode()
    alive = [p for p in Path("/proc").iterdir() if p.name.isdigit() and script in read(p / "cmdline")]
    assert not alive, f"the Paddle script's workers outlived it: {[p.name for p in alive]}"


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # a process that ended meanwhile
        return b""


def test_a_preprocessing_difference_under_a_shuffle_is_red_at_data(pair, tmp_path):
    code, said = paddle_judged(pair, tmp_path, [(NORMALISED, "x = (x - x.mean(0)) / x.std(0, ddof=1)")])
    assert code == 1 and "data RED: the batches or targets the Paddle script feeds differ: input/batch 0, key args/0" \
        in said and "given torch's RandomSampler order" in said, said
    assert "rows torch fed at another place" not in said, said  # the same samples: not an order


def test_a_shuffle_of_the_scripts_own_is_judged_as_drawn(pair, tmp_path):
    """The Paddle script permutes its data itself (numpy), its loader unshuffled: its order is its own, red."""
    code, said = paddle_judged(pair, tmp_path, [
        (NORMALISED, NORMALISED + "\norder = np.random.RandomState(0).permutation(len(x))\nx, y = x[order], y[order]"),
        ("shuffle=True)", "shuffle=False)")])
    assert code == 1 and "data RED" in said and "each framework's shuffle draws its own order" in said, said
    assert "torch's RandomSampler order given to no Paddle sampler" in said, said


def test_accumulation_on_one_side_is_one_configuration_line(pair, tmp_path):
    code, said = paddle_judged(pair, tmp_path, flags=())
    assert "DIFFERS gradient accumulation: torch 2 backward() per optimizer step vs paddle 1" in said, said
    assert code == 1 and said.count("DIFFERS") == 1 and "data: every value equal" in said, said
    assert "RED: 1 configuration difference(s)" in said, said


def test_the_auxiliary_losss_settings_planted_are_red_and_named_in_run_and_check(pair, tmp_path):
    """Every loss of a micro-batch configured, not only the first: the auxiliary MSELoss's reduction planted (the
    second loss called; the first alone compared before: green configuration) is one line naming it, which `check`
    re-derives from the hand-in's configuration records."""
    code, said = paddle_judged(pair, tmp_path, [("brier = nn.MSELoss()", 'brier = nn.MSELoss(reduction="sum")')])
    line = "loss 2 of 2 (mse_loss): reduction torch mean vs paddle sum"
    assert code == 1 and f"DIFFERS {line}" in said and said.count("DIFFERS") == 1, said
    checked = subprocess.run([sys.executable, "-m", "portcheck", "check", str(tmp_path / "out" / "log_reprod"),
                              "--only", runconfig.CONFIG], capture_output=True, text=True)
    assert checked.returncode == 1 and f"DIFFERS {line}" in checked.stdout, checked.stdout + checked.stderr


def test_an_accumulation_count_that_varies_is_said_step_by_step():
    """A side whose last step accumulates fewer micro-batches (an epoch's end): the counts of each step, one line."""
    from portcheck.scripts.runconfig import differences
    said = differences({"accumulation": {"backward": [2, 2, 1]}}, {"accumulation": {"backward": [2, 2, 2]}}, {}, {})
    assert said == ["gradient accumulation: backward() per optimizer step torch [2, 2, 1] vs paddle [2, 2, 2]"]
    assert differences({"accumulation": {"backward": [2, 2]}}, {"accumulation": {"backward": [2, 2]}}, {}, {}) == []


def test_batchnorms_running_variance_under_accumulation_is_the_by_design_rule_of_every_update():
    """Two micro-batches a step update BatchNorm's statistics twice, torch's with the unbiased variance, Paddle's
    with the biased one: the rule takes both (norm_counter counts the calls; before, it took one and a correct port
    accumulating over a BatchNorm was red at running_var, found by a pair of scripts written outside the project).
    A momentum that differs still leaves its difference."""
    from types import SimpleNamespace

    import paddle
    import torch

    from portcheck.gradients.optimizers import biased_variance, norm_counter
    x = [np.random.default_rng(i).standard_normal((16, 4)).astype(np.float32) for i in range(2)]
    bn = torch.nn.Sequential(torch.nn.BatchNorm1d(4))
    counts = norm_counter(bn)
    before = bn[0].running_var.numpy().copy()
    opt = torch.optim.SGD(bn.parameters(), lr=0.1)
    for xb in x:
        bn(torch.from_numpy(xb))
    opt.step()
    bn(torch.from_numpy(x[0]))  # the next step's: the count is the first step's
    norm = counts()["norm/0"]
    assert norm.tolist() == [16, 0.1, 2]

    bn = torch.nn.Sequential(torch.nn.BatchNorm1d(4))  # the two micro-batches' updates alone, as a step's
    for xb in x:
        bn(torch.from_numpy(xb))
    after = bn[0].running_var.detach().numpy()

    def left(momentum, updates):
        pd = paddle.nn.BatchNorm1D(4, momentum=momentum)
        for xb in x:
            pd(paddle.to_tensor(xb))
        row = SimpleNamespace(max=1.0, mean=1.0)
        biased_variance(row, norm, before, before, after, pd._variance.numpy(), updates)
        return row.max
    assert left(0.9, 2) < 1e-6 < 1e-3 < left(0.9, 1)
    assert left(0.8, 2) > 1e-3
