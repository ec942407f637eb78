"""docs/run.md's Limits, held to the code: what the page says `portcheck run` reads, it reads; what it says it does
not do, it refuses in one line."""
import pytest

from portcheck import hooks_paddle


OPTIMIZERS = {"SGD": "L2", "Adam": "L2", "Momentum": "L2", "AdamW": "decoupled"}
# Momentum and AdamW apply a group's weight_decay in their own update (Paddle moves the weight, not the bias, on a
# zero gradient), which the recorder does not read: it reads the optimizer's own (docs/run.md, Limits)
UNREAD = pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/run.md's limit: Momentum's and AdamW's dict groups unread")


@pytest.mark.parametrize("name", ["SGD", "Adam", pytest.param("Momentum", marks=UNREAD),
                                  pytest.param("AdamW", marks=UNREAD)])
def test_a_paddle_optimizers_dict_parameter_groups_and_their_weight_decay(name):
    """SGD and Adam: Paddle turns a group's weight_decay into each of its parameters' regularizer, which the
    recorder reads per parameter."""
    import paddle
    m = paddle.nn.Linear(3, 2)
    opt = getattr(paddle.optimizer, name)(learning_rate=0.1, parameters=[
        {"params": [m.weight], "weight_decay": 0.01}, {"params": [m.bias], "weight_decay": 0.0}])
    decay = hooks_paddle.PaddleSide().optimizer_config(opt, m)["weight_decay"]
    assert decay == {"weight": [0.01, OPTIMIZERS[name]], "bias": [0.0, OPTIMIZERS[name]]}, decay
