"""A ReLU kink in the first forward (compare_backward's run on Paddle's branch): a value within rounding of 0 of
another sign on each side opens the gate in torch and shuts it in Paddle, a jump in the gradients no multiple of
torch's own error covers. The zoo's MobileNetV2 met one under ATEN_CPU_CAPABILITY=default (a conv output 1.5e-15
in torch, -1.7e-16 in Paddle): its BatchNorm bias gradient 380 x its allowance. Planted here in a small MLP by a
hidden unit of 2**-30 in torch and -2**-30 in Paddle (its bias 2**-29 apart, within the forward's rounding): green
against torch's run with that value set to Paddle's, and a momentum plant beside it still red."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, convert  # noqa: E402
from portcheck.backward import ON_BRANCH  # noqa: E402

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
    assert [(k.module, k.count) for k in report.kinks] == [("0", 1), ("1", 1)], report.kinks
    assert report.forward.passed and report.on_branch and report.passed, report.table()
    assert ON_BRANCH in report.table()


def test_a_momentum_plant_beside_the_kink_stays_red():
    report = run(0.8)
    assert report.on_branch and not report.passed and report.first_diverging == "0.weight after step 3", \
        report.table()
