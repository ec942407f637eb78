"""The tiny models and data both sides build the same way: a Linear / activation stack in each framework, the Paddle
one converted from torch's, a mean-square loss, and sklearn's wine data standardized."""
import paddle
import torch

from portcheck import convert


def mlp(side, sizes=(4, 8, 3), act="Tanh"):
    """A Linear / activation / Linear stack in side's framework, seeded on torch's side (Paddle's gets the
    torch weights through convert)."""
    nn = torch.nn if side == "torch" else paddle.nn
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(getattr(nn, act)())
    return nn.Sequential(*layers)


def converted(torch_model, paddle_model, x):
    paddle_model.set_state_dict(convert(torch_model, paddle_model, inputs=x))
    return torch_model, paddle_model


def seeded_pair(build, x, seed=0):
    torch.manual_seed(seed)
    paddle.seed(seed)
    return converted(build("torch"), build("paddle"), x)


def mse(side):
    if side == "torch":
        return lambda out, y: torch.nn.functional.mse_loss(out, y)
    return lambda out, y: paddle.nn.functional.mse_loss(out, y)


def wine():
    from sklearn.datasets import load_wine
    x, y = load_wine(return_X_y=True)
    x = ((x - x.mean(0)) / x.std(0)).astype("float32")
    return x, y.astype("int64")
