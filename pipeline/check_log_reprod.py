"""Re-derive every step's verdict from a hand-in folder alone (default: the folder run_all.py writes).

    python pipeline/check_log_reprod.py                  # the last run's: log_reprod_demo/ after a demo run
    python pipeline/check_log_reprod.py log_reprod       # the committed reference (a run on SST-2)
    python pipeline/check_log_reprod.py path/to/log_reprod --threshold train_align=0.002 --strict

A reviewer's command: it needs no weights, data or framework, only the folder. Every folder, ours or a
contestant's (reprod_log's files, examples/resnet18/log_reprod, your own model's), is judged by the library's
command, `python -m portcheck check` (portcheck/cli.py): one line per pair with the guide's rule, the measured
one where torch's float64 run is handed in, the strict one, the run records, the diff logs and the last run.

A folder this pipeline wrote (its diagnostics/ holds Step 1's module statistics) gets BERT's own verdicts on
the same lines, which the library cannot know: each pair compared again at the step checks' tuned tolerances
(bert_sst2/tolerances.py), and what is too big to hand in whole checked through its statistics, of the same
run: every module output of Step 1 and every gradient of Step 4 as [max |x|, mean |x|, rms] per side (their
differences can never exceed the real diff, so a tampered value shows), Step 5's curves and weights finite.
Exit 1 if any pair is red or missing, 2 on bad input.
"""
import argparse
import contextlib
import io
import sys
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from bert_sst2 import diagnose, flags, paths, tolerances
from portcheck import cli
from portcheck.core import diff, page, record, report
from portcheck.core.errors import PipelineError, run_main
from portcheck.core.fileio import load_npy

DIAGNOSTICS = report.DIAGNOSTICS
COMPANIONS = {"forward": ("forward_modules_stats",), "bp_align": ("grad_stats",),  # what is too big to hand in whole
              "train_align": ("train_curves", "weight_stats")}
STATS = {"forward_modules_stats": tolerances.MODULE_OUTPUTS, "grad_stats": tolerances.BP_GRAD}


def load(path: Path) -> dict:
    if not path.is_file():
        raise PipelineError(f"{path.name} missing")
    return load_npy(path)


def tuned(folder: Path, pair: str) -> tuple:
    """The pair compared again at the tolerances its step check used."""
    spec = tolerances.PAIRS[pair]
    result = diff.compare(load(folder / f"{pair}_torch.npy"), load(folder / f"{pair}_paddle.npy"), spec.tolerances,
                          spec.default, name=pair)
    failed = [k.key for k in result.failed_keys]
    return not failed, f"{len(result.keys)} keys" + (f"; failed: {', '.join(failed[:4])}" if failed else "")


def companion(below: Path, stem: str) -> tuple:
    """A pair's statistics or curves (diagnostics/<stem>_{torch,paddle}.npy): of one run, and within the pair's
    tuned tolerance (statistics) or finite (curves and weights)."""
    sides = [below / f"{stem}_{side}.npy" for side in diff.SIDES]
    same, detail = record.same_run(*sides, [below / f"{stem}_{side}{record.SUFFIX}" for side in diff.SIDES])
    if not same:  # None too: this pipeline writes their records
        return False, detail
    data = [load(path) for path in sides]
    if stem in STATS:
        bad = diagnose.first_over(diagnose.compare_stats(*data, STATS[stem]))
        return bad is None, f"{len(data[0])} keys, same run" + (f"; first over: {bad}" if bad else "")
    if stem == "train_curves" and any("loss" not in d for d in data):
        return False, "same run, but no loss curve in it"
    finite = all(np.isfinite(v).all() for d in data for k, v in d.items() if stem != "train_curves" or k == "loss")
    return bool(finite), "same run, " + ("finite" if finite else "NaN or Inf in it")


SMOKE = ("Step 5 data", True, "SMOKE RUN on demo data, not evidence: trained and evaluated on the same demo "
         "sentences, so the scripts ran and alignment is not shown; run_all.py --data_dir trains on SST-2")


def findings(folder: Path, pair: str) -> list:
    """BERT's own verdicts on one of its pairs (cli.check's extra); a missing or unreadable file is a red one.
    A Step 5 smoke run (--demo, run_all's default offline) says so on train_align's line."""
    out = []
    if pair == "train_align":
        try:
            smoke = flags.smoke_run(record.load(None, folder / DIAGNOSTICS / f"train_align_torch{record.SUFFIX}"))[0]
        except PipelineError as e:
            out.append(diff.Finding("run record", False, report.one_line(str(e))))
        else:
            out += [diff.Finding(*SMOKE)] if smoke else []
    for name, judge in ([("BERT's tolerances", lambda: tuned(folder, pair))] if pair in tolerances.PAIRS else []) + \
            [(stem, lambda stem=stem: companion(folder / DIAGNOSTICS, stem)) for stem in COMPANIONS.get(pair, ())]:
        try:
            out.append(diff.Finding(name, *judge()))
        except PipelineError as e:
            out.append(diff.Finding(name, False, report.one_line(str(e))))
    return out


def ours(folder: Path) -> bool:
    """Whether this pipeline wrote `folder` (its diagnostics/ holds Step 1's module statistics)."""
    return (folder / DIAGNOSTICS / f"forward_modules_stats_torch{record.SUFFIX}").is_file()


def write_page(folder: Path) -> str:
    """The hand-in's page as this check derives it (every pair, BERT's verdicts on them), left as
    folder/diagnostics/report.html beside the pictures: run_all's last write. Its lines go to the page alone
    (SUMMARY.md says them); returns the line naming the page, or why there is none."""
    ap = argparse.ArgumentParser(allow_abbrev=False)
    cli.add_check_flags(ap)
    args = ap.parse_args(["--html", str(folder / DIAGNOSTICS / page.NAME)])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            red = cli.run_check(folder, args, findings if ours(folder) else None)
    except PipelineError as e:
        return report.one_line(f"no page of {paths.shown(folder)}: {e}")
    return f"page: {paths.shown(args.html)} (the hand-in as check_log_reprod.py judges it: {'RED' if red else 'green'})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("folder", nargs="?", type=Path, help="a hand-in folder (default: the one run_all.py writes: "
                    "log_reprod_demo/ for a demo run, log_reprod/ for a run on SST-2)")
    cli.add_check_flags(ap)
    args = ap.parse_args()
    folder = (args.folder or paths.log_reprod()).expanduser()
    if not folder.is_dir() and args.folder is None:
        raise PipelineError(f"no hand-in at {paths.shown(folder)} yet: run `python pipeline/run_all.py` first, or pass a "
                            "folder (log_reprod is the committed reference)")
    return cli.run_check(folder, args, findings if ours(folder) else None)


if __name__ == "__main__":
    sys.exit(run_main(main))
