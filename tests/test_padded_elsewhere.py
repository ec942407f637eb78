"""TF's "SAME" padding done in another place (timm's Conv2dSame pads inside the conv's forward, PaddleClas's
EfficientNet pads the conv by 2 on every side then crops its output's first row and column): the two convs hold the
same weights and differ in padding alone, so they are paired (mapping.module_pairs) and judged where their outputs
meet, the norm after them. Green with no map; a crop on the wrong side red there."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_forward, convert  # noqa: E402

X = np.random.RandomState(0).randn(2, 3, 16, 16).astype("float32")


class SameConv(torch.nn.Conv2d):
    """A stride-2 3x3 conv padded as TF's "SAME" does: one zero after the last row and column."""
    def forward(self, x):
        return super().forward(torch.nn.functional.pad(x, (0, 1, 0, 1)))


def pair(plant=None):
    """A SAME-padded stride-2 conv, a BatchNorm, a head. plant "crop": the port crops the last row and column."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = SameConv(3, 4, 3, stride=2, bias=False), torch.nn.BatchNorm2d(4)
            self.head = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.bn(self.conv(x)).mean((2, 3)))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv = paddle.nn.Conv2D(3, 4, 3, stride=2, padding=2, bias_attr=False)
            self.bn, self.head = paddle.nn.BatchNorm2D(4), paddle.nn.Linear(4, 2)

        def forward(self, x):
            h = self.conv(x)  # [9, 9]: padded by 2 on every side
            h = h[:, :, :-1, :-1] if plant == "crop" else h[:, :, 1:, 1:]
            return self.head(self.bn(h).mean((2, 3)))

    torch.manual_seed(0)
    paddle.seed(0)
    pt = Torch()
    with torch.no_grad():
        pt.bn.running_mean.normal_(0, 0.3), pt.bn.running_var.uniform_(0.5, 2)
    return pt.eval(), Port()


def test_a_conv_padded_in_another_place_is_paired_and_green_where_outputs_meet():
    pt, pd = pair()
    convert(pt, pd, inputs=X)
    pd.eval()
    assert np.array_equal(pd.conv.weight.numpy(), pt.conv.weight.detach().numpy())
    report = compare_forward(pt, pd, X, isolate=True)
    assert report.passed, report.table()


def test_a_crop_on_the_wrong_side_is_red_where_the_outputs_meet():
    pt, pd = pair(plant="crop")
    convert(pt, pd, inputs=X)
    pd.eval()
    report = compare_forward(pt, pd, X)
    red = [r.name for r in report.paired if not r.passed]
    assert red and red[0] == "bn", red
