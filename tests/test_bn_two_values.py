"""A net ending as densenet121 ends at 32 x 32, batch 2: strided convs down to 1 x 1, then a BatchNorm in training over
2 values per channel, ReLU, pooling and a Linear. Over two values a BatchNorm's output is +-d / sqrt(d^2 + eps) and
the gradient it sends back sums to 0 over them: each fp32 run's rounding there is amplified otherwise, and torch's
own error at a row is one sample of it. compare_backward judges every value that BatchNorm reaches also against
torch's run again with it moved by torch's own fp32 error there (gradients.few_values): a correct port green, a
wrong momentum or epsilon of that BatchNorm red at it."""
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, convert  # noqa: E402
from portcheck.gradients import few_values  # noqa: E402
from portcheck.gradients.optimizers import FEW_VALUES  # noqa: E402
from tools import bn_few_values as sweep  # noqa: E402 - paddle.nn under torch.nn's names

LOSS = (torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy)
SGD = (lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9), lambda ps: paddle.optimizer.Momentum(0.1, 0.9, parameters=ps))
LAST = "13"  # the BatchNorm over 2 values per channel


def layers(nn, norm):
    convs = [(3, 8), (8, 8), (8, 16), (16, 16), (16, 16)]  # 32 -> 16 -> 8 -> 4 -> 2 -> 1
    out = []
    for c_in, c_out in convs[:-1]:
        out += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), norm(c_out, False), nn.ReLU()]
    return out + [nn.Conv2d(16, 16, 3, stride=2, padding=1), norm(16, True), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                  nn.Flatten(), nn.Linear(16, 4)]


def nets(seed, plant=None):
    torch.manual_seed(seed)
    pt = torch.nn.Sequential(*layers(torch.nn, lambda c, last: torch.nn.BatchNorm2d(c)))
    pd_nn = sweep._Paddle()

    def norm(c, last):
        planted = last and plant
        return pd_nn.BatchNorm2d(c, epsilon=1e-3 if planted == "epsilon" else 1e-5,
                                 momentum=0.1 if planted == "momentum" else 0.9)
    pd = pd_nn.Sequential(*layers(pd_nn, norm))
    x = torch.randn(2, 3, 32, 32).numpy()
    convert(pt, pd, inputs=x)
    return pt, pd, x, torch.randint(0, 4, (2,)).numpy()


@pytest.mark.parametrize("seed", [0, 1])
def test_a_correct_port_ending_in_a_batchnorm_over_two_values_is_green(seed):
    report = compare_backward(*nets(seed), LOSS, SGD, steps=3)
    assert report.passed and not report.cannot_judge, report.table()
    assert (f"{LAST}", "BatchNorm2d", 2, FEW_VALUES) in report.few_values
    moved = [r for r in report.grads if r.rule.spread_by == few_values.BY]  # the rows it reaches: torch's run moved
    assert moved and all(r.passed for r in moved), report.table()


@pytest.mark.parametrize("plant, where", [("momentum", f"{LAST}.running_mean after step 1"), ("epsilon", LAST)])
def test_that_batchnorms_momentum_or_epsilon_wrong_is_red_at_it(plant, where):
    report = compare_backward(*nets(0, plant), LOSS, SGD, steps=3)
    assert not report.passed and not report.cannot_judge, report.table()
    assert str(report.first_diverging) == where, report.table()


def test_a_loss_red_by_the_guides_bound_alone_is_not_named_before_a_red_statistic():
    """torchvision's densenet121 against paddle.vision's at 32 x 32, batch 2, seed 2, Paddle's norm5 momentum 0.1
    (torch's value): red, its worst row features.norm5.running_mean after step 1 (1.56 x its allowance), but named at
    the first step's loss, over the guide's bound on its mean where torch's own fp32 result is over it too (a correct
    port's loss there, which the verdict lets pass)."""
    from portcheck.core import calibrated
    from portcheck.core.diff import KeyResult
    from portcheck.gradients.result import LOSS_MEAN_BOUND, BackwardReport
    loss = KeyResult("loss", calibrated.Measured(128, LOSS_MEAN_BOUND), max=0.02, mean=0.02, scale=3.0, err32=1.8e-3,
                     own_mean=0.05)
    stat = KeyResult("features.norm5.running_mean", calibrated.Measured(128), shape=(8,), max=1.3, mean=0.1,
                     scale=1.0, err32=1e-3, own_mean=1e-4)
    report = BackwardReport(steps=[[loss, stat]])
    assert loss.beyond(LOSS_MEAN_BOUND) and not report.passed
    assert report.first_diverging == "features.norm5.running_mean after step 1"
    assert BackwardReport(steps=[[loss]]).first_diverging is None
