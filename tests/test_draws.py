"""compare_backward on models that draw from numpy's global generator in train mode, a LayerDrop as paddlenlp (and
transformers before torch.rand) writes it: every run of either side draws alike (backward.outside_draws), so a correct
port is green in every call, where before each side drew on from wherever the caller's generator stood and a layer
one side skipped was red or refused in one call and not the next; the caller's generators are put back."""
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, convert  # noqa: E402

X = np.random.RandomState(0).randn(2, 4).astype("float32")
Y = np.random.RandomState(1).randn(2, 6).astype("float32")
DROP = 0.5  # each layer skipped with this probability in train mode


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers, self.head = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(4)]), torch.nn.Linear(4, 6)

    def forward(self, x):
        for layer in self.layers:
            if self.training and np.random.uniform(0, 1) < DROP:
                continue
            x = x + torch.tanh(layer(x))
        return self.head(x)


class Port(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.layers, self.head = paddle.nn.LayerList([paddle.nn.Linear(4, 4) for _ in range(4)]), paddle.nn.Linear(4, 6)

    def forward(self, x):
        for layer in self.layers:
            if self.training and np.random.uniform(0, 1) < DROP:
                continue
            x = x + paddle.tanh(layer(x))
        return self.head(x)


def trained(scale=1.0):
    torch.manual_seed(0)
    pt, pd = Net(), Port()
    pd.set_state_dict(convert(pt.eval(), pd.eval(), inputs=X))
    pd.layers[1].weight.set_value(pd.layers[1].weight.numpy() * scale)
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    return compare_backward(pt.train(), pd.train(), X, Y, loss=loss, optimizer=sgd, steps=3)


def test_a_layerdrop_drawn_from_numpy_is_drawn_alike_green_in_every_call_and_the_callers_draws_kept():
    np.random.seed(7)
    random.seed(7)
    ahead = np.random.uniform(), random.random()
    np.random.seed(7)
    random.seed(7)
    reports = [trained() for _ in range(2)]
    assert all(r.passed for r in reports), reports[0].table()
    assert [r.max for r in reports[0].grads] == [r.max for r in reports[1].grads]
    assert (np.random.uniform(), random.random()) == ahead  # as if compare_backward had drawn nothing


def test_a_plant_beside_a_layerdrop_is_red_at_its_layer():
    """The port's second layer's weight scaled by 1.01: red at it in the first forward (the draws keep it)."""
    report = trained(scale=1.01)
    assert not report.passed and report.first_diverging == "layers.1", report.table()


def test_the_zoo_builds_every_family_with_each_drop_it_sets_at_0():
    """speecht5's encoder_layerdrop and positional_dropout, which TINY does not name, were left at 0.1: its backward
    skipped layers by each side's own draws, a verdict in one run and a refusal in the next. Any setting whose name
    says drop, a tower's too (a dict, a config of its own), is 0; other settings and labels are kept."""
    from tools.zoo.families import no_drops

    class TextConfig:
        def __init__(self):
            self.hidden_dropout_prob, self.layerdrop, self.hidden_size = 0.1, 0.2, 32

    class SpeechConfig:
        def __init__(self):
            self.encoder_layerdrop, self.positional_dropout, self.use_cache = 0.1, 0.1, True
            self.text_config, self.vision_config = TextConfig(), {"drop_path_rate": 0.1, "id2label": {0: "a"}}

    c = no_drops(SpeechConfig())
    assert (c.encoder_layerdrop, c.positional_dropout, c.text_config.hidden_dropout_prob, c.text_config.layerdrop,
            c.vision_config["drop_path_rate"]) == (0.0,) * 5
    assert c.use_cache is True and c.text_config.hidden_size == 32 and c.vision_config["id2label"] == {0: "a"}
