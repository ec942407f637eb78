"""The third hostile pass (issue 36): each case it found handled badly, planted. Another pair's files and records
copied over a pair with its check's verdict removed; a diff log with a byte-order mark; a mistyped or repeated
--threshold; a .npy padded far past its pickle; compare_backward given one loss instead of a pair."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from portcheck import cli
from portcheck.core import fileio
from portcheck.core.errors import PipelineError
from examples.resnet18 import resnet

ROOT = Path(__file__).resolve().parents[1]
# the ResNet-18 example's train_align is judged at its task's threshold, which the reviewer gives (a folder's own
# verdict file never loosens a rule)
TASK = {"train_align": resnet.THRESHOLD}


def copy_of(tmp_path, folder="log_reprod"):
    out = tmp_path / "hand_in"
    shutil.copytree(ROOT / folder, out)
    return out


def swap_loss_into_forward(folder, keep_verdict=False):
    for side in ("torch", "paddle"):
        shutil.copy(folder / f"loss_{side}.npy", folder / f"forward_{side}.npy")
        shutil.copy(folder / f"diagnostics/loss_{side}.run.json", folder / f"diagnostics/forward_{side}.run.json")
    shutil.copy(folder / "loss_diff.log", folder / "forward_diff.log")
    if keep_verdict:
        shutil.copy(folder / "diagnostics/loss_diff.json", folder / "diagnostics/forward_diff.json")
    else:
        (folder / "diagnostics/forward_diff.json").unlink()


def check_log_reprod(folder):
    return subprocess.run([sys.executable, str(ROOT / "pipeline/check_log_reprod.py"), str(folder)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("keep_verdict", [False, True], ids=["verdict removed", "verdict copied too"])
def test_another_pairs_files_in_a_pairs_place_are_red_on_both_checkers(tmp_path, capsys, keep_verdict):
    """The committed BERT records name no file: loss's npy, records and log copied over forward's stayed green
    once forward's verdict was removed. Both checkers now need the log and the verdict the pair's check wrote."""
    folder = copy_of(tmp_path)
    swap_loss_into_forward(folder, keep_verdict)
    assert cli.check(folder) == 1
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("forward:"))
    assert line.startswith("forward: RED")
    proc = check_log_reprod(folder)
    assert proc.returncode == 1 and "\nforward: RED" in "\n" + proc.stdout, proc.stdout


def test_a_pair_whose_diff_log_is_removed_is_red(tmp_path, capsys):
    folder = copy_of(tmp_path, "examples/resnet18/log_reprod")
    (folder / "loss_diff.log").unlink()
    assert cli.check(folder, TASK) == 1
    assert "loss_diff.log missing: the pair's check writes them" in capsys.readouterr().out


def test_a_diff_log_with_a_byte_order_mark_is_read_as_written(tmp_path, capsys):
    folder = copy_of(tmp_path, "examples/resnet18/log_reprod")
    log = folder / "forward_diff.log"
    log.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    assert cli.check(folder, TASK) == 0, capsys.readouterr().out


@pytest.mark.parametrize("flags, says", [
    (["--threshold", "Forward=1e-9"], "--threshold Forward: the folder holds no pair of that name"),
    (["--threshold", "forward=0.1", "--threshold", "forward=1e-9"], "--threshold given twice for forward"),
])
def test_a_mistyped_or_repeated_threshold_is_refused(flags, says):
    proc = subprocess.run([sys.executable, "-m", "portcheck", "check", str(ROOT / "examples/resnet18/log_reprod"),
                           *flags], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == "" and says in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_npy_padded_past_its_pickle_is_refused_without_reading_the_padding(tmp_path):
    path = tmp_path / "forward_paddle.npy"
    np.save(path, {"logits": np.ones((2, 3), np.float32)}, allow_pickle=True)
    assert fileio.load_npy(path)["logits"].shape == (2, 3)
    with open(path, "r+b") as f:  # sparse: 1 GB that costs no disk, and must cost no memory
        f.truncate(1 << 30)
    with pytest.raises(PipelineError, match="bytes follow the pickled dict"):
        fileio.load_npy(path)


def test_compare_backward_given_one_loss_instead_of_a_pair_is_one_line():
    torch = pytest.importorskip("torch")
    paddle = pytest.importorskip("paddle")
    from portcheck import compare_backward
    pt, pd = torch.nn.Linear(3, 2), paddle.nn.Linear(3, 2)
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    with pytest.raises(PipelineError, match=r"loss= takes a pair, \(torch's, Paddle's\), got MSELoss"):
        compare_backward(pt, pd, x, y, loss=torch.nn.MSELoss(), optimizer=sgd)
    with pytest.raises(PipelineError, match="optimizer= takes a pair"):
        compare_backward(pt, pd, x, y, loss=(torch.nn.MSELoss(), paddle.nn.MSELoss()), optimizer=sgd[0])


def test_a_chinese_key_on_a_console_that_cannot_show_it_is_escaped_not_a_traceback(tmp_path):
    key = "损失"
    for side in ("torch", "paddle"):
        np.save(tmp_path / f"loss_{side}.npy", {key: np.array([0.5], np.float32)})
    proc = subprocess.run([sys.executable, "-m", "portcheck", "pair", "loss_torch.npy", "loss_paddle.npy"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert key.encode("ascii", "backslashreplace").decode() in proc.stdout
