"""A training BatchNorm over few values per channel: its input gradient sums to exactly 0 over the batch and, over
2 values, nearly cancels, so what it holds is mostly the rounding of the batch means, which depends on the order a
kernel sums in. torch's float32 error is one kernel's sample of it; judge_backward also holds each gradient to
torch's run with those means moved by their rounding (against_itself.rounded_means). A user's net: 8 x (BatchNorm2d,
ReLU, 1 x 1 conv) on 1 x 1 maps, batch 2 (2 values per channel), 64 channels, a correct Paddle port: green, where
torch's own error alone was red at 10 x (a conv bias before a BatchNorm: exactly 0 in float64); plants stay red."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import convert, judge_backward, record_backward  # noqa: E402
from portcheck.gradients.against_itself import ROUNDED, ROUNDED_BY  # noqa: E402

C, BLOCKS = 64, 8
LOSS = (torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy)
SGD = (lambda ps: torch.optim.SGD(ps, 0.01, momentum=0.9),
       lambda ps: paddle.optimizer.Momentum(0.01, 0.9, parameters=ps))


def nets(epsilon=1e-5):
    torch.manual_seed(7)
    pt = torch.nn.Sequential(*[m for _ in range(BLOCKS) for m in (
        torch.nn.BatchNorm2d(C), torch.nn.ReLU(), torch.nn.Conv2d(C, C, 1))], torch.nn.Flatten())
    pd = paddle.nn.Sequential(*[m for _ in range(BLOCKS) for m in (
        paddle.nn.BatchNorm2D(C, epsilon=epsilon), paddle.nn.ReLU(), paddle.nn.Conv2D(C, C, 1))], paddle.nn.Flatten())
    convert(pt, pd)
    return pt, pd, torch.randn(2, C, 1, 1).numpy(), torch.randint(0, C, (2,)).numpy()


@pytest.fixture(scope="module")
def clean():
    pt, pd, x, y = nets()
    return record_backward(pt, x, y, LOSS[0], SGD[0]), record_backward(pd, x, y, LOSS[1], SGD[1])


def test_a_correct_port_over_two_values_per_channel_is_green_where_torchs_own_error_alone_is_red(clean):
    t, p = clean
    report = judge_backward(t, p)
    assert report.passed, report.table()
    alone = judge_backward({k: v for k, v in t.items() if not k.startswith(ROUNDED)}, p)
    worst = max(alone.grads, key=lambda r: r.max / r.allowed)
    assert not alone.passed and worst.name.endswith(".bias") and worst.max / worst.allowed > 5, alone.table()
    assert any(r.rule.spread_by == ROUNDED_BY for r in report.grads)


@pytest.mark.parametrize("plant", ["epsilon", "weight", "eval"])
def test_a_planted_bug_stays_red(plant):
    pt, pd, x, y = nets(epsilon=1e-3 if plant == "epsilon" else 1e-5)
    if plant == "weight":
        pd[5].weight.set_value(pd[5].weight.numpy() + 1e-3)
    if plant == "eval":  # the bias before it then has a real gradient on Paddle's side
        pd[9].eval()
    report = judge_backward(record_backward(pt, x, y, LOSS[0], SGD[0]), record_backward(pd, x, y, LOSS[1], SGD[1]))
    worst = max(report.grads, key=lambda r: r.max / r.allowed)
    assert not report.passed and worst.max / worst.allowed > 100, report.table()
