"""A torch container and a Paddle Linear of one name, paired by what they hold: transformers' pooler (a Module holding
its dense Linear and a Tanh) against a port's `pooler`, a Linear, the tanh in its parent's forward. The container's
tensors are its dense's, the Linear's own: no bare parameter of a parent (mapping.loose.apart), so pooler.dense pairs
with the Linear (convert refused it: "the two models' configs differ there", with two identical shapes)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402

D = 16
IDS = np.random.RandomState(0).randint(0, 50, (2, 5)).astype("int64")


class TorchPooler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dense, self.activation = torch.nn.Linear(D, D), torch.nn.Tanh()

    def forward(self, hidden):
        return self.activation(self.dense(hidden[:, 0]))


class Torch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.layer, self.pooler = torch.nn.Embedding(50, D), torch.nn.Linear(D, D), TorchPooler()

    def forward(self, ids):
        hidden = self.layer(self.embed(ids))
        return hidden, self.pooler(hidden)


class Port(paddle.nn.Layer):
    def __init__(self, activation=paddle.tanh):
        super().__init__()
        self.embed, self.layer, self.pooler = paddle.nn.Embedding(50, D), paddle.nn.Linear(D, D), paddle.nn.Linear(D, D)
        self.activation = activation

    def forward(self, ids):
        hidden = self.layer(self.embed(ids))
        return hidden, self.activation(self.pooler(hidden[:, 0]))


def pair(activation=paddle.tanh):
    torch.manual_seed(0)
    pt, pd = Torch(), Port(activation)
    convert(pt, pd, inputs=IDS)
    return pt.eval(), pd.eval()


def train(pt, pd):
    y = np.random.RandomState(1).randn(2, D).astype("float32") * 0.5
    loss = (lambda o, t: (o[0] ** 2).mean() + ((o[1] - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    return compare_backward(pt.train(), pd.train(), IDS, y, loss=loss, optimizer=sgd, steps=2)


def test_a_container_and_a_linear_of_one_name_pair_by_what_they_hold_and_are_green():
    pt, pd = pair()
    np.testing.assert_array_equal(pd.pooler.weight.numpy(), pt.pooler.dense.weight.detach().numpy().T)
    report = compare_forward(pt, pd, IDS, isolate=True)
    assert report.passed and report.pairing.pairs["pooler.dense"] == "pooler", report.pairs()
    backward = train(pt, pd)
    assert backward.passed, backward.table()


def test_a_plant_is_red_where_it_is():
    """The port's pooler weights off: red at pooler.dense (Paddle: pooler). Its activation changed (relu for tanh),
    which the port's own forward applies after its pooler: red at the model's output there, its own computation."""
    pt, pd = pair()
    pd.pooler.bias.set_value(pd.pooler.bias.numpy() + 0.01)
    report = compare_forward(pt, pd, IDS, isolate=True)
    assert report.first_diverging.both == "pooler.dense (Paddle: pooler)", report.table()
    assert not train(*pair(paddle.nn.functional.relu)).passed
    report = compare_forward(*pair(paddle.nn.functional.relu), IDS, isolate=True)
    assert report.first_diverging == "(model)[1]" and report.differing == ["(model)"], report.table()
