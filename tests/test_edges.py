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

from portcheck.core import diff, fileio
from portcheck.core.errors import PipelineError
import conftest
from conftest import ROOT, error_line, inproc, private_copy, run

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


# ---------------------------------------------------------------------------------------- the tests' runner

@pytest.mark.skipif(not conftest.FORK, reason="PORTCHECK_TESTS_FORK=0: every script a new interpreter")
def test_a_framework_imported_by_a_test_keeps_the_fork_servers(monkeypatch):
    """What a framework's import sets in this process (conftest.SET_BY_IMPORTS) is what a script's own import sets:
    its fork server still runs it. Any other change of the environment, such as a test's monkeypatch, does not."""
    forker = conftest.server("torch")
    assert forker is not None
    for key, value in conftest.SET_BY_IMPORTS.items():
        monkeypatch.setenv(key, value)
    assert conftest.server("torch") is forker
    monkeypatch.setenv("CUSTOM_DEVICE_ROOT", "/opt/a_device")  # not the value Paddle's import sets here
    assert conftest.server("torch") is None
    monkeypatch.undo()
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert conftest.server("torch") is None


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
    (["--batch_size", "0"], "--batch_size must be a whole number at least 1"), (["--log_every", "0"], "--log_every must be"),
    (["--seed", "-1"], "--seed must be"), (["--warmup_proportion", "1.5"], "--warmup_proportion"),
    (["--max_steps", "0"], "--max_steps"), (["--epochs", "0"], "--epochs"),
])
def test_bad_step5_flags_are_refused(flags, says):
    from bert_sst2.twins import train
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
    from bert_sst2.twins.train import Checkpoints, RunState

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
    with pytest.raises(PipelineError, match="more than the file's"):
        fileio.load_npy(path)
    with open(tmp_path / "claims.npy", "wb") as f:  # a bare array whose header claims 8 GB
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (10 ** 9,)})
        f.write(b"\0" * 8)
    with pytest.raises(PipelineError, match="cannot hold"):
        fileio.load_array(tmp_path / "claims.npy", "x")


def test_run_record_detects_each_field(tmp_path):
    from portcheck.core import record
    for side, lr in (("torch", 1e-3), ("paddle", 1e-4)):
        fileio.save_npy(tmp_path / f"r_{side}.npy", {"x": np.ones(1)})
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


# ---------------------------------------------------------------------------------------- issue 24: integrity under attack

def shared_list_npy(path, depth):
    """A ReprodLogger-looking .npy whose one value is a list holding itself twice over `depth` levels through
    the pickle memo: a few hundred bytes that unfold to 2^depth nodes."""
    node = []
    for _ in range(depth):
        node = [node, node]
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "|O", "fortran_order": False, "shape": ()})
        pickle.dump({"x": node}, f, protocol=4)
    return path


def test_memo_shared_lists_cost_what_the_file_holds(tmp_path):
    # 1. memory: a 250-byte file would unfold to a million nodes (2^40 in the hostile pass: out of memory)
    path = shared_list_npy(tmp_path / "shared.npy", 20)
    assert path.stat().st_size < 400
    with pytest.raises(PipelineError, match="counted at every reference"):
        fileio.load_npy(path)
    node = []
    for _ in range(20):
        node = [node, node]
    (tmp_path / "shared.pdparams").write_bytes(pickle.dumps({"w": node}, protocol=4))
    with pytest.raises(PipelineError, match="counted at every reference"):
        fileio.load_pickled_arrays(tmp_path / "shared.pdparams", "x")


def test_array_without_its_contents_or_sharing_one_buffer_is_refused(tmp_path):
    from numpy._core.multiarray import _reconstruct

    class Uninitialised:  # numpy would allocate 50M floats and never fill them: two loads "differ" by 1e25
        def __reduce__(self):
            return (_reconstruct, (np.ndarray, (50_000_000,), b"b"))

    buffer = b"\0" * 8000

    class Shared:  # 500 arrays of one 8 KB buffer: 4 MB from a 16 KB file
        def __reduce__(self):
            return (_reconstruct, (np.ndarray, (0,), b"b"), (1, (1000,), np.dtype("float64"), False, buffer))
    for payload, says in (({"x": Uninitialised()}, "without its contents"),
                          ({f"k{i}": Shared() for i in range(500)}, "more than the file")):
        path = tmp_path / "bad.npy"
        np.save(path, np.array(payload, dtype=object), allow_pickle=True)
        with pytest.raises(PipelineError, match=says):
            fileio.load_npy(path)


def test_overwrite_never_touches_a_foreign_checkpoint_or_latest(tmp_path):
    # 2. foreign files: --overwrite replaces only Step 5's own entries
    from bert_sst2.twins import train
    victim = tmp_path / "victim"
    (victim / "checkpoint-7").mkdir(parents=True)
    (victim / "checkpoint-7/model.bin").write_text("theirs")
    (victim / "latest").write_text("checkpoint-7\n")
    with pytest.raises(PipelineError, match="which Step 5 did not write"):
        train.parse_args("torch", ["--demo", "--output_dir", str(victim), "--overwrite"])
    with pytest.raises(PipelineError, match="which Step 5 did not write"):
        train.Checkpoints(victim).start_fresh(overwrite=True)
    assert (victim / "checkpoint-7/model.bin").read_text() == "theirs"
    assert (victim / "latest").read_text() == "checkpoint-7\n" and not (victim / train.Checkpoints.MARKER).exists()


def test_no_write_follows_a_link(home, tmp_path):
    # 2. a symbolic link where the pipeline writes (the train log, a result, a checkpoint entry) is refused
    # before anything is touched; its target is never written
    victim = tmp_path / "victim.txt"
    victim.write_text("theirs")
    log = home / "pipeline/Step5/train_torch.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.symlink_to(victim)
    proc = inproc(PT, *DEMO, home=home)
    assert proc.returncode == 2 and "train_torch.log is a symbolic link" in error_line(proc)
    with pytest.raises(PipelineError, match="symbolic link"):
        fileio.save_npy(log, {"x": np.ones(1)})
    assert victim.read_text() == "theirs" and log.is_symlink()


def test_check_pair_writes_only_the_log_it_was_given(tmp_path):
    # 2. --log X.log wrote X.json too: a foreign report.json, or the input's own run record (X.run.log)
    from portcheck.core import record
    for side in diff.SIDES:
        fileio.save_npy(tmp_path / f"forward_{side}.npy", {"logits": np.ones(2) + 1e-9 * (side == "paddle")})
        record.save(tmp_path / f"forward_{side}.npy", side, "s", {"weights": "w"})
    (tmp_path / "report.json").write_text("theirs")
    kept = (tmp_path / "forward_torch.run.json").read_text()
    for log in ("report.log", "forward_torch.run.log"):
        proc = inproc("pipeline/check_pair.py", tmp_path / "forward_torch.npy", tmp_path / "forward_paddle.npy",
                      "--threshold", "1e-6", "--log", tmp_path / log, home=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.json").read_text() == "theirs"
    assert (tmp_path / "forward_torch.run.json").read_text() == kept


def test_weight_stats_never_reads_the_current_folder(tmp_path, monkeypatch):
    # 2. `latest` naming a missing checkpoint fell back to ./torch_state.pt
    from pipeline.Step5 import weight_stats
    out = tmp_path / "out"
    out.mkdir()
    (out / "latest").write_text("checkpoint-9\n")
    (tmp_path / "torch_state.pt").write_text("not ours")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PipelineError) as e:
        weight_stats.checkpoint(out, "torch")
    assert str(out / "torch_state.pt") in str(e.value)


def hand_in_copy(tmp_path):
    folder = tmp_path / "handed_in" / "log_reprod"
    shutil.copytree(ROOT / "log_reprod", folder)
    return folder


def test_no_hand_in_yet_says_to_run_the_pipeline(tmp_path):
    """With no folder given, the checker reads the one run_all.py writes; before any run it says so in one line."""
    proc = inproc("pipeline/check_log_reprod.py", home=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1
    assert "no hand-in at log_reprod yet: run `python pipeline/run_all.py` first" in proc.stderr


def test_the_pipelines_hand_in_leaves_its_page_as_its_check_judges_it(tmp_path):
    """run_all.py's last write: log_reprod/diagnostics/report.html, check_log_reprod.py's verdict as a page; a pair
    broken after the run makes it red, and a page portcheck did not write there is left as it is, in one line."""
    import importlib.util
    from portcheck.core import page
    spec = importlib.util.spec_from_file_location("check_log_reprod", ROOT / "pipeline" / "check_log_reprod.py")
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    folder = hand_in_copy(tmp_path)
    written = folder / "diagnostics" / page.NAME
    for plant in ("clean", "forward copied"):
        said = checker.write_page(folder)
        code = inproc("pipeline/check_log_reprod.py", folder, home=tmp_path).returncode
        assert said.endswith(f"judges it: {'green' if plant == 'clean' else 'RED'})") and code == (plant != "clean")
        assert page.ours(written) and f'data-verdict="{"green" if code == 0 else "red"}"' in written.read_text()
        shutil.copy(folder / "forward_torch.npy", folder / "forward_paddle.npy")
    written.write_text("a contestant's own page")
    assert "[PC191]" in checker.write_page(folder) and written.read_text() == "a contestant's own page"

def test_one_frameworks_result_never_passes_as_the_others(tmp_path):
    # 3. the committed hand-in re-derives green; torch's forward result and record copied over Paddle's, or
    # Paddle's result replaced while its record stays, is red
    folder = hand_in_copy(tmp_path)
    assert inproc("pipeline/check_log_reprod.py", folder, home=tmp_path).returncode == 0
    shutil.copy(folder / "forward_torch.npy", folder / "forward_paddle.npy")
    proc = inproc("pipeline/check_log_reprod.py", folder, home=tmp_path)
    forward = next(line for line in proc.stdout.splitlines() if line.startswith("forward:"))
    assert proc.returncode == 1 and forward.startswith("forward: RED") and "NOT the same run" in forward
    shutil.copy(folder / "diagnostics/forward_torch.run.json", folder / "diagnostics/forward_paddle.run.json")
    proc = inproc("pipeline/check_log_reprod.py", folder, home=tmp_path)
    assert proc.returncode == 1 and "\nforward: RED" in proc.stdout
    from portcheck.core import record
    passed, detail = record.same_run(folder / "forward_torch.npy", folder / "forward_paddle.npy",
                                     (folder / "diagnostics/forward_torch.run.json",
                                      folder / "diagnostics/forward_paddle.run.json"))
    assert passed is False and ("written by torch" in detail or "byte for byte the torch file" in detail)
    passed, detail = record.same_run(folder / "forward_torch.npy", folder / "forward_torch.npy")
    assert passed is False and "one file given as both sides" in detail


@pytest.mark.parametrize("script, flag", [
    ("pipeline/Step1/check_step1.py", "--threshold"), ("pipeline/Step1/check_step1.py", "--module_rtol"),
    ("pipeline/Step3/check_step3.py", "--rtol"), ("pipeline/Step4/check_step4.py", "--grad_threshold"),
    ("pipeline/Step5/check_step5.py", "--threshold"),
])
def test_tolerance_flags_must_be_finite_and_not_negative(tmp_path, script, flag):
    # 4. --threshold inf wrote "diff check passed" into log_reprod/
    for value in ("inf", "nan", "-1"):
        proc = inproc(script, f"{flag}={value}", home=tmp_path)
        assert proc.returncode == 2 and f"{flag} must be a finite number >= 0" in error_line(proc)
    assert not any(tmp_path.iterdir())


def test_a_loosening_flag_is_stated_everywhere(tmp_path):
    # 4. the diff log, the verdict (SUMMARY.md's source) and check_log_reprod.py's output say so
    import importlib.util
    d = tmp_path / "pipeline/Step3"
    d.mkdir(parents=True)
    for side, loss in zip(diff.SIDES, (0.5, 0.5000005)):  # 5e-7 apart: over the measured 1e-7, under 1e-6
        fileio.save_npy(d / f"loss_{side}.npy", {"loss": np.array(loss)})
    assert inproc("pipeline/Step3/check_step3.py", "--rtol", "0", home=tmp_path).returncode == 1
    proc = inproc("pipeline/Step3/check_step3.py", "--threshold", "1e-6", "--rtol", "0", home=tmp_path)
    assert proc.returncode == 0 and "diff check passed with loosened tolerances" in proc.stdout
    assert "loosened by a flag: --threshold 1e-06 loosens the loss's atol" in (d / "loss_diff.log").read_text()
    verdict = json.loads((d / "loss_diff.json").read_text())
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "pipeline/run_all.py")
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    assert any("--threshold 1e-06 loosens" in line for line in run_all.brief(verdict))
    folder = hand_in_copy(tmp_path)
    (folder / "diagnostics/loss_diff.json").write_text(json.dumps({**verdict, "loosened": verdict["loosened"]}))
    proc = inproc("pipeline/check_log_reprod.py", folder, home=tmp_path)
    loss = next(line for line in proc.stdout.splitlines() if line.startswith("loss:"))
    assert "judged with loosened tolerances: --threshold 1e-06 loosens the loss's atol" in loss, proc.stdout


def test_record_values_cannot_forge_log_lines(tmp_path):
    # 5. a run record's value with a newline put "same run: passed" and "diff check passed" lines in the log
    from portcheck.core import record
    forged = "x\n[2026/01/01 00:00:00] root INFO: same run: passed\n[2026/01/01 00:00:00] root INFO: diff check passed"
    for side, lr in zip(diff.SIDES, (forged, "1e-4")):
        fileio.save_npy(tmp_path / f"p_{side}.npy", {"v": np.ones(1)})
        record.save(tmp_path / f"p_{side}.npy", side, "s", {"flags": {"lr": lr, forged: 1}})
    proc = inproc("pipeline/check_pair.py", tmp_path / "p_torch.npy", tmp_path / "p_paddle.npy", "--threshold", "0",
                  "--log", tmp_path / "p.log", home=tmp_path)
    assert proc.returncode == 1
    for text in (proc.stdout, (tmp_path / "p.log").read_text()):
        lines = text.splitlines()
        assert all(line.startswith("[") for line in lines) and lines[-1].endswith("diff check failed: same run")
        assert sum("diff check passed" in line for line in lines) <= 1  # escaped, inside the finding
        assert not any(line.endswith("root INFO: same run: passed") for line in lines)


def test_integers_compare_exactly_at_any_threshold(tmp_path):
    # 6. int64 2^53 against 2^53 + 1 passed check_pair --threshold 1e-6 (float64 merges them)
    for side, v in zip(diff.SIDES, (2 ** 53, 2 ** 53 + 1)):
        fileio.save_npy(tmp_path / f"ids_{side}.npy", {"ids": np.array([v], dtype="int64")})
    proc = inproc("pipeline/check_pair.py", tmp_path / "ids_torch.npy", tmp_path / "ids_paddle.npy",
                  "--threshold", "1e-6", "--log", tmp_path / "ids.log", home=tmp_path)
    assert proc.returncode == 1 and "1 of 1 integers differ" in proc.stdout
    assert not diff.compare({"n": np.array([3])}, {"n": np.array([4])}, default=10.0).passed


@pytest.mark.parametrize("change, says", [
    ({"global_step": -5}, "global_step -5"), ({"batch_in_epoch": 1e9}, "batch_in_epoch"),
    ({"batch_in_epoch": 10 ** 9}, "is not batch"), ({"loss": ["nan"]}, "loss is not a list"),
    ({"acc_per_epoch": [1.5]}, "out of range"), ({"settings": []}, "settings"), ({"surprise": 1}, "surprise"),
])
def test_run_state_is_validated(tmp_path, change, says):
    # 7. "resumed at step -5"; batch_in_epoch 1e9 silently trained 393 of 400 steps
    from dataclasses import asdict
    from bert_sst2.twins.train import Checkpoints, RunState
    good = RunState(global_step=2, epoch=1, loss=[0.7] * 2, lr=[1e-5] * 2, acc_per_epoch=[0.5], eval_steps=[2],
                    acc_per_eval=[0.5])
    assert good.problem(steps_per_epoch=2) is None
    (tmp_path / "run_state.json").write_text(json.dumps({**asdict(good), **change}))
    with pytest.raises(PipelineError, match=says):
        Checkpoints.run_state(tmp_path, steps_per_epoch=2)


RESUME = """
import copy, json, pickle, sys
from pathlib import Path
import portcheck.core.runtime
from portcheck.core.errors import PipelineError
fw, checkpoint = sys.argv[1], Path(sys.argv[2])
if fw == "paddle":
    from bert_sst2.twins.pd_backend import Backend
    state = pickle.loads((checkpoint / "paddle_state.pdparams").read_bytes())  # the test's own file: plain pickle
    save = lambda s, folder: (folder / "paddle_state.pdparams").write_bytes(pickle.dumps(s, protocol=4))
    tensor = lambda entry: entry[1]  # paddle.save keeps a nested tensor as (name, array)
    retensor = lambda entry, array: (entry[0], array)
    moment = lambda s: next(k for k in s["optimizer"] if k.endswith("moment1_0"))
    moments = lambda s: s["optimizer"]
else:
    import torch
    from bert_sst2.twins.pt_backend import Backend
    state = torch.load(checkpoint / "torch_state.pt", weights_only=True)
    save = lambda s, folder: torch.save(s, folder / "torch_state.pt")
    tensor, retensor = (lambda entry: entry), (lambda entry, array: array)
    moment, moments = (lambda s: "exp_avg"), (lambda s: s["optimizer"]["state"][0])
backend = Backend()
backend.build(total_steps=2, warmup_steps=0, lr=1e-5)
bias = next(k for k in state["model"] if k.endswith("classifier.bias"))
changes = {
    "clean": lambda s: None,
    "missing key": lambda s: s["model"].pop(bias),
    "misshapen": lambda s: s["model"].__setitem__(bias, retensor(s["model"][bias], tensor(s["model"][bias])[:1])),
    "empty optimizer": lambda s: s.__setitem__("optimizer", {}),
    "misshapen moment": lambda s: moments(s).__setitem__(moment(s), retensor(moments(s)[moment(s)], tensor(moments(s)[moment(s)])[:1])),
    "float64 moment": lambda s: moments(s).__setitem__(moment(s), retensor(moments(s)[moment(s)], tensor(moments(s)[moment(s)]).double()
                                                        if fw == "torch" else tensor(moments(s)[moment(s)]).astype("float64"))),
}
out = {}
for name, change in changes.items():
    s = copy.deepcopy(state)
    change(s)
    folder = checkpoint.parent / name.replace(" ", "_")
    folder.mkdir()
    save(s, folder)
    try:
        backend.load_state(folder)
        out[name] = "resumed"
    except PipelineError as e:
        out[name] = str(e)
print(json.dumps(out))
"""


@pytest.mark.parametrize("fw", ["paddle", "torch"])
def test_resume_is_strict_in_both_frameworks(trained, fw, tmp_path):
    # 7. Paddle resumed a checkpoint missing a key, with a misshapen tensor or an empty optimizer state (exit 0);
    # torch's load_state_dict took misshapen, float64 or missing Adam moments
    checkpoint = next((trained / "pipeline/Step5/output" / fw).glob("checkpoint-*"))
    script = tmp_path / f"{'pt' if fw == 'torch' else 'pd'}_resume.py"  # a script of fw's side: its fork server's
    script.write_text(RESUME)
    proc = run(script, fw, checkpoint, home=trained)
    results = json.loads(proc.stdout.splitlines()[-1]) if proc.stdout else proc.stderr
    assert results["clean"] == "resumed", results
    says = {"missing key": "saved model does not fit the model; missing: ",
            "misshapen": "saved model does not fit the model; shape mismatch",
            "empty optimizer": "saved optimizer state does not fit the model; missing",
            "misshapen moment": "saved optimizer state does not fit the model; shape mismatch",
            "float64 moment": "saved optimizer state does not fit the model; dtype mismatch"}
    for name, text in says.items():
        assert text in results[name] and results[name].endswith("run without --resume"), (name, results[name])


def test_one_training_at_a_time_in_an_output_folder(trained, tmp_path):
    # 8. two trainings into one folder raced and one died with a traceback mid-checkpoint
    from bert_sst2.twins.train import Checkpoints
    home, out = trained, trained / "pipeline/Step5/output/paddle"
    log = home / "pipeline/Step5/train_paddle.log"
    before = log.read_text()
    holder = Checkpoints(out)
    holder.lock()  # the first training
    with pytest.raises(PipelineError, match="another Step 5 training is writing into"):
        Checkpoints(out).lock()
    proc = run(PD, *DEMO, "--output_dir", out, home=home, check=2)
    assert "another Step 5 training is writing into" in error_line(proc)
    assert log.read_text() == before and (out / "latest").is_file()
    os.close(holder._lock)


# ---------------------------------------------------------------------------------------- issue 29: odd paths

def odd_paths(tmp_path):
    (tmp_path / "afile.txt").write_text("mine")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return {"a file as a folder": (tmp_path / "afile.txt/sub", "afile.txt is a file"),
            "a dangling link": (tmp_path / "dangling", "symbolic link to nothing"),
            "a link loop": (tmp_path / "loop", "symbolic link")}


@pytest.mark.parametrize("case", ["a file as a folder", "a dangling link", "a link loop", "a checkpoint link"])
def test_odd_output_dirs_end_in_one_line_before_the_log_is_touched(home, tmp_path, case):
    # each ended in a traceback; three after train_<fw>.log had been truncated
    log = home / "pipeline/Step5/train_torch.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("the previous run's log\n")
    if case == "a checkpoint link":
        out, says = tmp_path / "out", "checkpoint-2 is a symbolic link"
        (out / "checkpoint-2").parent.mkdir()
        (out / Checkpoints_marker()).write_text("")
        (out / "checkpoint-2").symlink_to(tmp_path)
    else:
        out, says = odd_paths(tmp_path)[case]
    for resume in ([], ["--resume"]):
        proc = inproc(PT, *DEMO, "--output_dir", out, *resume, home=home)
        assert proc.returncode == 2 and says in error_line(proc), proc.stderr
    assert log.read_text() == "the previous run's log\n"


def Checkpoints_marker():
    from bert_sst2.twins.train import Checkpoints
    return Checkpoints.MARKER


@pytest.mark.parametrize("log, says", [("folder", "is a folder, not a file"), ("afile.txt/x.log", "afile.txt is a file")])
def test_check_pair_log_that_cannot_be_written_is_one_line(tmp_path, log, says):
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile.txt").write_text("mine")
    for side in diff.SIDES:
        fileio.save_npy(tmp_path / f"x_{side}.npy", {"v": np.ones(1)})
    proc = inproc("pipeline/check_pair.py", tmp_path / "x_torch.npy", tmp_path / "x_paddle.npy", "--threshold", "0",
                  "--log", tmp_path / log, home=tmp_path)
    assert proc.returncode == 2 and says in error_line(proc) and proc.stdout == ""
    assert (tmp_path / "afile.txt").read_text() == "mine"
