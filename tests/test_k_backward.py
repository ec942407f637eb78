"""The plain run's steps of compare_backward judged against what torch does to itself (calibrated.SPREAD): torch's
run again with every weight moved one ulp with other threads, recorded beside its float64 run
(docs/bench/k_backward.md).

The jump that needs it (a ReLU input within rounding of 0 in a later step, one branch in one fp32 run and the other
in another) is planted in a small BatchNorm net's records (the same jump on Paddle's side as in torch's moved run is
green, said as torch's spread, one 8 x larger red), and met on a net of tools/bench_k_backward.py --kinks where
Paddle crosses a kink at step 5 that torch moved one ulp with the same kernels does not: green, with momentum and
weight decay plants red. A momentum plant, which the gradients cannot show, is red after the steps.

A kink no run of torch against itself crosses (Paddle's value within rounding of 0 on the other side in a later
step's forward, e.g. step 5's on the --kinks net of seed 7): torch's run again taking Paddle's side of 0 at exactly
those values (backward.judged, made only where red) makes it green, and the plants beside it stay red. Which net's
kink a CPU's kernels cross depends on the CPU: that net is searched at test time (conftest.paddle_alone_kink)."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import convert, judge_backward, record_backward  # noqa: E402
from portcheck.core import calibrated  # noqa: E402
from portcheck.gradients.against_itself import MOVED, SPREAD_KEY  # noqa: E402
from portcheck.gradients.backward import F64, judged  # noqa: E402
from portcheck.gradients.kinks import INPUT, NEAR, TAKEN, TAKING  # noqa: E402

from tools import kink_nets as nets  # noqa: E402 - the small conv/BatchNorm nets, shared
from conftest import paddle_alone_kink  # noqa: E402

STEPS, LR = 3, 0.01


def batch():
    rng = np.random.RandomState(0)
    return rng.randn(8, 3, 16, 16).astype("float32"), rng.randint(0, 10, 8)


def paddle_momentum(momentum):
    return lambda params: paddle.optimizer.Momentum(LR, momentum=momentum, parameters=params,
                                                    weight_decay=paddle.regularizer.L2Decay(1e-4))


@pytest.fixture(scope="module")
def records():
    """(torch's record, Paddle's clean record, Paddle's with momentum 0.8), each over STEPS steps in train mode."""
    x, y = batch()
    pt, pd = nets.conv_bn_nets((8, 16, 32))
    pd.set_state_dict(convert(pt, pd, inputs=x))
    start = copy.deepcopy(pd.state_dict())
    t = record_backward(pt.train(), x, y, torch.nn.functional.cross_entropy,
                        lambda params: torch.optim.SGD(params, lr=LR, momentum=0.9, weight_decay=1e-4), steps=STEPS)
    out = [t]
    for momentum in (0.9, 0.8):
        pd.set_state_dict(start)
        out.append(record_backward(pd.train(), x, y, paddle.nn.functional.cross_entropy, paddle_momentum(momentum),
                                   steps=STEPS))
    return out


def test_a_batchnorm_net_is_green_over_its_steps_and_a_momentum_plant_red_after_them(records):
    t, clean, planted = records
    # train mode: its BatchNorm uses batch statistics, and torch's moved run keeps its gradients (batch_statistics)
    assert any(k.startswith(MOVED + "final/") for k in t) and any(k.startswith(MOVED + "grad/") for k in t)
    report = judge_backward(t, clean)
    assert report.passed, report.table()
    later = [r for rows in report.steps for r in rows if r.name != "lr"]
    assert all(r.multiple == calibrated.K_BACKWARD for r in later) and all(r.rule.spread >= 0 for r in later)
    assert any(r.rule.spread > 0 for r in later)  # torch's spread against itself, measured in the same call
    report = judge_backward(t, planted)
    # momentum enters from the second step: the gradients and the weights after step 1 are the clean port's, the
    # loss and weights after the last step are not
    assert not report.passed and all(r.passed for r in report.grads), report.table()
    assert all(r.passed for r in report.steps[0]) and not all(r.passed for r in report.steps[-1]), report.table()


def test_a_jump_torch_takes_against_itself_is_within_and_a_larger_one_red(records):
    t, clean, _ = records
    key = "final/3.weight"  # the second conv's weight after the last step, one name on both sides
    err32 = float(np.abs(t[key].astype(np.float64) - t[F64 + key]).max())
    jump = np.zeros_like(t[key])
    jump.flat[7] = 1000 * err32  # a jump far over K_BACKWARD x torch's own error
    moved = {**t, MOVED + key: t[key] + jump}
    for times, passed in ((1, True), (8, False)):
        report = judge_backward(moved, {**clean, key: t[key] + times * jump})
        row = next(r for r in report.steps[-1] if r.name == "3.weight (after the last step)")
        assert report.passed == passed and row.passed == passed, report.table()
        assert row.max > calibrated.K_BACKWARD * row.err32 + calibrated.Measured.floor(row)
        said = row.key_figures() if passed else row.why
        assert "torch against itself with every weight moved one ulp" in said, said
    assert not judge_backward(t, {**clean, key: t[key] + jump}).passed  # no moved run: K_BACKWARD alone


@pytest.mark.usefixtures("two_threads")
def test_a_kink_paddle_crosses_at_a_later_step_is_torch_spread_and_a_momentum_plant_red():
    """A net where Paddle crosses a ReLU kink at step 5 that torch moved one ulp with the same kernels does not
    (tools/bench_k_backward.py --kinks): torch's run against itself with other threads crosses it too on some CPUs'
    kernels; on others only torch's run taking Paddle's side of it does (backward.judged, as compare_backward
    judges): green either way, the jump decided by torch against itself, and a momentum plant red."""
    t, clean, planted, again = nets.kink_records(*nets.KINK_NETS["other threads"], nets.sgd("torch"),
                                                 [(nets.sgd("paddle"), None), (nets.sgd("paddle", 0.8), None)])
    assert any(k.startswith(MOVED + "final/") for k in t) and not any(k.startswith(SPREAD_KEY) for k in t)
    report = judged(t, clean, again=again)
    assert report.passed, report.table()
    # the kink's jump: far over K_BACKWARD x torch's own error, within torch's spread against itself
    jumped = [r for rows in report.steps for r in rows if r.name != "lr" and r.rule.spread_decides(r)
              and r.max > calibrated.K_BACKWARD * r.err32 + calibrated.Measured.floor(r)]
    assert all("torch against itself" in r.key_figures() for r in jumped), report.table()
    assert jumped or not report.crossed, report.table()  # a CPU whose kernels cross no kink here: no jump either
    report = judged(t, planted, again=again)
    assert not report.passed and all(r.passed for r in report.grads), report.table()


@pytest.mark.usefixtures("two_threads")
def test_a_weight_decay_plant_stays_red_beside_a_kink():
    t, clean, planted, _ = nets.kink_records(*nets.KINK_NETS["other threads"], nets.sgd("torch", decay=1e-4),
                                             [(nets.sgd("paddle", decay=1e-4), None),
                                              (nets.sgd("paddle", decay=3e-4), None)])
    assert judge_backward(t, clean).passed
    report = judge_backward(t, planted)
    assert not report.passed and all(r.passed for r in report.grads), report.table()


@pytest.mark.usefixtures("two_threads")
def test_a_hand_ins_bp_align_carries_torchs_spread_and_the_folder_judges_as_the_run_does(tmp_path):
    """handin.bp_align(exact=True) writes torch's spread against itself beside the float64 values (SPREAD_OF keys),
    and the checker allows SPREAD x it where judge_backward does in process: the kink net's correct port is green
    from the folder, its last update digest's allowance torch's spread (0.25 of it; 0.88 of K_BACKWARD alone); a
    momentum 0.8 against 0.9 is red from the folder at an update digest."""
    from portcheck.pipeline import handin
    t, clean, planted, _ = nets.kink_records(*nets.KINK_NETS["other threads"], nets.sgd("torch"),
                                             [(nets.sgd("paddle"), None), (nets.sgd("paddle", 0.8), None)])
    exact = handin.bp_align(t, exact=True)
    assert any(k.startswith(calibrated.SPREAD_OF + "weights_") for k in exact)
    verdicts = {}
    for name, p, spread in (("clean", clean, True), ("alone", clean, False), ("planted", planted, True)):
        folder = tmp_path / name
        kept = exact if spread else {k: v for k, v in exact.items() if not k.startswith(calibrated.SPREAD_OF)}
        handin.save_side(folder, "bp_align", "torch", handin.bp_align(t), {"inputs": "i"}, "t", exact=kept)
        handin.save_side(folder, "bp_align", "paddle", handin.bp_align(p), {"inputs": "i"}, "t")
        verdicts[name] = handin.judge_and_log(folder, "bp_align", after_steps=True)
    assert verdicts["clean"].passed, verdicts["clean"].describe_measured()
    spread = {r.name: r for r in verdicts["clean"].rows if r.rule.spread_decides(r)}
    alone = {r.name: r for r in verdicts["alone"].rows}
    # torch's spread decides where torch's moved run crosses the kink Paddle's does (some CPUs' kernels): there it
    # widens the allowance; elsewhere the digests are within torch's own error alone (both verdicts asserted)
    assert all(r.allowed >= alone[r.name].allowed for r in verdicts["clean"].rows)
    assert all(r.allowed > alone[name].allowed for name, r in spread.items())
    assert spread or verdicts["alone"].passed, verdicts["alone"].describe_measured()
    bad = verdicts["planted"]
    assert not bad.passed and any(not r.passed and r.name.startswith("weights_") for r in bad.rows), \
        bad.describe_measured()


def test_a_further_run_against_itself_is_kept_as_one_figure_per_key_and_widens_the_spread(monkeypatch, kink_net):
    """recording.AGAINST_ITSELF's runs after the first are kept as spread: figures (what the bench's candidates
    measure), widening no allowance's rule narrower: on a CPU whose torch crosses the kink net's kink only without
    oneDNN (avx512 and avx2 on seed 7), a second such run makes it green; under ATEN_CPU_CAPABILITY default the one
    kink net found (conftest.PADDLE_ALONE_KINK) is not crossed without oneDNN either, and there the allowances only
    widen."""
    net, _, (t, clean) = kink_net[0], kink_net[1], kink_net[2][:2]
    one = judge_backward(t, clean)
    assert not one.passed  # one run with other threads does not cross it (docs/bench/k_backward.md)
    from portcheck.gradients import against_itself, recording
    monkeypatch.setattr(recording, "AGAINST_ITSELF", (against_itself.other_threads,
                                                      lambda: torch.backends.mkldnn.flags(enabled=False)))
    t, _ = nets.kink_records(*net, nets.sgd("torch"), [])  # torch's record alone
    assert any(k.startswith(SPREAD_KEY + "final/") and t[k].shape == (1,) for k in t)
    two = judge_backward(t, clean)
    allowed = lambda report: [(i, r.name, r.allowed) for i, rows in enumerate(report.steps) for r in rows]  # noqa: E731
    assert all(a[:2] == b[:2] and b[2] >= a[2] for a, b in zip(allowed(one), allowed(two), strict=True))
    assert two.passed or net != nets.KINK_NETS["oneDNN off"], two.table()  # the net found where oneDNN off crosses


@pytest.fixture(scope="module")
def kink_net():
    """((seed, batch), judged's report of the clean port, (torch's record, Paddle's clean record, Paddle's with one
    BatchNorm's momentum 0.2, torch's run again taking Paddle's side)) of the --kinks net where this CPU's Paddle
    alone crosses a ReLU kink in a later step's forward (seed 7, batch 8: step 5's on avx512 and avx2): no run of
    torch against itself crosses it (other threads, four sign seeds, docs/bench/k_backward.md)."""
    return paddle_alone_kink([(nets.sgd("paddle"), None), (nets.sgd("paddle"), nets._bn_momentum)])


def test_a_kink_only_paddle_crosses_in_a_later_step_is_green_once_torch_takes_its_side(kink_net):
    t, clean, _, again = kink_net[2]
    alone = judge_backward(t, clean)  # records judged alone (a hand-in's): no torch run taking Paddle's side
    assert not alone.passed and "torch's run taking Paddle's side there is not made" in alone.table()  # 77.5
    assert any(k.startswith(NEAR) for k in t) and any(k.startswith(NEAR) for k in clean)
    report = judged(t, clean, again=again)
    assert report.passed and report.taken, report.table()
    # one value at each kink crossed, each in a later step (how many the net crosses is this CPU's: one on avx2,
    # four on an avx512 Xeon)
    assert report.crossed and all((len(c.index), c.step >= 1) == (1, True) for c in report.crossed), report.crossed
    c = report.crossed[0]
    assert c.torch[0] * c.paddle[0] < 0 and max(abs(c.torch[0]), abs(c.paddle[0])) < 1e-6
    said = f"kink in step {c.step + 1}'s forward: {c.module} holds 1 value(s) within rounding of 0"
    assert said in report.table(), report.table()
    # the rows the jump reaches are judged against that run, and say so
    taken = [r for rows in report.steps for r in rows
             if getattr(r.rule, "spread_by", "") == TAKING and r.rule.spread_decides(r)]
    assert taken and all(i > c.step for i, rows in enumerate(report.steps) for r in rows if r in taken)
    assert all("taking Paddle's side of 0" in r.key_figures() for r in taken)
    assert TAKEN not in t  # judged keeps the caller's record as its run made it


def test_a_batchnorm_momentum_plant_on_the_kink_net_stays_red_with_torch_taking_paddles_side(kink_net):
    t, _, planted, again = kink_net[2]
    report = judged(t, planted, again=again)
    assert report.taken and not report.passed, report.table()
    assert report.first_diverging == "4.running_mean after step 1", report.first_diverging


def test_a_weight_decay_plant_on_the_kink_net_stays_red_with_torch_taking_paddles_side():
    """The least visible plant of --kinks (weight decay 3e-4 against 1e-4, 21.8 x its allowance on this net)."""
    t, clean, planted, again = nets.kink_records(*nets.KINK_NETS["oneDNN off"], nets.sgd("torch", decay=1e-4),
                                                 [(nets.sgd("paddle", decay=1e-4), None),
                                                  (nets.sgd("paddle", decay=3e-4), None)])
    assert judged(t, clean, again=again).passed
    report = judged(t, planted, again=again)
    assert report.taken and not report.passed and all(r.passed for r in report.grads), report.table()


def test_values_of_one_sign_on_both_sides_are_no_crossing_and_no_torch_run_is_made(kink_net):
    """The crossing is read from both records: Paddle's values near 0 given as torch's are no kink crossed, and then
    no torch run is made (the run stays red: the jump is over its allowance)."""
    t, clean, _, _ = kink_net[2]
    # the crossing step's forward, the BatchNorm's output and the ReLU's input after it: the value Paddle put on the
    # other side
    # (a crossing read at a module's first input, in/<n>, where no module's output holds it, is that key alone)
    keys = [f"{NEAR}{c.step}/{at}" for c in kink_net[1].crossed
            for at in ([c.module, f"{INPUT}{int(c.module) + 1}"] if c.module.isdigit() else [c.module])]
    assert keys and all(key in clean and key in t for key in keys)
    runs = []
    report = judged(t, {**clean, **{key: t[key] for key in keys}}, again=lambda crossed: runs.append(crossed))
    assert not report.crossed and not runs and not report.passed and not report.taken


def test_compare_backward_takes_paddles_side_of_a_kink_it_crossed_in_a_later_step(kink_net):
    """The user's call (compare_backward, one process) on the kink net: green, torch's taking run made in it."""
    report = nets.kink_compared(*kink_net[0], (nets.sgd("torch"), nets.sgd("paddle")))
    assert report.passed and report.taken and report.crossed[0].step == kink_net[1].crossed[0].step, report.table()


# ---------------------------------------------------------------- a gradient exact arithmetic makes 0

def one_key_attention(framework):
    """An attention over one key (each query attends to itself alone, as position 0 under a causal mask): softmax
    is 1 whatever the query and the key, so their projections' gradients are 0 in exact arithmetic; v's are not."""
    nn = torch.nn if framework == "torch" else paddle.nn

    class Attention(nn.Module if framework == "torch" else nn.Layer):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):  # x [batch, 1, 8]
            mod = torch if framework == "torch" else paddle
            scores = (self.q(x) * self.k(x)).sum(-1, keepdim=True)
            return mod.nn.functional.softmax(scores, -1) * self.v(x)
    return Attention()


@pytest.fixture(scope="module")
def one_key_records():
    """(torch's record, Paddle's) of one step of the one-key attention; torch's q and k gradients exactly 0."""
    x, y = np.random.RandomState(0).randn(4, 1, 8).astype("float32"), np.random.RandomState(1).randn(4, 1, 8)
    torch.manual_seed(0)
    pt, pd = one_key_attention("torch"), one_key_attention("paddle")
    pd.set_state_dict(convert(pt, pd, inputs=x))
    mse = lambda o, t: ((o - t) ** 2).mean()
    t = record_backward(pt.train(), x, y.astype("float32"), mse, lambda ps: torch.optim.SGD(ps, lr=LR))
    p = record_backward(pd.train(), x, y.astype("float32"), mse, lambda ps: paddle.optimizer.SGD(LR, parameters=ps))
    assert not t["grad/k.bias"].any() and not t[F64 + "grad/k.bias"].any() and t["grad/v.bias"].any()
    return t, p


@pytest.mark.parametrize("left, green", [(1e-27, True), (1e-3, False)])
def test_a_gradient_zero_in_exact_arithmetic_is_judged_on_its_modules_scale(one_key_records, left, green):
    """Before: torch's k.bias gradient is 0 in float32 and float64, so its floor (16 x eps32 x max|torch|) is 0 and
    Paddle's rounding left over (paddlenlp's CLIP: 1.8e-27 at a text key projection) was red, against 0 allowed.
    Now its floor is on the nearest module holding a larger tensor (the model's v here): the same 1e-27 green, said;
    a gradient of 1e-3 where exact arithmetic has none stays red."""
    t, p = one_key_records
    p = dict(p)
    p["grad/k.bias"] = (p["grad/k.bias"] + np.float32(left)).astype("float32")
    report = judged(t, p)
    row = next(r for r in report.grads if r.name == "grad k.bias")
    assert row.passed is green and report.passed is green, report.table()
    assert "zero to fp32 beside the model's gradients" in row.notes[0], row.notes
    assert row.allowed < 1e-4


def test_a_small_gradient_that_is_not_zero_to_fp32_keeps_its_own_floor():
    """A tensor 1e-6 of its module's scale is not zero to fp32 (eps32 is 1.2e-7): its floor stays its own."""
    row = calibrated.measure("grad m.bias", np.full(3, 1e-6), np.full(3, 1e-6), np.full(3, 1e-6 + 1e-11), multiple=8)
    calibrated.zero_to_fp32(row, "m.bias", calibrated.module_scales({"m.weight": 1.0, "m.bias": 1e-6}))
    assert row.scale == 1e-6 and not row.notes and not row.passed
