"""A hand-written ViT port taking the class token before its final norm, `norm(x[:, 0])`, against timm's norm over
every token, then the class token, `norm(x)[:, 0]`: the same model, the two outputs meeting at the head's input."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402

D, PATCHES = 8, 4
X = np.random.RandomState(0).randn(2, 3, 8, 8).astype(np.float32)
TAKEN = "norm -> norm (torch's forward takes index 0 along axis 1 of this output next, outside any module, where " \
        "Paddle's takes it before its module: torch's output judged as that index [PC446])"


class TorchBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.fc = torch.nn.LayerNorm(D), torch.nn.Linear(D, D)

    def forward(self, x):
        return x + self.fc(self.norm1(x))


class TorchViT(torch.nn.Module):
    """timm's order: every token normed, then the class token taken for the head."""
    def __init__(self):
        super().__init__()
        self.patch_embed = torch.nn.Conv2d(3, D, 4, 4)
        self.cls_token = torch.nn.Parameter(torch.randn(1, 1, D))
        self.pos_embed = torch.nn.Parameter(torch.randn(1, PATCHES + 1, D))
        self.blocks = torch.nn.Sequential(TorchBlock(), TorchBlock())
        self.norm, self.head = torch.nn.LayerNorm(D), torch.nn.Linear(D, 3)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


class PaddleBlock(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.norm1, self.fc = paddle.nn.LayerNorm(D), paddle.nn.Linear(D, D)

    def forward(self, x):
        return x + self.fc(self.norm1(x))


class PaddleViT(paddle.nn.Layer):
    """The port's order: the class token taken, then normed. token: the index it takes; epsilon: its norm's."""
    def __init__(self, token=0, epsilon=1e-5):
        super().__init__()
        self.patch_embed = paddle.nn.Conv2D(3, D, 4, 4)
        self.cls_token = self.create_parameter([1, 1, D])
        self.pos_embed = self.create_parameter([1, PATCHES + 1, D])
        self.blocks = paddle.nn.Sequential(PaddleBlock(), PaddleBlock())
        self.norm, self.head = paddle.nn.LayerNorm(D, epsilon=epsilon), paddle.nn.Linear(D, 3)
        self.token = token

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose([0, 2, 1])
        x = paddle.concat([self.cls_token.expand([x.shape[0], -1, -1]), x], 1) + self.pos_embed
        return self.head(self.norm(self.blocks(x)[:, self.token]))


@pytest.fixture(scope="module")
def torch_vit():
    torch.manual_seed(0)
    pt = TorchViT().eval()
    with torch.no_grad():  # a norm that is not the identity: its epsilon and its affine tensors count
        pt.norm.weight.uniform_(0.5, 1.5), pt.norm.bias.uniform_(-0.5, 0.5)
    return pt


def pair(pt, **port):
    pd = PaddleViT(**port)
    convert(pt, pd)
    return pt, pd.eval()


def test_the_class_token_taken_before_the_norm_is_green_cumulative_and_isolated_and_said(torch_vit):
    report = compare_forward(*pair(torch_vit), X, isolate=True)
    assert report.passed and report.differing == [], report.table()
    assert TAKEN in report.pairs().splitlines(), report.pairs()


@pytest.mark.parametrize("port, red", [({"epsilon": 1e-3}, ["norm"]), ({"token": -1}, ["(model) (before norm)"])])
def test_a_plant_in_the_norm_or_in_the_token_taken_is_red_where_it_is(torch_vit, port, red):
    """epsilon: the norm itself; token -1: the port's forward hands its norm the last token (its input red)."""
    report = compare_forward(*pair(torch_vit, **port), X, isolate=True)
    assert not report.passed and report.differing == red, report.table()


@pytest.mark.parametrize("port, red", [({}, None), ({"epsilon": 1e-3}, "norm")])
def test_compare_backward_judges_the_token_taken_as_compare_forward_does(torch_vit, port, red):
    mse = lambda o, t: ((o - t) ** 2).mean()  # noqa: E731
    pt, pd = pair(copy.deepcopy(torch_vit), **port)
    report = compare_backward(pt, pd, X, np.random.RandomState(1).randn(2, 3).astype(np.float32), loss=(mse, mse),
                              optimizer=(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                                         lambda p: paddle.optimizer.Momentum(0.1, momentum=0.9, parameters=p)),
                              steps=2)
    assert report.passed == (red is None) and report.first_diverging == red, report.table()


@pytest.mark.parametrize("port, red", [({}, None), ({"epsilon": 1e-3}, "norm")])
def test_two_saved_records_are_judged_as_compare_forward_judges_them(torch_vit, port, red, tmp_path):
    """judge_forward on record_forward's records (each side's script saves its own): the same rule, read from the
    records alone."""
    from portcheck import judge_forward, record_forward
    pt, pd = pair(torch_vit, **port)
    report = judge_forward(record_forward(pt, X, tmp_path / "torch"), record_forward(pd, X, tmp_path / "paddle"))
    assert report.passed == (red is None) and report.first_diverging == red, report.table()
    assert TAKEN in report.pairs().splitlines(), report.pairs()
