"""Sibling branches whose norms hold equal shapes (RepVGG's 3x3 and 1x1 branches, each conv followed by a BatchNorm of
the same width), run in another order on the two sides: no shape or order says which norm is which, the converted
run does (convert settles the tie as it settles an order's pairs: mapping.pairing, mapping.settle). Green with no map;
a plant in one branch's norm red at that norm."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_forward, convert  # noqa: E402

X = np.random.RandomState(0).randn(2, 4, 8, 8).astype("float32")


def pair(plant=None):
    """Two RepVGG blocks (a 3x3 conv + BN branch, a 1x1 conv + BN branch, an identity BN, their sum, ReLU), as timm
    and PaddleClas write them: torch runs the identity first, then the 1x1 branch; the port the 3x3 one first. Every BN's statistics and affine drawn at random. plant "eps": the port's second
    block's 1x1 BN epsilon 1e-3."""
    def branch_pt(k):
        return torch.nn.Sequential(torch.nn.Conv2d(4, 4, k, padding=k // 2, bias=False), torch.nn.BatchNorm2d(4))

    def branch_pd(k, eps=1e-5):
        return paddle.nn.Sequential(paddle.nn.Conv2D(4, 4, k, padding=k // 2, bias_attr=False),
                                    paddle.nn.BatchNorm2D(4, epsilon=eps))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.identity, self.conv_kxk, self.conv_1x1 = torch.nn.BatchNorm2d(4), branch_pt(3), branch_pt(1)

        def forward(self, x):
            identity = self.identity(x)
            return torch.relu(self.conv_1x1(x) + self.conv_kxk(x) + identity)

    class PdBlock(paddle.nn.Layer):
        def __init__(self, eps=1e-5):
            super().__init__()
            self.rbr_identity, self.rbr_dense, self.rbr_1x1 = paddle.nn.BatchNorm2D(4), branch_pd(3), branch_pd(1, eps)

        def forward(self, x):
            return paddle.nn.functional.relu(self.rbr_dense(x) + self.rbr_1x1(x) + self.rbr_identity(x))

    torch.manual_seed(0)
    paddle.seed(0)
    pt = torch.nn.Sequential(Block(), Block())
    pd = paddle.nn.Sequential(PdBlock(), PdBlock(1e-3 if plant == "eps" else 1e-5))
    with torch.no_grad():
        for m in pt.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.normal_(1, 0.3), m.bias.normal_(0, 0.3), m.running_mean.normal_(0, 0.3)
                m.running_var.uniform_(0.01, 2)  # small variances: an epsilon's change shows
    return pt.eval(), pd


def test_sibling_branches_of_equal_shapes_are_told_apart_by_the_run_and_green():
    pt, pd = pair()
    convert(pt, pd, inputs=X)
    pd.eval()
    assert np.array_equal(pd[1].rbr_1x1[1]._variance.numpy(), pt[1].conv_1x1[1].running_var.numpy())
    assert compare_forward(pt, pd, X, isolate=True).passed


def test_a_plant_in_one_branchs_norm_is_red_at_that_norm():
    pt, pd = pair(plant="eps")
    convert(pt, pd, inputs=X)
    pd.eval()
    report = compare_forward(pt, pd, X)
    red = [report.both(r.name) for r in report.paired if not r.passed]
    assert red and "1.conv_1x1.1" in red[0], red
