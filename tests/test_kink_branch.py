"""A ReLU kink in the first forward (compare_backward's run on Paddle's branch): a value within rounding of 0 of
another sign on each side opens the gate in torch and shuts it in Paddle, a jump in the gradients no multiple of
torch's own error covers. The zoo's MobileNetV2 met one under ATEN_CPU_CAPABILITY=default (a conv output 1.5e-15
in torch, -1.7e-16 in Paddle): its BatchNorm bias gradient 380 x its allowance. Planted here in a small MLP by a
hidden unit of 2**-30 in torch and -2**-30 in Paddle (its bias 2**-29 apart, within the forward's rounding): green
against torch's run with that value set to Paddle's, and a momentum plant beside it still red.

The same mechanism (backward.judged) at a later step's kink seen only at a module's input: a ReLU after a residual sum
written inline (below)."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, convert, judge_backward, record_backward  # noqa: E402
from portcheck.gradients.backward import judged  # noqa: E402
from portcheck.gradients.kinks import INPUT, NEAR, ON_BRANCH  # noqa: E402

TINY = 2.0 ** -30


def pair():
    """torch's Linear-ReLU-Linear and its Paddle port, hidden unit 0 of the first example at +TINY in torch and
    -TINY in Paddle (exact in fp32: 2**-10 + (-2**-10 +- 2**-30))."""
    torch.manual_seed(0)
    pt = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        pt[0].weight[0] = torch.tensor([2.0 ** -10, 0, 0, 0])
        pt[0].bias[0] = -2.0 ** -10 + TINY
    pd = paddle.nn.Sequential(paddle.nn.Linear(4, 3), paddle.nn.ReLU(), paddle.nn.Linear(3, 1))
    x = np.array([[1, 0.5, -0.3, 0.2], [3, -1, 0.4, 0.7]], dtype="float32")
    pd.set_state_dict(convert(pt, pd, inputs=x))
    bias = pd[0].bias.numpy()
    bias[0] = -2.0 ** -10 - TINY
    pd[0].bias.set_value(bias)
    return pt, pd, x


def run(momentum):
    pt, pd, x = pair()
    y = np.array([[1.0], [-1.0]], dtype="float32")
    return compare_backward(pt, pd, x, y, loss=(torch.nn.functional.mse_loss, paddle.nn.functional.mse_loss),
                            optimizer=(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                                       lambda p: paddle.optimizer.Momentum(0.1, momentum=momentum, parameters=p)),
                            steps=3)


def test_a_kink_in_the_first_forward_is_judged_on_paddles_branch_and_green():
    """on_branch: judged again because torch's own run was red (grad 0.weight, the gate's term)."""
    report = run(0.9)
    # the Linear's output (the ReLU's input holds the same values: one crossing), in the first forward
    assert [(c.step, c.module, len(c.index)) for c in report.kinks] == [(0, "0", 1)], report.kinks
    assert report.forward.passed and report.on_branch and report.passed and not report.taken, report.table()
    assert f"kink in step 1's forward: 0 holds 1 value(s)" in report.table() and ON_BRANCH in report.table()


def test_a_momentum_plant_beside_the_kink_stays_red():
    report = run(0.8)
    assert report.on_branch and not report.passed and report.first_diverging == "0.weight after step 3", \
        report.table()


# A ReLU kink in a later step's forward at a value no module outputs: a residual sum written inline (`h += x`, as
# transformers' ResNet writes it) feeds the ReLU module, whose input alone holds it. The zoo's ResNet-18 under
# ATEN_CPU_CAPABILITY=default crossed such a kink in step 2's forward (stages.3.layers.1's ReLU input: torch 7.1e-06,
# Paddle -4.9e-06, the floor 1.0e-05), 13.3 x its allowance at conv weights after step 2 while no module output
# crossed. Planted here exactly in fp32: hidden unit 0's bias 2**-30 above a value in torch and below it in Paddle,
# so that after one step of SGD (lr 2**-11, its gradient 1) the unit plus the residual's -2**-10 is +-2**-30 while the
# unit itself is 2**-10 (no output near 0).
LR = 2.0 ** -11


class Residual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.act, self.lin2 = torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)

    def forward(self, x):
        h = self.lin1(x)
        h += x  # inline: no module outputs the sum
        return self.lin2(self.act(h))


class PaddleResidual(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.lin1, self.act, self.lin2 = paddle.nn.Linear(4, 4), paddle.nn.ReLU(), paddle.nn.Linear(4, 2)

    def forward(self, x):
        h = self.lin1(x)
        h += x
        return self.lin2(self.act(h))


def residual_pair():
    torch.manual_seed(0)
    pt = Residual()
    x = np.array([[-2.0 ** -10, 1, 0, 0]], dtype="float32")  # |x|^2 = 1 + 2**-20: lin1 row 0 moves by x * lr
    with torch.no_grad():
        pt.lin1.weight[0] = 0.0
        pt.lin2.weight[:, 0] = 0.5  # the loss is the outputs' sum: unit 0's gradient 1, exactly
        pt.lin1.bias[0] = 2.0 ** -9 + 2.0 ** -31 + TINY
    pd = PaddleResidual()
    pd.set_state_dict(convert(pt, pd, inputs=x))
    bias = pd.lin1.bias.numpy()
    bias[0] = 2.0 ** -9 + 2.0 ** -31 - TINY
    pd.lin1.bias.set_value(bias)
    return pt, pd, x


SUMMED = (lambda o, y: o.sum(), lambda o, y: o.sum())
TARGETS = np.zeros((1, 2), "float32")


def sgd(momentum):
    return (lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9),
            lambda p: paddle.optimizer.Momentum(LR, momentum=momentum, parameters=p))


@pytest.fixture(scope="module")
def residual_records():
    """(torch's record, Paddle's clean record, Paddle's with momentum 0.8, torch's run again taking Paddle's side)."""
    pt, pd, x = residual_pair()
    start, paddle_start = copy.deepcopy(pt.state_dict()), copy.deepcopy(pd.state_dict())
    t = record_backward(pt, x, TARGETS, SUMMED[0], sgd(0.9)[0], steps=3)
    out = [t]
    for momentum in (0.9, 0.8):
        pd.set_state_dict(paddle_start)
        out.append(record_backward(pd, x, TARGETS, SUMMED[1], sgd(momentum)[1], steps=3))

    def again(crossed):
        pt.load_state_dict(start)
        return record_backward(pt, x, TARGETS, SUMMED[0], sgd(0.9)[0], steps=3, crossed=crossed)
    return (*out, again)


def test_a_kink_at_a_relus_input_in_a_later_step_is_green_once_torch_takes_paddles_side(residual_records):
    t, clean, _, again = residual_records
    report = judged(t, clean, again=again)
    assert report.passed and report.taken and not report.kinks, report.table()
    assert [(c.step, c.module, len(c.index)) for c in report.crossed] == [(1, "in/act", 1)], report.crossed
    c = report.crossed[0]
    assert c.torch[0] == TINY and c.paddle[0] == -TINY, c
    assert "kink in step 2's forward: act's input holds 1 value(s)" in report.table(), report.table()
    assert not judge_backward(t, clean).passed  # without torch's run taking Paddle's side: the jump, red


def test_without_the_inputs_near_0_the_kink_is_unseen_and_red(residual_records):
    """The same records without the ReLU input's near-0 values (what the library recorded before: module outputs
    only): no crossing found, no torch run taking Paddle's side, red at lin1 after step 2."""
    t, clean, _, again = residual_records
    outputs = lambda record: {k: v for k, v in record.items() if not (k.startswith(NEAR) and f"/{INPUT}" in k)}
    report = judged(outputs(t), outputs(clean), again=again)
    assert not report.crossed and not report.taken and not report.passed, report.table()


def test_a_momentum_plant_beside_a_kink_at_a_relus_input_stays_red(residual_records):
    t, _, planted, again = residual_records
    report = judged(t, planted, again=again)
    # lin1's rows are allowed SPREAD x the jump the kink makes in lin1 (one figure per key): red at the next layer
    assert (report.taken, report.passed, report.first_diverging) == (True, False, "lin2.weight after step 3"), \
        report.table()


def test_compare_backward_takes_paddles_side_at_a_relus_input():
    """The user's call, one process: green, torch's taking run made in it."""
    pt, pd, x = residual_pair()
    report = compare_backward(pt, pd, x, TARGETS, loss=SUMMED, optimizer=sgd(0.9), steps=3)
    assert report.passed and report.taken, report.table()
