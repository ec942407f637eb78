"""Data handed over as each side's own tensors, as a user's pt_ and pd_ scripts hold it: torch tensors on one side,
Paddle tensors on the other (save_side takes them as their values), and labels of two integer widths (torch's
DataLoader collates int64, a Paddle dataset may give int32): the same data when every value is equal. A value that
differs, or float64 features against float32 ones, stays red."""
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


def test_int64_labels_against_int32_ones_of_equal_values_are_the_same_data():
    pt, pd = loaders()
    t, p = data.record_batches(pt), data.record_batches(pd)
    assert t["batch_0/y"].dtype == np.int64 and p["batch_0/y"].dtype == np.int32
    assert data.judge_batches(t, p).passed


@pytest.mark.parametrize("plant", ["label", "float64 features"])
def test_a_label_that_differs_or_wider_features_stay_red(plant):
    pt, pd = loaders(change=5) if plant == "label" else loaders(features=np.float64)
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
