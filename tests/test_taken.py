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


# ---------------------------------------------------------------- timm's own ViT against a port written by hand

class HandAttention(paddle.nn.Layer):
    """q, k and v apart, where timm's holds them in one qkv: convert settles their columns by the run."""
    def __init__(self, dim, heads):
        super().__init__()
        self.q, self.k, self.v = (paddle.nn.Linear(dim, dim) for _ in range(3))
        self.proj, self.heads = paddle.nn.Linear(dim, dim), heads

    def forward(self, x):
        b, n, d = x.shape
        split = lambda t: t.reshape([b, n, self.heads, d // self.heads]).transpose([0, 2, 1, 3])  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        attn = paddle.nn.functional.softmax(q @ k.transpose([0, 1, 3, 2]) * (d // self.heads) ** -0.5, axis=-1)
        return self.proj((attn @ v).transpose([0, 2, 1, 3]).reshape([b, n, d]))


class HandBlock(paddle.nn.Layer):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.attn = paddle.nn.LayerNorm(dim, epsilon=1e-6), HandAttention(dim, heads)
        self.norm2 = paddle.nn.LayerNorm(dim, epsilon=1e-6)
        self.fc1, self.fc2 = paddle.nn.Linear(dim, 4 * dim), paddle.nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(paddle.nn.functional.gelu(self.fc1(self.norm2(x))))


class HandViT(paddle.nn.Layer):
    """A port of timm's VisionTransformer as users write one: its class token normed alone, after it is taken."""
    def __init__(self, dim, heads, patches, token=0):
        super().__init__()
        self.patch_embed = paddle.nn.Conv2D(3, dim, 4, 4)
        self.cls_token, self.pos_embed = self.create_parameter([1, 1, dim]), self.create_parameter([1, patches + 1, dim])
        self.blocks = paddle.nn.LayerList([HandBlock(dim, heads)])
        self.norm, self.head, self.token = paddle.nn.LayerNorm(dim, epsilon=1e-6), paddle.nn.Linear(dim, 3), token

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose([0, 2, 1])
        x = paddle.concat([self.cls_token.expand([x.shape[0], -1, -1]), x], axis=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, self.token]))


@pytest.mark.parametrize("token, red", [(0, []), (2, ["(model) (before norm)"])])
def test_timms_own_vit_against_a_port_written_by_hand_is_green_and_a_token_taken_otherwise_red(token, red):
    from tools.zoo import vision
    if vision.installed():
        pytest.skip(f"timm is not installed here ({vision.installed()}; CI installs it)")
    vision.prepare()
    import timm
    torch.manual_seed(0)
    pt = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=3, img_size=8, patch_size=4,
                           embed_dim=D, num_heads=2, depth=1).eval()
    with torch.no_grad():  # a norm that is not the identity, a class token and table that are not zeros
        pt.norm.weight.uniform_(0.5, 1.5), pt.norm.bias.uniform_(-0.5, 0.5)
        pt.cls_token.normal_(), pt.pos_embed.normal_(std=0.1)
    paddle.seed(0)
    pd = HandViT(D, 2, PATCHES, token)
    convert(pt, pd, inputs=X)
    report = compare_forward(pt, pd.eval(), X, isolate=True)
    assert report.passed == (not red) and report.differing == red, report.table()
    assert TAKEN in report.pairs().splitlines(), report.pairs()
