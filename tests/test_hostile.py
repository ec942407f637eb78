"""Issue 36's families, each planted where any model's hand-in meets it: writes through a linked folder, reads
that could hang or blow up, a side that is a copy of the other, a folder not read in full, misleading errors."""
import errno
import json
import os
import shutil
import signal
import time

import numpy as np
import pytest

from portcheck import cli
from portcheck.core import fileio, record
from portcheck.pipeline import guide, handin
from portcheck.core.errors import PipelineError
from test_library import one_ulp_apart


def contestant(folder, name="forward", paddle=None, log=True):
    """A contestant's pair written with plain np.save (no run records), with reprod_log's diff log."""
    folder.mkdir(parents=True, exist_ok=True)
    t = {"logits": np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)}
    np.save(folder / f"{name}_torch.npy", t)
    if paddle is not False:
        np.save(folder / f"{name}_paddle.npy", paddle if paddle is not None else {"logits": t["logits"] + 1e-8})
    return folder


# ------------------------------------------------------------------------ 3. writes through a linked folder

def test_a_hand_in_folder_that_is_a_link_is_refused_before_the_first_write(tmp_path):
    one_ulp_apart(tmp_path / "step", "loss")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "loss_diff.log").write_text("theirs")
    (tmp_path / "log_reprod").symlink_to(foreign)
    with pytest.raises(PipelineError, match="log_reprod is a symbolic link"):
        handin.judge_and_log(tmp_path / "step", "loss", top=tmp_path / "log_reprod")
    assert sorted(p.name for p in foreign.iterdir()) == ["loss_diff.log"]
    assert (foreign / "loss_diff.log").read_text() == "theirs"
    assert not (tmp_path / "step" / "loss_diff.log").exists()  # nothing written before the refusal


@pytest.mark.parametrize("where", ["log_reprod/diagnostics", "a/b"])
def test_no_write_goes_through_a_link_in_any_component(tmp_path, where):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    link = tmp_path / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(foreign)
    with pytest.raises(PipelineError, match="symbolic link"):
        fileio.save_npy(link / "x" / "y.npy", {"a": np.zeros(2)})
    with pytest.raises(PipelineError, match="symbolic link"):
        fileio.writable(link, folder=True)
    assert not list(foreign.iterdir())
    fileio.save_npy(tmp_path / "real" / "y.npy", {"a": np.zeros(2)})  # the clean case writes


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_linked_file_among_the_hand_in_targets_is_refused_before_the_first_write(tmp_path):
    one_ulp_apart(tmp_path / "step", "lr")
    one_ulp_apart(tmp_path / "step", "bp_align")
    top = tmp_path / "log_reprod"
    (top / "diagnostics").mkdir(parents=True)
    foreign = tmp_path / "theirs.json"
    foreign.write_text("theirs")
    (top / "diagnostics" / "bp_align_torch64.run.json").symlink_to(foreign)  # the second pair's last companion
    before = snapshot(tmp_path / "step")
    with pytest.raises(PipelineError, match="bp_align_torch64.run.json is a symbolic link"):
        handin.check_outputs(tmp_path / "step", ["lr", "bp_align"], top)  # what check_step4 calls first
    with pytest.raises(PipelineError, match="bp_align_torch64.run.json is a symbolic link"):
        handin.judge_and_log(tmp_path / "step", "bp_align", threshold=1e-4, top=top)
    assert snapshot(tmp_path / "step") == before and foreign.read_text() == "theirs"
    assert sorted(p.name for p in top.rglob("*")) == ["bp_align_torch64.run.json", "diagnostics"]
    (top / "diagnostics" / "bp_align_torch64.run.json").unlink()  # the clean case hands both in
    handin.check_outputs(tmp_path / "step", ["lr", "bp_align"], top)
    assert handin.judge_and_log(tmp_path / "step", "bp_align", threshold=1e-4, top=top).passed
    assert (top / "diagnostics" / "bp_align_torch64.run.json").is_file()


def test_a_side_whose_run_record_is_a_link_writes_nothing(tmp_path):
    foreign = tmp_path / "theirs.json"
    foreign.write_text("theirs")
    (tmp_path / "loss_torch64.run.json").symlink_to(foreign)
    with pytest.raises(PipelineError, match="loss_torch64.run.json is a symbolic link"):
        handin.save_side(tmp_path, "loss", "torch", {"loss": np.ones(1, np.float32)}, {}, "test",
                         exact={"loss": np.ones(1)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loss_torch64.run.json", "theirs.json"]


@pytest.mark.parametrize("error, where", [(errno.ENOSPC, "write"), (errno.EPERM, "replace")])
def test_a_full_disk_or_a_refused_rename_is_one_line_and_the_old_file_stays(tmp_path, monkeypatch, error, where):
    path = tmp_path / "loss_diff.log"
    path.write_text("the old log")

    def write(tmp):
        with open(tmp, "w") as f:
            f.write("half of the new")
        if where == "write":
            raise OSError(error, os.strerror(error))
    if where == "replace":
        def refused(*_):
            raise PermissionError(error, os.strerror(error))
        monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(PipelineError, match=rf"^{re_escape(str(path))} could not be written \({os.strerror(error)}\)"):
        fileio.atomic_write(path, write)
    monkeypatch.undo()
    assert path.read_text() == "the old log" and [p.name for p in tmp_path.iterdir()] == ["loss_diff.log"]
    fileio.atomic_write(path, lambda tmp: open(tmp, "w").write("the new log"))  # the clean case replaces it
    assert path.read_text() == "the new log"


# ------------------------------------------------------------------------------- 4. hangs and memory

def test_a_fifo_named_as_a_diff_log_is_refused_not_waited_on(tmp_path, capsys):
    folder = contestant(tmp_path / "hand_in")
    os.mkfifo(folder / "forward_diff.log")
    start = time.monotonic()
    assert cli.check(folder, only="forward") == 1
    assert time.monotonic() - start < 30
    assert "not a regular file" in capsys.readouterr().out


@pytest.fixture
def no_hang():
    """A read that would block on a FIFO fails the test in 20 s instead of hanging the suite."""
    def timeout(*_):
        pytest.fail("blocked on a read")  # not an OSError, which the code under test may catch
    old = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("name", ["mine_paddle.npy", "diagnostics/mine_paddle.run.json",
                                  "diagnostics/mine_diff.json"])
def test_a_fifo_named_as_a_result_is_refused_not_waited_on(tmp_path, capsys, no_hang, name):
    one_ulp_apart(tmp_path / "step", "mine")
    handin.judge_and_log(tmp_path / "step", "mine", threshold=1e-4, top=tmp_path / "log_reprod")
    assert cli.check(tmp_path / "log_reprod", {"mine": 1e-4}, only="mine") == 0, capsys.readouterr().out
    (tmp_path / "log_reprod" / name).unlink()
    os.mkfifo(tmp_path / "log_reprod" / name)
    assert cli.check(tmp_path / "log_reprod", {"mine": 1e-4}, only="mine") >= 1
    out = capsys.readouterr().out
    assert "mine: RED" in out
    assert {"mine_paddle.npy": "mine_paddle.npy is a FIFO, not a regular file",
            "diagnostics/mine_paddle.run.json": "the paddle result has no run record",
            "diagnostics/mine_diff.json": "mine_diff.json is unreadable"}[name] in out
    if name.endswith(".npy"):
        assert "mine_paddle.npy is a FIFO, not a regular file" in out
        with pytest.raises(PipelineError, match="not a regular file"):
            fileio.load_npy(tmp_path / "log_reprod" / name)


def test_a_fifo_given_as_the_pair_log_is_refused_not_waited_on(tmp_path, no_hang):
    folder = contestant(tmp_path / "hand_in")
    os.mkfifo(tmp_path / "my.log")
    with pytest.raises(PipelineError, match="was not written by this command"):
        cli.pair(folder / "forward_torch.npy", folder / "forward_paddle.npy", log=tmp_path / "my.log")
    assert cli.pair(folder / "forward_torch.npy", folder / "forward_paddle.npy", log=tmp_path / "new.log") == 0


def test_arrays_shared_through_the_pickle_memo_count_at_every_key(tmp_path):
    shared = np.zeros(2000, np.float32)
    np.save(tmp_path / "memo.npy", {f"k{i}": shared for i in range(20000)})  # 0.2 MB on disk, 160 MB as keys
    with pytest.raises(PipelineError, match="shared between keys"):
        fileio.load_npy(tmp_path / "memo.npy")
    np.save(tmp_path / "twice.npy", {"a": shared, "b": shared})  # one repeat is a hand-in, not an attack
    assert sorted(fileio.load_npy(tmp_path / "twice.npy")) == ["a", "b"]


@pytest.mark.parametrize("steps", [0, -1, 2.5, True, 10 ** 9, "3"])
def test_steps_out_of_bounds_is_one_line_naming_steps(steps):
    import torch
    from portcheck import record_backward
    model = torch.nn.Linear(2, 1)
    with pytest.raises(PipelineError, match=r"^steps="):
        record_backward(model, np.zeros((1, 2), np.float32), np.zeros((1, 1), np.float32),
                        torch.nn.functional.mse_loss, lambda p: torch.optim.SGD(p, 0.1), steps=steps)


def test_a_forward_that_changes_its_input_in_place_changes_neither_the_caller_nor_the_verdict():
    import paddle
    import torch
    from portcheck import compare_forward, convert

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            x.mul_(2)  # in place, on the tensor torch.from_numpy shares with its array
            return self.fc(x)

    class PaddleNet(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x * 2)

    torch.manual_seed(0)
    pt, pd = TorchNet().eval(), PaddleNet().eval()
    pd.set_state_dict(convert(pt, pd))
    x = np.random.RandomState(0).randn(2, 4).astype(np.float32)
    before = x.copy()
    report = compare_forward(pt, pd, x)
    assert np.array_equal(x, before)
    assert report.passed, report.table()


# --------------------------------------------------------------------------------- 2. one side copied

@pytest.mark.parametrize("how", ["symlink", "hard link", "byte copy"])
def test_a_paddle_file_that_is_the_torch_file_is_red(tmp_path, how, capsys):
    folder = contestant(tmp_path / "hand_in", paddle=False)
    t, p = folder / "forward_torch.npy", folder / "forward_paddle.npy"
    {"symlink": lambda: p.symlink_to(t.name), "hard link": lambda: os.link(t, p),
     "byte copy": lambda: shutil.copyfile(t, p)}[how]()
    assert cli.check(folder, only="forward") == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("forward: RED | guide RED (one side is a copy of the other: the Paddle file is")
    assert "| strict RED (one side is a copy of the other) [PC103] |" in line
    assert cli.pair(t, p) == 1
    out = capsys.readouterr().out
    assert "guide RED (one side is a copy of the other" in out and "strict RED (one side is a copy" in out


def test_a_small_models_logits_equal_to_the_bit_are_its_own_where_each_record_binds_its_side(tmp_path, capsys):
    """Two layers, one matmul each: a correct port's logits can be torch's to the bit. Each side's sealed run record
    binding its own file to its own framework makes them that run's, green; torch's file copied over Paddle's own
    (Paddle's record then describes another file), or with torch's record beside it, is still a copy, red."""
    from portcheck.core import record
    folder = tmp_path / "hand_in"
    folder.mkdir()
    logits = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    depends = {"weights": "a" * 64, "inputs": "b" * 64}
    for side, values in (("torch", logits), ("paddle", logits.copy())):
        np.save(folder / f"forward_{side}.npy", {"logits": values})
        record.save(folder / f"forward_{side}.npy", side, f"{side}_forward.py", depends)
    assert cli.check(folder, only="forward") == 0, capsys.readouterr().out
    assert "copy" not in capsys.readouterr().out
    t, p = folder / "forward_torch.npy", folder / "forward_paddle.npy"
    np.save(p, {"logits": np.nextafter(logits, 2)})  # Paddle's own run one ulp away, its record bound to it
    record.save(p, "paddle", "paddle_forward.py", depends)
    assert cli.check(folder, only="forward") == 0
    capsys.readouterr()
    shutil.copyfile(t, p)
    assert cli.check(folder, only="forward") == 1
    assert "one side is a copy of the other" in capsys.readouterr().out
    shutil.copyfile(record.path_for(t), record.path_for(p))
    assert cli.check(folder, only="forward") == 1
    assert "RED" in capsys.readouterr().out


def test_an_honest_contestant_pair_and_an_exact_pair_equal_to_the_bit_stay_green(tmp_path):
    folder = contestant(tmp_path / "hand_in")
    lr = {"lr": np.linspace(0, 1e-3, 100)}  # a schedule: equal to the bit by design
    np.save(folder / "lr_torch.npy", lr)
    np.save(folder / "lr_paddle.npy", lr)
    assert cli.check(folder, only="forward,lr") == 0


# ------------------------------------------------------------------- 1. green with less than the folder

def test_a_red_pair_deeper_than_the_walk_makes_the_folder_red(tmp_path, capsys):
    folder = contestant(tmp_path / "hand_in")
    contestant(folder / "a" / "b" / "c" / "d" / "e", name="loss",
               paddle={"logits": np.ones((8, 8), np.float32)})  # red, and 5 levels down
    assert cli.check(folder, only="forward") == 1
    assert "not all of the folder was read" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["junk", "unreadable"])
def test_a_red_pair_the_walk_did_not_reach_makes_the_folder_red(tmp_path, capsys, monkeypatch, where):
    folder = contestant(tmp_path / "hand_in")
    contestant(folder / "z", name="loss", paddle={"logits": np.ones((8, 8), np.float32)})  # red, read last
    if where == "junk":
        for i in range(20001):
            (folder / f"junk{i:05d}.txt").touch()
    else:  # root reads any folder: the permission error is planted where os.walk meets it
        scandir = os.scandir

        def refused(path="."):
            if os.fspath(path).endswith("/z"):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
            return scandir(path)
        monkeypatch.setattr(os, "scandir", refused)
    assert cli.check(folder, only="forward") == 1
    out = capsys.readouterr().out
    assert {"junk": "not all of the folder was read: more than 20000 files",
            "unreadable": "not all of the folder was read: z could not be read (Permission denied)"}[where] in out
    assert "loss: " not in out  # never judged: the exit is what says so


def test_another_pairs_files_in_a_pairs_place_are_red_when_a_record_names_them(tmp_path, capsys):
    step, top = tmp_path / "step", tmp_path / "log_reprod"
    for pair in ("mine", "yours"):
        one_ulp_apart(step, pair)
        handin.judge_and_log(step, pair, threshold=1e-4, top=top)
    assert cli.check(top, {"mine": 1e-4, "yours": 1e-4}, only="mine,yours") == 0, capsys.readouterr().out
    capsys.readouterr()
    for f in list(top.rglob("yours_*")):  # every file of yours over mine's, but mine's verdict
        if not f.name.endswith("_diff.json"):
            shutil.copyfile(f, f.with_name(f.name.replace("yours", "mine")))
    both = {"mine": 1e-4, "yours": 1e-4}
    assert cli.check(top, both, only="mine,yours") == 2  # the pair, and the folder against its manifest (PC151)
    out = capsys.readouterr().out
    assert "the torch result mine_torch.npy has the run record of yours_torch.npy" in out
    assert "handed in: RED | " in out and " was changed since it was handed in" in out
    shutil.copyfile(top / "diagnostics" / "yours_diff.json", top / "diagnostics" / "mine_diff.json")
    assert cli.check(top, both, only="mine,yours") == 2
    assert "mine_diff.json is the verdict of 'yours'" in capsys.readouterr().out


def test_a_contestants_pair_holding_another_pairs_keys_is_flagged(tmp_path, capsys):
    folder = tmp_path / "hand_in"
    folder.mkdir()
    logits, loss = {"logits": np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)}, {"loss": np.ones(1, np.float32)}

    def hand_in(**pairs):
        for pair, data in pairs.items():
            np.save(folder / f"{pair}_torch.npy", data)
            np.save(folder / f"{pair}_paddle.npy", {k: v + np.float32(1e-8) for k, v in data.items()})
        cli.check(folder, only="forward,loss")
        return capsys.readouterr().out
    assert "flagged: forward holds key 'loss', the name of another pair here" in hand_in(forward=loss, loss=logits)
    assert "flagged: forward, loss hold the same keys (loss)" in hand_in(forward=loss, loss=loss)
    assert "flagged" not in hand_in(forward=logits, loss=loss)  # the clean case


# ------------------------------------------------------------------------------------- 5. Chinese users

def test_an_honest_gbk_diff_log_with_a_chinese_key_is_held_as_written(tmp_path, capsys):
    folder = tmp_path / "hand_in"
    folder.mkdir()
    t = {"损失": np.array([0.5], np.float32)}
    p = {"损失": np.array([0.5000001], np.float32)}
    np.save(folder / "loss_torch.npy", t)
    np.save(folder / "loss_paddle.npy", p)
    mean = float(np.abs(t["损失"] - p["损失"]).mean())
    text = (f"[2026/11/24 10:00:00] root INFO: 损失: \n"
            f"[2026/11/24 10:00:00] root INFO: \tmean diff: check passed: True, value: {mean}, threshold: 1e-06\n"
            f"[2026/11/24 10:00:00] root INFO: diff check passed\n")
    (folder / "loss_diff.log").write_bytes(text.encode("gbk"))
    assert cli.check(folder, only="loss") == 0, capsys.readouterr().out
    assert "every logged value is the recomputed one" in capsys.readouterr().out


def test_a_contestants_own_diagnostics_folder_is_theirs_not_ours(tmp_path, capsys):
    folder = contestant(tmp_path / "hand_in")
    own = folder / "diagnostics"  # their per-layer dumps and their own tool's JSON, no run record
    own.mkdir()
    for i in range(7):
        (own / f"layer{i}_diff.json").write_text(json.dumps({"name": f"layer{i}", "threshold": 1e-4, "passed": True}))
    (own / "forward_diff.json").write_text(json.dumps({"name": "forward", "threshold": 1e-3, "max": 2e-8}))
    contestant(own, name="layer0")
    assert cli.check(folder, only="forward") == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "RED" not in out and "diagnostics/layer0_torch.npy" not in out  # their pair is judged as any other
    assert out.startswith("forward: green") and "layer0: green" in out
    one_ulp_apart(tmp_path / "step", "mine")  # ours: diagnostics/ holds run records, and a judged pair is listed
    handin.judge_and_log(tmp_path / "step", "mine", threshold=1e-4, top=tmp_path / "log_reprod")
    (tmp_path / "log_reprod" / "diagnostics" / "gone_diff.json").write_text(json.dumps({"name": "gone", "threshold": 1e-4}))
    assert cli.check(tmp_path / "log_reprod", {"mine": 1e-4}, only="mine") == 2  # and the manifest's line (PC151)
    out = capsys.readouterr().out
    assert "gone: RED | judged" in out and "diagnostics/gone_diff.json is not in the list of what was handed in" in out


# ------------------------------------------------------------------------------------ 6. one-line errors

def two_nets():
    import paddle
    import torch
    torch.manual_seed(0)
    pt = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2), torch.nn.Linear(2, 2))
    pd = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.ReLU(), paddle.nn.Linear(4, 2), paddle.nn.Linear(2, 2))
    return pt.eval(), pd.eval()


def test_a_name_map_that_misses_modules_names_them_all_at_once():
    from portcheck import convert
    pt, pd = two_nets()
    with pytest.raises(PipelineError, match=r"^name_map entries naming no module: ") as e:  # compare_forward's line
        convert(pt, pd, {"0": "layer0", "2": "layer2", "3": "layer3"})
    assert all(f"'{i}': 'layer{i}' (the Paddle model has no module 'layer{i}')" in str(e.value) for i in (0, 2, 3))


@pytest.mark.parametrize("name_map, says", [
    ({3: "0"}, "a dict maps torch name prefixes"),
    ([(r"^(\d)$", r"\2")], "name_map failed on '0': error: invalid group reference"),
    (lambda name: [name], "name_map gave list"),
    (lambda name: {"x": "y"}[name], "name_map failed on '0': KeyError"),
])
def test_a_name_map_that_fails_is_one_line_naming_the_module(name_map, says):
    from portcheck import compare_forward, convert
    pt, pd = two_nets()
    for call in (lambda: convert(pt, pd, name_map),
                 lambda: compare_forward(pt, pd, np.zeros((1, 4), np.float32), name_map)):
        with pytest.raises(PipelineError, match=re_escape(says)):
            call()


def re_escape(text):
    import re
    return re.escape(text)


def test_swapped_models_and_a_non_model_are_named():
    from portcheck import compare_backward, compare_forward, convert, judge_forward, record_forward
    pt, pd = two_nets()
    x = np.zeros((1, 4), np.float32)
    for call in (lambda: convert(pd, pt), lambda: compare_forward(pd, pt, x),
                 lambda: compare_backward(pd, pt, x, x[:, :2], (None, None), (None, None))):
        with pytest.raises(PipelineError, match="the models are swapped: pass the torch model first"):
            call()
    with pytest.raises(PipelineError, match="the records are swapped"):
        judge_forward(record_forward(pd, x), record_forward(pt, x))
    with pytest.raises(PipelineError, match="paddle_model is a dict, not a paddle.nn.Layer"):
        compare_forward(pt, {}, x)
    assert compare_forward(pt, pd.__class__(*[l for l in pd]), x) is not None  # the clean order runs


def test_a_judged_pair_whose_files_are_deleted_is_red(tmp_path, capsys):
    one_ulp_apart(tmp_path / "step", "mine_a")
    handin.judge_and_log(tmp_path / "step", "mine_a", threshold=1e-4, top=tmp_path / "log_reprod")
    one_ulp_apart(tmp_path / "step", "mine_b")
    handin.judge_and_log(tmp_path / "step", "mine_b", threshold=1e-4, top=tmp_path / "log_reprod")
    assert cli.check(tmp_path / "log_reprod", {"mine_a": 1e-4, "mine_b": 1e-4}, only="mine_a,mine_b") == 0
    for f in (tmp_path / "log_reprod").glob("mine_a_*"):
        f.unlink()
    assert cli.check(tmp_path / "log_reprod", {"mine_b": 1e-4}, only="mine_a,mine_b") == 2  # and the manifest's
    out = capsys.readouterr().out
    assert "mine_a: RED | judged" in out and "mine_a_diff.log is missing since it was handed in" in out


# ------------------------------------------------------------------- 1. compare_forward compares the whole

def output_nets(torch_out, paddle_out):
    import paddle
    import torch

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return torch_out(self.fc(x))

    class PaddleNet(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(4, 3)

        def forward(self, x):
            return paddle_out(self.fc(x))

    from portcheck import convert
    torch.manual_seed(0)
    pt, pd = TorchNet().eval(), PaddleNet().eval()
    pd.set_state_dict(convert(pt, pd))
    return pt, pd


@pytest.mark.parametrize("torch_out, paddle_out, green", [
    (lambda y: (y, y * 2), lambda y: (y, y * 2), True),
    (lambda y: (y, y * 2), lambda y: y, False),                 # Paddle drops an output
    (lambda y: (y, y * 2), lambda y: (y, y * 3), False),        # the second output 1.5x
    (lambda y: {"a": y, "b": y * 2}, lambda y: (y, y * 200), False),  # a dict against a tuple, 100x
])
def test_the_models_outputs_are_compared_whole(torch_out, paddle_out, green):
    from portcheck import compare_forward
    pt, pd = output_nets(torch_out, paddle_out)
    report = compare_forward(pt, pd, np.random.RandomState(0).randn(2, 4).astype(np.float32))
    assert report.passed == green, report.table()


def test_a_comparison_that_paired_nothing_is_red():
    from portcheck import compare_forward
    pt, pd = output_nets(lambda y: y, lambda y: y)
    x = np.random.RandomState(0).randn(2, 4).astype(np.float32)
    assert compare_forward(pt, pd, x).passed
    from portcheck import judge_forward, record_forward
    t, p = record_forward(pt, x), record_forward(pd, x)
    p = {k.replace("out/", "skip/"): v for k, v in p.items()}  # a Paddle record with no module outputs
    assert not judge_forward(t, p).passed


@pytest.mark.parametrize("t, p", [({}, {}), ({"x": np.zeros(0, np.float32)}, {"x": np.zeros(0, np.float32)}),
                                  ({"x": np.zeros((0, 3), np.float32)}, {"x": np.zeros((0, 3), np.float32)})])
def test_a_pair_that_holds_nothing_to_compare_is_red(tmp_path, t, p):
    np.save(tmp_path / "forward_torch.npy", t)
    np.save(tmp_path / "forward_paddle.npy", p)
    assert not guide.guide_verdict(t, p, 1e-6).passed
    assert not guide.strict_verdict(t, p, 1e-6).passed
    assert cli.check(tmp_path, only="forward") == 1


def test_an_empty_batch_compares_nothing_and_is_red():
    from portcheck import compare_forward
    pt, pd = output_nets(lambda y: y, lambda y: y)
    report = compare_forward(pt, pd, np.zeros((0, 4), np.float32))
    assert not report.passed and "empty: nothing compared" in report.table()
    assert compare_forward(pt, pd, np.ones((1, 4), np.float32)).passed


# ------------------------------------------------------------------- 6. the user's own errors, in one line

class Lookup:
    """A torch model whose forward raises the user's own KeyError."""

    def __new__(cls):
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 2)

            def forward(self, x):
                return self.fc({"image": x}["pixels"])
        return Net()


def training(**change):
    """compare_backward's arguments for two_nets on one batch, with `change` planted."""
    import paddle
    import torch
    pt, pd = two_nets()
    pd.set_state_dict(__import__("portcheck").convert(pt, pd))
    args = dict(inputs=np.random.RandomState(0).randn(3, 4).astype(np.float32),
                targets=np.random.RandomState(1).randn(3, 2).astype(np.float32),
                loss=(torch.nn.functional.mse_loss, paddle.nn.functional.mse_loss),
                optimizer=(lambda p: torch.optim.SGD(p, 0.1), lambda p: paddle.optimizer.SGD(0.1, parameters=p)),
                scheduler=None, steps=2)
    return pt.train(), pd.train(), {**args, **change}


def broken_factory(params):
    raise ValueError("lr must be given")


@pytest.mark.parametrize("change, says", [
    ({"inputs": np.zeros((3, 4))}, r"^the torch model's forward raised: RuntimeError: mat1 and mat2 must have the same "
                                   r"dtype.*; check the inputs \(their dtype"),
    ({"targets": np.zeros(3, np.float32)}, r"^the torch loss raised: RuntimeError: The size of tensor a \(2\) must "
                                           r"match .*; check targets \(float32\[3\]\) against the model's output "
                                           r"\(float32\[3, 2\]\)"),
    ({"loss": (lambda a, b: (a - b) ** 2, lambda a, b: (a - b) ** 2)},
     r"^the torch loss gave float32\[3, 2\], not a scalar tensor: reduce it"),
    ({"optimizer": (broken_factory, broken_factory)}, r"^the torch optimizer factory raised: ValueError: lr must be given \[PC229\]$"),
    ({"scheduler": (lambda o: __import__("torch").optim.lr_scheduler.StepLR(o, 1), lambda o: 0.1)},
     r"^the paddle scheduler factory gave float 0.1, not a scheduler"),
    ({"inputs": np.zeros((0, 4), np.float32)}, r"^inputs hold an empty batch \(shape \[0, 4\]\)"),
])
def test_the_users_own_errors_in_training_are_one_line_naming_where(change, says):
    from portcheck import compare_backward
    pt, pd, args = training(**change)
    with pytest.raises(PipelineError, match=says) as e:
        compare_backward(pt, pd, **args)
    assert "\n" not in str(e.value)


def test_clean_training_with_a_scheduler_is_green():
    import paddle
    import torch
    from portcheck import compare_backward
    sched = paddle.optimizer.lr.StepDecay(0.1, 1)
    pt, pd, args = training(optimizer=(lambda p: torch.optim.SGD(p, 0.1),
                                       lambda p: paddle.optimizer.SGD(sched, parameters=p)),
                            scheduler=(lambda o: torch.optim.lr_scheduler.StepLR(o, 1), lambda o: sched))
    assert compare_backward(pt, pd, **args).passed


@pytest.mark.parametrize("inputs, says", [
    (np.zeros((1, 4)), r"^the torch model stopped before any module returned: RuntimeError: mat1 and mat2 must have "
                       r"the same dtype"),
    ({"inp": np.zeros((1, 4), np.float32)}, r"^the torch model stopped before any module returned: TypeError: "
                                            r".*unexpected keyword argument 'inp'"),
])
def test_inputs_the_model_cannot_take_are_said_not_swallowed(inputs, says):
    from portcheck import compare_forward
    pt, pd = two_nets()
    with pytest.raises(PipelineError, match=says):
        compare_forward(pt, pd, inputs)


def test_a_forward_raising_the_users_own_error_and_a_non_model_are_one_line():
    import paddle
    from portcheck import compare_forward, record_backward, record_forward, record_value
    with pytest.raises(PipelineError, match=r"^the torch model stopped before any module returned: KeyError: 'pixels'"):
        compare_forward(Lookup(), paddle.nn.Linear(4, 2), np.zeros((1, 4), np.float32))
    x = np.zeros((1, 4), np.float32)
    for call in (lambda: record_forward({"fc": None}, x), lambda: record_value("model.pt", x, sum),
                 lambda: record_backward(None, x, x, None, None)):
        with pytest.raises(PipelineError, match=r"^model is a (dict|str|NoneType), not a torch.nn.Module or a "
                                                r"paddle.nn.Layer: pass the model itself \[PC300\]$"):
            call()


@pytest.mark.parametrize("stdout", ["closed pipe", "/dev/full"])
def test_a_closed_or_full_stdout_ends_quietly_not_in_a_traceback(tmp_path, stdout):
    import subprocess
    import sys
    folder = contestant(tmp_path / "hand_in")
    cmd = [sys.executable, "-m", "portcheck", "check", str(folder), "--only", "forward"]
    if stdout == "closed pipe":
        r, w = os.pipe()
        os.close(r)  # the reader is gone before the first line: `| head -0`
        proc = subprocess.run(cmd, stdout=w, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
        os.close(w)
        assert proc.stderr == ""
    else:
        with open("/dev/full", "w") as full:
            proc = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True)
        assert proc.stderr == "error: stdout could not be written (No space left on device) [PC006]\n"
    assert proc.returncode == 141
    ok = subprocess.run(cmd, capture_output=True, text=True)  # the clean case: the verdict, exit 0
    assert ok.returncode == 0 and ok.stdout.endswith("every pair green (partial: --only forward)\n") and ok.stderr == ""


SIDE = """import sys, numpy as np
from portcheck.pipeline import handin
root, pair, side, weights = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
if weights == "fail":
    sys.exit("error: this side failed")
handin.save_side(root + "/step", pair, side, {"lr_0": np.array([0.1])}, {"weights": weights}, sys.argv[0].rsplit("/", 1)[1])
"""
CHECK = """import sys
from portcheck.pipeline import handin
root = sys.argv[1]
for pair in sys.argv[2:]:
    handin.judge_and_log(root + "/step", pair, threshold=1e-6, kind="exact", top=root + "/log_reprod")
"""


def pipeline(root, weights=("w", "w")):
    """A two-step pipeline of its own through the library's runner: pair a in Step 1, b in Step 2."""
    from portcheck.pipeline import steps
    for name, text in (("pt.py", SIDE), ("pd.py", SIDE), ("check.py", CHECK)):
        (root / name).write_text(text)
    specs = [steps.StepSpec(n, f"Step{n}", (steps.Pair(p, "pt.py", "pd.py"),), "check.py") for n, p in ((1, "a"), (2, "b"))]
    table = [steps.Step.of(spec) for spec in specs]
    for step, w in zip(table, weights):  # each side is told its framework and weights; the check its root and pair
        step.scripts = [["pt.py", str(root), step.checks[0], "torch", w], ["pd.py", str(root), step.checks[0], "paddle", w],
                        ["check.py", str(root), *step.checks]]
    return steps.run(table, root, hand_in=root / "log_reprod")


def test_a_hand_in_whose_last_run_stopped_before_a_step_is_red_at_that_steps_pairs(tmp_path, capsys):
    """A run that stops at Step 2 (a failure here; Ctrl-C and a kill alike) leaves Step 2's files of the run
    before in place: diagnostics/steps.json says so, and the checker holds them red (issue 36)."""
    assert pipeline(tmp_path)[1] is None
    assert cli.check(tmp_path / "log_reprod", only="a,b") == 0, capsys.readouterr().out
    assert json.loads((tmp_path / "log_reprod" / "diagnostics" / "steps.json").read_text())["steps"][1]["status"] == "passed"
    results, failed = pipeline(tmp_path, weights=("w", "fail"))
    assert failed and (tmp_path / "log_reprod" / "b_paddle.npy").is_file()  # the earlier run's files
    capsys.readouterr()
    assert cli.check(tmp_path / "log_reprod", only="a,b") == 1
    out = capsys.readouterr().out
    assert "b: RED" in out and "Step2 was FAILED in the last run" in out and "a: green" in out


def test_a_record_naming_another_script_than_the_step_tables_is_red(tmp_path, capsys):
    """Torch's file and record put in Paddle's place with its framework field edited: the record still names
    the torch script, and the step table's Paddle script is another."""
    pipeline(tmp_path)
    top = tmp_path / "log_reprod"
    rec = json.loads((top / "diagnostics" / "a_torch.run.json").read_text())
    shutil.copy(top / "a_torch.npy", top / "a_paddle.npy")
    (top / "diagnostics" / "a_paddle.run.json").write_text(json.dumps({**rec, "framework": "paddle", "file": "a_paddle.npy"}))
    capsys.readouterr()
    assert cli.check(top, only="a,b") == 2  # and the folder against its manifest (PC151)
    assert "the step table's paddle script is pd.py" in capsys.readouterr().out


def test_a_hand_in_mixing_runs_on_two_models_is_red(tmp_path, capsys):
    """Each pair its own same run, but Step 2 ran on other weights than Step 1: not one model's hand-in."""
    assert pipeline(tmp_path, weights=("w1", "w1"))[1] is None
    shutil.copytree(tmp_path / "log_reprod", tmp_path / "first")
    pipeline(tmp_path, weights=("w2", "w2"))
    for name in ("b_torch.npy", "b_paddle.npy", "diagnostics/b_torch.run.json", "diagnostics/b_paddle.run.json"):
        shutil.copy(tmp_path / "first" / name, tmp_path / "log_reprod" / name)  # Step 2 of the first run
    capsys.readouterr()
    assert cli.check(tmp_path / "log_reprod", only="a,b") >= 1
    assert "ran on other weights" in capsys.readouterr().out


def test_a_link_at_a_results_record_refuses_the_run_before_any_result_is_replaced(tmp_path):
    """record.save_results (every pt_/pd_ script of the BERT pipeline): all targets checked, then written."""
    out = tmp_path / "loss_torch.npy"
    fileio.save_npy(out, {"loss": np.array([1.0])})
    before = out.read_bytes()
    (tmp_path / "elsewhere.json").write_text("{}")
    record.path_for(tmp_path / "loss_torch64.npy").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(PipelineError, match="symbolic link"):
        record.save_results({out: {"loss": np.array([2.0])}, tmp_path / "loss_torch64.npy": {"loss": np.array([2.0])}},
                            "torch", "pt_loss.py", {"inputs": "x"})
    assert out.read_bytes() == before and not (tmp_path / "loss_torch64.npy").exists()
    assert (tmp_path / "elsewhere.json").read_text() == "{}"
