"""A ReLU kink behind Paddle's legacy BatchNorm(act='relu'), which applies its activation inside its own forward where
torch's BatchNorm hands its output to a ReLU module (torchvision's DenseNet against paddle.vision's): Paddle's output
there is 0 for a value on the other side of 0, no crossing, unless its values before the activation are what the
kink record reads (kinks.before_activation), against the ReLU module's input on torch's side. The zoo's densenet121
crossed one so at one thread (denseblock3.denselayer8's second ReLU input: torch 6.2e-06, Paddle -2.6e-06, the floor
6.5e-06), 2.34 x its allowance at that BatchNorm's gradients while unseen.

Planted here exactly in fp32: a channel whose BatchNorm weight is 0 (a zero-initialised last norm, as residual nets
start theirs) holds its bias alone, 2**-30 in torch and -2**-30 in Paddle, within the forward's rounding."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, convert  # noqa: E402
from portcheck.gradients.kinks import ON_BRANCH, before_activation  # noqa: E402

TINY = 2.0 ** -30
BATCH = 16  # the BatchNorm's values per channel: not few (optimizers.FEW_VALUES)


def pair(bn_momentum=0.9):
    """torch's Linear - BatchNorm1d - ReLU - Linear and its Paddle port with BatchNorm(act='relu'), channel 0 of the
    BatchNorm at +TINY in torch and -TINY in Paddle."""
    torch.manual_seed(0)
    pt = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        pt[1].weight[0], pt[1].bias[0] = 0.0, TINY
    pd = paddle.nn.Sequential(paddle.nn.Linear(4, 3), paddle.nn.BatchNorm(3, act="relu", momentum=bn_momentum),
                              paddle.nn.Linear(3, 1))
    x = np.random.RandomState(0).randn(BATCH, 4).astype("float32")
    pd.set_state_dict(convert(pt, pd, inputs=x))
    bias = pd[1].bias.numpy()
    bias[0] = -TINY
    pd[1].bias.set_value(bias)
    return pt, pd, x


def run(decay=0.0, bn_momentum=0.9):
    pt, pd, x = pair(bn_momentum)
    y = np.random.RandomState(1).randn(BATCH, 1).astype("float32")
    return compare_backward(pt.train(), pd.train(), x, y,
                            loss=(torch.nn.functional.mse_loss, paddle.nn.functional.mse_loss),
                            optimizer=(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                                       lambda p: paddle.optimizer.Momentum(0.1, momentum=0.9, parameters=p,
                                                                           weight_decay=decay)),
                            steps=1)  # the channel stays at the kink in later steps: one step, as the first forward's


def test_a_kink_behind_paddles_fused_activation_is_named_and_judged_on_paddles_branch():
    report = run()
    assert [(c.step, c.module, len(c.index)) for c in report.kinks] == [(0, "in/2", BATCH)], report.kinks
    assert report.forward.passed and report.on_branch and report.passed, report.table()
    assert "kink in step 1's forward: 2's input holds 16 value(s)" in report.table() and ON_BRANCH in report.table()


@pytest.mark.parametrize("plant, where", [({"decay": 1e-2}, "0.weight after step 1"),
                                          ({"bn_momentum": 0.1}, "1.running_mean after step 1")])
def test_a_plant_beside_the_kink_stays_red(plant, where):
    """A weight decay only Paddle's optimizer has, and the BatchNorm's momentum as torch writes it (Paddle's is
    1 - torch's)."""
    report = run(**plant)
    assert report.on_branch and not report.passed and report.first_diverging == where, report.table()


def test_the_fused_forward_is_paddles_own_bit_for_bit():
    """Read between its BatchNorm and its activation, Paddle's model computes what it computes alone: the output and
    the gradients the same bits, the running statistics too, its own forward put back after."""
    _, pd, x = pair()
    state = {k: v.numpy().copy() for k, v in pd.state_dict().items()}

    def once(read):
        pd.set_state_dict(state)
        held = {}
        handles = before_activation(pd, held) if read else []
        out = pd(paddle.to_tensor(x))
        out.sum().backward()
        for h in handles:
            h.remove()
        grads = [p.grad.numpy().copy() for p in pd.parameters() if p.grad is not None]
        pd.clear_gradients()
        return out.numpy(), grads, [v.numpy().copy() for v in pd.state_dict().values()], held
    plain, read = once(False), once(True)
    assert np.array_equal(plain[0], read[0])
    assert all(np.array_equal(a, b) for a, b in zip(plain[1] + plain[2], read[1] + read[2]))
    assert [float(np.asarray(v.numpy())[0, 0]) for v in read[3].values()] == [-TINY]  # before its ReLU
    assert "forward" not in vars(pd[1])
