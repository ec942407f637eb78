"""The fourth hostile pass (issue 49, with issue 48's differing outputs and issue 47's hand-in items): each problem
it found, planted. A hand-in's own files never loosen its verdict; integers are compared as integers; copies are
caught by value; every model output is judged; every error of the user's code or a bad argument is one line and
writes nothing outside the given folder."""
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from portcheck import cli
from portcheck.core import calibrated
from portcheck.pipeline import data, handin
from portcheck.pipeline import guide as reprod  # reprod_log's rule (`guide` is a verdict here)
from portcheck.core.errors import PipelineError
from examples.resnet18 import resnet

ROOT = Path(__file__).resolve().parents[1]
RESNET = ROOT / "examples/resnet18/log_reprod"
TASK = {"train_align": resnet.THRESHOLD}  # the example's task threshold: the reviewer's flag


def resnet_copy(tmp_path) -> Path:
    out = tmp_path / "hand_in"
    shutil.copytree(RESNET, out)
    return out


def contestant(tmp_path, pairs: dict, diagnostics: dict = None) -> Path:
    """A folder of {name: (torch dict, paddle dict)}, and files in its diagnostics/ ({name: text})."""
    folder = tmp_path / "hand_in"
    (folder / "diagnostics").mkdir(parents=True, exist_ok=True)
    for name, (t, p) in pairs.items():
        np.save(folder / f"{name}_torch.npy", t, allow_pickle=True)
        np.save(folder / f"{name}_paddle.npy", p, allow_pickle=True)
    for name, text in (diagnostics or {}).items():
        (folder / "diagnostics" / name).write_text(text)
    return folder


def line_of(out: str, pair: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"{pair}:"))


def run(*args):
    return subprocess.run([sys.executable, "-m", "portcheck", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


# ---------------------------------------------------------------- a hand-in's own files never loosen its verdict

def test_a_folders_own_threshold_for_a_pair_the_guide_does_not_name_is_not_used(tmp_path, capsys):
    """{"threshold": 10} in diagnostics/forward_resnet18_diff.json and any run record made a pair 0.3 apart green."""
    t = {"logits": np.zeros((2, 3), np.float32)}
    folder = contestant(tmp_path, {"forward_resnet18": (t, {"logits": t["logits"] + 0.3})},
                        {"forward_resnet18_diff.json": json.dumps({"threshold": 10}), "x.run.json": "{}"})
    assert cli.check(folder, only="forward_resnet18") == 1
    line = line_of(capsys.readouterr().out, "forward_resnet18")
    assert line.startswith("forward_resnet18: RED") and "declares threshold 10 (looser than the 1e-06" in line, line


def test_a_folders_own_outcome_threshold_is_not_used(tmp_path, capsys):
    """{"threshold": 0.5, "kind": "outcome"} in train_align_diff.json made 0.90 against 0.50 green."""
    folder = contestant(tmp_path, {"train_align": ({"acc": np.array([0.9])}, {"acc": np.array([0.5])})},
                        {"train_align_diff.json": json.dumps({"threshold": 0.5, "kind": "outcome"}),
                         "x.run.json": "{}"})
    assert cli.check(folder, only="train_align") == 1
    line = line_of(capsys.readouterr().out, "train_align")
    assert "guide RED (mean <= 0.0015" in line and "declares threshold 0.5" in line, line
    assert cli.check(folder, {"train_align": 0.5}, only="train_align") == 0  # the reviewer's own flag judges at it


def test_a_computed_pair_without_its_float64_run_is_red(tmp_path, capsys):
    """Deleting diagnostics/forward_torch64.npy dropped the measured verdict without a word."""
    folder = resnet_copy(tmp_path)
    (folder / "diagnostics/forward_torch64.npy").unlink()
    assert cli.check(folder, TASK) == 1
    line = line_of(capsys.readouterr().out, "forward")
    assert line.startswith("forward: RED") and "forward_torch64.npy missing" in line, line


def forty_times(tmp_path, pair="forward"):
    """A forward pair 40 x torch's own fp32 error apart: red at K = 16, green at K_BACKWARD = 128."""
    rng, eps = np.random.RandomState(0), 2.0 ** -23
    t = (1e-3 * (1 + rng.rand(256))).astype(np.float32)
    err = 10 * eps * 2e-3
    exact = t.astype(np.float64) + err * np.sign(rng.randn(256))
    p = (t + 40 * err).astype(np.float32)
    depends = {"inputs": "one batch"}
    handin.save_side(tmp_path, pair, "torch", {"y": t}, depends, "pt", exact={"y": exact})
    handin.save_side(tmp_path, pair, "paddle", {"y": p}, depends, "pd")
    return t, p, exact


def test_a_folders_own_k_is_not_used(tmp_path, capsys):
    """"k": 16.0 edited to 128.0 in forward_diff.json loosened the measured rule 8x, silently."""
    forty_times(tmp_path)
    assert not handin.judge_and_log(tmp_path, "forward", top=tmp_path / "log_reprod").passed
    verdict = tmp_path / "log_reprod/diagnostics/forward_diff.json"
    verdict.write_text(json.dumps({**json.loads(verdict.read_text()), "k": calibrated.K_BACKWARD}))
    assert cli.check(tmp_path / "log_reprod", only="forward") == 2  # and the folder against its manifest (PC151)
    line = line_of(capsys.readouterr().out, "forward")
    assert "measured RED" in line and "declares K 128 (looser than the 16" in line, line
    # the plant sits between the two multiples: the edit was what turned it green
    assert handin.judge_measured("forward", tmp_path / "forward_torch.npy", tmp_path / "forward_paddle.npy",
                                 tmp_path / "forward_torch64.npy", k=calibrated.K_BACKWARD).measured_passed


def test_a_declared_difference_is_red_under_strict(tmp_path, capsys):
    t = {"y": np.ones(3, np.float32)}
    folder = contestant(tmp_path, {"lr": (t, dict(t))}, {"lr_diff.json": json.dumps(
        {"name": "lr", "threshold": 1e-3, "kind": "exact"}), "x.run.json": "{}"})
    assert cli.check(folder, only="lr") == 0
    assert "said: its diagnostics/lr_diff.json declares threshold 0.001" in line_of(capsys.readouterr().out, "lr")
    assert cli.check(folder, strict=True, only="lr") == 1
    assert "RED: its diagnostics/lr_diff.json declares threshold 0.001" in line_of(capsys.readouterr().out, "lr")


# ---------------------------------------------------------------- integers compared as integers

@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integers_that_wrap_in_their_own_dtype_are_red(tmp_path, dtype):
    """int8 [-128, 0] against [0, 0]: reprod_log's own a - b wraps to a mean of -64, which passed its rule."""
    low = np.iinfo(dtype).min
    np.save(tmp_path / "ids_torch.npy", {"ids": np.array([low, 0], dtype)}, allow_pickle=True)
    np.save(tmp_path / "ids_paddle.npy", {"ids": np.array([0, 0], dtype)}, allow_pickle=True)
    proc = run("pair", tmp_path / "ids_torch.npy", tmp_path / "ids_paddle.npy")
    assert proc.returncode == 1, proc.stdout
    assert "guide RED" in proc.stdout and "wraps or rounds" in proc.stdout, proc.stdout
    guide = reprod.guide_verdict(*[{"ids": np.array(v, dtype)} for v in ([low, 0], [0, 0])], 1e-6)
    assert guide.keys[0].mean == -float(low) / 2


def test_integers_of_mixed_signedness_beyond_2_53_are_red(tmp_path):
    """uint64 2**53 + 1 against int64 2**53: float64 subtraction gives 0, the strict verdict named the dtype only."""
    np.save(tmp_path / "ids_torch.npy", {"ids": np.array([2 ** 53 + 1], np.uint64)}, allow_pickle=True)
    np.save(tmp_path / "ids_paddle.npy", {"ids": np.array([2 ** 53], np.int64)}, allow_pickle=True)
    proc = run("pair", tmp_path / "ids_torch.npy", tmp_path / "ids_paddle.npy")
    assert proc.returncode == 1 and "guide RED" in proc.stdout, proc.stdout
    assert "1 of 1 integers differ" in proc.stdout


# ---------------------------------------------------------------- copies caught by value

@pytest.mark.parametrize("how", ["key order", "Fortran order", "version-2 header"])
def test_a_copy_saved_another_way_is_red(tmp_path, capsys, how):
    rng = np.random.RandomState(0)
    t = {"logits": rng.rand(4, 3).astype(np.float32), "hidden": rng.rand(4, 8).astype(np.float32)}
    folder = contestant(tmp_path, {"forward": (t, t)})
    paddle_file = folder / "forward_paddle.npy"
    if how == "key order":
        np.save(paddle_file, dict(reversed(list(t.items()))), allow_pickle=True)
    elif how == "Fortran order":
        np.save(paddle_file, {k: np.asfortranarray(v) for k, v in t.items()}, allow_pickle=True)
    else:
        with open(paddle_file, "wb") as f:
            np.lib.format.write_array(f, np.asanyarray(t), version=(2, 0), allow_pickle=True)
    assert paddle_file.read_bytes() != (folder / "forward_torch.npy").read_bytes()
    assert cli.check(folder, only="forward") == 1
    assert "one side is a copy of the other" in line_of(capsys.readouterr().out, "forward")


# ---------------------------------------------------------------- every output judged

def models(torch_returns, paddle_returns):
    torch, paddle = pytest.importorskip("torch"), pytest.importorskip("paddle")
    from portcheck import convert

    class T(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return torch_returns(self.fc(x))

    class P(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(4, 3)

        def forward(self, x):
            return paddle_returns(self.fc(x))
    torch.manual_seed(0)
    t, p = T(), P()
    convert(t, p)
    return t, p


X = np.random.RandomState(0).rand(2, 4).astype(np.float32)


@pytest.mark.parametrize("torch_returns, paddle_returns, says", [
    (lambda y: (y, None), lambda y: (y, y), "torch returns None, Paddle a tensor [2, 3]"),
    (lambda y: y, lambda y: (y, y), "Paddle returns [1] (a tensor [2, 3]), which torch does not"),
    (lambda y: (y, y), lambda y: (y, None), "torch returns a tensor [2, 3], Paddle None"),
], ids=["torch None", "Paddle's extra output", "Paddle None"])
def test_an_output_one_side_lacks_is_red(torch_returns, paddle_returns, says):
    from portcheck import compare_forward
    report = compare_forward(*models(torch_returns, paddle_returns), X)
    assert not report.passed
    assert any(says in r.problem for r in report.rows), [r.problem for r in report.rows]


@pytest.mark.parametrize("torch_returns, paddle_returns, says", [
    (lambda y: (y, 1.0), lambda y: (y, 2.0), "max diff"),
    (lambda y: (y, "a"), lambda y: (y, "b"), "torch returns the string 'a', Paddle the string 'b'"),
    (lambda y: (y, iter([1])), lambda y: (y, iter([1])), "cannot be compared"),
], ids=["floats 1.0 apart", "strings", "generators"])
def test_outputs_that_are_not_tensors_are_judged(torch_returns, paddle_returns, says):
    from portcheck import compare_forward
    report = compare_forward(*models(torch_returns, paddle_returns), X)
    assert not report.passed
    row = next(r for r in report.rows if r.name == "(model)[1]")
    assert says in row.why, row.why


def test_equal_non_tensor_outputs_are_green():
    from portcheck import compare_forward
    report = compare_forward(*models(lambda y: (y, "same", None, float(y.sum())),
                                     lambda y: (y, "same", None, float(y.sum()))), X)
    assert report.passed, report.table()


def test_an_extra_output_is_named_and_outputs_compares_the_rest():
    """issue 48: transformers' past_key_values (use_cache=True) against a model returning its logits: the extra
    output named, and outputs=["logits"] compares the logits, the report saying what was left out."""
    from portcheck import compare_forward
    t, p = models(lambda y: {"logits": y, "past_key_values": iter(())}, lambda y: y)
    report = compare_forward(t, p, X)
    assert not report.passed
    assert any("torch returns past_key_values" in r.problem and "outputs=" in r.problem for r in report.rows)
    report = compare_forward(t, p, X, outputs=["logits"])
    assert report.passed and report.left_out == ["torch past_key_values"]
    assert "left out (outputs=), not judged: torch past_key_values" in report.table()
    with pytest.raises(PipelineError, match="the torch model's output has no loss"):
        compare_forward(t, p, X, outputs=["loss"])


def test_a_name_map_entry_naming_no_module_is_refused():
    from portcheck import compare_forward
    t, p = models(lambda y: y, lambda y: y)
    with pytest.raises(PipelineError, match="'fc': 'nope' \\(the Paddle model has no module 'nope'\\)"):
        compare_forward(t, p, X, name_map={"fc": "nope"})
    with pytest.raises(PipelineError, match="'nope': 'fc' \\(the torch model has no module 'nope'\\)"):
        compare_forward(t, p, X, name_map={"nope": "fc"})


def test_convert_with_inputs_neither_model_takes_is_one_line():
    from portcheck import convert
    t, p = models(lambda y: y, lambda y: y)
    with pytest.raises(PipelineError, match="the torch model's forward raised: RuntimeError") as e:
        convert(t, p, inputs=np.zeros((2, 5), np.float32))
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------- one line, nothing written outside

def test_a_metric_that_raises_is_one_line():
    def metric(p, y):
        raise ZeroDivisionError("no samples")
    with pytest.raises(PipelineError, match="the metric raised: ZeroDivisionError: no samples"):
        data.record_metric(metric, np.zeros(3), np.zeros(3))


def test_a_loader_that_raises_is_one_line():
    def loader():
        yield np.zeros(2)
        raise OSError("the disk went away")
    with pytest.raises(PipelineError, match="the loader raised at batch 1: OSError: the disk went away"):
        data.record_batches(loader())


@pytest.mark.parametrize("kw, says", [
    ({"arrays": [np.zeros(2)]}, "arrays must be a dict of numpy arrays"),
    ({"arrays": {"x": [1.0, 2.0]}}, "arrays['x'] is a list"),
    ({"framework": "tensorflow"}, "framework='tensorflow': one of torch, paddle"),
    ({"pair": "../../escaped"}, "name a pair by a plain name"),
], ids=["a list", "a list value", "another framework", "a path in the name"])
def test_save_side_refuses_bad_arguments_in_one_line_writing_nothing(tmp_path, kw, says):
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    args = {"pair": "forward", "framework": "torch", "arrays": {"x": np.zeros(2)}, **kw}
    with pytest.raises(PipelineError, match=says.replace("[", r"\[").replace("(", r"\(")):
        handin.save_side(folder, args["pair"], args["framework"], args["arrays"], {}, "pt")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("kw, says", [
    ({"record_dir": 5}, "record_dir=5: give a folder path"),
    ({"record_dir": ""}, "record_dir='': give a folder path"),
    ({"mean_bound": "1e-6"}, "mean_bound='1e-6': give a finite number"),
])
def test_compare_forward_refuses_bad_arguments_in_one_line(tmp_path, monkeypatch, kw, says):
    from portcheck import compare_forward
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PipelineError, match=says):
        compare_forward(*models(lambda y: y, lambda y: y), X, **kw)
    assert list(tmp_path.iterdir()) == []  # an empty record_dir wrote torch/ and paddle/ here


def test_an_outcome_judged_on_a_computed_pair_never_says_the_guides_rule(tmp_path):
    t = {"y": np.ones(3, np.float32)}
    handin.save_side(tmp_path, "forward", "torch", t, {}, "pt")
    handin.save_side(tmp_path, "forward", "paddle", t, {}, "pd")
    handin.judge_and_log(tmp_path, "forward", threshold=1, kind="outcome")
    log = (tmp_path / "forward_diff.log").read_text()
    assert "(the guide's rule)" not in log and "the caller's rule, not the guide's" in log


def test_a_pair_after_too_many_files_says_the_rest_was_not_read(tmp_path, monkeypatch):
    folder = tmp_path / "hand_in"
    (folder / "z").mkdir(parents=True)
    for i in range(30):  # read first: the folder's own files before its sub-folders
        (folder / f"{i}.txt").write_text("")
    np.save(folder / "z/z_torch.npy", {"x": np.zeros(2)}, allow_pickle=True)
    np.save(folder / "z/z_paddle.npy", {"x": np.zeros(2)}, allow_pickle=True)
    monkeypatch.setattr(handin, "find_pairs", functools.partial(handin.find_pairs, max_files=20))
    with pytest.raises(PipelineError, match="not all of it was read: more than 20 files"):
        cli.check(folder)


# ---------------------------------------------------------------- issue 47: what a hand-in holds

def test_the_guides_five_handed_in_pairs_are_a_complete_hand_in(tmp_path, capsys):
    """forward, metric, loss, bp_align, train_align, each with its diff log: data and lr are judged when present,
    never required (every contestant's hand-in was red for lacking them)."""
    folder = resnet_copy(tmp_path)
    for pair in ("data", "lr"):
        for path in [*folder.glob(f"{pair}_*"), *(folder / "diagnostics").glob(f"{pair}_*")]:
            path.unlink()
    assert cli.check(folder, TASK) == 0, capsys.readouterr().out
    (folder / "metric_torch.npy").unlink()
    capsys.readouterr()
    assert cli.check(folder, TASK) >= 1
    assert "\nmetric: RED" in "\n" + capsys.readouterr().out


def test_a_pair_named_with_its_tag_after_the_framework_is_the_pair(tmp_path, capsys):
    """forward_torch_resnet18.npy / forward_paddle_resnet18.npy with forward_diff.log: the forward pair."""
    folder = tmp_path / "hand_in"
    folder.mkdir()
    shutil.copy(RESNET / "forward_torch.npy", folder / "forward_torch_resnet18.npy")
    shutil.copy(RESNET / "forward_paddle.npy", folder / "forward_paddle_resnet18.npy")
    shutil.copy(RESNET / "forward_diff.log", folder / "forward_diff.log")
    assert cli.check(folder, only="forward") == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert line_of(out, "forward").startswith("forward: green") and "not handed in" not in out
    assert "forward_diff.log: every logged value is the recomputed one" in out


def test_a_file_of_more_keys_than_a_pair_holds_is_refused_as_it_is_read(tmp_path, monkeypatch):
    """A data pair of 1,000,000 one-value keys (two 44 MB files) took 120-167 s and 2.1 GB, growing with the key
    count: a file's arrays are counted as they are built, and more than fileio.MAX_ARRAYS is one line (1,000,000
    keys: refused in 5 s, 0.1 GB)."""
    from portcheck.core import fileio
    monkeypatch.setattr(fileio, "MAX_ARRAYS", 1000)
    for side in ("torch", "paddle"):
        np.save(tmp_path / f"data_{side}.npy", {f"k{i}": np.array([float(i)]) for i in range(1001)}, allow_pickle=True)
    with pytest.raises(PipelineError, match="more than 1000 arrays: a reprod_log pair holds hundreds of keys"):
        fileio.load_npy(tmp_path / "data_torch.npy")
    np.save(tmp_path / "data_torch.npy", {f"k{i}": np.array([float(i)]) for i in range(1000)}, allow_pickle=True)
    assert len(fileio.load_npy(tmp_path / "data_torch.npy")) == 1000


@pytest.mark.parametrize("epsilon, green", [(1e-8, True), (1e-6, False)], ids=["the same AdamW", "epsilon 1e-6"])
def test_a_hand_ins_bp_align_carries_what_its_check_judged(tmp_path, capsys, epsilon, green):
    """issue 47: a bp_align of losses alone let an AdamW epsilon 1e-6 against 1e-8, red in-process, be green from
    the folder. handin.bp_align carries each step's loss, lr and a digest of the update (record_backward's
    weights/<i>), and the checker re-derives the in-process verdict from the folder."""
    torch, paddle = pytest.importorskip("torch"), pytest.importorskip("paddle")
    from portcheck import convert, judge_backward, record_backward
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    p = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 3))
    convert(t, p)
    rng = np.random.RandomState(0)
    x, y = rng.rand(4, 8).astype(np.float32), rng.randint(0, 3, 4).astype(np.int64)
    rt = record_backward(t, x, y, torch.nn.functional.cross_entropy,
                         lambda ps: torch.optim.AdamW(ps, lr=1e-2, eps=1e-8), steps=5)
    rp = record_backward(p, x, y, paddle.nn.functional.cross_entropy,
                         lambda ps: paddle.optimizer.AdamW(learning_rate=1e-2, parameters=ps, epsilon=epsilon), steps=5)
    assert judge_backward(rt, rp).passed == green
    handin.save_side(tmp_path, "bp_align", "torch", handin.bp_align(rt), {"inputs": "x"}, "pt",
                     exact=handin.bp_align(rt, exact=True))
    handin.save_side(tmp_path, "bp_align", "paddle", handin.bp_align(rp), {"inputs": "x"}, "pd")
    assert sorted(np.load(tmp_path / "bp_align_paddle.npy", allow_pickle=True).item())[:3] == ["loss_0", "loss_1", "loss_2"]
    assert handin.judge_and_log(tmp_path, "bp_align", after_steps=True, top=tmp_path / "log_reprod").passed == green
    assert cli.check(tmp_path / "log_reprod", only="bp_align") == (0 if green else 1)
    line = line_of(capsys.readouterr().out, "bp_align")
    assert green or "measured RED (failed: weights_0" in line, line


@pytest.mark.parametrize("momentum, green", [(0.9, True), (0.1, False)], ids=["Paddle's 0.9", "torch's 0.1 copied"])
def test_a_hand_ins_bp_align_carries_batchnorms_running_means(tmp_path, capsys, momentum, green):
    """A BatchNorm momentum copied from torch (Paddle's m is torch's 1 - m) moves the running means alone: in train
    mode every loss, gradient and weight stays the same, so a bp_align of those was green from the folder while
    judge_backward, which judges the statistics by name, was red. It carries each step's running-mean digest too
    (running_<i>, backward.running_means)."""
    torch, paddle = pytest.importorskip("torch"), pytest.importorskip("paddle")
    from portcheck import convert, judge_backward, record_backward
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    p = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.BatchNorm1D(16, momentum=momentum), paddle.nn.ReLU(),
                             paddle.nn.Linear(16, 3))
    convert(t, p)
    rng = np.random.RandomState(0)
    x, y = rng.rand(8, 8).astype(np.float32), rng.randint(0, 3, 8).astype(np.int64)
    rt = record_backward(t.train(), x, y, torch.nn.functional.cross_entropy,
                         lambda ps: torch.optim.SGD(ps, lr=0.1), steps=3)
    rp = record_backward(p.train(), x, y, paddle.nn.functional.cross_entropy,
                         lambda ps: paddle.optimizer.SGD(0.1, parameters=ps), steps=3)
    assert judge_backward(rt, rp).passed == green
    handin.save_side(tmp_path, "bp_align", "torch", handin.bp_align(rt), {"inputs": "x"}, "pt",
                     exact=handin.bp_align(rt, exact=True))
    handin.save_side(tmp_path, "bp_align", "paddle", handin.bp_align(rp), {"inputs": "x"}, "pd")
    assert {"running_0", "running_2"} <= set(np.load(tmp_path / "bp_align_paddle.npy", allow_pickle=True).item())
    assert handin.judge_and_log(tmp_path, "bp_align", after_steps=True, top=tmp_path / "log_reprod").passed == green
    assert cli.check(tmp_path / "log_reprod", only="bp_align") == (0 if green else 1)
    line = line_of(capsys.readouterr().out, "bp_align")
    assert green or "measured RED (failed: running_" in line, line


@pytest.mark.parametrize("epsilon, green", [(1e-8, True), (1e-6, False)], ids=["the same Adam", "epsilon 1e-6"])
def test_a_weight_under_two_names_is_one_in_bp_align(tmp_path, capsys, epsilon, green):
    """Paddle's LSTM lists each weight twice (weight_ih_l0 and 0.cell.weight_ih: one tensor), torch's once: the
    update digest counted it twice on the Paddle side, a correct port red at weights_0's shape. Each tensor is
    counted once; an Adam epsilon planted beside it stays red there."""
    torch, paddle = pytest.importorskip("torch"), pytest.importorskip("paddle")
    from portcheck import convert, record_backward

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = torch.nn.LSTM(4, 8, batch_first=True), torch.nn.Linear(8, 3)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    class Paddle(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = paddle.nn.LSTM(4, 8), paddle.nn.Linear(8, 3)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])
    torch.manual_seed(0)
    t, p = Torch(), Paddle()
    convert(t, p)
    rng = np.random.RandomState(0)
    x, y = rng.rand(4, 5, 4).astype(np.float32), rng.randint(0, 3, 4).astype(np.int64)
    rt = record_backward(t, x, y, torch.nn.functional.cross_entropy, lambda ps: torch.optim.Adam(ps, lr=1e-2), steps=3)
    rp = record_backward(p, x, y, paddle.nn.functional.cross_entropy,
                         lambda ps: paddle.optimizer.Adam(1e-2, parameters=ps, epsilon=epsilon), steps=3)
    assert len(rp["weights/0"]) == len(rt["weights/0"]) == 6  # weight_ih, weight_hh, bias_ih, bias_hh, head's two
    handin.save_side(tmp_path, "bp_align", "torch", handin.bp_align(rt), {"inputs": "x"}, "pt",
                     exact=handin.bp_align(rt, exact=True))
    handin.save_side(tmp_path, "bp_align", "paddle", handin.bp_align(rp), {"inputs": "x"}, "pd")
    assert handin.judge_and_log(tmp_path, "bp_align", after_steps=True, top=tmp_path / "log_reprod").passed == green
    assert cli.check(tmp_path / "log_reprod", only="bp_align") == (0 if green else 1)
    assert green or "measured RED (failed: " in line_of(capsys.readouterr().out, "bp_align")


def test_compare_backward_refuses_a_bound_that_is_no_number_before_training():
    from portcheck import compare_backward
    torch, paddle = pytest.importorskip("torch"), pytest.importorskip("paddle")
    t, p = models(lambda y: y, lambda y: y)
    with pytest.raises(PipelineError, match="mean_bound='1e-2': give a finite number"):
        compare_backward(t, p, X, np.zeros(2, np.int64), (torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy),
                         (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps)),
                         mean_bound="1e-2")


def test_reprod_logs_own_wrapped_figure_in_a_diff_log_is_held_as_written(tmp_path, capsys):
    """The guide's mean is recomputed on the exact integers (red), but a contestant's log holds what reprod_log
    itself computed (a wrapped -64): that is its honest figure, not an edit."""
    folder = contestant(tmp_path, {"data": ({"ids": np.array([-128, 0], np.int8)}, {"ids": np.array([0, 0], np.int8)})})
    (folder / "data_diff.log").write_text("[2026/11/25 10:00:00] root INFO: ids: \n[2026/11/25 10:00:00] root INFO: "
                                          "\tmean diff: check passed: True, value: -64.0, threshold: 1e-06\n"
                                          "[2026/11/25 10:00:00] root INFO: diff check passed\n")
    assert cli.check(folder, only="data") == 1
    out = capsys.readouterr().out
    assert "guide RED" in line_of(out, "data") and "reprod_log's own int8 - int8 in int8 wraps" in out
    assert "data_diff.log: every logged value is the recomputed one (1 keys)" in out, out
