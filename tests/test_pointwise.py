"""A 1x1 convolution against a Linear (portcheck.mapping.pointwise): a head torch computes as a 1x1 Conv2d on the
pooled map and the port as a Linear on the flattened features, and the converse, converted with no map (the weight
reshaped) and green forward and backward; red where the port's Linear reads its matrix the other way."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402

X = np.random.RandomState(0).randn(2, 3, 8, 8).astype("float32")


def pair(torch_conv=True, plant=None):
    """A conv stem, global pooling and a 6 -> 6 head (square: only the types say its layout): torch's head a 1x1
    Conv2d (torch_conv) or a Linear, the port's the other. plant "transposed": the port's Linear applies its weight
    transposed."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.pool = torch.nn.Conv2d(3, 6, 3), torch.nn.AdaptiveAvgPool2d(1)
            self.head = torch.nn.Conv2d(6, 6, 1) if torch_conv else torch.nn.Linear(6, 6)

        def forward(self, x):
            h = self.pool(torch.relu(self.stem(x)))
            return self.head(h).flatten(1) if torch_conv else self.head(h.flatten(1))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.stem, self.pool = paddle.nn.Conv2D(3, 6, 3), paddle.nn.AdaptiveAvgPool2D(1)
            self.head = paddle.nn.Linear(6, 6) if torch_conv else paddle.nn.Conv2D(6, 6, 1)

        def forward(self, x):
            h = self.pool(paddle.nn.functional.relu(self.stem(x)))
            if not torch_conv:
                return self.head(h).flatten(1)
            if plant == "transposed":
                return h.flatten(1) @ self.head.weight.T + self.head.bias
            return self.head(h.flatten(1))

    torch.manual_seed(0)
    paddle.seed(0)
    return Torch(), Port()


@pytest.mark.parametrize("torch_conv", [True, False], ids=["conv-linear", "linear-conv"])
def test_a_1x1_conv_against_a_linear_converts_as_a_reshape_and_is_green(torch_conv):
    pt, pd = pair(torch_conv)
    state = convert(pt, pd, inputs=X)
    assert "a convolution's matrix (a 1x1 kernel, or one as large as its map) against a Linear's, reshaped" in \
        state.said
    assert compare_forward(pt.eval(), pd.eval(), X, isolate=True).passed
    y = np.random.RandomState(1).randn(2, 6).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    opt = (lambda p: torch.optim.SGD(p, lr=0.1), lambda p: paddle.optimizer.SGD(0.1, parameters=p))
    assert compare_backward(pt, pd, X, y, loss, opt, steps=2).passed


def test_the_linear_reading_its_matrix_transposed_is_red():
    pt, pd = pair(plant="transposed")
    convert(pt, pd, inputs=X)
    report = compare_forward(pt.eval(), pd.eval(), X)
    assert not report.passed


def whole_map_pair(plant=None):
    """timm's VGG head: a Conv2d whose kernel covers its whole 6 x 6 map, against the port's Linear on the flattened
    map. plant "channels last": the port flattens the map [N, H, W, C]."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.fc1 = torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 5, 6)

        def forward(self, x):
            return self.fc1(torch.relu(self.stem(x))).flatten(1)

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.stem, self.fc1 = paddle.nn.Conv2D(3, 4, 3), paddle.nn.Linear(4 * 6 * 6, 5)

        def forward(self, x):
            h = paddle.nn.functional.relu(self.stem(x))
            return self.fc1((h.transpose([0, 2, 3, 1]) if plant else h).flatten(1))

    torch.manual_seed(0)
    paddle.seed(0)
    return Torch(), Port()


@pytest.mark.parametrize("plant", [None, "channels last"])
def test_a_conv_whose_kernel_covers_its_map_against_a_linear_converts_as_a_reshape(plant):
    pt, pd = whole_map_pair(plant)
    state = convert(pt, pd, inputs=X)
    assert "torch fc1.weight [5, 4, 6, 6] -> Paddle fc1.weight [144, 5]" in state.said, state.said
    report = compare_forward(pt.eval(), pd.eval(), X, isolate=True)
    if plant is None:
        assert report.passed and report.differing == [], report.table()
    else:  # the flatten before it is the model's own code: named there
        assert not report.passed and report.differing == ["(model) (before fc1)"], report.table()
