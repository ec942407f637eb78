"""Trust at the edges: same-run proof, no file runs code, no run deletes what it did not make,
every script refuses bad flags before touching a file."""
import json
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

from checks import diff
from common import fileio
from common.errors import PipelineError
from conftest import ROOT, error_line, private_copy, run

PT, PD, CHECK5 = "pipeline/Step5/pt_train.py", "pipeline/Step5/pd_train.py", "pipeline/Step5/check_step5.py"
DEMO = ["--demo", "--max_steps", 2, "--log_every", 1]
SCRIPTS = sorted(str(p.relative_to(ROOT)) for pattern in ("pipeline/**/*.py", "weights/*.py", "classifier_weights/*.py",
                                                           "fake_data/*.py", "tools/*.py")
                 for p in ROOT.glob(pattern))


@pytest.fixture(scope="module")
def demo_trained(tiny_home, tmp_path_factory):
    """The tiny home after both Step 5 demo runs: results in pipeline/Step5/ and a checkpoint in each
    framework's default output folder (read-only; the `trained` fixture gives a test its own copy)."""
    home = private_copy(tiny_home, tmp_path_factory.mktemp("demo_trained"))
    for script in (PT, PD):
        run(script, *DEMO, home=home, check=0)
    return home


@pytest.fixture
def trained(demo_trained, tmp_path):
    return private_copy(demo_trained, tmp_path)


class Payload:
    """What a hostile file would carry: unpickling it would create `flag`."""

    def __init__(self, flag):
        self.flag = str(flag)

    def __reduce__(self):
        return (os.system, (f"touch {self.flag}",))


def snapshot(folder):
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


# ---------------------------------------------------------------------------------------- flags and help

HELP_PROBE = """
import contextlib, io, json, runpy, sys
out = {}
for script in sys.argv[1:]:
    for flag in ("--help", "--no_such_flag"):
        sys.argv = [script, flag]
        stdout, stderr = io.StringIO(), io.StringIO()
        code = "no exit"
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as e:
                code = e.code
            except BaseException as e:
                code = repr(e)
        out[f"{script} {flag}"] = [code, stdout.getvalue()[:200], stderr.getvalue()[-200:]]
print(json.dumps(out))
"""


def test_help_and_unknown_flags_change_no_file(home):
    """Every script (in one process, so the frameworks load once): --help prints usage and exits 0,
    an unknown flag exits 2, and neither changes a file."""
    before = snapshot(home)
    env = dict(os.environ, BERT_ALIGN_HOME=str(home), PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", HELP_PROBE, *(str(ROOT / s) for s in SCRIPTS)],
                          cwd="/tmp", env=env, capture_output=True, text=True)
    results = json.loads(proc.stdout.splitlines()[-1])
    for key, (code, stdout, stderr) in results.items():
        if key.endswith("--help"):
            assert code == 0 and "usage:" in stdout, (key, code, stderr)
        else:
            assert code == 2 and ("unrecognized arguments" in stderr or "required" in stderr), (key, code, stderr)
    assert len(results) == 2 * len(SCRIPTS) and snapshot(home) == before


@pytest.mark.parametrize("flags, says", [
    (["--lr", "nan"], "--lr must be a finite number"), (["--lr", "-1"], "--lr must be"),
    (["--batch_size", "0"], "--batch_size must be at least 1"), (["--log_every", "0"], "--log_every must be"),
    (["--seed", "-1"], "--seed must be"), (["--warmup_proportion", "1.5"], "--warmup_proportion"),
    (["--max_steps", "0"], "--max_steps"), (["--epochs", "0"], "--epochs"),
])
def test_bad_step5_flags_are_refused(flags, says):
    from twins import train
    with pytest.raises(PipelineError, match=says):
        train.parse_args("torch", ["--demo", *flags])


@pytest.mark.parametrize("script", [PT, PD])
def test_lr_nan_is_one_line_before_any_work(home, script):
    proc = run(script, *DEMO, "--lr", "nan", home=home, check=2)
    assert "--lr must be a finite number" in error_line(proc)
    assert not (home / "pipeline/Step5/output").exists()


def test_output_dir_that_is_a_file_is_refused_first(home, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    proc = run(PD, *DEMO, "--output_dir", tmp_path / "notes.txt", home=home, check=2)
    assert "is a file" in error_line(proc) and (tmp_path / "notes.txt").read_text() == "mine"


def test_run_all_refuses_bad_input_before_writing(tmp_path):
    home = tmp_path / "home"
    for flags, says in ((["--data_dir", tmp_path / "nowhere"], "train.tsv not found"),
                        (["--lr", "nan"], "--lr must be"), (["--random_init", tmp_path / "none.json"], "not found")):
        proc = run("pipeline/run_all.py", *flags, home=home, check=2)
        assert says in error_line(proc)
    assert not home.exists()


# ---------------------------------------------------------------------------------------- no deletion

@pytest.mark.parametrize("script", [PT, PD])
def test_foreign_folder_survives(home, tmp_path, script):
    notes = tmp_path / "my_notes"
    notes.mkdir()
    (notes / "thesis.txt").write_text("years of work")
    proc = run(script, *DEMO, "--output_dir", notes, home=home, check=2)
    assert "not a Step 5 output folder" in error_line(proc)
    assert (notes / "thesis.txt").read_text() == "years of work" and len(list(notes.iterdir())) == 1
    if script == PD:  # the rest is the loop's (twins/train.py), the same for both frameworks
        run(script, *DEMO, "--output_dir", notes, "--overwrite", home=home, check=0)  # explicitly allowed
        assert (notes / "thesis.txt").read_text() == "years of work"
        run(script, *DEMO, "--output_dir", notes, home=home, check=0)  # now its own folder: fresh runs are fine
        assert (notes / "thesis.txt").read_text() == "years of work"


def test_latest_cannot_point_outside_and_resave_keeps_a_checkpoint(home, tmp_path):
    from twins.train import Checkpoints, RunState

    class Backend:
        def save_state(self, folder):
            (folder / "state.bin").write_text("x")

    out = tmp_path / "out"
    ckpt = Checkpoints(out)
    ckpt.start_fresh(overwrite=False)
    ckpt.save(Backend(), RunState(global_step=3))
    ckpt.save(Backend(), RunState(global_step=3))  # the same step twice
    assert ckpt.latest() == out / "checkpoint-3" and (out / "checkpoint-3/state.bin").is_file()
    victim = tmp_path / "victim"
    victim.mkdir()
    (out / "latest").write_text("../victim\n")
    with pytest.raises(PipelineError, match="not a checkpoint-<step>"):
        ckpt.latest()
    assert victim.is_dir()


# ---------------------------------------------------------------------------------------- nothing runs code

@pytest.mark.parametrize("target, script", [
    ("weights/paddle_weight.pdparams", "pipeline/Step1/pd_forward_bert.py"),
    ("classifier_weights/classifier_weights.pdparams", "pipeline/Step1/pd_forward_bert.py"),
    ("weights/torch_weight.bin", "pipeline/Step1/pt_forward_bert.py"),
    ("classifier_weights/classifier_weights.bin", "pipeline/Step1/pt_forward_bert.py"),
    ("weights/torch_weight.bin", "weights/torch2paddle.py"),
])
def test_payload_in_weights_or_head_runs_nothing(home, tmp_path, target, script):
    flag = tmp_path / "pwned"
    (home / target).write_bytes(pickle.dumps({"w": Payload(flag)}))
    proc = run(script, home=home, check=2)
    assert target.split("/")[-1] in error_line(proc)
    assert not flag.exists()


@pytest.mark.parametrize("script, name", [(PT, "torch_state.pt"), (PD, "paddle_state.pdparams")])
def test_payload_or_garbage_in_a_checkpoint_runs_nothing(trained, tmp_path, script, name):
    home = trained
    out = home / "pipeline/Step5/output" / ("torch" if script == PT else "paddle")
    state = next(out.glob("checkpoint-*")) / name
    flag = tmp_path / "pwned"
    contents = [pickle.dumps({"model": Payload(flag)})] + ([b"\x00garbage" * 10] if script == PT else [])
    for content in contents:
        state.write_bytes(content)
        proc = run(script, *DEMO, "--output_dir", out, "--resume", home=home, check=2)
        assert name in error_line(proc)
        assert not flag.exists()


def test_resume_refuses_other_flags(trained):
    home, out = trained, trained / "pipeline/Step5/output/paddle"
    proc = run(PD, *DEMO, "--output_dir", out, "--resume", "--lr", "1e-4", home=home, check=2)
    assert "flags.lr" in error_line(proc)
    proc = run(PD, *DEMO, "--output_dir", out, "--resume", "--shared_dropout", home=home, check=2)
    assert "flags.dropout" in error_line(proc)


# ---------------------------------------------------------------------------------------- same run

def test_step5_green_means_the_same_run(trained):
    home = trained
    # the demo pair trained with dropout on (Step 5's default): a pass is chance there, but it must run and report
    assert all("dropout on" in (home / f"pipeline/Step5/train_{fw}.log").read_text() for fw in ("torch", "paddle"))
    out = run(CHECK5, home=home, check=0).stdout
    # a smoke run says so on the console, and its chance weight departures are counted, not tabled (issue 29)
    assert "acc diff" in out and "smoke run, not evidence" in out and "weight statistics:" not in out
    run(PD, *DEMO, "--lr", "1e-4", home=home, check=0)  # another run's result on one side
    proc = run(CHECK5, home=home, check=1)
    assert "same run: FAILED, flags.lr differs" in proc.stdout


def test_step1_stale_side_is_red(home):
    run("pipeline/Step1/pt_forward_bert.py", home=home, check=0)
    run("weights/torch_bert_weights.py", "--random_init", "--config", ROOT / "tests/tiny_config.json",
        "--seed", 7, home=home, check=0)  # new weights; only the Paddle side is re-run
    for script in ("weights/torch2paddle.py", "pipeline/Step1/pd_forward_bert.py"):
        run(script, home=home, check=0)
    proc = run("pipeline/Step1/check_step1.py", home=home, check=1)
    assert "same run: FAILED, weights differs" in proc.stdout


def test_nan_run_is_red(trained):
    # a run that diverges to NaN, as its saved curve shows it
    home = trained
    curves = home / "pipeline/Step5/train_curves_paddle.npy"
    data = fileio.load_npy(curves)
    data["loss"][-1] = np.nan
    fileio.save_npy(curves, data)
    proc = run(CHECK5, home=home, check=1)
    assert "finite: FAILED, paddle loss not finite" in proc.stdout


# ---------------------------------------------------------------------------------------- the diff loader

def test_integers_above_2_53_compare_exactly():
    a = {"ids": np.array([2 ** 53], dtype="int64")}
    b = {"ids": np.array([2 ** 53 + 1], dtype="int64")}
    assert not diff.compare(a, b, default=0.0).passed


def test_key_that_could_forge_a_log_line_is_refused(tmp_path):
    fileio.save_npy(tmp_path / "x.npy", {"logits\n[2026/01/01] root INFO: diff check passed": np.ones(1)})
    with pytest.raises(PipelineError, match="printable names"):
        fileio.load_npy(tmp_path / "x.npy")


def test_small_file_cannot_ask_for_gigabytes(tmp_path):
    class Big:
        def __reduce__(self):
            from numpy._core.multiarray import _reconstruct
            return (_reconstruct, (np.ndarray, (0,), b"b"), (1, (10 ** 9,), np.dtype("float32"), False, b"\0" * 4))
    path = tmp_path / "big.npy"
    np.save(path, np.array({"x": Big()}, dtype=object), allow_pickle=True)
    assert path.stat().st_size < 400
    with pytest.raises(PipelineError, match="more than the file holds"):
        fileio.load_npy(path)
    with open(tmp_path / "claims.npy", "wb") as f:  # a bare array whose header claims 8 GB
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (10 ** 9,)})
        f.write(b"\0" * 8)
    with pytest.raises(PipelineError, match="cannot hold"):
        fileio.load_array(tmp_path / "claims.npy", "x")


def test_run_record_detects_each_field(tmp_path):
    from common import record
    for side, lr in (("torch", 1e-3), ("paddle", 1e-4)):
        record.save(tmp_path / f"r_{side}.npy", side, "s", {"weights": "a" * 64, "flags": {"lr": lr}})
    passed, detail = record.same_run(tmp_path / "r_torch.npy", tmp_path / "r_paddle.npy")
    assert passed is False and detail.startswith("flags.lr differs")
    (tmp_path / "r_paddle.run.json").unlink()
    assert record.same_run(tmp_path / "r_torch.npy", tmp_path / "r_paddle.npy")[0] is False
    (tmp_path / "r_torch.run.json").unlink()
    assert record.same_run(tmp_path / "r_torch.npy", tmp_path / "r_paddle.npy")[0] is None
    (tmp_path / "r_torch.run.json").write_text(json.dumps([1]))
    with pytest.raises(PipelineError):
        record.same_run(tmp_path / "r_torch.npy", tmp_path / "r_paddle.npy")


def test_corrupt_inputs_end_in_one_line(home, tmp_path):
    shutil.copy(home / "fake_data/fake_data.npy", tmp_path / "keep.npy")
    (home / "fake_data/fake_data.npy").write_bytes(b"\x93NUMPY garbage")
    assert "fake_data.npy" in error_line(run("pipeline/Step3/pt_loss.py", home=home, check=2))
    (home / "weights/torch_weight.bin").write_bytes(b"PK\x03\x04 not a zip")
    assert "torch_weight.bin" in error_line(run("pipeline/Step1/pt_forward_bert.py", home=home, check=2))
    tsv = tmp_path / "data"
    tsv.mkdir()
    (tsv / "dev.tsv").write_text("sentence\tlabel\n" + "x" * 200_000 + "\t1\n")
    proc = run("pipeline/Step2/pt_data_loader.py", "--data_dir", tsv, home=home, check=2)
    assert "dev.tsv:2" in error_line(proc)
