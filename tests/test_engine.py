"""One of each (issue 33, item 4): one result type whose rules (exact, atol + rtol, measured on the model) are
values of it, one rule for the first diverging place, which every report (forward, backward, the BERT
pipeline's tables, the hand-in verdicts) calls, and one float64 twin."""
import copy
import dataclasses

import numpy as np
import pytest

from bert_sst2 import diagnose
from portcheck.core import calibrated, diff, tolerances
from portcheck.pipeline import handin
from portcheck.pipeline import guide as reprod  # reprod_log's rule (`guide` is a verdict here)
from portcheck.gradients.result import LAST, BackwardReport
from portcheck.forward.result import ForwardReport
from portcheck.forward.twin import F64, float64, float64_inputs
from portcheck.mapping.trace import APPLIED

torch = pytest.importorskip("torch")
from portcheck.forward import compare  # noqa: E402
from portcheck.gradients import backward, recording  # noqa: E402


def row(name, over=False, input_ok=None):
    """A measured row within its rule, or over it (max 1 against an allowance of about 1e-6)."""
    return diff.KeyResult(name, calibrated.Measured(), (2,), 1.0 if over else 0.0, 0.0, 1.0, err32=1e-8,
                          input_ok=input_ok)


T = {"logits": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
EXACT64 = {"logits": T["logits"].astype(np.float64)}


@pytest.mark.parametrize("bug", [0.0, 1e-3])
def test_every_rule_is_a_value_of_one_result_type(bug):
    """The guide's strict rule, a tuned atol + rtol, the exact rule and the measured rule judge the same pair
    into the same type, through the same verdict; a planted 1e-3 is red through every one of them."""
    p = {"logits": T["logits"] + np.float32(bug)}
    strict = reprod.strict_verdict(T, p, 1e-6).keys[0]
    tuned = diff.compare(T, p, default=tolerances.Tol(1e-5, 1e-5)).keys[0]
    exact = diff.compare(T, p, default=tolerances.EXACT).keys[0]
    measured = calibrated.judge_pair(T, p, EXACT64, 1e-6)[0]
    guide = reprod.guide_verdict(T, p, 1e-6).keys[0]
    results = (strict, tuned, exact, measured)
    assert {type(r) for r in results + (guide,)} == {diff.KeyResult}
    assert [type(r.rule) for r in results + (guide,)] == [tolerances.Tol] * 3 + [calibrated.Measured,
                                                                                   tolerances.ReprodLog]
    assert [r.passed for r in results + (guide,)] == [not bug] * 5
    if bug:
        assert guide.why.startswith("mean diff 1.000e-03 > the guide's bound 1e-06")
    assert all(r.max == results[0].max and r.mean == results[0].mean for r in results)
    if bug:
        assert all(r.failures == [r.why] and r.why.startswith("max diff 1.000e-03 > ") for r in results)
        assert exact.why == "max diff 1.000e-03 > 0 (exact)"
        assert "torch's own fp32 error" in measured.why and "inf x" not in measured.why and "atol" in tuned.why
    # the rule is the result's value: the same figures judged by another rule
    assert dataclasses.replace(measured, rule=tolerances.Tol(1e-2, 0.0, None)).passed
    assert not dataclasses.replace(strict, rule=calibrated.Measured()).passed  # no float64 run: never green


def test_the_guides_rule_is_a_rule_value_with_reprod_logs_quirks():
    """reprod_log's rule judged through the one result type: the mean alone, a NaN passing and noted, a transpose
    and a broadcast noted, an empty array and a stop (keys on one side) red. The same figures under the strict
    rule fail where reprod_log is blind."""
    nan = {"logits": np.where(np.eye(3, 4, dtype=bool), np.nan, T["logits"]).astype(np.float32)}
    key = reprod.guide_verdict(T, nan, 1e-6).keys[0]
    assert key.passed and key.mean != key.mean and key.notes == ["NaN passes reprod_log's rule"]
    assert not dataclasses.replace(key, rule=tolerances.Tol.absolute(1e-6)).passed
    big = reprod.guide_verdict(T, {"logits": T["logits"] + np.float32(1e-3) * (np.arange(12) == 0).reshape(3, 4)},
                               1e-4).keys[0]
    assert big.passed and big.max > 1e-4  # a max of 1e-3 within reprod_log's rule: it bounds the mean alone
    turned = reprod.guide_verdict(T, {"logits": T["logits"].T.copy()}, 1e-6)
    assert turned.passed and turned.keys[0].notes == ["transposed by reprod_log"]
    spread = reprod.guide_verdict(T, {"logits": T["logits"][:1]}, 10.0)
    assert spread.passed and spread.keys[0].notes[0].startswith("broadcast by reprod_log")
    empty = reprod.guide_verdict({"x": np.zeros(0, np.float32)}, {"x": np.zeros(0, np.float32)}, 1e-6)
    assert not empty.passed and empty.keys[0].problems == [diff.EMPTY]
    stop = reprod.guide_verdict(T, {}, 1e-6)
    assert not stop.passed and reprod.stopped(stop) == "keys on one side only: logits"


def test_a_verdict_file_keeps_its_fields():
    r = diff.compare(T, {"logits": T["logits"] + np.float32(1e-3)}, default=tolerances.Tol(1e-4, 0.0), name="x")
    key = r.to_json()["keys"][0]
    assert list(key) == ["key", "atol", "rtol", "mean_bound", "passed", "max", "mean", "scale", "allowed", "relative",
                         "shape", "problems"]
    assert key["passed"] is False and key["shape"] == [3, 4] and key["problems"][0].startswith("max diff 1.000e-03 > ")
    measured = calibrated.judge_pair(T, {"logits": T["logits"] + np.float32(1e-3)}, EXACT64, 1e-6)[0].to_json()
    assert measured["atol"] is None and measured["passed"] is False and "torch's own fp32 error" in measured["problems"][0]


def test_one_rule_for_the_first_diverging_place():
    rows = [row("a"), row("b", over=True, input_ok=False), row("c", over=True, input_ok=True), row("d", over=True)]
    assert diff.first_diverging(rows).name == "c"  # b only inherits a difference made before it
    assert diff.first_diverging(rows, reverse=True).name == "d"
    assert diff.first_diverging([row("a")]) is None
    assert diff.first_diverging([row("b", over=True, input_ok=False)]).name == "b"  # no input within: the first
    report = ForwardReport(rows=rows)
    assert report.first_diverging == "c"
    marked = [r for r in calibrated.table_rows(rows, diff.first_diverging(rows)) if r[-1] == calibrated.ORIGIN]
    assert [r[0] for r in marked] == ["c"]


def test_a_value_a_module_computes_that_its_own_output_absorbs_is_named_at_its_reader():
    """A softmax scale changed inside an attention: its probabilities, read by its dropout, differ, and its output
    after the residual and norm is within its rule. Before: no place was named (the report red, first_diverging
    None, the caller's absent row taken for the first)."""
    drop = row("attn.dropout", over=True, input_ok=False)
    drop.input_unsourced = "attn"
    rows = [row("emb"), drop, row("attn.dropout#2", over=True, input_ok=False), row("attn[0]", input_ok=True)]
    assert diff.first_diverging(rows).name == "attn.dropout"
    assert ForwardReport(rows=rows).first_diverging == "attn.dropout"


def test_backward_names_and_marks_the_same_gradient():
    """The gradient table marks the gradient first_diverging_gradient names (backward order), not the first
    over in forward order, as it did when the two were decided by two rules."""
    grads = [row("grad a"), row("grad b", over=True), row("grad c", over=True)]
    report = BackwardReport(grads=grads, steps=[[row("loss"), row("w", over=True)], [row("v", over=True)]])
    assert report.first_diverging_gradient == "grad c" == report.first_diverging
    assert "grad c" in next(line for line in report.table().splitlines() if calibrated.ORIGIN in line)
    assert report.first_diverging_step == (0, "w")
    assert BackwardReport(steps=[[row("loss")], [row("v", over=True)]]).first_diverging == "v after step 2"


def test_an_optimizers_bug_is_named_at_the_weights_not_at_the_loss_they_make():
    """A momentum or beta planted changes the second step's update: a plain run (weights recorded after the first
    step and the last) sees it first in step 3's loss, computed from weights it does not hold, then in the weights
    after the last step. Named at the weight, as the isolated steps name it (the zoo's SGD momentum 0.1, Adam beta2
    0.99 and Adamax beta1 0.8 read "loss after step 3"); the loss when no weight is red at or before its step, and
    first in an isolated step, whose loss comes before any update."""
    w = [row("0.weight"), row("0.bias")]
    planted = [[row("loss"), row("lr"), *w], [row("loss"), row("lr")],
               [row("loss", over=True), row("lr"), row("0.weight" + LAST, over=True)]]
    assert BackwardReport(steps=planted).first_diverging == "0.weight after step 3"
    assert "first over: 0.weight (after the last step)" in BackwardReport(steps=planted).table()
    loss_only = [[row("loss"), *w], [row("loss", over=True)], [row("loss", over=True), row("0.weight", over=True)]]
    assert BackwardReport(steps=loss_only).first_diverging == "loss after step 2"
    assert BackwardReport(steps=[planted[0], planted[1], planted[2][:2]]).first_diverging == "loss after step 3"
    assert BackwardReport(steps=planted, isolated=True).first_diverging == "loss after step 3"
    lr_first = [*planted[:2], [row("loss"), row("lr", over=True), row("0.weight" + LAST, over=True)]]
    assert BackwardReport(steps=lr_first).first_diverging == "lr after step 3"


def test_the_bert_pipeline_asks_the_same_rule():
    a = {"x": np.zeros(3, np.float32), "y": np.zeros(3, np.float32), "z": np.zeros(3, np.float32)}
    b = {"x": a["x"], "y": a["y"] + 1, "z": a["z"] + 1}
    result = diff.compare(a, b, default=1e-6)
    assert diagnose.first_over(result) == diff.first_diverging(result.keys).key == "y"
    assert diagnose.last_over(result) == diff.first_diverging(result.keys, reverse=True).key == "z"
    assert diagnose.table(result, "t").rows[1][-1] == "<-- first over tolerance"


def test_one_formatter_of_a_keys_diff_log_lines(monkeypatch):
    """A CheckResult's log and a hand-in pair's log write each key's reprod_log lines through report.key_lines,
    and parse_diff_log reads both back to the figures judged."""
    from portcheck.core import report
    p = {"logits": T["logits"] + np.float32(1e-3)}
    strict = reprod.strict_verdict(T, p, 1e-6)
    rows = calibrated.judge_pair(T, p, EXACT64, 1e-6)
    measured = handin.MeasuredVerdict("x", reprod.guide_verdict(T, p, 1e-6), rows, strict, (True, "same"), 1e-6)
    for lines in ([m for m, _ in report.log_lines(strict)], [m for m, _ in measured.messages()]):
        logged = reprod.parse_diff_log("\n".join(lines))["logits"]
        assert logged["mean"] == rows[0].mean and logged["max"] == rows[0].max and not logged["max passed"]
    calls = []
    monkeypatch.setattr(report, "key_lines", lambda key, *a, **k: calls.append(key) or [f"{key}: "])
    report.log_lines(strict), measured.messages()
    assert calls == ["logits", "logits"]


class Net(torch.nn.Module):
    def __init__(self, momentum=None):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4, momentum=momentum)  # None: the update uses num_batches_tracked
        self.fc = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


X = np.random.RandomState(1).randn(5, 3, 8, 8).astype(np.float32)
Y = np.array([0, 1, 2, 0, 1])


def training():
    return (torch.nn.functional.cross_entropy, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
            lambda o: torch.optim.lr_scheduler.StepLR(o, 1, 0.5))


def test_the_float64_twin_counts_on_its_own_integer_buffers():
    torch.manual_seed(0)
    model = Net().train()
    counter = model.bn.num_batches_tracked
    compare.record_forward(model, X)  # float32 run, then the float64 one, module by module
    assert model.bn.num_batches_tracked is counter and counter.dtype == torch.int64 and int(counter) == 1
    weight = model.fc.weight
    weight.grad = torch.ones_like(weight)
    with float64(model):
        assert weight.dtype == torch.float64 and model.bn.num_batches_tracked.dtype == torch.int64
        model(torch.from_numpy(X).double()).sum().backward()  # a float64 gradient, a second count
    assert weight.dtype == torch.float32 and torch.equal(weight.grad, torch.ones_like(weight))
    assert model.bn.num_batches_tracked is counter and int(counter) == 1


@pytest.mark.parametrize("isolate", [False, True])
def test_backward_trains_compare_float64_twin(monkeypatch, isolate):
    """record_backward's float64 run is twin.float64's twin of the model itself, and gives what a float64
    deep copy trained from the same start gives, bit for bit; the model ends as its float32 run left it."""
    torch.manual_seed(0)
    model = Net().train()
    start = copy.deepcopy(model)
    used = []
    monkeypatch.setattr(recording, "float64", lambda m: used.append(m) or float64(m))
    rec = backward.record_backward(model, X, Y, *training(), steps=3, isolate=isolate)
    assert used == [model] and int(model.bn.num_batches_tracked) == 3
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert not any(torch.equal(a, b) for a, b in zip(model.parameters(), start.parameters()))
    layouts, left = recording.torch_layouts(start, None, None), {}
    state, grads = (lambda m: recording._torch_state(m, layouts)), (lambda m: recording._torch_grads(m, layouts))
    recording._train("torch", copy.deepcopy(start), X, Y, *training(), 3, torch.from_numpy, state, grads, dict,
                    lambda m, i: left.__setitem__(i, copy.deepcopy(m.state_dict())))
    twin = recording._train("torch", start.double(), float64_inputs(X), Y, *training(), 3, torch.from_numpy, state,
                           grads, dict, (lambda m, i: m.load_state_dict(left[i])) if isolate else None)
    f64 = {k[len(F64):]: v for k, v in rec.items() if k.startswith(F64)}
    # which output torch's forward hands to an activation (fn/) is said by its float32 run alone
    twin = {k: v for k, v in twin.items() if not k.startswith(APPLIED)}
    assert f64.keys() == twin.keys()
    assert all(np.array_equal(f64[k], twin[k]) and f64[k].dtype == twin[k].dtype for k in twin)


def test_an_update_digest_counts_a_tied_tensor_once_and_two_filled_ones_twice():
    """backward.updates: each weight's mean |after - before| in float64 (the float64 formula's figures bit for bit:
    a float32 mean is red), one tensor under two names counted once, and two distinct tensors that held one value
    each before the step (BatchNorm weights at 1) and end equal counted twice (a digest skipping that test is red)."""
    rng = np.random.RandomState(0)
    w = rng.randn(4, 3).astype(np.float32)
    before = {"emb.weight": w, "head.weight": w, "a.weight": np.ones(3, np.float32), "b.weight": np.ones(3, np.float32),
              "c.bias": rng.randn(5).astype(np.float32), "n": np.zeros(1, np.int64)}
    after = {k: v + np.float32(1e-3) * (1 + np.arange(v.size, dtype=v.dtype).reshape(v.shape)) for k, v in before.items()}
    after["head.weight"], after["n"] = after["emb.weight"], before["n"] + 1  # an integer buffer: no digest
    figures = [float(np.abs(after[k].astype(np.float64) - before[k].astype(np.float64)).mean())
               for k in ("emb.weight", "a.weight", "b.weight", "c.bias")]
    digest = backward.updates(before, after)
    assert digest.dtype == np.float64 and digest.tolist() == sorted(figures), (digest, figures)
