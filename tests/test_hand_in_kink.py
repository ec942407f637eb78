"""A hand-in's bp_align judged from its files as its check judged it in-process (issue 47): on the net of
tools/bench_k_backward.py --kinks where this CPU's Paddle alone crosses a ReLU kink in a later step's forward (searched
at test time: conftest.paddle_alone_kink; seed 7, batch 8: step 5's on avx512 and avx2), the check
(backward.judged) is green only against torch's run taking Paddle's side of it; from the folder, the pair's update
digests after that step are red without it (seed 7: weights_4 1.18, weights_5 8.98 x their allowance). The check
writes that run's figures under diagnostics/ (kink_files.TAKEN), bound to the torch side's run record and to both
files: green from the folder; the file edited since, or another run's, left out in one line (red); a corrupt one
red; a momentum plant red."""
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("paddle")
from portcheck import cli  # noqa: E402
from portcheck.pipeline import handin, kink_files  # noqa: E402
from portcheck.gradients.backward import judged  # noqa: E402
from portcheck.core.fileio import load_npy, save_npy  # noqa: E402
from portcheck.core.report import DIAGNOSTICS  # noqa: E402

from tools import kink_nets as nets  # noqa: E402 - the small conv/BatchNorm nets, shared
from conftest import paddle_alone_kink  # noqa: E402

TAKEN = f"{DIAGNOSTICS}/bp_align{kink_files.TAKEN}"


@pytest.fixture(scope="module")
def kink_net():
    """(torch's record, Paddle's clean one, Paddle's with momentum 0.8, torch's run taking Paddle's side)."""
    return paddle_alone_kink([(nets.sgd("paddle"), None), (nets.sgd("paddle", 0.8), None)])[2]


def handed_in(folder, t, p, again, keep=lambda record: None):
    """The check of a bp_align: judged in-process (backward.judged; keep: given the torch record it judged last), the
    pair written by each side, judged and handed in with that report; (the in-process report, the check's verdict,
    the log_reprod/ folder)."""
    comparison = judged(t, p, again=again, keep=keep)
    handin.save_side(folder, "bp_align", "torch", handin.bp_align(t), {"inputs": "i"}, "pt",
                     exact=handin.bp_align(t, exact=True))
    handin.save_side(folder, "bp_align", "paddle", handin.bp_align(p), {"inputs": "i"}, "pd")
    verdict = handin.judge_and_log(folder, "bp_align", after_steps=True, top=folder / "log_reprod",
                                   comparison=comparison)
    return comparison, verdict, folder / "log_reprod"


@pytest.fixture(scope="module")
def clean_run(kink_net, tmp_path_factory):
    """handed_in's (report, verdict, folder) of the clean pair, and {"torch": the torch record judged last}."""
    t, p, _, again = kink_net
    kept = {}
    return (*handed_in(tmp_path_factory.mktemp("clean"), t, p, again, lambda rec: kept.update(torch=rec)), kept)


@pytest.fixture(scope="module")
def clean(clean_run):
    return clean_run[:3]


def checked(top, capsys) -> tuple:
    code = cli.check(top, only="bp_align")
    out = capsys.readouterr().out
    return code, next(line for line in out.splitlines() if line.startswith("bp_align:")), out


def test_a_kink_only_paddle_crosses_is_green_from_the_folder_as_in_process(clean, capsys):
    comparison, verdict, top = clean
    assert comparison.passed and comparison.taken, comparison.table()
    assert verdict.passed, verdict.describe_measured()
    assert (top / TAKEN).is_file()
    code, line, out = checked(top, capsys)
    assert code == 0 and "bp_align: green" in line, out
    # the figures decide at the update digests after the kink, and say so
    taken = {r.name for r in verdict.rows if r.rule.spread_decides(r) and r.rule.spread_by}
    steps = {int(name.removeprefix("weights_")) for name in taken if name.startswith("weights_")}  # seed 7: 4, 5
    assert nets.KINK_STEPS - 1 in steps and min(steps) >= comparison.crossed[0].step, taken


@pytest.mark.parametrize("how", ["deleted", "edited"])
def test_without_the_checks_taking_run_the_folder_is_red(clean, tmp_path, capsys, how):
    top = Path(shutil.copytree(clean[2], tmp_path / "log_reprod"))
    if how == "deleted":
        (top / TAKEN).unlink()
    else:  # a figure widened after the check: its record no longer describes the file
        figures = load_npy(top / TAKEN)
        save_npy(top / TAKEN, {k: v * 10 for k, v in figures.items()})
    code, line, out = checked(top, capsys)
    # the key named first: the CPU's figures decide; the second red is the folder against its manifest, the third its
    # page, green as handed in (PC970)
    assert code == 3 and "measured RED (failed: " in line, out
    said = [s for s in out.splitlines() if "left out" in s]
    assert (how == "deleted") == (not said), out
    assert how == "deleted" or said == [f"  {TAKEN} left out: its run record does not describe it (edited since its "
                                        "check wrote it, or another file's); the pair is judged without torch's run "
                                        "taking Paddle's side of a kink (run its check again)"], out


def test_a_corrupt_taking_run_is_red(clean, tmp_path, capsys):
    top = Path(shutil.copytree(clean[2], tmp_path / "log_reprod"))
    (top / TAKEN).write_bytes((top / TAKEN).read_bytes()[:40])
    code, line, out = checked(top, capsys)
    assert code == 3 and line.startswith("bp_align: RED (") and kink_files.TAKEN[1:] in line, out  # PC151, PC970
    save_npy(top / TAKEN, {"weights_4": np.array([-1.0])})  # not a figure: red, whatever its record
    code, line, out = checked(top, capsys)
    assert code == 3 and "is not torch's run taking Paddle's side" in line, out


def test_a_momentum_plant_stays_red_and_another_runs_taking_run_is_left_out(kink_net, clean, tmp_path, capsys):
    t, _, planted, again = kink_net
    comparison, verdict, top = handed_in(tmp_path, t, planted, again)
    assert not comparison.passed and not verdict.passed, verdict.describe_measured()
    code, line, out = checked(top, capsys)
    assert code == 1 and "bp_align: RED" in line, out
    shutil.copy(clean[2] / TAKEN, top / TAKEN)  # the clean hand-in's run, with its record: of other files
    shutil.copy(clean[2] / DIAGNOSTICS / f"bp_align_taken_torch{handin.record.SUFFIX}",
                top / DIAGNOSTICS / f"bp_align_taken_torch{handin.record.SUFFIX}")
    code, line, out = checked(top, capsys)
    assert code == 2 and "left out: it was written for other files of the pair" in out, out  # and PC151


def test_each_sides_whole_record_is_judged_from_the_folder_across_the_kink_as_in_process(kink_net, clean_run, tmp_path,
                                                                                         capsys):
    """Each side's whole record handed in as portcheck.Handin keeps it (torch's as judged: its own run, and the keys
    of its run taking Paddle's side beside them, whole.as_judged): `check` judges compare_backward from them green, as
    in-process; torch's own run alone is red there, as judge_backward alone is on this net."""
    from portcheck.core import record
    from portcheck.pipeline import whole
    t, p, _, _ = kink_net
    comparison, kept = clean_run[0], clean_run[3]
    assert comparison.passed and comparison.taken
    for side, rec in (("torch", whole.as_judged(t, kept["torch"])), ("paddle", p)):
        path = whole.path(tmp_path, "bp_align", side)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_npy(path, rec)
        record.save(path, side, {"torch": "pt", "paddle": "pd"}[side], {"inputs": "i"})
    handin.save_side(tmp_path, "bp_align", "torch", handin.bp_align(t), {"inputs": "i"}, "pt",
                     exact=handin.bp_align(t, exact=True))
    handin.save_side(tmp_path, "bp_align", "paddle", handin.bp_align(p), {"inputs": "i"}, "pd")
    top = tmp_path / "log_reprod"
    handin.judge_and_log(tmp_path, "bp_align", after_steps=True, top=top, comparison=comparison)
    code, line, out = checked(top, capsys)
    assert code == 0 and "from diagnostics/records/: green (every value within its rule)" in line, out
    own = whole.path(top / DIAGNOSTICS, "bp_align", "torch")  # torch's own run alone, handed in as it would be
    save_npy(own, t)
    record.save(own, "torch", "pt", {"inputs": "i"})
    record.list_handed(top, top / DIAGNOSTICS, [own, record.path_for(own)])
    code, line, out = checked(top, capsys)
    assert code == 1 and "from diagnostics/records/: RED (the runs part at " in line, out
