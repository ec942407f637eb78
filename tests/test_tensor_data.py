"""Data handed over as each side's own tensors, as a user's pt_ and pd_ scripts hold it: torch tensors on one side,
Paddle tensors on the other (save_side takes them as their values). A value that differs, float64 features against
float32 ones, or labels of another integer width (torch's DataLoader collates int64, a Paddle dataset may give
int32) stay red: a dtype mismatch is a failure."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck.core.errors import PipelineError  # noqa: E402
from portcheck.pipeline import data  # noqa: E402
from portcheck.pipeline.handin import judge_and_log, save_side  # noqa: E402

X = np.random.RandomState(0).randn(8, 5).astype("float32")
Y = np.arange(8) % 3


def loaders(labels=np.int32, features=np.float32, change=None):
    """torch's DataLoader of dicts (int64 labels) and Paddle's of the same samples, its labels `labels`."""
    class TorchSet(torch.utils.data.Dataset):
        def __len__(self):
            return len(X)

        def __getitem__(self, i):
            return {"x": torch.tensor(X[i]), "y": torch.tensor(Y[i])}

    class PaddleSet(paddle.io.Dataset):
        def __len__(self):
            return len(X)

        def __getitem__(self, i):
            y = labels(Y[i] + (1 if change == i else 0))
            return {"x": X[i].astype(features), "y": y}
    return (torch.utils.data.DataLoader(TorchSet(), batch_size=4),
            paddle.io.DataLoader(PaddleSet(), batch_size=4))


def test_torch_tensors_against_paddle_tensors_are_compared_as_values():
    pt, pd = loaders(labels=np.int64)
    t, p = data.record_batches(pt), data.record_batches(pd)
    assert t["batch_0/y"].dtype == p["batch_0/y"].dtype == np.int64
    assert data.judge_batches(t, p).passed


def test_int32_labels_against_int64_ones_are_a_dtype_mismatch():
    pt, pd = loaders()
    report = data.judge_batches(data.record_batches(pt), data.record_batches(pd))
    assert not report.passed and "dtype torch int64 vs paddle int32" in report.line(), report.line()


@pytest.mark.parametrize("plant", ["label", "float64 features"])
def test_a_label_that_differs_or_wider_features_stay_red(plant):
    pt, pd = loaders(np.int64, change=5) if plant == "label" else loaders(np.int64, features=np.float64)
    report = data.judge_batches(data.record_batches(pt), data.record_batches(pd))
    said = {"label": "batch 1, key y: index [1]: torch 2 vs paddle 3", "float64 features": "dtype torch float32"}
    assert not report.passed and said[plant] in report.line(), report.line()


def test_save_side_takes_each_sides_own_tensors_as_values(tmp_path):
    xt, xp = torch.tensor(X, requires_grad=True) * 1, paddle.to_tensor(X)
    save_side(tmp_path, "data", "torch", {"x": xt, "y": torch.tensor(Y)}, {"data": "d"}, "pt_data.py")
    save_side(tmp_path, "data", "paddle", {"x": xp, "y": paddle.to_tensor(Y)}, {"data": "d"}, "pd_data.py")
    assert judge_and_log(tmp_path, "data").passed
    save_side(tmp_path, "data", "paddle", {"x": xp + 1e-3, "y": paddle.to_tensor(Y)}, {"data": "d"}, "pd_data.py")
    assert not judge_and_log(tmp_path, "data").passed
    with pytest.raises(PipelineError, match=r"PC119"):
        save_side(tmp_path, "data", "torch", {"x": "not numbers"}, {"data": "d"}, "pt_data.py")


@pytest.mark.parametrize("side", ["torch", "paddle"])
def test_a_bfloat16_tensor_is_refused_in_one_line_on_either_side(tmp_path, side):
    # torch's .numpy() raised a TypeError on it; Paddle's gave its raw bits as uint16, compared as numbers
    x = torch.tensor(X).bfloat16() if side == "torch" else paddle.to_tensor(X).astype("bfloat16")
    with pytest.raises(PipelineError, match=r"bfloat16 tensor.*\[PC176\]"):
        save_side(tmp_path, "data", side, {"x": x}, {"data": "d"}, f"{side}_data.py")
    assert not list(tmp_path.iterdir())
