"""docs/run.md's Limits, held to the code: what the page says `portcheck run` reads, it reads; what it says it does
not do, it refuses in one line."""
import pytest

from portcheck.scripts import hooks_paddle, runconfig


# {Paddle optimizer: (torch's counterpart, the kind of weight decay both apply)}
OPTIMIZERS = {"SGD": ("SGD", "L2"), "Adam": ("Adam", "L2"), "Momentum": ("SGD", "L2"), "AdamW": ("AdamW", "decoupled")}


def grouped(name: str, bias_decay: float):
    """The torch and Paddle optimizers' configurations as the recorders read them, for one Linear whose weight and
    bias are two dict groups (weight_decay 0.01 and bias_decay)."""
    import paddle
    import torch
    from portcheck.scripts import hooks_torch
    m = paddle.nn.Linear(3, 2)
    t = torch.nn.Linear(3, 2)
    extra = {"momentum": 0.9} if name == "Momentum" else {}
    p_opt = getattr(paddle.optimizer, name)(learning_rate=0.1, **extra, parameters=[
        {"params": [m.weight], "weight_decay": 0.01}, {"params": [m.bias], "weight_decay": bias_decay}])
    t_opt = getattr(torch.optim, OPTIMIZERS[name][0])(lr=0.1, **extra, params=[
        {"params": [t.weight], "weight_decay": 0.01}, {"params": [t.bias], "weight_decay": 0.0}])
    return ({"optimizer": hooks_torch.TorchSide(False).optimizer_config(t_opt, t)},
            {"optimizer": hooks_paddle.PaddleSide().optimizer_config(p_opt, m)})


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_paddle_optimizers_dict_parameter_groups_and_their_weight_decay(name):
    """Each group's weight_decay read as Paddle applies it (SGD and Adam: each parameter's regularizer; Momentum: an
    L2 decay in its own update; AdamW: decoupled), against torch's same groups: the same; a group's decay planted
    (the bias's 0.02 for 0) is red, naming the parameter."""
    kind = OPTIMIZERS[name][1]
    t, p = grouped(name, 0.0)
    assert p["optimizer"]["weight_decay"] == {"weight": [0.01, kind], "bias": [0.0, kind]}, p
    root = {runconfig.ROOT: runconfig.ROOT}  # the Linears are the models, paired as the forward pairs them
    assert runconfig.differences(t, p, root, {}) == []
    t, p = grouped(name, 0.02)
    assert runconfig.differences(t, p, root, {}) == [
        f"optimizer: weight decay of bias torch 0 ({kind}) vs paddle 0.02 ({kind}) (torch's parameter group 2 of 2 "
        "(bias))"]



def test_seeds_and_library_versions_are_shown_beside_not_judged():
    """'Seeds and library versions are shown beside the configuration, not judged': two sides seeded apart, on
    other library versions, differ in no configuration line (the run syncs weights and batches); both are said."""
    t = {"seeds": {"torch.manual_seed": 0}, "versions": {"python": "3.11.7", "torch": "2.1.0"}}
    p = {"seeds": {"paddle.seed": 1}, "versions": {"python": "3.10.4", "paddle": "3.0.0"}}
    assert runconfig.differences(t, p, {runconfig.ROOT: runconfig.ROOT}, {}) == []
    assert runconfig.not_compared(t, p) == runconfig.not_compared({}, {})   # nothing more left uncompared
    assert runconfig.notes(t, p) == ["seeds: torch torch.manual_seed(0); paddle paddle.seed(1)",
                                     "versions: torch side python 3.11.7, torch 2.1.0; paddle side python 3.10.4, "
                                     "paddle 3.0.0"]
