"""A module of a type no layout names holding tensors of its own (portcheck.mapping.own_layout): a ViT-like model
holding its class token and position table itself, converted with no layouts (green, and red where the port puts
its class token last), compare_backward through the same placement; a square matrix of its own still refused."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402

X = np.random.RandomState(0).randn(2, 4, 6).astype("float32")  # 2 images of 4 patches, 6 values each


def pair(plant=None, square=False):
    """A patch embedding, a class token [1, 1, 8] and a position table [1, 5, 8] the model holds itself, a norm and a
    head. square: it also holds a [8, 8] mixing matrix of its own. plant "last": the port appends its class token."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.norm, self.head = torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3)
            self.cls_token = torch.nn.Parameter(torch.randn(1, 1, 8))
            self.pos_embed = torch.nn.Parameter(torch.randn(1, 5, 8))
            if square:
                self.mix = torch.nn.Parameter(torch.randn(8, 8))

        def forward(self, x):
            h = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), self.embed(x)], 1) + self.pos_embed
            h = h @ self.mix if square else h
            return self.head(self.norm(h)[:, 0])

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed, self.norm, self.head = paddle.nn.Linear(6, 8), paddle.nn.LayerNorm(8), paddle.nn.Linear(8, 3)
            self.cls_token = self.create_parameter([1, 1, 8])
            self.pos_embed = self.create_parameter([1, 5, 8])
            if square:
                self.mix = self.create_parameter([8, 8])

        def forward(self, x):
            cls = self.cls_token.expand([x.shape[0], -1, -1])
            parts = [self.embed(x), cls] if plant == "last" else [cls, self.embed(x)]
            h = paddle.concat(parts, 1) + self.pos_embed
            h = h @ self.mix if square else h
            return self.head(self.norm(h)[:, 0])

    torch.manual_seed(0)
    paddle.seed(0)
    return Torch(), Port()


def test_a_type_holding_its_own_tokens_converts_with_no_layouts_and_is_green():
    pt, pd = pair()
    state = convert(pt, pd, inputs=X)
    assert np.array_equal(pd.pos_embed.numpy(), pt.pos_embed.detach().numpy())
    assert "held by its Torch itself" in state.said
    assert compare_forward(pt.eval(), pd.eval(), X, isolate=True).passed
    y = np.random.RandomState(1).randn(2, 3).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    opt = (lambda p: torch.optim.SGD(p, lr=0.1), lambda p: paddle.optimizer.SGD(0.1, parameters=p))
    assert compare_backward(pt, pd, X, y, loss, opt, steps=2).passed


def test_the_class_token_put_last_by_the_port_is_red():
    pt, pd = pair(plant="last")
    convert(pt, pd, inputs=X)
    report = compare_forward(pt.eval(), pd.eval(), X)
    assert not report.passed


def test_a_square_matrix_of_its_own_is_still_declared():
    pt, pd = pair(square=True)
    with pytest.raises(PipelineError, match=r"layouts=\{'Torch': 'same'\}"):
        convert(pt, pd, inputs=X)


def test_a_type_of_its_own_holding_another_width_is_refused_naming_both_shapes():
    """The port's position table one row longer (built for another image size): refused naming both shapes."""
    pt, _ = pair()

    class Wider(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed, self.norm, self.head = paddle.nn.Linear(6, 8), paddle.nn.LayerNorm(8), paddle.nn.Linear(8, 3)
            self.cls_token = self.create_parameter([1, 1, 8])
            self.pos_embed = self.create_parameter([1, 6, 8])

        def forward(self, x):
            h = paddle.concat([self.cls_token.expand([x.shape[0], -1, -1]), self.embed(x)], 1)
            return self.head(self.norm(h + self.pos_embed[:, :5])[:, 0])

    with pytest.raises(PipelineError, match=r"torch \(model\) \(Torch: cls_token \[1, 1, 8\], pos_embed \[1, 5, 8\]\) "
                                            r"against Paddle \(model\) \(cls_token \[1, 1, 8\], pos_embed \[1, 6, 8\]\)"):
        convert(pt, Wider(), inputs=X)
