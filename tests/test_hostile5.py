"""The hostile pass on `python -m portcheck run` (issue 63): no stale verdict in a rerun's folder, the recorder only
in the scripts' own processes, their workers ended with them, --out taken as given or refused in one line, SIGTERM
and SIGHUP ending the scripts, and a script's printing read as a terminal shows it. Cheap: tiny torch scripts that
stop early; none trains a Paddle model."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from portcheck import cli
from portcheck.pipeline import handin
from portcheck.scripts import folders, full, launch, run
from portcheck.core.errors import PipelineError

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "examples/resnet18/log_reprod"
PYTHON = sys.executable
TRAIN = ("import torch\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
         "for _ in range(2):\n    loss = model(torch.ones(4, 2)).sum(); loss.backward(); opt.step(); opt.zero_grad()\n")


def script(tmp_path, body: str, name="t.py") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def command(cwd, capfd, *argv) -> tuple:
    """(exit code, stdout, stderr) of `python -m portcheck ARGV` run in cwd, its main in this process (a command of
    its own is one more interpreter; the scripts `run` starts are forked as conftest.FORKED_RUNS says)."""
    capfd.readouterr()
    was = os.getcwd()
    os.chdir(cwd)
    try:
        with pytest.raises(SystemExit) as e:
            cli.main(list(argv))
    finally:
        os.chdir(was)
    out, err = capfd.readouterr()
    return e.value.code, out, err


def portcheck_run(tmp_path, capfd, torch_script, *args, out="out", paddle_script=None):
    """(exit code, stderr) of `python -m portcheck run`, run in tmp_path."""
    code, _, err = command(tmp_path, capfd, "run", "--torch", f"{PYTHON} {torch_script}", "--paddle",
                           f"{PYTHON} {paddle_script or torch_script}", "--out", str(out), *args)
    return code, err


def one_error_line(stderr: str) -> str:
    """The run's stderr is one line of ours (the script printed nothing there)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def gone(pid: int, wait: float = 10.0) -> bool:
    """The process ended (a zombie waiting for its reaper counts as ended) within `wait` seconds."""
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


# ---------------------------------------------------------------- 2. no stale verdict

def test_a_rerun_that_fails_leaves_no_earlier_green_to_check(tmp_path, capfd):
    """A green run's --out rerun with a script failing at import: `check` of its log_reprod said "every pair green"
    from the earlier hand-in. The earlier hand-in (here the ResNet example's five pairs in its place) is removed;
    a file of the user's in the folder is not."""
    out = tmp_path / "out"
    run.prepare(out)
    (out / "log_reprod" / "diagnostics").mkdir(parents=True)
    for pair in run.PAIRS:
        for below in ("", "diagnostics"):
            for f in (RESNET / below).glob(f"{pair}_*"):
                shutil.copy(f, out / "log_reprod" / below / f.name)
    check = ["check", str(out / "log_reprod")]
    code, said, err = command(tmp_path, capfd, *check, "--only", ",".join(run.PAIRS))
    assert code == 0 and "every pair green" in said, said + err
    (out / "log_reprod" / "notes.txt").write_text("the user's")
    code, err = portcheck_run(tmp_path, capfd, script(tmp_path, "raise ImportError('No module named paddlex')\n"))
    assert code == 2 and "crashed (exit 1" in err.strip().splitlines()[-1], err
    code, said, _ = command(tmp_path, capfd, *check)
    assert code != 0 and "green" not in said, said
    assert (out / "log_reprod" / "notes.txt").read_text() == "the user's"
    assert sorted(p.name for p in (out / "log_reprod").rglob("*") if p.is_file()) == ["notes.txt"]


# ---------------------------------------------------------------- 4. the recorder only in the scripts themselves

def test_the_processes_a_script_starts_record_nothing_write_nothing_and_end_with_it(tmp_path):
    """A monitor started with subprocess inherited the settings and the sitecustomize (it recorded, and wrote
    status.json at its exit); a forked child (a DataLoader worker) leaving through Python's exit wrote status.json;
    after the recorder's os._exit at step N, what the script started (a Paddle DataLoader's workers) lived on."""
    said, status = tmp_path / "said", tmp_path / "out" / "torch" / "status.json"
    body = ("import os, subprocess, sys\n"
            "sleeper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            "monitor = subprocess.run([sys.executable, '-c', 'import sys; "
            "m = sys.modules.get(\"portcheck.scripts.install\"); "
            "print(m is not None and m.RUN is not None)'], capture_output=True, text=True).stdout.strip()\n"
            "pid = os.fork()\nif pid == 0:\n    sys.exit(0)\nos.waitpid(pid, 0)\n"
            f"written = os.path.exists({str(status)!r})\n"
            f"open({str(said)!r}, 'w').write(f'{{sleeper.pid}} {{monitor}} {{written}}')\n"
            + TRAIN)
    out = tmp_path / "out"
    run.prepare(out)
    assert run.run_side("torch", [PYTHON, str(script(tmp_path, body))], out, 1)["steps"] == 1
    sleeper, recorded, written = said.read_text().split()
    assert recorded == "False", "the monitor was recorded"
    assert written == "False", "the forked child wrote the script's status.json"
    assert gone(int(sleeper)), "what the script started outlived it"


def test_ranks_a_python_launcher_portcheck_does_not_know_starts_still_refuse(tmp_path):
    """A launcher that is a Python script (accelerate's, a script of one's own) installs the recorder as the script
    would; the ranks it starts are its children, and still refuse in one line (they would share one folder)."""
    rank = script(tmp_path, TRAIN, "rank.py")
    body = ("import os, subprocess, sys\n"
            f"subprocess.run([sys.executable, {str(rank)!r}], env=dict(os.environ, RANK='1', WORLD_SIZE='2'))\n")
    out = tmp_path / "out"
    run.prepare(out)
    with pytest.raises(PipelineError, match="rank 1 of 2 under a launcher `portcheck run` does not know"):
        run.run_side("torch", [PYTHON, str(script(tmp_path, body))], out, 1)


# ---------------------------------------------------------------- 5. paths

def tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.is_symlink(), p.stat().st_mtime_ns if p.exists() else None)
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("how, says", [
    ("a file on the way", "is a file, so"),
    ("a dangling link", "is a symbolic link to nothing"),
    ("a link to an empty folder", "is a symbolic link"),
    ("a side folder that is a link", "is a symbolic link"),
])
def test_an_out_that_cannot_be_written_as_given_is_one_line_and_nothing_written(tmp_path, how, says):
    """--out notes.txt/out (NotADirectoryError), a dangling link (FileExistsError), a link to an empty folder (the
    recorder raised inside the script after prepare wrote through it), out/paddle a link (status.json written
    through it): refused before the scripts start (the command line's PipelineError: one line, exit 2)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    if how == "a file on the way":
        (tmp_path / "notes.txt").write_text("notes")
        out = tmp_path / "notes.txt" / "out"
    elif how == "a dangling link":
        out.symlink_to(tmp_path / "nothing")
    elif how == "a link to an empty folder":
        out.symlink_to(elsewhere)
    else:
        run.prepare(out)
        shutil.rmtree(out / "paddle")
        (out / "paddle").symlink_to(elsewhere)
    before = tree(tmp_path)
    with pytest.raises(PipelineError, match=says):
        run.prepare(out)
    assert tree(tmp_path) == before


def test_a_relative_out_is_where_it_was_given_when_the_script_changes_directory(tmp_path, capfd):
    """A script that chdirs wrote its records under its new directory: 'the recorder did not start', untrue."""
    (tmp_path / "sub").mkdir()
    code, err = portcheck_run(tmp_path, capfd, script(tmp_path, "import os\nos.chdir('sub')\nprint('no training')\n"))
    assert code == 2 and "never called a model" in one_error_line(err), err
    assert (tmp_path / "out" / "torch" / "status.json").is_file() and not (tmp_path / "sub" / "out").exists()


# ---------------------------------------------------------------- 6. signals

@pytest.mark.parametrize("signum, says, code", [
    (signal.SIGTERM, "error: stopped by SIGTERM", 128 + signal.SIGTERM),
    (signal.SIGHUP, "error: stopped by SIGHUP", 128 + signal.SIGHUP),
    (signal.SIGINT, "error: interrupted (Ctrl-C)", 130),
], ids=["SIGTERM", "SIGHUP", "Ctrl-C"])
def test_a_signal_to_the_run_ends_the_scripts_with_one_line(tmp_path, signum, says, code):
    """SIGTERM ended `portcheck run` but left the script (and what it started) running."""
    pids = tmp_path / "pids"
    body = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            f"open({str(pids)!r} + '.tmp', 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
            f"os.replace({str(pids)!r} + '.tmp', {str(pids)!r})\n"
            "time.sleep(120)\n")
    t = script(tmp_path, body)
    # started as a terminal's foreground command: Ctrl-C at its default, where a suite started in the background of a
    # non-interactive shell (`.ci/run &`) hands SIGINT on ignored, which `portcheck run` keeps (as any Unix command)
    foreground = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.executable, [sys.executable, '-m', 'portcheck', *sys.argv[1:]])")
    proc = subprocess.Popen([PYTHON, "-c", foreground, "run", "--torch", f"{PYTHON} {t}", "--paddle", f"{PYTHON} {t}",
                             "--out", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    try:
        end = time.monotonic() + 120
        while not pids.exists() and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        assert pids.exists(), proc.communicate()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    # Ctrl-C reaches the scripts as from a terminal (their KeyboardInterrupt shown); SIGTERM, SIGHUP end them quietly
    last = err.strip().splitlines()[-1] if signum == signal.SIGINT else one_error_line(err)
    assert proc.returncode == code and last.startswith(says), (proc.returncode, err)
    assert all(gone(int(pid)) for pid in pids.read_text().split()), "the script or its child outlived the run"


# ---------------------------------------------------------------- 7. output

def test_printed_lines_are_read_as_a_terminal_shows_them_in_linear_time():
    """--full's reader copied all text since the last newline at every write: 30,000 progress updates (a carriage
    return each) took 7 s, growing with the square; only the current line is kept now."""
    read = []
    lines = full.Lines(read.append)
    start = time.perf_counter()
    for i in range(30_000):
        lines.write(f"\rstep {i}/30000 loss 0.5")
    lines.write(" acc 0.9")
    lines.write("7\r\nval_acc 0.5")
    lines.write("\n")
    assert time.perf_counter() - start < 1.0
    assert read == ["step 29999/30000 loss 0.5 acc 0.97", "val_acc 0.5"]


def test_a_metric_that_is_no_number_is_one_line_naming_the_line():
    with pytest.raises(ValueError, match=r"read '35.4%' as acc's value in the printed line 'epoch 1 acc 35.4%'"):
        full.metrics(re.compile(r"(acc)\s+(\S+)"), "epoch 1 acc 35.4%\n")
    assert full.metrics(re.compile(full.METRIC), "epoch 1 val_acc: 0.5 f1=0.25") == {"val_acc": 0.5,
                                                                                           "f1": 0.25}


def test_full_with_a_metric_that_is_no_number_stops_in_one_line(tmp_path):
    """`--full --metric` matching "35.4%": a ValueError inside the script's print, then an untrue line."""
    out = tmp_path / "out"
    run.prepare(out)
    run.run_side("torch", [PYTHON, str(script(tmp_path, TRAIN))], out, 1)  # torch's initial weights, as --full reads
    (out / "full").mkdir()
    body = TRAIN + "print('epoch 1 acc 35.4%')\n"
    with pytest.raises(PipelineError, match=r"--full: the torch script .*'35.4%' as acc's value in the printed line "
                                            r"'epoch 1 acc 35.4%'"):
        run.full_side("torch", [PYTHON, str(script(tmp_path, body, "full.py"))], out, r"(acc)\s+(\S+)")


def test_a_script_whose_stdout_has_no_flush_is_recorded(tmp_path, capfd):
    """recorder.finish's sys.stdout.flush() raised AttributeError inside the script's opt.step()."""
    body = "import sys\nclass Quiet:\n    def write(self, text):\n        return len(text)\nsys.stdout = Quiet()\n" + TRAIN
    out = tmp_path / "out"
    run.prepare(out)
    status = run.run_side("torch", [PYTHON, str(script(tmp_path, body))], out, 1)
    err = capfd.readouterr().err
    assert status["steps"] == 1 and "Traceback" not in err, err


# ---------------------------------------------------------------- 8. the API's entry points

def test_judge_and_log_given_a_comparison_that_is_no_report_is_one_line(tmp_path):
    folder, top = tmp_path / "pairs", tmp_path / "log_reprod"
    logits = np.ones((2, 3), np.float32)
    handin.save_side(folder, "forward", "torch", {"logits": logits}, {}, "pt.py", exact={"logits": logits.astype(np.float64)})
    handin.save_side(folder, "forward", "paddle", {"logits": logits}, {}, "pd.py")
    with pytest.raises(PipelineError, match="comparison='not a report': give compare_forward's ForwardReport"):
        handin.judge_and_log(folder, "forward", top=top, comparison="not a report")
    assert not top.exists() and not (folder / "forward_diff.log").exists()


@pytest.mark.parametrize("status, says", [
    ({"root": "Linear", "config": {}, "error": None}, "'steps' is missing"),
    ({"steps": "3", "root": "Linear", "config": {}, "error": None}, "'steps' is str"),
    ({"steps": True, "root": "Linear", "config": {}, "error": None}, "'steps' is bool"),
    ({"steps": 3, "root": "Linear", "config": [], "error": None}, "'config' is list"),
    ({"steps": 3, "root": 7, "config": {}, "error": None}, "'root' is int"),
    ({"steps": 3, "root": None, "config": {}, "error": {"a": 1}}, "'error' is dict"),
    ({"steps": 3, "root": "Linear", "config": {}, "error": None, "world": "2"}, "'world' is str"),
], ids=["no steps", "steps a string", "steps a bool", "config a list", "root a number", "error a dict", "world"])
def test_a_forged_status_is_one_line(tmp_path, status, says):
    """A status.json without `steps` (a process the script started wrote it) was a KeyError in folders.status_of."""
    (tmp_path / "status.json").write_text(json.dumps(status))
    with pytest.raises(PipelineError, match=f"the torch script: its status.json is not the one portcheck's recorder "
                                            f"writes \\({says}\\)"):
        folders.status_of("the torch script", tmp_path, 0, 1)
    (tmp_path / "status.json").write_text(json.dumps({"steps": 1, "root": "Linear", "config": {}, "error": None}))
    assert folders.status_of("the torch script", tmp_path, 0, 1)["steps"] == 1


# ---------------------------------------------------------------- 1. records the scripts cannot forge (the forged pair:
# test_run_scripts.test_a_record_changed_after_its_side_ended_is_red_naming_it)

def test_a_sealed_side_is_read_only_its_digests_listed_and_a_change_named(tmp_path):
    out = tmp_path / "out"
    run.prepare(out)
    side = out / "paddle"
    (side / "record.npy").write_bytes(b"the record")
    (side / "status.json").write_text("{}")
    sealed = run.Sealed(out)
    sealed.side(side, "the Paddle script")
    assert not side.stat().st_mode & 0o222 and not (side / "record.npy").stat().st_mode & 0o222
    assert sealed.changed() == ""
    assert sorted(line.split()[1] for line in (out / folders.DIGESTS).read_text().splitlines()) == \
        ["paddle/record.npy", "paddle/status.json"]
    side.chmod(0o755)  # what a process of the same user can do
    (side / "status.json").unlink()
    (side / "status.json").symlink_to(side / "record.npy")
    assert sealed.changed().startswith(f"{side / 'status.json'} was removed or replaced by what is not a file after "
                                       "the Paddle script ended")
    (side / "status.json").unlink()
    side.chmod(0o555)  # a run killed while sealed: the rerun clears it
    run.prepare(out)
    assert side.stat().st_mode & 0o200 and not (side / "record.npy").exists() and not (out / folders.DIGESTS).exists()


def test_a_python_reached_through_a_shell_shim_is_taken(tmp_path):
    """pyenv's `python` is a bash script that execs the Python it picks: its #! line names bash, which the probe ran
    (`bash -c "import sys, ..."`) and refused as "not a Python interpreter"; the shim itself is probed now. A #! line
    naming a Python (torchrun's console script) is still that Python's."""
    shim = tmp_path / "python"
    shim.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    assert run.command(f"{shim} train.py", "torch") == [str(shim), "train.py"]
    assert launch.interpreter(str(shim)) == str(shim)
    console = tmp_path / "torchrun"
    console.write_text(f"#!{sys.executable}\nimport sys\n")
    assert launch.interpreter(str(console)) == sys.executable


def test_a_shell_script_as_the_first_word_is_refused_before_it_runs(tmp_path, capfd):
    """`--torch ./train.sh` was asked for its Python (`./train.sh -c "import sys, ..."`): the script ran, then was
    refused. What the first word is is read from its file now: a script whose #! names a shell, a program that is no
    Python (`ls`), refused unrun; a Python binary, a #! naming one and pyenv's shim (above) taken."""
    marker = tmp_path / "ran"
    train = script(tmp_path, f"#!/bin/sh\ntouch {marker}\n", "train.sh")
    train.chmod(0o755)
    code, _, err = command(tmp_path, capfd, "run", "--torch", "./train.sh", "--paddle", f"{PYTHON} t.py",
                           "--out", str(tmp_path / "out"))
    assert code == 2 and err.strip().endswith("'./train.sh' is not a Python interpreter: the command's first word "
                                              "is one (python, /path/venv/bin/python) or a launcher it runs "
                                              "(torchrun) [PC802]"), err
    assert len(err.strip().splitlines()) == 1 and not marker.exists() and not (tmp_path / "out").exists()
    assert launch.interpreter(shutil.which("ls")) is None and launch.interpreter(str(train)) is None
    assert launch.interpreter(os.path.realpath(PYTHON)) == os.path.realpath(PYTHON)
    own = script(tmp_path, f"#!/usr/bin/env -S {Path(PYTHON).name} -u\n", "train.py")
    assert Path(launch.interpreter(str(own))).name == Path(PYTHON).name


@pytest.mark.parametrize("name", ["python_wrapper", "python_train.sh", "pypy-run"])
def test_a_shell_script_whose_name_begins_like_a_pythons_is_refused_before_it_runs(tmp_path, name):
    """Any name beginning with python was taken as pyenv's shim: `--torch "./python_wrapper train.py"`, a shell
    script, was asked for its Python and ran, then was refused. A Python's name is whole now (python3.11, pypy3,
    python3.13t); the shim named python is still taken."""
    marker = tmp_path / "ran"
    wrapper = script(tmp_path, f'#!/bin/sh\ntouch {marker}\nexec {PYTHON} "$@"\n', name)
    wrapper.chmod(0o755)
    with pytest.raises(PipelineError, match=r"is not a Python interpreter: .* \[PC802\]$"):
        run.command(f"{wrapper} train.py", "torch")
    assert not marker.exists()
    shim = script(tmp_path, f'#!/usr/bin/env bash\nexec {PYTHON} "$@"\n', "python3.11")
    shim.chmod(0o755)
    assert launch.interpreter(str(shim)) == str(shim)
    assert all(launch.PYTHONS.fullmatch(n) for n in ("python", "python3", "pypy3.10", "python3.13t", "pythonw"))


def test_a_400_digit_number_in_a_configuration_record_is_one_line(tmp_path):
    """A configuration record (its digest recomputed) whose lr is a 400-digit integer reached math.isclose and a :g
    format: an OverflowError's traceback in `check`. Read with bounded numbers, it is the entry's red line."""
    from portcheck.scripts import runconfig
    optimizer = lambda lr: {"optimizer": {"family": "sgd", "lr": lr}}
    runconfig.hand_in(tmp_path, {"torch": optimizer(10 ** 400), "paddle": optimizer(1.0)}, {}, {}, ([], []),
                      {"torch": {}, "paddle": {}}, "t.py")
    assert runconfig.from_folder(tmp_path)[1] == ("config_torch.json is not a configuration record (a number of 401 "
                                                  "digits): rerun portcheck run")
    clipped = {"optimizer": {"family": "sgd", "lr": 1.0}, "clip": {"kind": "norm", "bound": float("inf")}}
    runconfig.hand_in(tmp_path, {"torch": clipped, "paddle": clipped}, {}, {}, ([], []), {"torch": {}, "paddle": {}},
                      "t.py")  # max_norm=inf, a norm measured: json.dumps writes Infinity, read back as it was
    assert runconfig.from_folder(tmp_path)[:2] == ([], "")


def test_a_first_word_that_is_there_but_no_program_is_said_as_what_it_is(tmp_path):
    """`--torch /dev/zero` was refused as "'/dev/zero' is not found [PC801]": it is there, a device, not a program.
    Each such path is now said as what it is (a device, a folder, a file without the x permission)."""
    plain = tmp_path / "python"
    plain.write_text("")
    for path, said in (("/dev/zero", "a character device"), (str(tmp_path), "a folder"),
                       (str(plain), "a file that is not executable (no x permission)")):
        with pytest.raises(PipelineError) as e:
            run.command(f"{path} x.py", "torch")
        assert str(e.value) == (f"--torch: {path!r} is {said}, not a program: the command's first word is a Python "
                                "interpreter (python, /path/venv/bin/python) or a launcher it runs (torchrun) [PC186]")
    with pytest.raises(PipelineError, match=r"PC801"):
        run.command(f"{tmp_path / 'nothing'} x.py", "torch")
