"""The second worked example (examples/resnet18/): transformers' ResNet-18 against paddle.vision's resnet18,
two models no one here wrote, through align's public API and a name map only. The clean run is green end to
end and its hand-in re-checks green; each planted bug is red and named at its module."""
import re

import numpy as np
import pytest

from portcheck.core import calibrated, record
from portcheck.pipeline import data, training
from conftest import ROOT, run

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import convert, judge_backward, judge_forward, record_backward, record_forward  # noqa: E402
from examples.resnet18 import resnet  # noqa: E402
from examples.resnet18.resnet import RESNET_MAP  # noqa: E402

CHECK = "pipeline/check_log_reprod.py"
QUICK_STEPS = 1   # Step 5 in the suite: the first step of each training (the whole one is the committed hand-in)
GUIDE_PAIRS = ("forward", "data", "metric", "loss", "lr", "bp_align", "train_align")
# the task's threshold for the final metric is the reviewer's to give (a hand-in's own files never loosen its rule)
TASK = ("--threshold", f"train_align={resnet.THRESHOLD!r}")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A quick run of the example where a fresh clone runs it: beside the committed hand-in (a copy), which it must
    leave as it was, handing in to log_reprod_rerun/ and saying in one line that it did not reproduce it."""
    import shutil
    home = tmp_path_factory.mktemp("resnet_home")
    committed = home / resnet.FOLDER / "log_reprod"
    shutil.copytree(ROOT / resnet.FOLDER / "log_reprod", committed)
    before = {p: p.read_bytes() for p in committed.rglob("*") if p.is_file()}
    proc = run(f"{resnet.FOLDER}/run_all.py", "--max_steps", QUICK_STEPS, home=home, check=0)
    assert "every step green" in proc.stdout
    assert {p: p.read_bytes() for p in committed.rglob("*") if p.is_file()} == before  # left as it was
    said = [line for line in proc.stdout.splitlines() if "bit for bit" in line]
    assert len(said) == 1 and said[0].startswith(f"this run did not reproduce {resnet.FOLDER}/log_reprod bit for bit")
    assert f"this run's hand-in is {resnet.FOLDER}/log_reprod_rerun" in said[0], said
    return home


def hand_in(home):
    return home / resnet.FOLDER / "log_reprod_rerun"


def test_a_rerun_that_reproduces_the_hand_in_says_so_and_leaves_one_copy(tmp_path):
    from examples.resnet18 import run_all
    earlier, rerun = tmp_path / "log_reprod", tmp_path / "log_reprod_rerun"
    for folder, value in ((earlier, b"353"), (rerun, b"353")):
        (folder / "diagnostics").mkdir(parents=True)
        (folder / "train_align_torch.npy").write_bytes(value)
        (folder / "diagnostics" / "steps.json").write_bytes(b"{}")
    assert "reproduced" in run_all.settle(earlier, rerun) and not rerun.exists()
    (rerun / "diagnostics").mkdir(parents=True)
    (rerun / "train_align_torch.npy").write_bytes(b"352")  # another CPU's torch: another count
    line = run_all.settle(earlier, rerun)
    assert "did not reproduce" in line and "2 of 2 files differ, 1 of them arrays: train_align_torch.npy, diagnostics/steps.json" in line
    assert (earlier / "train_align_torch.npy").read_bytes() == b"353" and rerun.is_dir()


def test_run_all_is_green_and_its_hand_in_rechecks_green(home):
    log_reprod = hand_in(home)
    proc = run(CHECK, log_reprod, *TASK, home=home, check=0)
    for pair in GUIDE_PAIRS:
        assert f"{pair}: green" in proc.stdout, proc.stdout
    assert "not handed in" not in proc.stdout
    from portcheck.core.fileio import load_npy
    for fw in ("torch", "paddle"):  # what check_step4 judged, the hand-in checker judges: loss, lr, update digest
        keys = [k.rsplit("_", 1)[0] for k in load_npy(log_reprod / f"bp_align_{fw}.npy")]
        assert set(keys) == {"loss", "lr", "weights", "running"} and keys.count("loss") == resnet.QUICK_BP_STEPS, keys
    # Step 5 judged on torch's own runs of the same quick training, made on this machine before it
    from examples.resnet18.Step5.torch_vs_torch import runs_of
    step5 = home / resnet.FOLDER / "Step5"
    made = sorted(resnet.torch_own(n).name for n, _ in runs_of(QUICK_STEPS))
    assert sorted(p.name for p in step5.glob(resnet.torch_own())) == made and len(made) >= 2
    assert "+ torch's own spread" in (step5 / "train_align_diff.log").read_text()
    step4 = (home / resnet.FOLDER / "Step4" / "bp_align_diff.log").read_text()
    assert "running_var: by design: torch's BatchNorm updates running_var with the unbiased batch variance" in step4


def test_committed_hand_in_rechecks_green():
    proc = run(CHECK, ROOT / resnet.FOLDER / "log_reprod", *TASK, home=ROOT, check=0)
    assert "every pair green" in proc.stdout and "not handed in" not in proc.stdout
    for pair in GUIDE_PAIRS:
        assert f"{pair}: green" in proc.stdout, proc.stdout


def test_readmes_digest_figures_are_the_committed_hand_ins():
    """The README's (and README_cn's) multiple of torch's own error for bp_align's update digests, per family
    (weights_<i>, running_<i>), is the committed hand-in's largest |torch - paddle| / |torch - torch64|."""
    from portcheck.core.fileio import load_npy
    folder = ROOT / resnet.FOLDER / "log_reprod"
    t, p = (load_npy(folder / f"bp_align_{fw}.npy") for fw in ("torch", "paddle"))
    t64 = load_npy(folder / "diagnostics" / "bp_align_torch64.npy")
    readmes = [(ROOT / resnet.FOLDER / name).read_text() for name in ("README.md", "README_cn.md")]
    for family in ("weights", "running"):
        worst = max(float(np.abs(t[k] - p[k]).max() / np.abs(t[k] - t64[k]).max()) for k in t
                    if k.rsplit("_", 1)[0] == family)
        for text in readmes:
            assert re.search(rf"{re.escape(f'{worst:.3g}')}\s*(times|倍)", text), (family, f"{worst:.3g}")


def test_a_hand_in_missing_a_guide_pair_is_red(home, tmp_path):
    import shutil
    copy = tmp_path / "log_reprod"
    shutil.copytree(hand_in(home), copy)
    for f in copy.glob("metric_*"):
        f.unlink()
    proc = run(CHECK, copy, *TASK, home=tmp_path, check=1)
    assert "metric: RED" in proc.stdout and "not in the folder" in proc.stdout, proc.stdout


# ---- Step 2: the digits through each framework's loader, and the metric ---------------------------------

def test_the_digits_are_sklearns_read_without_importing_it(monkeypatch):
    """resnet.digits() reads sklearn's digits file as load_digits does, bit for bit, with sklearn not imported (its
    import is ~2 s of CPU in every script); where the file is not found, load_digits gives the same."""
    import subprocess
    import sys
    code = "import sys; from examples.resnet18 import resnet; resnet.digits(); print('sklearn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split() == ["False"]
    read = resnet.digits.__wrapped__()
    monkeypatch.setattr(resnet.importlib.util, "find_spec", lambda name: None)
    for ours, sklearns in zip(read, resnet.digits.__wrapped__()):
        assert ours.dtype == sklearns.dtype and np.array_equal(ours, sklearns)

def loader_records(side_loader, order=None, labels_shift=0, **plant):
    """The first DATA_BATCHES training batches of one side, as pt_data.py / pd_data.py record them."""
    order = resnet.train_orders()[0] if order is None else order
    batches = ((x, y + labels_shift) for x, y in side_loader(order, resnet.TRAIN["batch"], drop_last=True, **plant))
    return data.record_batches(batches, resnet.DATA_BATCHES, ("images", "labels"), prefix="train/")


@pytest.fixture(scope="module")
def torch_batches():
    return loader_records(resnet.torch_loader)


def shuffled():
    return resnet.train_orders()[0][np.random.RandomState(5).permutation(len(resnet.train_orders()[0]))]


@pytest.mark.parametrize("plant, where", [
    ({}, None),
    ({"mean": 0.3}, "train/batch 0, key images: index [0, 0, 0, 0]"),  # the normalization mean of another set
    ({"order": "shuffled"}, "train/batch 0, key images: index"),       # a loader that shuffles
    ({"labels_shift": 1}, "train/batch 0, key labels: index [0]"),     # labels 1..10
], ids=["clean", "normalization mean", "shuffles", "labels off by one"])
def test_data_plants_are_red_at_their_batch_key_and_index(torch_batches, plant, where):
    if plant.get("order") == "shuffled":
        plant = {"order": shuffled()}
    report = data.judge_batches(torch_batches, loader_records(resnet.paddle_loader, **plant))
    assert report.passed == (where is None), report.line()
    if where:
        assert where in report.first.describe(), report.line()


@pytest.mark.parametrize("average", ["macro", "micro"])
def test_the_metric_is_equal_on_the_same_predictions_and_micro_averaging_is_red(average):
    predictions, labels = resnet.centroid_predictions()
    t = data.record_metric(resnet.torch_metric, predictions, labels, framework="torch")
    p = data.record_metric(lambda x, y: resnet.paddle_metric(x, y, average), predictions, labels, framework="paddle")
    difference = data.first_difference(t, p)
    assert (difference is None) == (average == "macro"), difference
    if difference:
        assert difference.key == "macro_f1"


# ---- Step 5: training, each side's loop as pt_train.py / pd_train.py write it -------------------------------

def quick_training(side, steps=3, weight_decay=None, lr_ahead=False):
    """The first `steps` steps of Step 5 on one side (resnet's trainers, loaders and order) through a
    TrainingLog: (its arrays, its run record's depends)."""
    pt = resnet.new_torch_model()
    weights = record.model_fingerprint(pt)
    if side == "torch":
        model, fn = pt, lambda out, y: torch.nn.functional.cross_entropy(out.logits, y)
        opt, sched, lr_now = resnet.torch_trainer(model, resnet.TRAIN["epochs"] * resnet.steps_per_epoch(), weight_decay)
        loader, clear = resnet.torch_loader, opt.zero_grad
    else:
        model = paddle.vision.models.resnet18(num_classes=resnet.CLASSES)
        model.set_state_dict(convert(pt, model, RESNET_MAP))
        fn = paddle.nn.functional.cross_entropy
        opt, sched, lr_now = resnet.paddle_trainer(model, resnet.TRAIN["epochs"] * resnet.steps_per_epoch(), weight_decay)
        loader, clear = resnet.paddle_loader, opt.clear_grad
        if lr_ahead:  # the schedule stepped once before the first step
            sched.step()
    log = training.TrainingLog()
    model.train()
    for _, (images, labels) in zip(range(steps), loader(resnet.train_orders()[0], resnet.TRAIN["batch"], drop_last=True)):
        lr = lr_now()
        loss = fn(model(images), labels)
        loss.backward()
        opt.step()
        sched.step()
        log.step(loss, lr, model=model, batch=labels)
        clear()
    log.evaluate({"accuracy": 0.5})  # the curves are what is judged here
    return log.arrays(), resnet.train_depends(weights, steps)


@pytest.fixture(scope="module")
def torch_steps():
    return quick_training("torch")


@pytest.mark.parametrize("plant, rows, cause", [
    ({}, [], None),
    ({"weight_decay": 5e-3}, ["weight norm"], "the update differs"),
    # the lr. The updates it makes in warmup's first steps (twice the lr at step 0) move the weight norm by 6.6e-07
    # relative, under the 1e-6 row, and the loss curves part at step 2, after which the norm is only said
    ({"lr_ahead": True}, ["lr"], "one step ahead"),
], ids=["clean", "weight decay 10x", "lr schedule one step ahead"])
def test_training_plants_are_red_at_their_row_and_name_the_cause(torch_steps, plant, rows, cause):
    (t, t_dep), (p, p_dep) = torch_steps, quick_training("paddle", **plant)
    report = training.judge_training(t, p, records=({"depends": t_dep}, {"depends": p_dep}))
    failed = [r.name for r in report.rows if not r.passed]
    assert failed == rows, report.lines()
    if cause:
        assert any(cause in c for c in report.causes), report.causes


def test_step5_is_judged_on_torchs_own_runs_of_the_same_training_only(torch_steps, monkeypatch, tmp_path, capsys):
    """check_step5.py widens the task's threshold by torch's own runs of this very training kept beside Step 5's
    (torch_vs_torch.py's): a run of another training (other flags: a stale one) or one edited since its record is
    left out, and a Paddle outcome beyond the widened threshold is red, half an image within it green."""
    import importlib.util
    from portcheck.core.fileio import save_npy
    monkeypatch.setenv("BERT_ALIGN_HOME", str(tmp_path))
    spec = importlib.util.spec_from_file_location("check_step5", ROOT / resnet.FOLDER / "Step5" / "check_step5.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    (t, dep), d = torch_steps, resnet.step_dir(5)

    def save(path, log, depends):
        save_npy(path, log)
        record.save(path, "torch", "pt_train.py", depends)

    def ending(accuracy):
        return {**t, f"{training.METRIC}accuracy": np.array([accuracy])}

    save(d / f"{training.LOG}_torch.npy", ending(0.98), dep)
    save(resnet.torch_own("one thread, moved 1"), ending(0.97), dep)  # 3.6 images from this run
    save(resnet.torch_own("two threads"), ending(0.90), {**dep, "flags": {**dep["flags"], "max_steps": 99}})
    save(resnet.torch_own("moved 2"), ending(0.97), dep)
    save_npy(resnet.torch_own("moved 2"), ending(0.90))  # edited after its record was written
    own = check.own_runs(d)
    assert [float(o[f"{training.METRIC}accuracy"][-1]) for o in own] == [0.97], own
    assert "1 torch run(s) of this training" in capsys.readouterr().out
    widened = resnet.THRESHOLD + 0.01  # the moved run ends 0.01 from this one
    for paddle, green in ((0.98 - widened + 0.5 / resnet.TEST, True), (0.98 - widened - 0.5 / resnet.TEST, False)):
        report = training.judge_training(ending(0.98), ending(paddle), resnet.THRESHOLD, own=own)
        assert report.rows[0].passed is green, report.lines()


def test_torchs_own_runs_never_write_through_a_link(tmp_path):
    """A link where torch_vs_torch.py keeps a run: refused in one line before any run starts, the file it points
    at as it was."""
    from conftest import error_line
    weights = tmp_path / resnet.FOLDER / "weights"
    weights.mkdir(parents=True)
    (weights / resnet.torch_weight().name).write_bytes(b"")  # there: the script refuses before reading it
    victim, own = tmp_path / "theirs.npy", tmp_path / resnet.FOLDER / "Step5" / "torch_own_moved_3.npy"
    victim.write_bytes(b"theirs")
    own.parent.mkdir()
    own.symlink_to(victim)
    proc = run(f"{resnet.FOLDER}/Step5/torch_vs_torch.py", home=tmp_path)
    assert proc.returncode != 0 and "never writes through a link" in error_line(proc), proc.stderr
    assert victim.read_bytes() == b"theirs" and not proc.stdout.strip()  # no run started


def test_a_tampered_hand_in_is_red(home, tmp_path):
    import shutil
    copy = tmp_path / "log_reprod"
    shutil.copytree(hand_in(home), copy)
    from portcheck.core.fileio import load_npy, save_npy
    data = load_npy(copy / "loss_paddle.npy")
    save_npy(copy / "loss_paddle.npy", {"loss": data["loss"] + np.float32(1e-5)})  # within the guide's 1e-6? no
    proc = run(CHECK, copy, *TASK, home=tmp_path, check=1)
    assert "loss: RED" in proc.stdout and "NOT the same run" in proc.stdout, proc.stdout


def models():
    pt = resnet.new_torch_model()
    pd = paddle.vision.models.resnet18(num_classes=resnet.CLASSES)
    pd.set_state_dict(convert(pt, pd, RESNET_MAP))
    return pt, pd


@pytest.fixture(scope="module")
def torch_forward():
    pt, _ = models()
    return record_forward(pt.eval(), resnet.batch()[0])


def untransposed_fc(pt, pd):  # a converter that reshapes the [10, 512] weight into [512, 10] instead of transposing
    pd.fc.weight.set_value(pt.classifier[1].weight.detach().numpy().reshape(512, resnet.CLASSES))


def conv_padding(pt, pd):
    conv = pd.layer2[0].conv1
    conv._padding = conv._updated_padding = [2, 2]


def bn_epsilon(pt, pd):
    pd.layer2[0].bn2._epsilon = 1e-3


def train_mode(pt, pd):
    pd.train()


@pytest.mark.parametrize("plant, where", [
    (None, None),
    (untransposed_fc, "classifier.1"),
    (conv_padding, "resnet.encoder.stages.1.layers.0.layer.0.convolution"),
    (bn_epsilon, "resnet.encoder.stages.1.layers.0.layer.1.normalization"),
    (train_mode, "resnet.embedder.embedder.normalization"),
], ids=["clean", "fc untransposed", "conv padding off by one", "BatchNorm epsilon 1e-3", "train vs eval"])
def test_forward_plants_are_named_at_their_module(torch_forward, plant, where):
    pt, pd = models()
    pd.eval()
    if plant:
        plant(pt, pd)
    report = judge_forward(torch_forward, record_forward(pd, resnet.batch()[0]), RESNET_MAP)
    assert report.passed == (plant is None) and report.first_diverging == where, report.table()
    if plant is None:
        assert max(r.ratio for r in report.rows if not r.problem) < calibrated.K


def train(model, steps=resnet.QUICK_BP_STEPS):  # the quick run's Step 4: torch_training is its record
    sides = resnet.torch_training() if isinstance(model, torch.nn.Module) else resnet.paddle_training()
    images, labels = resnet.batch()
    return record_backward(model, images, labels, *sides, steps)


@pytest.fixture(scope="module")
def torch_training(home):
    """torch's Step 4 record as the quick run's pt_bp.py wrote it: train() of the same weights on the same batch,
    QUICK_BP_STEPS steps (the momentum plant shows after the first, the weight decay's at the second update), not
    trained again here (with its float64 twin and its run against itself, ~10 s of CPU)."""
    from portcheck.core.fileio import load_npy
    return load_npy(home / resnet.FOLDER / "Step4" / "records" / "bp_align_torch.npy")


def momentum_01(pd):  # torch's momentum=0.1 copied: Paddle's momentum is the complement (0.9 is torch's 0.1)
    for layer in pd.sublayers():
        if isinstance(layer, paddle.nn.BatchNorm2D):
            layer._momentum = 0.1


@pytest.mark.parametrize("plant, where", [
    (None, None),
    (momentum_01, "resnet.embedder.embedder.normalization.running_mean after step 1"),
    (lambda pd: pd.eval(), "resnet.embedder.embedder.normalization"),
], ids=["clean", "BatchNorm momentum 0.1", "eval vs train"])
def test_training_plants_are_named_at_their_module(torch_training, plant, where):
    _, pd = models()
    pd.train()
    if plant:
        plant(pd)
    report = judge_backward(torch_training, train(pd), RESNET_MAP)
    assert report.passed == (plant is None) and report.first_diverging == where, report.table()


@pytest.fixture(scope="module")
def weight_decay_5x():
    """Paddle's Step 4 training with weight decay 5e-4 where torch has 1e-4 (both cases below judge it)."""
    _, pd = models()
    return record_backward(pd.train(), *resnet.batch(), *resnet.paddle_training(weight_decay=5e-4),
                           resnet.QUICK_BP_STEPS)


def test_the_hand_ins_bp_align_carries_the_updates(torch_training, weight_decay_5x, tmp_path, capsys):
    """Step 4's bp_align is handin.bp_align's (each step's loss, lr and update digest), as pt_bp.py and pd_bp.py
    write it. A Paddle weight decay of 5e-4 where torch has 1e-4 moves the first update's digest (each weight's mean
    |update|) 216 x torch's own error, over K_BACKWARD's 128, at one thread and two, on avx512 and avx2 (measured):
    red from the folder. How far it moves the losses of 3 steps depends on the CPU's kernels (less than rounding on
    the machine this was written on, 483 x torch's own error at loss_2 on an Intel Xeon): where the losses alone are
    green, the digest is what makes the folder red, named at a weights_ key."""
    from portcheck import cli
    from portcheck.pipeline import handin

    def checked(pair, folder):
        handin.save_side(folder, "bp_align", "torch", pair(torch_training), {"inputs": "x"}, "pt_bp.py",
                         exact=pair(torch_training, exact=True))
        handin.save_side(folder, "bp_align", "paddle", pair(weight_decay_5x), {"inputs": "x"}, "pd_bp.py")
        handin.judge_and_log(folder, "bp_align", after_steps=True, top=folder / "log_reprod")
        code = cli.check(folder / "log_reprod", only="bp_align")
        return code, next(line for line in capsys.readouterr().out.splitlines() if line.startswith("bp_align:"))

    losses_code, _ = checked(lambda rec, exact=False: handin.per_step(rec, "loss", exact), tmp_path / "losses")
    code, line = checked(handin.bp_align, tmp_path / "bp_align")
    assert code == 1, line
    assert losses_code == 1 or "measured RED (failed: weights_" in line, line


def test_a_kink_is_named_not_hidden(monkeypatch):
    """Seed 0's batch of noise puts one input of layer4.1's first ReLU within rounding of 0, and the two sides take
    different branches there: red, at that BatchNorm's gradient, and the kink said in one line. One step: the
    kink is in the first backward (five steps cost six times as long and say the same)."""
    monkeypatch.setattr(resnet, "batch", lambda: resnet.random_batch(0))
    pt, pd = models()
    report = judge_backward(train(pt.train(), steps=1), train(pd.train(), steps=1), RESNET_MAP)
    # which ReLU input lands within rounding of its kink depends on the CPU's kernels (layer4.1's on the machine
    # this was written on, layer3.0's on another): the gradient named first must be at a kink the table names
    kinks = re.findall(r"kink in step 1's forward: (\S+) holds \d+ value\(s\) within rounding of 0", report.table())
    assert not report.passed and kinks, report.table()
    assert report.first_diverging in {f"grad {m}.bias" for m in kinks}, (report.first_diverging, kinks)


def test_readmes_state_the_committed_figures():
    """The example's READMEs: the same commands in both languages, and the clean run's figures are the
    committed hand-in's (recomputed from its files) and its logs'."""
    from portcheck.pipeline import handin
    from test_docs import fenced
    folder = ROOT / resnet.FOLDER
    readme, readme_cn = folder / "README.md", folder / "README_cn.md"
    assert fenced(readme) and fenced(readme) == fenced(readme_cn)
    hand_in, figures = folder / "log_reprod", []
    for pair in ("forward", "loss", "bp_align"):
        below = hand_in / "diagnostics"
        v = handin.judge_measured(pair, hand_in / f"{pair}_torch.npy", hand_in / f"{pair}_paddle.npy",
                                  below / f"{pair}{handin.EXACT}",
                                  [below / f"{pair}_{s}.run.json" for s in ("torch", "paddle", "torch64")],
                                  k=calibrated.multiple(pair == "bp_align"))
        worst = max(v.rows, key=lambda r: r.max)
        figures += [f"| {x:.2e} |" if x else "| 0 |" for x in (worst.max, worst.err32)] + [f"| {worst.ratio:.2f} |"]
    from portcheck.core.fileio import load_npy
    for side in ("torch", "paddle"):  # Step 5's outcome, and Step 2's metric
        figures += [f"{float(v):.6f}" for v in load_npy(hand_in / f"train_align_{side}.npy").values()]
        figures += [f"{float(v):.6f}" for v in load_npy(hand_in / f"metric_{side}.npy").values()]
    log = (hand_in / "bp_align_diff.log").read_text()
    rules = [float(line.rsplit("raw diff ", 1)[1]) for line in log.splitlines() if "by design" in line]
    for text, count in ((readme.read_text(), f"({len(rules)} here"), (readme_cn.read_text(encoding="utf-8"),
                                                                        f"（这里 {len(rules)} 个")):
        flat = " ".join(text.split())
        for figure in figures + [f"{max(rules):.3e}", count]:
            assert figure in flat, figure


# ---- Step 5's committed measurements: the threshold, the outcome, the time (files read, nothing trained) --------

DOCS = ROOT / resnet.FOLDER / "docs"
HAND_IN = ROOT / resnet.FOLDER / "log_reprod"


def measurements():
    """(torch_vs_torch.py's figures, run_all.py --timing's), as committed."""
    import json
    return (json.loads((DOCS / "torch_vs_torch.json").read_text()),
            json.loads((DOCS / "run_all_time.json").read_text()))


def hand_in_outcome(side):
    from portcheck.core.fileio import load_npy
    final = load_npy(HAND_IN / f"train_align_{side}.npy")
    return {k: float(v) for k, v in final.items()}, load_npy(HAND_IN / "diagnostics" / f"{training.LOG}_{side}.npy")


def loss_parts(a, b):
    over = np.flatnonzero(~(np.abs(a["loss"] - b["loss"]) <= training.LOSS_PARTS))
    return int(over[0]) if over.size else None


def test_the_threshold_is_torch_against_itself():
    """resnet.THRESHOLD is half an image above the largest gap between torch's own runs of this very training
    (Step5/torch_vs_torch.py's JSON, recomputed from its runs: its run set, the reference first), covers every
    metric's gap there, and is the threshold the hand-in was judged at, widened by the same runs; the yardstick's
    reference run is the hand-in's torch side."""
    from examples.resnet18.Step5 import torch_vs_torch as tvt_script
    tvt, _ = measurements()
    assert tvt["train"] == resnet.TRAIN and tvt["test_images"] == resnet.TEST  # measured on today's recipe
    runs = tvt["runs"]
    assert [(name, r["moved_seed"]) for name, r in runs.items()] == [(tvt_script.REFERENCE, 0), *tvt_script.RUNS]
    for r in runs.values():
        assert r["correct"] == round(r["accuracy"] * resnet.TEST)
    gap = {k: max(abs(a[k] - b[k]) for a in runs.values() for b in runs.values())
           for k in ("correct", "accuracy", "macro_f1")}
    assert gap == tvt["largest_gap"] and gap["correct"] == resnet.TORCH_GAP
    if gap["correct"]:
        assert resnet.THRESHOLD == (gap["correct"] + 0.5) / resnet.TEST
        assert max(gap["accuracy"], gap["macro_f1"]) <= resnet.THRESHOLD
    else:  # torch against itself ends equal: the guide's 0.15% is within reach and holds
        from portcheck.core.tolerances import GUIDE
        assert resnet.THRESHOLD == GUIDE["train_align"].threshold
    torch_final, _ = hand_in_outcome("torch")
    reference = runs[tvt_script.REFERENCE]
    assert {k: reference[k] for k in torch_final} == torch_final
    moved = max(abs(r[k] - reference[k]) for r in runs.values() for k in torch_final)
    widened = f"{resnet.THRESHOLD + moved:g}"
    assert f"threshold: {widened} ({widened} = the task's {resnet.THRESHOLD:g} + torch's own spread {moved:.3g}" in \
        (HAND_IN / "train_align_diff.log").read_text()
    # the hand-in carries those runs, so the reviewer's checker judges the curves on them as check_step5 did
    from portcheck.core.fileio import load_npy
    own = load_npy(HAND_IN / "diagnostics" / f"{training.OWN}_torch.npy")  # the moved runs and the committed one
    assert sorted(own["metric/accuracy"]) == pytest.approx(sorted(r["accuracy"] for r in runs.values()))


def test_readmes_state_step5s_measurements():
    """The Step 5 section of both READMEs: the table (a row per run: accuracy and count, macro F1, where the loss
    curves part from torch's) is the hand-in's and torch_vs_torch.py's, in its order; both sides pass the 95%
    floor; the count gaps, the thresholds, the first loss (never exceeded) and the time (run_all.py --timing, a
    whole training) are the committed files'."""
    tvt, timing = measurements()
    (t, t_log), (p, p_log) = hand_in_outcome("torch"), hand_in_outcome("paddle")
    assert min(t["accuracy"], p["accuracy"]) >= 0.95
    own = list(tvt["runs"].values())[1:]
    accuracy = [t["accuracy"], p["accuracy"], *(r["accuracy"] for r in own)]
    f1 = [t["macro_f1"], p["macro_f1"], *(r["macro_f1"] for r in own)]
    parts = [loss_parts(t_log, p_log), *(r["loss_parts_from_one_thread_at"] for r in own)]
    counts = [round(a * resnet.TEST) for a in accuracy]
    first = float(t_log["loss"][0])
    assert float(p_log["loss"][0]) == first and t_log["loss"].max() == first and p_log["loss"].max() == first
    assert timing["train"] == {**resnet.TRAIN, "max_steps": None}
    assert timing["step5_seconds"] == timing["seconds"]["Step5 training"] <= 300  # the 5 minutes
    gap, own_gap = abs(counts[0] - counts[1]), tvt["largest_gap"]["correct"]
    moved = max(abs(metric[0] - v) for metric in (accuracy, f1) for v in metric[2:])  # own runs from the reference
    common = [f"{a * 100:.2f}%" for a in accuracy[:2]] + [
        f"{own_gap + 0.5:g} / {resnet.TEST} = {resnet.THRESHOLD:.6f}", f"{tvt['largest_gap']['macro_f1']:.6f}",
        f"{resnet.THRESHOLD + moved:.6f}", f"{first:.6f}", f"{timing['step5_seconds']:.0f} s",
        f"{timing['total_seconds']:.0f} s"]
    english = [f"The counts are {gap} images apart", f"Torch's own runs end up to {own_gap} images apart",
               f"span {min(counts)} to {max(counts)} correct", f"{timing['cores']}-core machine", "pass 95%"]
    chinese = [f"正确张数差 {gap} 张", f"torch 自己的几次运行最后最多相差 {own_gap} 张",
               f"落在 {min(counts)} 到 {max(counts)} 之间", f"{timing['cores']} 核机器", "都超过 95%"]
    header = {"README.md": "| run | test accuracy |", "README_cn.md": "| 运行 | 测试准确率 |"}
    for name, own_words in (("README.md", english), ("README_cn.md", chinese)):
        text = (ROOT / resnet.FOLDER / name).read_text(encoding="utf-8")
        flat = " ".join(text.split())
        for figure in common + own_words:
            assert re.search(rf"(?<![\d.]){re.escape(figure)}", flat), (name, figure)
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(header[name])) + 2
        rows = [[c.strip() for c in line.strip("|").split("|")[1:]] for line in lines[start:start + len(accuracy)]]
        of = (f"of {resnet.TEST}", f"{resnet.TEST} 张中")  # "353 of 360", "360 张中 353 张": the other is the count
        assert [re.findall(r"[\d.]+", r[0].replace(of[0], "").replace(of[1], "")) for r in rows] == \
            [[f"{a:.6f}", str(n)] for a, n in zip(accuracy, counts)], (name, rows)
        assert [r[1] for r in rows] == [f"{v:.6f}" for v in f1], (name, rows)
        assert [r[2] for r in rows] == ["", *("" if k is None else str(k) for k in parts)], (name, rows)
