"""Step 5: a smoke training alignment passes; a different data order fails; resume equals no interruption."""
import numpy as np
import pytest

from portcheck.core.fileio import load_npy
from conftest import SST2, STEP5_PAIR, STEP5_TRAIN, error_line, private_copy, run

(PT, PD), CHECK = STEP5_TRAIN, "pipeline/Step5/check_step5.py"

needs_sst2 = pytest.mark.skipif(not SST2.is_dir(), reason=f"{SST2} not present")


def test_deterministic_smoke_passes_and_wrong_order_fails(deterministic_pair, tmp_path):
    home = private_copy(deterministic_pair, tmp_path)
    run(CHECK, home=home, check=0)
    log = (home / "pipeline/Step5/train_align_diff.log").read_text()
    assert "per-step loss: max diff" in log and "never beyond" in log
    for name in ("train_align_torch.npy", "train_align_paddle.npy", "train_align_diff.log", "train_torch.log",
                 "train_paddle.log", "diagnostics/train_align.png", "diagnostics/train_curves_torch.npy",
                 "diagnostics/train_curves_paddle.npy", "diagnostics/train_align_torch.run.json"):
        assert (home / "log_reprod" / name).is_file(), name

    run(PD, *STEP5_PAIR, home=home, plant="paddle_data_order", check=0)
    proc = run(CHECK, home=home, check=1)
    failed = next(line for line in proc.stdout.splitlines() if "diff check failed: " in line)
    assert "loss" in failed.split("diff check failed: ", 1)[1].split(", ") and "curves separate" in proc.stdout


SHARED = ["--data_dir", SST2, "--train_limit", 640, "--max_steps", 20, "--log_every", 10, "--shared_dropout"]


def losses(home, fw):
    return load_npy(home / f"pipeline/Step5/train_curves_{fw}.npy")["loss"].astype("float64")


@needs_sst2
def test_shared_dropout_keeps_curves_together_and_catches_a_wrong_mask(home):
    for script in (PT, PD):
        assert "shared dropout masks" in run(script, *SHARED, home=home, check=0).stdout
    shared = losses(home, "paddle")
    assert np.abs(losses(home, "torch") - shared).max() < 1e-5  # all 20 steps
    run(CHECK, home=home, check=0)
    assert "per-step loss_shared_dropout: max diff" in (home / "pipeline/Step5/train_align_diff.log").read_text()

    for bug in ("paddle_dropout_no_rescale", "paddle_dropout_rate"):
        run(PD, *SHARED, home=home, plant=bug, check=0)
        proc = run(CHECK, home=home, check=1)
        assert "diff check failed: loss_shared_dropout" in proc.stdout and "curves separate" in proc.stdout, bug

    run(PT, *SHARED[:-1], "--deterministic", home=home, check=0)  # the masks really drop something
    assert np.abs(losses(home, "torch") - shared).max() > 1e-3


def test_without_data_dir_says_pass_data_dir(home):
    proc = run(PT, home=home, check=2)
    assert "--data_dir" in error_line(proc)


@pytest.mark.parametrize("script", [PT, PD])
def test_resume_after_kill_equals_uninterrupted(home, script, tmp_path):
    # demo.tsv: 40 sentences, 5 steps an epoch; checkpoints at steps 3, 5 (epoch end), 6, 9
    args = ["--demo", "--batch_size", 8, "--epochs", 2, "--save_steps", 3, "--group_by_length", "--eval_steps", 4,
            "--output_dir", tmp_path / "ckpt"]
    fw = "torch" if script == PT else "paddle"
    run(script, *args, home=home, check=0)  # dropout on: resume must restore the RNG too
    straight = load_npy(home / f"pipeline/Step5/train_curves_{fw}.npy")
    acc = load_npy(home / f"pipeline/Step5/train_align_{fw}.npy")["acc_per_epoch"]

    killed = run(script, *args, home=home, plant="sigkill_at_step_8")  # mid second epoch, after 7 steps
    assert killed.returncode == -9
    assert not list((tmp_path / "ckpt").glob(".tmp-*"))
    run(script, *args, "--resume", home=home, check=0)
    resumed = load_npy(home / f"pipeline/Step5/train_curves_{fw}.npy")
    np.testing.assert_array_equal(resumed["loss"], straight["loss"])
    np.testing.assert_array_equal(resumed["lr"], straight["lr"])
    np.testing.assert_array_equal(load_npy(home / f"pipeline/Step5/train_align_{fw}.npy")["acc_per_epoch"], acc)


def test_weight_decay_on_layernorm_is_flagged(deterministic_pair, tmp_path):
    """The guide's weight-statistics check: Paddle decaying LayerNorm and bias shows in the norm ratios."""
    home = private_copy(deterministic_pair, tmp_path)
    assert "departing from 1 by more than" in run(CHECK, home=home).stdout
    assert any(line.endswith(": none") and "departing from 1" in line
               for line in (home / "pipeline/Step5/train_align_diff.log").read_text().splitlines())

    run(PD, *STEP5_PAIR, home=home, plant="paddle_decay_all", check=0)
    run(CHECK, home=home)
    line = next(l for l in (home / "pipeline/Step5/train_align_diff.log").read_text().splitlines()
                if "departing from 1" in l)
    flagged = line.split(": ")[-1].split(", ")
    assert "bert.encoder.layer.0.attention.output.LayerNorm.weight" in flagged
    assert "bert.embeddings.LayerNorm.weight" in flagged
    assert not [n for n in flagged if n.endswith(".weight") and "LayerNorm" not in n]  # Linear weights decay on both
    # and the standalone tool reads the same from the two checkpoints
    proc = run("pipeline/Step5/weight_stats.py", home=home, check=0)
    assert "LayerNorm.weight" in proc.stdout.splitlines()[-1]
