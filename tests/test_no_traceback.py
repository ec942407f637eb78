"""Runs that end in one line the library says, never in its own traceback: a small BatchNorm net whose first step
is too small for float32 to move its BatchNorm weights (distinct tensors bit-identical before and after it, as one
tensor under two names is), and a run taking Paddle's side of a kink that diverged (NaN) before the library wrote
its figures."""
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import convert  # noqa: E402
from portcheck.core import calibrated  # noqa: E402
from portcheck.pipeline import handin, kink_files  # noqa: E402
from portcheck.gradients.backward import record_backward  # noqa: E402

X = np.random.RandomState(0).randn(16, 6).astype(np.float32)
Y = np.random.RandomState(1).randn(16, 2).astype(np.float32)
LR = 1e-9  # lr x gradient under half an ulp of 1: float32's BatchNorm weights stay at 1, float64's move


def nets():
    torch.manual_seed(0)
    pt = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                             torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                             torch.nn.Linear(8, 2))
    pd = paddle.nn.Sequential(paddle.nn.Linear(6, 8), paddle.nn.BatchNorm1D(8), paddle.nn.ReLU(), paddle.nn.Linear(8, 8),
                              paddle.nn.BatchNorm1D(8), paddle.nn.ReLU(), paddle.nn.Linear(8, 2))
    convert(pt, pd)
    return pt.train(), pd.train()


@pytest.fixture(scope="module")
def records():
    pt, pd = nets()
    t = record_backward(pt, X, Y, torch.nn.functional.mse_loss, lambda ps: torch.optim.SGD(ps, lr=LR), steps=2)
    p = record_backward(pd, X, Y, paddle.nn.functional.mse_loss,
                        lambda ps: paddle.optimizer.SGD(learning_rate=LR, parameters=ps), steps=2)
    return t, p


def handed_in(folder, t, p):
    handin.save_side(folder, "bp_align", "torch", handin.bp_align(t), {"inputs": "i"}, "pt",
                     exact=handin.bp_align(t, exact=True))
    handin.save_side(folder, "bp_align", "paddle", handin.bp_align(p), {"inputs": "i"}, "pd")


def test_batchnorm_weights_float32_leaves_equal_are_digested_as_float64_digests_them(records, tmp_path):
    """Before, two BatchNorm weights left at 1 by float32's step were counted once there and twice in float64
    (the digest deduplicated one tensor under two names by value): judging them broadcast (9,) against (10,)."""
    t, p = records
    plain, exact = handin.bp_align(t), handin.bp_align(t, exact=True)
    assert all(plain[k].shape == exact[k].shape == handin.bp_align(p)[k].shape for k in plain), \
        ({k: v.shape for k, v in plain.items()}, {k: v.shape for k, v in exact.items()})
    handed_in(tmp_path, t, p)
    verdict = handin.judge_and_log(tmp_path, "bp_align", after_steps=True)
    assert verdict.measured_passed, verdict.describe_measured()


def test_a_float64_run_of_another_shape_is_said_not_judged_never_a_broadcast():
    row = calibrated.measure("weights_0", np.zeros(9), np.zeros(10), np.zeros(9))
    assert not row.judged and "float64 run holds float64[10]" in row.problem, row


def test_a_taking_run_that_diverged_is_said_with_its_step_and_the_pair_judged_without_it(records, tmp_path):
    """Before, its NaN figures were written, then read back as a file 'not as save_taken writes it' (naming the
    file the library had just written)."""
    t, p = records
    handed_in(tmp_path, t, p)
    # a BackwardReport's two parts judge_and_log reads: its taking run's figures, and a plot (drawn nowhere here)
    taking = {"loss/1": np.array([np.nan]), "weights/1": np.array([np.inf]), "loss/0": np.array([1e-9])}
    verdict = handin.judge_and_log(tmp_path, "bp_align", after_steps=True,
                                   comparison=types.SimpleNamespace(taking=taking, plot=lambda *a, **k: None))
    log = (tmp_path / "bp_align_diff.log").read_text()
    assert "torch's run taking Paddle's side of a kink diverged, NaN or Inf from step 1 on (loss_1, weights_1)" in log
    kept = handin.load_npy(tmp_path / f"bp_align{kink_files.TAKEN}")
    assert set(kept) == {"loss_0"}, kept
    assert verdict.measured_passed, verdict.describe_measured()
