"""portcheck.Handin, the short form of the guide's five steps: one object per hand-in folder, one call per step.

The clean pair (examples/mlp_pair.py) through all five calls is green in process and by the reviewer's command on
the folder they wrote, every guide pair present; a bug planted in the Paddle model (GELU's tanh form) is red at
Step 1 in process and in the folder; the steps' own page shows each step's verdict and each step's page, in a real
browser too (the plant's Step 1 red, its module marked); a Paddle model holding other weights than the conversion's
is not the same run; steps.train refuses logs it did not bind."""
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
pytest.importorskip("sklearn.datasets")

import portcheck  # noqa: E402
from portcheck import cli  # noqa: E402
from portcheck.core import page, tolerances  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402
from portcheck.pipeline import data  # noqa: E402
from test_view import BROWSER_OWN, CHROMIUM, browse, host  # noqa: E402  (the pages' browser and its proxy)
from examples.mlp_pair import (HP, ORDERS, SEEDS, TEST, PaddleNet, centroid_predictions, cross_entropy,  # noqa: E402
                               dataloader, evaluate, first_batch, optimizer, scores, torch_net)

GUIDE = ("forward", "data", "metric", "loss", "lr", "bp_align", "train_align")


def five_steps(top, paddle_net=PaddleNet):
    """The five steps as a user writes them with the short form."""
    steps = portcheck.Handin(top)
    x, y = first_batch()
    steps.forward(torch_net(), paddle_net(), x)
    steps.data(dataloader("torch", ORDERS[0]), dataloader("paddle", ORDERS[0]))
    steps.metric(scores, *centroid_predictions())
    steps.loss(torch_net(), paddle_net(), x, y, (cross_entropy("torch"), cross_entropy("paddle")))
    n = HP["bp_steps"]
    steps.backward(torch_net(), paddle_net(), x, y, (cross_entropy("torch"), cross_entropy("paddle")),
                   (optimizer("torch", n)[0], optimizer("paddle", n)[0]), (optimizer("torch", n)[1], None), n, HP)
    models = torch_net(), paddle_net()
    logs = steps.training(*models, ORDERS[:1], SEEDS, HP, inputs=x)
    for side, model, log in zip(("torch", "paddle"), models, logs):
        make, schedule = optimizer(side, 12)
        opt = make(model.parameters())
        sched, loss_fn = schedule(opt), cross_entropy(side)
        model.train()
        for features, labels in data.each_batch(dataloader(side, ORDERS[0])):
            lr = opt.param_groups[0]["lr"] if side == "torch" else opt.get_lr()
            loss = loss_fn(model(features), labels)
            loss.backward()
            opt.step()
            sched.step()
            log.step(loss, lr, model=model, batch=labels)
            opt.zero_grad() if side == "torch" else opt.clear_grad()
        model.eval()
        log.evaluate(evaluate(side, model))
    steps.trained = steps.train(*logs)
    return steps


class GeluTanh(PaddleNet):
    def __init__(self):
        super().__init__()
        self.act = paddle.nn.GELU(approximate=True)


@pytest.fixture(scope="module")
def handed(tmp_path_factory):
    """The clean pair through the five steps, and Step 1 on a Paddle model with a planted GELU (tanh): {"clean":
    (steps, its folder's parent), "planted": (steps, its folder's parent, Step 1's report)}."""
    clean, planted = tmp_path_factory.mktemp("clean"), tmp_path_factory.mktemp("planted")
    steps = portcheck.Handin(planted / "log_reprod")
    x, _ = first_batch()
    report = steps.forward(torch_net(), GeluTanh(), x)
    return {"clean": (five_steps(clean / "log_reprod"), clean), "planted": (steps, planted, report)}


def test_the_five_short_calls_hand_in_a_folder_the_reviewers_command_finds_green(handed):
    steps, tmp_path = handed["clean"]
    assert steps.passed, steps
    assert list(steps.verdicts) == list(GUIDE)
    for pair in GUIDE:
        assert (tmp_path / "log_reprod" / f"{pair}_paddle.npy").is_file(), pair
    assert (tmp_path / "log_reprod" / "diagnostics" / "report.html").is_file()
    assert cli.check(tmp_path / "log_reprod") == 0
    assert str(steps).splitlines()[0].startswith("forward: measured green")
    # the training's own page and a notebook's view of it: the pair's verdicts, the curves drawn inline
    said = steps.trained.html(tmp_path / "training.html")
    page = (tmp_path / "training.html").read_text(encoding="utf-8")
    assert said.startswith("page: ") and "<svg" in page and "train_align" in page and "weight norm" in page
    assert "<svg" in steps.trained.curves._repr_html_() or "&lt;svg" in steps.trained.curves._repr_html_()


def marked(text: str) -> list:
    return re.findall(r'id="first-diverging" data-module="([^"]*)"', text)


def test_the_five_steps_page_shows_each_steps_verdict_and_each_steps_own_page(handed, tmp_path):
    """Handin's own page (its view(), html(path), _repr_html_, and diagnostics/report.html after each step): every
    step's verdict line, then each step's own page beneath (the pair's keys, Step 1's module tree, Step 4's
    gradients, Step 5's curves); on a planted GELU, Step 1 red with its first diverging module marked once."""
    steps, folder = handed["clean"]
    text = page.page(steps.view())
    assert steps._repr_html_() == page.framed(text) and steps.html(tmp_path / "clean.html").startswith("page: ")
    left = page.data_of(folder / "log_reprod" / "diagnostics" / page.NAME)  # the folder's: bound to it, its verdict
    assert left["sections"] == page.data_of(tmp_path / "clean.html")["sections"] and left["passed"] and left["run"]
    assert 'data-verdict="green"' in text and not marked(text) and "<svg" in text
    for pair in GUIDE:
        step = f"Step {tolerances.GUIDE[pair].step} {pair}"
        assert f"{step}: green" in text and f"{step}: its diff log" in text, pair
    assert "Step 1 forward: module by module" in text and "Step 4 bp_align: gradients after the first" in text
    steps, folder, report = handed["planted"]
    text = (folder / "log_reprod" / "diagnostics" / page.NAME).read_text()
    assert 'data-verdict="red"' in text and "Step 1 forward: RED" in text and "red at forward" in text
    assert marked(text) == [report.first_diverging] and f"first diverging: <bdi>{report.first_diverging}</bdi>" in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium): the pages "
                    "are not opened in a browser here")
def test_the_five_steps_page_in_a_real_browser(handed, tmp_path):
    """Both Handin pages in headless Chromium, every request sent to the test's proxy: the clean one green with no
    red row, the planted one red with Step 1's first diverging module visible and red, and no request leaves."""
    pages = {plant: handed[plant][1] / "log_reprod" / "diagnostics" / page.NAME for plant in ("clean", "planted")}
    shown, requests = browse(pages, tmp_path)
    assert all(host(r) == "portcheck-probe.invalid" or host(r).endswith(BROWSER_OWN) for r in requests), requests
    assert shown["clean"]["verdict"] == "green" and shown["clean"]["red_rows"] == 0 and shown["clean"]["first"] is None
    s, report = shown["planted"], handed["planted"][2]
    assert s["verdict"] == "red" and s["first"] == report.first_diverging and s["visible"] and s["red"], s
    assert s["header"].startswith(f"first diverging: {report.first_diverging}"), s


def test_a_bug_planted_in_the_paddle_model_is_red_at_its_module_in_process_and_in_the_folder(handed):
    steps, tmp_path, report = handed["planted"]
    assert not report.passed and report.first_diverging.startswith("2"), report.first_diverging
    assert not steps.passed and "RED" in str(steps)
    assert cli.check(tmp_path / "log_reprod") != 0


def test_a_paddle_model_holding_other_weights_than_the_conversions_is_not_the_same_run(tmp_path):
    steps = portcheck.Handin(tmp_path / "log_reprod")
    x, y = first_batch()
    torch_model, paddle_model = torch_net(), PaddleNet()
    steps.convert(torch_model, paddle_model, x)
    other = PaddleNet()  # its own random weights: never converted
    steps.loss(torch_model, other, x, y, (cross_entropy("torch"), cross_entropy("paddle")), convert=False)
    assert not steps.passed
    assert cli.check(tmp_path / "log_reprod") != 0


def test_steps_train_refuses_logs_it_did_not_bind_in_one_line(tmp_path):
    from portcheck.pipeline.training import TrainingLog
    steps = portcheck.Handin(tmp_path / "log_reprod")
    with pytest.raises(PipelineError, match=r"not made by steps.training.*\[PC162\]$"):
        steps.train(TrainingLog(), TrainingLog())
    with pytest.raises(PipelineError, match=r"no conversion yet.*\[PC161\]$"):
        steps.training(torch_net(), PaddleNet(), ORDERS[:1], SEEDS, HP)
    with pytest.raises(PipelineError, match=r"\(torch's, Paddle's\).*\[PC160\]$"):
        steps.metric(("only one",), *centroid_predictions())
    assert not np.any([p.exists() for p in tmp_path.iterdir()])


def split_form(work, paddle_net=PaddleNet):
    """Each side's half as a pt_ and a pd_ script saves it (here one after the other), Paddle's weights torch's."""
    x, y = first_batch()
    n = HP["bp_steps"]
    torch_model, paddle_model = torch_net(), paddle_net()
    portcheck.convert(torch_model, paddle_model, inputs=x)  # a pd_ script loads the converted weights instead
    for side, model in (("torch", torch_model), ("paddle", paddle_model)):
        half = portcheck.Side(work)
        half.forward(model.eval(), x)
        half.loss(model, x, y, cross_entropy(side))
        half.data(dataloader(side, ORDERS[0]))
        half.metric(scores, *centroid_predictions(), framework=side)
        half.backward(model.train(), x, y, cross_entropy(side), *optimizer(side, n), steps=n)


def test_the_split_form_two_halves_and_a_check_hand_in_a_folder_the_reviewers_command_finds_green(tmp_path):
    split_form(tmp_path / "work")
    steps = portcheck.Handin(tmp_path / "log_reprod", sides=tmp_path / "work")
    verdicts = steps.judge()
    assert set(verdicts) == {"forward", "data", "metric", "loss", "lr", "bp_align"} and steps.passed, steps
    assert cli.check(tmp_path / "log_reprod", only=list(verdicts)) == 0  # Step 5: TrainingLog.save, each side


def test_the_split_form_is_red_at_a_planted_module_and_on_a_paddle_half_of_other_weights(tmp_path):
    split_form(tmp_path / "work", GeluTanh)
    steps = portcheck.Handin(tmp_path / "log_reprod", sides=tmp_path / "work")
    assert not steps.judge("forward")["forward"].passed
    assert cli.check(tmp_path / "log_reprod") != 0
    x, _ = first_batch()
    portcheck.Side(tmp_path / "other").forward(torch_net().eval(), x)
    portcheck.Side(tmp_path / "other").forward(PaddleNet().eval(), x)  # never converted: its own weights
    other = portcheck.Handin(tmp_path / "other_reprod", sides=tmp_path / "other")
    assert not other.judge()["forward"].passed
    assert cli.check(tmp_path / "other_reprod") != 0
    with pytest.raises(PipelineError, match=r"no loss saved by both sides.*\[PC163\]$"):
        other.judge("loss")


def test_a_sides_own_depends_binds_its_records_and_a_half_of_another_checkpoint_is_not_the_same_run(tmp_path):
    """Side(depends=): every record binds the dict the scripts build (the ResNet example's resnet.depends, the
    fingerprint of the checkpoint both loaded), the whole record's too; a Paddle half bound to another checkpoint is
    red as not the same run, with values that agree."""
    from portcheck.core import record
    x, y = first_batch()
    torch_model, paddle_model = torch_net(), PaddleNet()
    portcheck.convert(torch_model, paddle_model, inputs=x)
    for work, paddle_weights in (("clean", "w0"), ("planted", "w1")):
        for model, weights in ((torch_model, "w0"), (paddle_model, paddle_weights)):
            half = portcheck.Side(tmp_path / work, script="x.py", depends={"weights": weights, "inputs": "batch 0"})
            half.forward(model.eval(), x)
        verdict = portcheck.Handin(tmp_path / f"{work}_reprod", sides=tmp_path / work).judge("forward")["forward"]
        assert verdict.passed == (work == "clean"), verdict.describe_measured()
    whole = portcheck.Side(tmp_path / "clean").whole_record("forward", "paddle")
    assert record.load(whole)["depends"] == {"weights": "w0", "inputs": "batch 0"}


def test_backwards_flags_never_restate_its_steps_and_data_takes_named_loaders(tmp_path):
    """A flags dict holding its own "steps" (a pipeline's hyper-parameters, written before a quick run asked for
    fewer) is bound with the steps the run took; {name: loader} is one data pair, each loader's keys under its
    name, a Paddle test loader in another order red at it; an empty dict is refused in one line."""
    from portcheck.core import record
    x, y = first_batch()
    model = torch_net()
    half = portcheck.Side(tmp_path / "work")
    half.backward(model.train(), x, y, cross_entropy("torch"), *optimizer("torch", 1), steps=1,
                  flags={"steps": 5, "lr": 0.05})
    assert record.load(tmp_path / "work" / "bp_align_torch.npy")["depends"]["flags"] == {"steps": 1, "lr": 0.05}
    for side, order in (("torch", TEST), ("paddle", TEST[::-1])):
        portcheck.Side(tmp_path / "work").data({"train": dataloader(side, ORDERS[0]), "test": dataloader(side, order)},
                                               batches=1)
    from portcheck.core.fileio import load_npy
    report = data.judge_batches(*(load_npy(tmp_path / "work" / f"data_{s}.npy") for s in ("torch", "paddle")))
    assert not report.passed and "test/batch 0" in report.line(), report.line()
    steps = portcheck.Handin(tmp_path / "log_reprod", sides=tmp_path / "work")
    assert not steps.judge("data")["data"].passed
    assert report.line() in (tmp_path / "log_reprod" / "data_diff.log").read_text()  # the log says where
    with pytest.raises(PipelineError, match=r"^data: an empty \{name: loader\}.*\[PC476\]$"):
        half.data({})


class Stops(PaddleNet):
    def forward(self, x):
        return self.head(self.norm(self.hidden(x)).reshape([-1, 16]))  # a reshape the port got wrong


def test_a_model_that_stops_keeps_what_ran_and_says_so_in_one_line(tmp_path):
    """Side.forward on a model that raises part way writes no pair and keeps the modules that ran, which
    judge_forward pairs against torch's to the first module where the two part."""
    from portcheck.core.fileio import load_npy
    x, _ = first_batch()
    torch_model, ported, paddle_model = torch_net(), PaddleNet(), Stops()
    portcheck.convert(torch_model, ported, inputs=x)
    paddle_model.set_state_dict(ported.state_dict())
    side = portcheck.Side(tmp_path / "work")
    side.forward(torch_model.eval(), x)
    with pytest.raises(PipelineError, match=r"^the paddle model stopped \(.*records/forward_paddle\.npy: judge "
                                            r"them .*\[PC475\]$"):
        side.forward(paddle_model.eval(), x)
    assert not (tmp_path / "work" / "forward_paddle.npy").exists()
    report = portcheck.judge_forward(*(load_npy(side.whole_record("forward", s)) for s in ("torch", "paddle")))
    assert not report.passed


def test_a_whole_record_of_another_run_is_never_drawn_into_the_pairs_verdict(tmp_path):
    """Handin.judge draws each side's whole record (its tables, torch's run across a kink) only where it is the
    pair's own run: one an earlier run left in records/ (another Paddle model's) is refused in one line."""
    import shutil
    x, _ = first_batch()
    torch_model, paddle_model = torch_net(), PaddleNet()
    portcheck.convert(torch_model, paddle_model, inputs=x)
    for model in (torch_model, paddle_model):
        portcheck.Side(tmp_path / "work").forward(model.eval(), x)
    portcheck.Side(tmp_path / "other").forward(PaddleNet().eval(), x)  # another run: the Paddle model's own weights
    steps = portcheck.Handin(tmp_path / "log_reprod", sides=tmp_path / "work")
    assert steps.judge("forward")["forward"].passed
    for name in ("forward_paddle.npy", "forward_paddle.run.json"):  # left in place of this run's
        shutil.copy(tmp_path / "other" / "records" / name, tmp_path / "work" / "records" / name)
    with pytest.raises(PipelineError, match=r"records/forward_paddle\.npy: not the run of forward_paddle\.npy \(its run "
                                            r"record binds other inputs, weights or flags.*\[PC477\]$"):
        steps.judge("forward")


@pytest.fixture(scope="module")
def decayed(tmp_path_factory):
    """Step 4 of a conv, a BatchNorm and a Linear with AdamW through portcheck.Handin: {0.01: the correct port's
    (report, steps, folder), 0.0: a Paddle AdamW with no weight decay's}. The conv's bias, before the BatchNorm,
    takes Adam updates of pure noise, whose own spread sets bp_align's one allowance a key."""
    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.fc = torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), \
                torch.nn.Linear(4 * 6 * 6, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))

    class PaddleNet(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.fc = paddle.nn.Conv2D(1, 4, 3, padding=1), paddle.nn.BatchNorm2D(4), \
                paddle.nn.Linear(4 * 6 * 6, 10)

        def forward(self, x):
            return self.fc(paddle.nn.functional.relu(self.bn(self.conv(x))).flatten(1))

    rng = np.random.RandomState(0)
    x, y = rng.rand(8, 1, 6, 6).astype("float32"), rng.randint(0, 10, 8).astype("int64")
    losses = torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy
    out = {}
    for decay in (0.01, 0.0):
        torch.manual_seed(0)
        top = tmp_path_factory.mktemp(f"wd{decay}") / "log_reprod"
        steps = portcheck.Handin(str(top))
        optimizers = (lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01),
                      lambda p, d=decay: paddle.optimizer.AdamW(learning_rate=1e-3, parameters=p, weight_decay=d))
        out[decay] = steps.backward(TorchNet(), PaddleNet(), x, y, losses, optimizers, steps=2), steps, top
    return out


def test_a_weight_decay_the_digest_cannot_show_is_red_by_the_comparison_the_step_ran(decayed):
    """Its digest shows no weight decay left out of Paddle's AdamW. compare_backward, judged beside the pair, names
    it; the correct port stays green."""
    assert decayed[0.01][0].passed and decayed[0.01][1].passed
    report, steps, _ = decayed[0.0]
    assert not report.passed and not steps.passed and not steps.verdicts["bp_align"].passed
    assert "compare_backward, every parameter and step: RED (the runs part at" in repr(steps)


def bp_line(capsys) -> str:
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("bp_align: "))


def test_the_reviewers_check_judges_step_4_from_each_sides_whole_record_beside_the_guides_rule(decayed, capsys):
    """`check` on the folder alone is red where the step was: each side's whole record handed in
    (diagnostics/records/) is judged by compare_backward's rule, every parameter and step, beside the guide's rule,
    which stays green as the guide judges it; the correct port's folder is green on both."""
    assert cli.check(decayed[0.0][2], only="lr,bp_align") == 1
    line = bp_line(capsys)
    assert line.startswith("bp_align: RED | guide green (mean <= 0.01") and "| same run |" in line
    assert re.search(r"compare_backward, every parameter and step, from diagnostics/records/: RED \(the runs part "
                     r"at \S+ after step \d\) \[PC463\]$", line), line
    assert cli.check(decayed[0.01][2], only="lr,bp_align") == 0
    assert bp_line(capsys).endswith("from diagnostics/records/: green (every value within its rule)")


def _relabel(top, how: str, reseal: bool):
    """The correct port's whole records edited: swapped (each file and run record under the other side's name), or
    torch's copied as Paddle's; reseal: as a forger recomputing the digests would (each run record written anew
    naming the side it now stands for, the manifest listing the edited files)."""
    from portcheck.core import record
    below = top / "diagnostics" / "records"
    files = {side: below / f"bp_align_{side}.npy" for side in ("torch", "paddle")}
    kept = {side: (f.read_bytes(), record.path_for(f).read_bytes()) for side, f in files.items()}
    given = {"torch": "paddle", "paddle": "torch"} if how == "swap" else {"torch": "torch", "paddle": "torch"}
    for side, f in files.items():
        data, rec = kept[given[side]]
        f.write_bytes(data)
        record.path_for(f).write_bytes(rec)
        if reseal:
            written = record.load(f)
            record.save(f, side, written["script"], written["depends"])
    if reseal:
        record.list_handed(top, top / "diagnostics", [p for f in files.values() for p in (f, record.path_for(f))])


@pytest.mark.parametrize("how", ["swap", "copy"])
def test_whole_records_swapped_or_copied_as_paddles_are_never_green(decayed, tmp_path, capsys, how):
    """Each side's whole record is hostile as the pairs are: swapped with the other side's, or torch's copied as
    Paddle's, with their run records (as edited, or resealed as a forger would, the manifest recomputed), the
    correct port's folder is red: the run record names the other side, the manifest lists other files, or the
    records' own contents say whose they are (a swapped pair, torch's float64 run in Paddle's)."""
    import shutil
    for reseal in (False, True):
        top = tmp_path / f"{how}{reseal}" / "log_reprod"
        shutil.copytree(decayed[0.01][2], top)
        _relabel(top, how, reseal)
        assert cli.check(top, only="lr,bp_align") != 0, (how, reseal)
        line = bp_line(capsys)
        assert line.startswith("bp_align: RED") and "from diagnostics/records/: RED (" in line, line


def test_a_bp_align_of_step_figures_alone_says_what_it_cannot_show_and_stays_the_guides(decayed, tmp_path, capsys):
    """A contestant's plain hand-in (the pairs alone, no whole records): the guide's verdict is not made red, and one
    line says that its figures cannot show a change under the noisiest parameter's spread, and how to hand in the
    full comparison."""
    import shutil
    (tmp_path / "plain").mkdir()
    for side in ("torch", "paddle"):
        shutil.copy(decayed[0.0][2] / f"bp_align_{side}.npy", tmp_path / "plain")
    assert cli.check(tmp_path / "plain", only="bp_align") == 0
    out = capsys.readouterr().out
    assert "bp_align: green | guide green" in out
    assert re.search(r"^  bp_align: judged on each step's figures alone .* cannot show a change under that "
                     r"parameter's spread\); compare_backward, every parameter and step not compared: hand in with "
                     r"portcheck\.Handin or portcheck\.Side, .* \[PC464\]$", out, re.M), out


def test_whole_records_of_another_run_with_the_same_run_records_are_never_green(decayed, tmp_path, capsys):
    """The correct port's whole records put in the weight decay plant's folder (the same weights, inputs and flags,
    so their run records bind what the plant's pairs bind), the manifest recomputed as a forger would: red, as the
    records do not give the plant's pair values."""
    import shutil
    from portcheck.core import record
    top = tmp_path / "log_reprod"
    shutil.copytree(decayed[0.0][2], top)
    clean = decayed[0.01][2] / "diagnostics" / "records"
    for f in clean.iterdir():
        shutil.copy(f, top / "diagnostics" / "records" / f.name)
    record.list_handed(top, top / "diagnostics", list((top / "diagnostics" / "records").iterdir()))
    assert cli.check(top, only="lr,bp_align") == 1
    line = bp_line(capsys)
    assert re.search(r"from diagnostics/records/: RED \(records/bp_align_paddle\.npy is not the run of "
                     r"bp_align_paddle\.npy \(its steps' figures are not the ones bp_align_paddle\.npy holds\)\) "
                     r"\[PC463\]$", line), line


def test_a_file_put_among_the_whole_records_after_the_hand_in_is_red(decayed, tmp_path, capsys):
    """diagnostics/records/ is held to the manifest as the rest of the folder: a file its writers did not list is
    red."""
    import shutil
    top = tmp_path / "log_reprod"
    shutil.copytree(decayed[0.01][2], top)
    below = top / "diagnostics" / "records"
    shutil.copy(below / "bp_align_torch.npy", below / "bp_align_earlier_torch.npy")
    assert cli.check(top, only="lr,bp_align") == 2  # and its page, green as written, is red beside it (PC970)
    out = capsys.readouterr().out
    assert "handed in: RED | diagnostics/records/bp_align_earlier_torch.npy is not in the list of what was handed in" \
        in out and "page: RED | diagnostics/report.html says green where the folder is red" in out


def test_a_whole_record_larger_than_a_hand_in_keeps_is_red_and_never_loaded(decayed, monkeypatch, capsys):
    from portcheck.pipeline import whole
    monkeypatch.setattr(whole, "WHOLE_BYTES", 1 << 10)
    monkeypatch.setattr(whole, "load_npy", lambda path: pytest.fail(f"{path} loaded"))
    assert cli.check(decayed[0.01][2], only="lr,bp_align") == 2  # and its page, green as written (PC970)
    assert "from diagnostics/records/: RED (records/bp_align_torch.npy is over the 0 MB a hand-in keeps of a whole " \
        "record) [PC463]" in bp_line(capsys)
