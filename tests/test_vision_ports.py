"""Habits of vision models (torchvision against paddle.vision), each on a small pair built here: activations run in
place after the module that computed their input, Paddle's legacy BatchNorm holding the activation torch runs as
the next module, and two convolutions paired by place whose shapes differ."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_forward, convert  # noqa: E402

X = np.random.RandomState(0).randn(2, 3, 8, 8).astype(np.float32)


# ---------------------------------------------------------------- in-place activations and a residual add

class TorchBlock(torch.nn.Module):
    """torchvision's habit: one ReLU(inplace=True) called twice, an activation in place, `out += identity`."""
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False), torch.nn.BatchNorm2d(4)
        self.conv2, self.bn2 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False), torch.nn.BatchNorm2d(4)
        self.relu, self.act = torch.nn.ReLU(inplace=True), torch.nn.Hardswish(inplace=True)

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.act(self.bn2(self.conv2(out)))
        out += identity
        return self.relu(out)


class PaddleBlock(paddle.nn.Layer):
    def __init__(self, act=paddle.nn.Hardswish, last=paddle.nn.ReLU):
        super().__init__()
        self.conv1, self.bn1 = paddle.nn.Conv2D(4, 4, 3, padding=1, bias_attr=False), paddle.nn.BatchNorm2D(4)
        self.conv2, self.bn2 = paddle.nn.Conv2D(4, 4, 3, padding=1, bias_attr=False), paddle.nn.BatchNorm2D(4)
        self.relu, self.act, self.last = paddle.nn.ReLU(), act(), last()

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.act(self.bn2(self.conv2(out)))
        out += identity  # in place in Paddle too
        return self.last(out)


def net(framework, block):
    nn = torch.nn if framework is torch else paddle.nn
    conv = nn.Conv2d if framework is torch else nn.Conv2D
    return nn.Sequential(conv(3, 4, 3, padding=1), block, conv(4, 2, 1))


def in_place_pair(**plant):
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = net(torch, TorchBlock()).eval(), net(paddle, PaddleBlock(**plant))
    convert(pt, pd)
    return pt, pd.eval()


def test_a_port_of_in_place_activations_is_green_cumulative_and_isolated():
    report = compare_forward(*in_place_pair(), X, isolate=True)
    assert report.passed and report.differing == [], report.table()


@pytest.mark.parametrize("plant, module", [({"act": paddle.nn.ReLU}, "1.act"),
                                           ({"last": paddle.nn.LeakyReLU}, "1.relu#2")])
def test_an_activation_planted_behind_an_in_place_one_is_named_exactly_cumulative_and_isolated(plant, module):
    """Before, each output was recorded as the in-place module after it left it, and each input after its module
    ran: the plants were named at the block, and isolate found no module differing."""
    report = compare_forward(*in_place_pair(**plant), X, isolate=True)
    assert not report.passed
    assert report.first_diverging == module, report.table()
    assert report.differing == [module], report.table()



def test_the_float64_run_judged_as_it_runs_reads_each_input_before_an_in_place_module_overwrites_it():
    """compare_forward's rows are, input verdicts and own errors included, those of the records (record_forward,
    judge_forward). Before, the float64 run judged each first input after its module ran: an in-place module's
    own output, its input's yardstick another value than the record's."""
    from portcheck import judge_forward, record_forward
    pt, pd = in_place_pair(act=paddle.nn.ReLU)
    seen = lambda report: [(r.name, r.input_ok, r.max, r.err32) for r in report.paired]
    assert seen(compare_forward(pt, pd, X)) == seen(judge_forward(record_forward(pt, X), record_forward(pd, X)))

# ---------------------------------------------------------------- Paddle's BatchNorm(act=...) against BatchNorm2d, ReLU

def dense_pair(**norm):
    """torchvision's densenet stem (BatchNorm2d, then ReLU(inplace=True)) against paddle.vision's (nn.BatchNorm with
    act='relu': one module)."""
    from collections import OrderedDict
    torch.manual_seed(0)
    paddle.seed(0)
    pt = torch.nn.Sequential(OrderedDict(
        conv0=torch.nn.Conv2d(3, 4, 3, padding=1), norm0=torch.nn.BatchNorm2d(4), relu0=torch.nn.ReLU(inplace=True),
        pool0=torch.nn.MaxPool2d(2), conv1=torch.nn.Conv2d(4, 2, 1))).eval()
    pd = paddle.nn.Sequential(
        ("conv0", paddle.nn.Conv2D(3, 4, 3, padding=1)), ("norm0", paddle.nn.BatchNorm(4, **{"act": "relu", **norm})),
        ("pool0", paddle.nn.MaxPool2D(2)), ("conv1", paddle.nn.Conv2D(4, 2, 1)))
    convert(pt, pd)
    return pt, pd.eval()


def test_a_batchnorm_holding_the_next_relu_pairs_as_both_and_is_green_forward_isolated_and_backward():
    """Before, Paddle's norm0 (its output after the ReLU) was judged against torch's norm0 (before it): red."""
    from portcheck import compare_backward
    pt, pd = dense_pair()
    report = compare_forward(pt, pd, X, isolate=True)
    assert report.passed and report.differing == [], report.table()
    lines = report.pairs().splitlines()
    assert "norm0 + relu0 -> norm0 (Paddle's module computes torch's in turn)" in lines, lines
    assert "torch calls unpaired (0): -" in lines and sum("relu0" in line for line in lines) == 1, lines
    trained = compare_backward(pt.train(), pd.train(), X, np.zeros((2, 2, 4, 4), np.float32),
                               (torch.nn.functional.mse_loss, paddle.nn.functional.mse_loss),
                               (lambda ps: torch.optim.SGD(ps, lr=0.1),
                                lambda ps: paddle.optimizer.SGD(learning_rate=0.1, parameters=ps)), steps=2)
    assert trained.passed, trained.table()


@pytest.mark.parametrize("plant", [{"act": "sigmoid"}, {"act": "elu"}, {"epsilon": 1e-3}])
def test_a_plant_in_a_batchnorm_holding_its_activation_is_red_at_it(plant):
    report = compare_forward(*dense_pair(**plant), X, isolate=True)
    assert not report.passed
    assert report.first_diverging == "norm0" and report.differing[0] == "norm0", report.table()


def passed_through_pair(**norm):
    """timm's ResNet block: bn2, then drop_block and aa, Identity modules around its act2 (ReLU(inplace=True)),
    against PaddleClas's ResNeXt: one legacy BatchNorm(act='relu')."""
    from collections import OrderedDict
    torch.manual_seed(0)
    paddle.seed(0)
    pt = torch.nn.Sequential(OrderedDict(
        conv0=torch.nn.Conv2d(3, 4, 3, padding=1), norm0=torch.nn.BatchNorm2d(4), drop=torch.nn.Identity(),
        relu0=torch.nn.ReLU(inplace=True), aa=torch.nn.Identity(), conv1=torch.nn.Conv2d(4, 2, 1))).eval()
    pd = paddle.nn.Sequential(
        ("conv0", paddle.nn.Conv2D(3, 4, 3, padding=1)), ("norm0", paddle.nn.BatchNorm(4, **{"act": "relu", **norm})),
        ("conv1", paddle.nn.Conv2D(4, 2, 1)))
    convert(pt, pd)
    return pt, pd.eval()


@pytest.mark.parametrize("plant", [{}, {"act": "elu"}])
def test_a_batchnorm_holding_the_relu_torch_runs_past_identities_pairs_as_all_of_them(plant):
    """An Identity hands on the output it was given: no place of its own where the chain could end, tied with the
    chain before it. Before, torch's norm0 was judged before its ReLU against Paddle's after it: red."""
    report = compare_forward(*passed_through_pair(**plant), X, isolate=True)
    if not plant:
        assert report.passed and report.differing == [], report.table()
        assert "norm0 + drop + relu0 -> norm0 (Paddle's module computes torch's in turn)" in report.pairs().splitlines()
    else:
        assert not report.passed and report.first_diverging == "norm0" and report.differing == ["norm0"], \
            report.table()


class BatchNormAct2d(torch.nn.BatchNorm2d):
    """timm's habit, the converse: torch's one module computes the norm and its activation."""
    def forward(self, x):
        return torch.relu(super().forward(x))


def fused_torch_pair(act=paddle.nn.ReLU):
    from collections import OrderedDict
    torch.manual_seed(0)
    pt = torch.nn.Sequential(OrderedDict(conv0=torch.nn.Conv2d(3, 4, 3, padding=1), norm0=BatchNormAct2d(4),
                                         pool0=torch.nn.MaxPool2d(2), conv1=torch.nn.Conv2d(4, 2, 1))).eval()
    pd = paddle.nn.Sequential(("conv0", paddle.nn.Conv2D(3, 4, 3, padding=1)), ("norm0", paddle.nn.BatchNorm2D(4)),
                              ("relu0", act()), ("pool0", paddle.nn.MaxPool2D(2)), ("conv1", paddle.nn.Conv2D(4, 2, 1)))
    convert(pt, pd)
    return pt, pd.eval()


@pytest.mark.parametrize("act", [paddle.nn.ReLU, paddle.nn.ELU])
def test_a_torch_module_holding_the_activation_paddle_runs_next_pairs_as_both(act):
    report = compare_forward(*fused_torch_pair(act), X, isolate=True)
    if act is paddle.nn.ReLU:
        assert report.passed and report.differing == [], report.table()
        assert "norm0 -> norm0 + relu0 (torch's module computes Paddle's in turn)" in report.pairs().splitlines()
        assert "Paddle calls unpaired (0): -" in report.pairs().splitlines()
    else:  # a port running another activation there: red at the module
        assert not report.passed and report.first_diverging == "norm0" and report.differing == ["norm0"], \
            report.table()


class BatchNormSiLU(torch.nn.BatchNorm2d):
    def forward(self, x):
        return torch.nn.functional.silu(super().forward(x))


class PaddleStem(paddle.nn.Layer):
    """PaddleClas's EfficientNet: the norm a module of its own, its activation applied by the parent's forward."""
    def __init__(self, act):
        super().__init__()
        self.conv0, self.norm0 = paddle.nn.Conv2D(3, 4, 3, padding=1), paddle.nn.BatchNorm2D(4)
        self.conv1, self.act = paddle.nn.Conv2D(4, 2, 1), act

    def forward(self, x):
        return self.conv1(self.act(self.norm0(self.conv0(x))))


@pytest.mark.parametrize("act", [paddle.nn.functional.swish, paddle.nn.functional.relu])
def test_a_torch_module_holding_the_activation_paddles_forward_applies_is_judged_where_the_two_meet(act):
    """timm's BatchNormAct2d against PaddleClas's BatchNorm and the F.swish its parent applies: torch's output
    judged against the input Paddle computes for the next module. Before, red at the norm on the correct port."""
    from collections import OrderedDict
    torch.manual_seed(0)
    paddle.seed(0)
    pt = torch.nn.Sequential(OrderedDict(conv0=torch.nn.Conv2d(3, 4, 3, padding=1), norm0=BatchNormSiLU(4),
                                         conv1=torch.nn.Conv2d(4, 2, 1))).eval()
    pd = PaddleStem(act)
    convert(pt, pd)
    report = compare_forward(pt, pd.eval(), X, isolate=True)
    if act is paddle.nn.functional.swish:
        assert report.passed and report.differing == [], report.table()
        assert "norm0 -> norm0 (judged against the input of Paddle's conv1, which Paddle's forward computes from its " \
               "output)" in report.pairs().splitlines(), report.pairs()
    else:  # a port applying another activation there: red at the norm, and at the parent's code that applies it
        assert not report.passed and report.first_diverging == "norm0", report.table()
        assert report.differing == ["norm0", "(model) (before conv1)"], report.table()


class TorchDense(torch.nn.Module):
    """torchvision's DenseNet: norm0 and norm1 followed by ReLU modules, norm5 by F.relu in the parent's forward."""
    def __init__(self):
        super().__init__()
        from collections import OrderedDict
        self.features = torch.nn.Sequential(OrderedDict(
            conv0=torch.nn.Conv2d(3, 4, 3, padding=1), norm0=torch.nn.BatchNorm2d(4), relu0=torch.nn.ReLU(inplace=True),
            norm1=torch.nn.BatchNorm2d(4), relu1=torch.nn.ReLU(inplace=True), conv1=torch.nn.Conv2d(4, 4, 1),
            norm5=torch.nn.BatchNorm2d(4)))
        self.classifier = torch.nn.Linear(4, 2)

    def forward(self, x):
        out = torch.nn.functional.relu(self.features(x), inplace=True)
        return self.classifier(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(out, 1), 1))


class PaddleDense(paddle.nn.Layer):
    """paddle.vision's: every norm a legacy BatchNorm(act='relu'), pooled by a module of its own. act5="forward":
    BatchNorm2D at norm5 and F.relu in the forward, as torch does; pool: a function, pooled in the forward."""
    def __init__(self, act0="relu", act5="relu", pool=None):
        super().__init__()
        self.conv0, self.norm0 = paddle.nn.Conv2D(3, 4, 3, padding=1), paddle.nn.BatchNorm(4, act=act0)
        self.norm1, self.conv1 = paddle.nn.BatchNorm(4, act="relu"), paddle.nn.Conv2D(4, 4, 1)
        self.norm5 = paddle.nn.BatchNorm2D(4) if act5 == "forward" else paddle.nn.BatchNorm(4, act=act5)
        self.relu = paddle.nn.functional.relu if act5 == "forward" else lambda x: x
        self.pool, self.out = pool or paddle.nn.AdaptiveAvgPool2D(1), paddle.nn.Linear(4, 2)

    def forward(self, x):
        y = self.relu(self.norm5(self.conv1(self.norm1(self.norm0(self.conv0(x))))))
        return self.out(paddle.flatten(self.pool(y), 1))


@pytest.fixture(scope="module")
def torch_dense():
    torch.manual_seed(0)
    pt = TorchDense().eval()
    with torch.no_grad():  # statistics and shifts away from their initial values: the ReLUs cut something
        for m in pt.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5), m.running_var.uniform_(0.5, 1.5), m.bias.uniform_(-0.5, 0.5)
    return pt


def functional_pair(pt, **act):
    pd = PaddleDense(**act)
    convert(pt, pd)
    return pt, pd.eval()


@pytest.mark.parametrize("act", [{}, {"act5": "forward"},
                                 {"pool": lambda x: paddle.nn.functional.adaptive_avg_pool2d(x, 1)}])
def test_a_batchnorm_holding_the_relu_torchs_forward_applies_after_it_is_judged_through_it(torch_dense, act):
    """torchvision's densenet121 against paddle.vision's: Paddle's norm5 holds the F.relu torchvision's forward
    applies to features' output, outside any module (pooled by a module or in its forward: its declared act says it).
    Before, its output was judged against torch's norm5 before the ReLU: red at features.norm5 (1.29e+05 x torch's
    error) and, isolated, at (model) (before classifier) too. A port applying F.relu in its own forward is judged on
    the outputs as they are."""
    report = compare_forward(*functional_pair(torch_dense, **act), X, isolate=True)
    assert report.passed and report.differing == [], report.table()
    said = "features.norm5 -> norm5 (Paddle norm5 is BatchNorm(act=relu): judged against torch's features.norm5 " \
           "followed by relu, which torch's forward applies to it)"
    assert (said in report.pairs().splitlines()) == ("act5" not in act), report.pairs()


@pytest.mark.parametrize("act, module", [({"act0": "tanh"}, "features.norm0"), ({"act5": None}, "features.norm5"),
                                         ({"act5": "tanh"}, "features.norm5")])
def test_a_plant_at_a_batchnorm_holding_its_activation_is_red_there_alone(torch_dense, act, module):
    """Before, norm0's tanh was named isolated at every later norm too (Paddle's norm1 paired with torch's norm1
    alone: the run's values, different from norm0 on, no longer said Paddle's holds relu1), and a norm5 without its
    activation only at the model's output."""
    report = compare_forward(*functional_pair(torch_dense, **act), X, isolate=True)
    assert not report.passed
    assert report.first_diverging == module and report.differing == [module], report.table()

@pytest.mark.parametrize("act, red", [({}, None), ({"act5": None}, "features.norm5")])
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_compare_backward_judges_its_first_forward_through_the_activation_torchs_forward_applies(torch_dense, act,
                                                                                                   red, mode):
    """compare_backward's first forward is paired and judged as compare_forward's: torch's record says which output
    its forward hands to F.relu. Before, torchvision's densenet121 against paddle.vision's (batch 2, 64 x 64) was
    green in compare_forward and red at features.norm5 in compare_backward, eval or train: the kink hooks' reads of
    norm5's output hid the F.relu after them."""
    import copy
    from portcheck import compare_backward
    pt, pd = functional_pair(copy.deepcopy(torch_dense), **act)
    getattr(pt, mode)(), getattr(pd, mode)()
    mse = lambda o, t: ((o - t) ** 2).mean()  # noqa: E731
    report = compare_backward(pt, pd, X, np.random.RandomState(1).randn(2, 2).astype(np.float32), loss=(mse, mse),
                              optimizer=(lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
                                         lambda p: paddle.optimizer.Momentum(0.01, momentum=0.9, parameters=p)),
                              steps=2)
    assert report.passed == (red is None) and report.first_diverging == red, report.table()



class TorchBasicConv(torch.nn.Module):
    """torchvision's inception BasicConv2d: conv and bn modules, F.relu in its own forward."""
    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False), torch.nn.BatchNorm2d(4, eps=0.001)
        self.out = torch.nn.Conv2d(4, 2, 1)

    def forward(self, x):
        return self.out(torch.nn.functional.relu(self.bn(self.conv(x)), inplace=True))


def paddle_conv_norm_act(act):
    """paddle.vision's ConvNormActivation (conv, BatchNorm2D, an activation module), then the next conv."""
    layers = [paddle.nn.Conv2D(3, 4, 3, padding=1, bias_attr=False), paddle.nn.BatchNorm2D(4, epsilon=0.001)]
    return paddle.nn.Sequential(*layers, *([getattr(paddle.nn, act)()] if act else []), paddle.nn.Conv2D(4, 2, 1))


@pytest.mark.parametrize("act, red", [("ReLU", None), ("LeakyReLU", "bn"), (None, "bn")])
def test_an_activation_torchs_forward_applies_and_paddles_runs_as_a_module_is_judged_on_the_outputs_as_they_are(
        act, red):
    """torchvision's inception_v3 against paddle.vision's: every BasicConv2d calls F.relu on its bn's output in its
    own forward, paddle.vision's ConvNormActivation runs a ReLU module after its BatchNorm2D. Before, torch's bn was
    judged through the relu and Paddle's as it is, its ReLU module left unpaired: the correct port red at
    Conv2d_1a_3x3.bn (2.09e+05 x its allowance) and, isolated, at every bn of the model. Another activation module
    there, or none, is red at the bn."""
    torch.manual_seed(0)
    pt = TorchBasicConv().eval()
    with torch.no_grad():
        pt.bn.running_mean.uniform_(-0.5, 0.5), pt.bn.bias.uniform_(-0.5, 0.5)
    pd = paddle_conv_norm_act(act)
    convert(pt, pd)
    report = compare_forward(pt, pd.eval(), X, isolate=True)
    assert report.passed == (red is None) and report.first_diverging == red, report.table()
    assert report.differing == ([] if red is None else [red]), report.table()

# ---------------------------------------------------------------- a convolution of another config, paired by place

class TorchSqueeze(torch.nn.Module):
    """torchvision's squeezenet1_1 stem: its first conv without padding, in a Sequential `features`."""
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(inplace=True),
                                            torch.nn.MaxPool2d(3, 2, ceil_mode=True), torch.nn.Conv2d(8, 4, 1))

    def forward(self, x):
        return self.features(x)


class PaddleSqueeze(paddle.nn.Layer):
    """paddle.vision's: the same layers under other names, the first conv with padding=1."""
    def __init__(self, **conv):
        super().__init__()
        self._conv = paddle.nn.Conv2D(3, 8, **{"kernel_size": 3, "stride": 2, "padding": 1, **conv})
        self._pool, self._conv1 = paddle.nn.MaxPool2D(3, 2), paddle.nn.Conv2D(8, 4, 1)

    def forward(self, x):
        return self._conv1(self._pool(paddle.nn.functional.relu(self._conv(x))))


@pytest.mark.parametrize("conv, inputs, said", [
    ({}, np.random.RandomState(0).randn(2, 3, 16, 16).astype(np.float32),
     "torch features.0 (weight [8, 3, 3, 3], bias [8]; output [2, 8, 7, 7]) against Paddle _conv (weight [8, 3, 3, 3], "
     "bias [8]; output [2, 8, 8, 8]), padding 0 against 1: the two models' configs differ there"),
    ({"kernel_size": 5, "padding": 0}, None,
     "torch features.0 (weight [8, 3, 3, 3], bias [8]) against Paddle _conv (weight [8, 3, 5, 5], bias [8]), "
     "kernel_size 3 against 5: the two models' configs differ there")])
def test_two_convolutions_paired_by_place_whose_shapes_differ_are_said_with_the_settings_that_make_them(
        conv, inputs, said):
    """Before, torch's features.0 was said to have no counterpart, and a name_map entry asked for."""
    from portcheck.core.errors import PipelineError
    with pytest.raises(PipelineError) as refused:
        convert(TorchSqueeze(), PaddleSqueeze(**conv), inputs=inputs)
    assert said in str(refused.value) and "name_map entry" not in str(refused.value), refused.value


# ---------------------------------------------------------------- training: batch statistics and dropout masks

def _trained(pt, pd, steps=1):
    from portcheck import compare_backward
    loss = (lambda o, y: ((o - y) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9),
           lambda ps: paddle.optimizer.Momentum(learning_rate=0.01, momentum=0.9, parameters=ps))
    return compare_backward(pt, pd, X, np.random.RandomState(1).randn(2, 2, 8, 8).astype(np.float32), loss=loss,
                            optimizer=sgd, steps=steps)


def test_gradients_under_batch_statistics_are_allowed_torchs_spread_and_a_momentum_plant_stays_red():
    """BatchNorm in train mode: a weight moved one ulp moves torch's own gradients past its fp32 error (resnext50 at
    64 x 64: 1.30e-3 at layer4.2.bn3.weight, Paddle's 1.30e-3, torch's fp32 error 2.2e-6), so the gradients are also
    allowed calibrated.SPREAD x torch against itself. Before, the torch record held no such run of its gradients. A
    BatchNorm momentum left at torch's 0.1 on Paddle's side (Paddle's 0.9 is torch's 0.1) stays red at its statistic."""
    pt, pd = in_place_pair()
    report = _trained(pt.train(), pd.train())
    assert report.passed, report.table()
    assert any(r.rule.spread > 0 for r in report.grads), report.table()
    pt, pd = in_place_pair()
    pd[1].bn1._momentum = 0.1
    report = _trained(pt.train(), pd.train())
    assert not report.passed and report.first_diverging == "1.bn1.running_mean after step 1", report.table()


def test_without_batch_statistics_the_gradients_keep_torchs_own_error_alone():
    from portcheck.gradients.against_itself import MOVED
    from portcheck.gradients.backward import record_backward
    pt, _ = in_place_pair()
    record = record_backward(pt.eval(), X, np.zeros((2, 2, 8, 8), np.float32), lambda o, y: ((o - y) ** 2).mean(),
                             lambda ps: torch.optim.SGD(ps, lr=0.01))
    assert not [k for k in record if k.startswith(MOVED + "grad/")]


def test_the_float64_twin_draws_the_float32_runs_dropout_masks():
    """Before, torch's float64 run drew masks of its own after the float32 run: its 'own error' was another mask's,
    an allowance that let a planted activation through (alexnet in train mode, 0.175 of it)."""
    from portcheck.gradients.backward import record_backward
    from portcheck.forward.twin import F64
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 64), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                              torch.nn.Linear(64, 2))
    record = record_backward(net.train(), X, np.zeros((2, 2), np.float32), lambda o, y: ((o - y) ** 2).mean(),
                             lambda ps: torch.optim.SGD(ps, lr=0.01))
    g, g64 = record["grad/1.weight"], record[F64 + "grad/1.weight"]
    assert np.abs(g - g64).max() <= 1e-5 * np.abs(g64).max()


# ---------------------------------------------------------------- a pooled [N, C, 1, 1] against a reshaped [N, C]

class TorchHead(torch.nn.Module):
    """torchvision's inception_v3 head: pooled, Dropout on [N, C, 1, 1], then flattened."""
    def __init__(self):
        super().__init__()
        self.conv, self.avgpool = torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1)
        self.dropout, self.fc = torch.nn.Dropout(0.5), torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.flatten(self.dropout(self.avgpool(self.conv(x))), 1))


class PaddleHead(paddle.nn.Layer):
    """paddle.vision's: reshaped to [N, C] before its Dropout."""
    def __init__(self, mode="upscale_in_train"):
        super().__init__()
        self.conv, self.avg_pool = paddle.nn.Conv2D(3, 4, 3), paddle.nn.AdaptiveAvgPool2D(1)
        self.dropout, self.fc = paddle.nn.Dropout(0.5, mode=mode), paddle.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.dropout(paddle.reshape(self.avg_pool(self.conv(x)), [-1, 4])))


@pytest.mark.parametrize("mode", ["upscale_in_train", "downscale_in_infer"])
def test_a_pooled_output_against_its_reshape_is_the_same_values_and_a_dropout_mode_plant_red_there(mode):
    """Before, [2, 4, 1, 1] against [2, 4] was compared as a broadcast ([2, 4, 2, 4]: every value against every
    other): the correct port red at dropout (inception_v3 in the zoo)."""
    torch.manual_seed(0)
    pt, pd = TorchHead().eval(), PaddleHead(mode)
    convert(pt, pd)
    report = compare_forward(pt, pd.eval(), X, isolate=True)
    if mode == "upscale_in_train":
        assert report.passed and report.differing == [], report.table()
        assert "the same values in another shape" in next(r.by_design for r in report.paired if r.name == "dropout")
    else:  # x (1 - p) in eval
        assert not report.passed and report.first_diverging == "dropout" and report.differing == ["dropout"], \
            report.table()


# ---------------------------------------------------------------- a max pooling's tie, sent another way

class LaterMax(paddle.nn.Layer):
    """Max pooling that sends a tied window's gradient to the later of its maxima (torch's kernel: the first), as
    Paddle's kernel does where its values, an ulp from torch's, break torch's exact tie the other way (vgg11)."""
    def forward(self, x):
        return paddle.nn.functional.max_pool2d(x.flip([2, 3]), 2).flip([2, 3])


def tied_pair(act=paddle.nn.ReLU):
    torch.manual_seed(0)
    paddle.seed(0)
    pt = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                             torch.nn.Conv2d(4, 2, 1))
    pd = paddle.nn.Sequential(paddle.nn.Conv2D(3, 4, 3, padding=1), act(), LaterMax(), paddle.nn.Conv2D(4, 2, 1))
    with torch.no_grad():  # small integers: every sum exact, so windows tie between different patches
        pt[0].weight.copy_(torch.from_numpy(np.random.RandomState(2).randint(-1, 2, (4, 3, 3, 3)).astype(np.float32)))
        pt[0].bias.zero_()
    convert(pt, pd)
    return pt, pd


@pytest.mark.parametrize("act", [paddle.nn.ReLU, paddle.nn.LeakyReLU])
def test_a_max_pooling_tie_sent_the_other_way_is_torchs_own_spread_and_a_planted_activation_stays_red(act):
    """vgg11 at 64 x 64: one window tied exactly in torch's fp32 run, the later one taken by Paddle's; its gradient
    moved whole (grad features.3.weight 2.6e-4 from torch, torch's own error 1.5e-8). Before, torch's run against
    itself kept no gradients without BatchNorm and took the first of a tie: red at grad 0.weight (0.198)."""
    x = np.random.RandomState(0).randint(0, 3, (2, 3, 8, 8)).astype(np.float32)
    from portcheck import compare_backward
    report = compare_backward(*tied_pair(act), x, np.random.RandomState(1).randn(2, 2, 4, 4).astype(np.float32),
                              loss=(lambda o, y: ((o - y) ** 2).mean(),) * 2,
                              optimizer=(lambda ps: torch.optim.SGD(ps, lr=0.01),
                                         lambda ps: paddle.optimizer.SGD(learning_rate=0.01, parameters=ps)), steps=1)
    if act is paddle.nn.ReLU:
        assert report.passed, report.table()
        assert next(r for r in report.grads if r.name == "grad 0.weight").rule.spread > 0, report.table()
    else:
        assert not report.passed, report.table()


# ---------------------------------------------------------------- a residual block whose only child holds its layers

class TorchResidual(torch.nn.Module):
    """torchvision's InvertedResidual: its layers in one child, `block`, its input added to that child's output."""
    def __init__(self):
        super().__init__()
        self.block = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                         torch.nn.Hardswish())

    def forward(self, x):
        return x + self.block(x)


class PaddleResidual(paddle.nn.Layer):
    """paddle.vision's: the same layers its own, the same add."""
    def __init__(self):
        super().__init__()
        self.conv, self.bn = paddle.nn.Conv2D(4, 4, 3, padding=1), paddle.nn.BatchNorm2D(4)
        self.act = paddle.nn.Hardswish()

    def forward(self, x):
        return x + self.act(self.bn(self.conv(x)))


TorchResidual.__name__ = PaddleResidual.__name__ = "InvertedResidual"  # one class name, as the two libraries'


class TorchStages(torch.nn.Module):
    """torchvision's mobilenet_v3: the stem, the blocks and the last conv in one `features`."""
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Hardswish()),
                                      TorchResidual(), TorchResidual(), nn.Conv2d(4, 6, 1))
        self.head = nn.Conv2d(6, 2, 1)

    def forward(self, x):
        return self.head(self.features(x))


class PaddleStages(paddle.nn.Layer):
    """paddle.vision's: the stem, `blocks` and the last conv each its own."""
    def __init__(self):
        super().__init__()
        nn = paddle.nn
        self.conv = nn.Sequential(nn.Conv2D(3, 4, 3, padding=1), nn.BatchNorm2D(4), nn.Hardswish())
        self.blocks = nn.Sequential(PaddleResidual(), PaddleResidual())
        self.last, self.head = nn.Conv2D(4, 6, 1), nn.Conv2D(6, 2, 1)

    def forward(self, x):
        return self.head(self.last(self.blocks(self.conv(x))))


@pytest.mark.parametrize("plant, module", [(None, None), ("conv.2", "features.0.2"),
                                           ("blocks.1.act", "features.2.block.2")])
def test_a_block_wrapping_its_only_child_pairs_by_structure_and_a_planted_activation_is_red_forward_and_backward(
        plant, module):
    """mobilenet_v3_small's stem Hardswish as ReLU: compare_forward named it, compare_backward refused ("Paddle
    blocks.10 fits torch features.11.block and features.11 equally"). features.11.block -> blocks.10 was as good as
    features.11 -> blocks.10 only beside features.11 -> blocks, whose insides do not correspond (blocks holds the
    other ten blocks); eval mode's values settled the tie, train mode's batch statistics under the plant did not.
    That pair is forbidden before any tie is settled: the last block pairs as its class, whatever a plant moves,
    one inside it too."""
    from portcheck import compare_backward
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = TorchStages(), PaddleStages()
    convert(pt, pd, inputs=X)
    if plant:  # Paddle's Hardswish there as ReLU
        *path, last = plant.split(".")
        layer = pd
        for part in path:
            layer = layer[int(part)] if part.isdigit() else getattr(layer, part)
        setattr(layer, last, paddle.nn.ReLU())
    forward = compare_forward(pt.eval(), pd.eval(), X)
    trained = compare_backward(pt.train(), pd.train(), X, np.zeros((2, 2, 8, 8), np.float32),
                               (torch.nn.functional.mse_loss, paddle.nn.functional.mse_loss),
                               (lambda ps: torch.optim.SGD(ps, lr=0.1),
                                lambda ps: paddle.optimizer.SGD(learning_rate=0.1, parameters=ps)))
    for report in (forward, trained.forward):
        assert "features.2 -> blocks.1" in report.pairs().splitlines(), report.pairs()
    assert forward.passed == trained.passed == (plant is None), (forward.table(), trained.table())
    assert forward.first_diverging == trained.forward.first_diverging == module, trained.table()


# ---------------------------------------------------------------- a module on the other side of a boundary

class TorchPooledHead(torch.nn.Module):
    """timm's ReXNet: the pool inside the head (its ClassifierHead: pool, dropout, Linear)."""
    def __init__(self):
        super().__init__()
        self.conv, self.norm = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Dropout(0.2),
                                        torch.nn.Linear(4, 2))

    def forward(self, x):
        return self.head(self.norm(self.conv(x)))


class PaddlePooledFeatures(paddle.nn.Layer):
    """PaddleClas's ReXNet: the pool the features' last module, the head a dropout and a 1x1 conv."""
    def __init__(self, scale=1.0):
        super().__init__()
        self.features = paddle.nn.Sequential(paddle.nn.Conv2D(3, 4, 3, padding=1), paddle.nn.BatchNorm2D(4),
                                             paddle.nn.AdaptiveAvgPool2D(1))
        self.output = paddle.nn.Sequential(paddle.nn.Dropout(0.2), paddle.nn.Conv2D(4, 2, 1))
        self.scale = scale

    def forward(self, x):
        return self.output(self.features(x) * self.scale).squeeze(axis=-1).squeeze(axis=-1)


@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_a_pool_run_inside_the_head_against_one_inside_the_features_is_judged_by_its_outputs(scale):
    """The heads' inputs are of other sizes ([2, 4, 8, 8] against [2, 4, 1, 1]): no computation of a parent to judge
    in isolation, where the pool's and the head's outputs judge it. Before, the isolated run named the model's own
    code before the head. A port scaling the pooled value there is red, named before the head's dropout."""
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = TorchPooledHead().eval(), PaddlePooledFeatures(scale)
    convert(pt, pd)
    report = compare_forward(pt, pd.eval(), X, isolate=True)
    if scale == 1.0:
        assert report.passed and report.differing == [], report.table()
    else:
        assert not report.passed and report.differing == ["head (before head.2)"], report.table()


def test_a_port_whose_run_stops_is_refused_naming_the_stop_first():
    """PaddleClas's SwinTransformerV2, whose patch embedding returns a name it never defines: the modules after it
    never run, and a refusal naming them alone misleads. The refusal says the stop, the cause, first."""
    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv0, self.conv1 = paddle.nn.Conv2D(3, 4, 3, padding=1), paddle.nn.Conv2D(4, 2, 1)

        def forward(self, x):
            return self.conv1(self.conv0(x) + undefined_name)  # noqa: F821

    torch.manual_seed(0)
    pt = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 1), torch.nn.Conv2d(4, 2, 1))
    with pytest.raises(Exception) as refused:
        convert(pt, Port(), inputs=X)
    assert str(refused.value).startswith("the Paddle model stopped on inputs (NameError: name 'undefined_name' is "
                                         "not defined)"), str(refused.value)
    assert "have no counterpart in the Paddle model" in str(refused.value)


# ---------------------------------------------------------------- a table of its own held as a map or as tokens

class TorchPixels(torch.nn.Module):
    """timm's TNT: its pixel_pos [1, C, h, w] added to the embedding's map, flattened to tokens after."""
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.pixel_pos = torch.nn.Parameter(torch.randn(1, 4, 8, 8))

    def forward(self, x):
        return (self.proj(x) + self.pixel_pos).flatten(2).transpose(1, 2)


class PaddlePixels(paddle.nn.Layer):
    """PaddleClas's: pixel_pos [1, h * w, C] added to the tokens. plant: the map flattened column by column."""
    def __init__(self, plant=False):
        super().__init__()
        self.proj = paddle.nn.Conv2D(3, 4, 3, padding=1)
        self.pixel_pos = self.create_parameter([1, 64, 4])
        self.plant = plant

    def forward(self, x):
        x = self.proj(x)
        x = x.transpose([0, 1, 3, 2]) if self.plant else x
        return x.flatten(2).transpose([0, 2, 1]) + self.pixel_pos


@pytest.mark.parametrize("plant", [False, True])
def test_a_map_table_of_its_own_against_its_tokens_converts_with_no_layouts(plant):
    """A 4-D table with two axes of one length (8 x 8): its tokens' shape [1, 64, 4] takes no other layout, so no
    hint is asked. A port flattening the map column by column is red."""
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = TorchPixels().eval(), PaddlePixels(plant)
    state = convert(pt, pd, inputs=X)
    assert "torch pixel_pos [1, 4, 8, 8] -> Paddle pixel_pos: held by its TorchPixels itself" in state.said, state.said
    report = compare_forward(pt, pd.eval(), X, isolate=True)
    assert report.passed is not plant, report.table()
