"""Step 3 passes on the aligned losses and goes red on each planted loss bug."""

import numpy as np
import pytest

from portcheck.core.fileio import load_npy, save_npy
from conftest import error_line, private_copy, run

S = "pipeline/Step3/"
PT, PD, CHECK = S + "pt_loss.py", S + "pd_loss.py", S + "check_step3.py"


@pytest.fixture(scope="module")
def aligned(tiny_home, tmp_path_factory):
    """The tiny home with both Step 3 outputs, aligned (read-only: tests copy it)."""
    home = private_copy(tiny_home, tmp_path_factory.mktemp("step3"))
    run(PT, home=home, cwd="/", check=0)  # scripts resolve every path from the repo root, not the cwd
    run(PD, home=home, cwd=home, check=0)
    return home


@pytest.fixture
def copy(aligned, tmp_path):
    return private_copy(aligned, tmp_path)


def log(home):
    return (home / "pipeline/Step3/loss_diff.log").read_text()


def test_aligned_passes_and_fills_log_reprod(copy):
    run(CHECK, home=copy, check=0)
    assert "diff check passed" in log(copy)
    # align's measured verdict beside the tuned one, from torch's float64 twin of the run
    assert "measured rule (align: 16 x torch's own fp32 error + a floor): all 1 within" in log(copy)
    for name in ("loss_torch.npy", "loss_paddle.npy", "loss_diff.log"):
        assert (copy / "log_reprod" / name).is_file()
    for side in ("torch", "paddle"):
        loss = load_npy(copy / f"pipeline/Step3/loss_{side}.npy")["loss"]
        assert loss.shape == (1,) and loss.dtype == np.float32 and 0.3 < loss[0] < 1.5


@pytest.mark.parametrize("bug, script", [("torch_label_smoothing", PT), ("paddle_sum_reduction", PD)])
def test_planted_bug_turns_the_check_red(copy, bug, script):
    run(script, home=copy, plant=bug, check=0)
    proc = run(CHECK, home=copy, check=1)
    assert "diff check failed: loss" in log(copy) and "diff check failed" in proc.stdout
    assert "measured rule (align: 16 x torch's own fp32 error + a floor): first over: loss (" in log(copy)


def test_zero_d_loss_and_one_element_loss_are_the_same_scalar_other_shapes_are_not(copy):
    """A 0-d loss (torch, Paddle >= 2.5) against a [1] loss (Paddle before 2.5, reprod_log's examples):
    the same scalar. Any other shape difference fails, never broadcasts."""
    path = copy / "pipeline/Step3/loss_paddle.npy"
    loss = load_npy(path)["loss"]
    save_npy(path, {"loss": loss.reshape(())})
    run(CHECK, home=copy, check=0)
    save_npy(path, {"loss": loss.reshape(1, 1)})
    run(CHECK, home=copy, check=1)
    assert "shape torch (1,) vs paddle (1, 1)" in log(copy)


def test_check_before_scripts_says_what_to_run(home):
    proc = run(CHECK, home=home, check=2)
    assert "pt_loss.py" in error_line(proc)


def test_missing_fake_data_is_one_line_and_keeps_results(copy):
    before = (copy / "pipeline/Step3/loss_paddle.npy").read_bytes()
    (copy / "fake_data/fake_label.npy").unlink()
    proc = run(PD, home=copy, check=2)
    assert "gen_fake_data.py" in error_line(proc) and "Traceback" not in proc.stderr
    assert (copy / "pipeline/Step3/loss_paddle.npy").read_bytes() == before
