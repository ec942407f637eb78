"""A `portcheck run` hand-in edited without recomputing any digest is red or refused (issue 73, item 1): each run
record's digest covers its file with its side, its pair and its run; the run's manifest (diagnostics/manifest.json)
lists every file handed in with its digest; the configuration entry is required and tied to the pairs' inputs and
steps; a yardstick holds its own spread:* keys. One honest hand-in is written once (examples/scripts, 3 steps); each
edit is made on a copy of it and judged in this process (cli.check)."""
import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

import pytest

from portcheck import cli
from portcheck.core import record
from portcheck.scripts import run

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "examples" / "scripts"
ONLY = ",".join(("config", *run.PAIRS))
STEPS = 3


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A run's DIR and its sides' statuses: the example's two scripts recorded for 3 steps."""
    out = tmp_path_factory.mktemp("run") / "out"
    run.prepare(out)
    argv = {"torch": [sys.executable, str(SCRIPTS / "pt_train.py")],
            "paddle": [sys.executable, str(SCRIPTS / "pd_train.py")]}
    return out, {side: run.run_side(side, argv[fw], out, STEPS) for side, fw in run.SIDES}


def judged(recorded, where: Path, steps: int) -> Path:
    """The hand-in run.judge writes from a copy of the recorded DIR at `where`, judging its first `steps` steps."""
    out, statuses = recorded
    shutil.copytree(out, where)
    with contextlib.redirect_stdout(io.StringIO()):
        assert run.judge(where, statuses, steps) == 0
    return where / "log_reprod"


@pytest.fixture(scope="module")
def honest(recorded, tmp_path_factory):
    return judged(recorded, tmp_path_factory.mktemp("honest") / "out", STEPS)


def checked(top: Path, only=ONLY) -> tuple:
    """(number of red entries, what check printed)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        red = cli.check(top, only=only)
    return red, printed.getvalue()


def copy(honest: Path, tmp_path: Path) -> Path:
    top = tmp_path / "log_reprod"
    shutil.copytree(honest, top)
    return top


def relabel(path: Path, **fields):
    """A run record edited as a forger edits it: fields changed, no digest recomputed."""
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, **fields}, indent=1, sort_keys=True) + "\n")


def swap(a: Path, b: Path):
    tmp = a.with_name(a.name + ".swap")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def test_the_honest_hand_in_is_green(honest):
    red, said = checked(honest)
    assert red == 0, said
    red, said = checked(honest, only="forward")  # a partial check of it stays green
    assert red == 0, said


def test_torchs_configuration_copied_over_paddles_is_red(honest, tmp_path):
    top = copy(honest, tmp_path)
    below = top / "diagnostics"
    shutil.copy(below / "config_torch.json", below / "config_paddle.json")
    shutil.copy(below / "config_torch.run.json", below / "config_paddle.run.json")
    relabel(below / "config_paddle.run.json", framework="paddle", file="config_paddle.json")
    red, said = checked(top)
    assert red and "config: RED | config_paddle.json is not the file its run record" in said, said
    assert "handed in: RED | diagnostics/config_paddle.json was changed since it was handed in" in said, said


def test_the_configuration_files_swapped_and_relabelled_are_red(honest, tmp_path):
    top = copy(honest, tmp_path)
    below = top / "diagnostics"
    swap(below / "config_torch.json", below / "config_paddle.json")
    swap(below / "config_torch.run.json", below / "config_paddle.run.json")
    relabel(below / "config_torch.run.json", framework="torch", file="config_torch.json")
    relabel(below / "config_paddle.run.json", framework="paddle", file="config_paddle.json")
    red, said = checked(top)
    assert red and "config: RED | config_torch.json is not the file its run record" in said, said


def test_bp_aligns_sides_swapped_and_relabelled_are_red(honest, tmp_path):
    top = copy(honest, tmp_path)
    below = top / "diagnostics"
    swap(top / "bp_align_torch.npy", top / "bp_align_paddle.npy")
    swap(below / "bp_align_torch.run.json", below / "bp_align_paddle.run.json")
    relabel(below / "bp_align_torch.run.json", framework="torch", file="bp_align_torch.npy")
    relabel(below / "bp_align_paddle.run.json", framework="paddle", file="bp_align_paddle.npy")
    red, said = checked(top)
    assert red and "the torch result is not the file its run record describes" in said, said


def test_the_yardstick_replaced_by_paddles_result_is_red(honest, tmp_path):
    top = copy(honest, tmp_path)
    below = top / "diagnostics"
    shutil.copy(top / "bp_align_paddle.npy", below / "bp_align_torch64.npy")
    shutil.copy(below / "bp_align_paddle.run.json", below / "bp_align_torch64.run.json")
    relabel(below / "bp_align_torch64.run.json", framework="torch", file="bp_align_torch64.npy")
    red, said = checked(top)
    assert red and "bp_align: RED" in said and "handed in: RED" in said, said
    # its record sealed again, as a forger recomputing digests would: the yardstick lacks torch's spread:* keys
    path = below / "bp_align_torch64.run.json"
    path.write_text(json.dumps(record.sealed(json.loads(path.read_text()), record.result_fingerprint(
        below / "bp_align_torch64.npy"))))
    red, said = checked(top)
    assert red and "the float64 run holds no spread:loss_0 (and" in said, said


def test_a_configuration_entry_of_another_run_is_red(recorded, honest, tmp_path):
    other = judged(recorded, tmp_path / "other", STEPS - 1)  # the same scripts and weights, another step count
    top = copy(honest, tmp_path)
    for name in ("config_torch.json", "config_paddle.json", "config_torch.run.json", "config_paddle.run.json"):
        shutil.copy(other / "diagnostics" / name, top / "diagnostics" / name)
    red, said = checked(top)
    assert red and "config: RED | config_torch.json is of another run than" in said, said


def test_a_configuration_entry_deleted_is_red_without_only(honest, tmp_path):
    top = copy(honest, tmp_path)
    for name in ("config_torch.json", "config_paddle.json", "config_torch.run.json", "config_paddle.run.json"):
        (top / "diagnostics" / name).unlink()
    red, said = checked(top, ",".join(run.PAIRS))  # --only without config: still red, naming it
    assert red and "config: RED" in said and "diagnostics/config_paddle.json is missing since it was handed in" in said, said


def test_the_manifest_deleted_or_edited_is_red(honest, tmp_path):
    top = copy(honest, tmp_path)
    manifest = top / "diagnostics" / record.MANIFEST
    listed = json.loads(manifest.read_text())
    del listed["files"]["diagnostics/config_paddle.json"]  # a file taken off the list, its seal not recomputed
    manifest.write_text(json.dumps(listed))
    red, said = checked(top)
    # and the folder's page, written for the manifest as it was (PC970)
    assert red == 2 and "its list of files was changed after it was written" in said, said
    manifest.unlink()  # gone: the records were written with one
    red, said = checked(top)
    assert red == 2 and f"diagnostics/{record.MANIFEST} missing, while " in said, said
