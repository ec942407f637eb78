"""Re-derive every step's verdict from a hand-in folder alone (default: the folder run_all.py writes).

    python pipeline/check_log_reprod.py                  # the last run's: log_reprod_demo/ after a demo run
    python pipeline/check_log_reprod.py log_reprod       # the committed reference (a run on SST-2)
    python pipeline/check_log_reprod.py path/to/log_reprod

A reviewer's command: it needs no weights, data or framework, only the folder. Each of the
guide's pairs at the top (forward, data, metric, loss, lr, bp_align, train_align) is compared
again with the same tolerances as the step checks (bert_sst2/tolerances.py), their run records
(diagnostics/*.run.json) must show the same run, and what is too big to hand in whole is
checked through its statistics: every module output of Step 1 and every gradient of Step 4
as [max |x|, mean |x|, rms] per side, whose differences can never exceed the real diff, so a
tampered value shows. Prints one line per step; exit 1 if any step is red or a file is missing.

Any other folder (a contestant's own hand-in written with reprod_log, examples/resnet18/log_reprod, your own
model's written through portcheck.handin) is judged by the library's command, `python -m portcheck check`,
which this script calls: the guide's rule, the measured one where torch's float64 run is handed in, the
strict one beside, the run records and the diff logs (see portcheck/cli.py):

    python pipeline/check_log_reprod.py path/to/their/log_reprod
    python pipeline/check_log_reprod.py path/to/their/log_reprod --threshold train_align=0.002 --strict
"""
import argparse
import json
import math
import sys
from pathlib import Path

try:
    import portcheck.runtime  # first: offline mode, threads, allocator
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from bert_sst2 import diagnose, paths, steps, tolerances
from portcheck import cli, diff, handin, record, report
from portcheck.errors import PipelineError, run_main
from portcheck.fileio import load_npy

DIAGNOSTICS = report.DIAGNOSTICS
STEPS = {spec.number: tuple(p.name for p in spec.pairs) for spec in steps.BERT}
COMPANIONS = {"forward": ("forward_modules_stats",), "bp_align": ("grad_stats",),
              "train_align": ("train_curves", "weight_stats")}
STATS = {"forward": ("forward_modules_stats", tolerances.MODULE_OUTPUTS), "bp_align": ("grad_stats", tolerances.BP_GRAD)}


def load(folder: Path, name: str) -> dict:
    path = folder / name
    if not path.is_file():
        raise PipelineError(f"{path.name} missing")
    return load_npy(path)


def check_pair(folder: Path, pair: str, run_problems: dict) -> diff.CheckResult:
    spec = tolerances.PAIRS[pair]
    t, p = load(folder, f"{pair}_torch.npy"), load(folder, f"{pair}_paddle.npy")
    result = diff.compare(t, p, spec.tolerances, spec.default, name=pair)
    records = folder / DIAGNOSTICS
    passed, detail = record.same_run(folder / f"{pair}_torch.npy", folder / f"{pair}_paddle.npy",
                                     (records / f"{pair}_torch{record.SUFFIX}", records / f"{pair}_paddle{record.SUFFIX}"))
    result.findings.append(diff.Finding("same run", bool(passed), detail))  # a hand-in must prove it
    gone = handin.checks_gone(folder, pair) or cli.declared_rule(records, pair)[2]  # another pair's verdict there
    result.findings.append(diff.Finding("its check's log and verdict", not gone, gone or "beside the pair"))
    for stem in COMPANIONS.get(pair, ()):  # what the pair's statistics and curves are read from: the same run too
        passed, detail = record.same_run(records / f"{stem}_torch.npy", records / f"{stem}_paddle.npy",
                                         (records / f"{stem}_torch{record.SUFFIX}", records / f"{stem}_paddle{record.SUFFIX}"))
        result.findings.append(diff.Finding(f"{stem} same run", bool(passed), detail))
    for stem in (pair, *COMPANIONS.get(pair, ())):  # handin.last_run: a step not run last time, another script's record
        if stem in run_problems:
            result.findings.append(diff.Finding(f"{stem} of the hand-in's run", False, run_problems.pop(stem)))
    if pair in STATS:
        stem, tol = STATS[pair]
        stats = diagnose.compare_stats(load(records, f"{stem}_torch.npy"), load(records, f"{stem}_paddle.npy"), tol)
        bad = diagnose.first_over(stats)
        result.findings.append(diff.Finding(stem, bad is None, f"{len(stats.keys)} keys" + (f", first over: {bad}" if bad else "")))
    if pair == "train_align":
        for fw in diff.SIDES:
            curves, weights = load(records, f"train_curves_{fw}.npy"), load(records, f"weight_stats_{fw}.npy")
            finite = np.isfinite(curves["loss"]).all() and all(np.isfinite(v).all() for v in weights.values())
            result.findings.append(diff.Finding(f"{fw} finite", bool(finite), "losses and weights"))
    return result


def loosened(folder: Path, pair: str) -> list:
    """The flags the hand-in's own check loosened (its verdict, diagnostics/<pair>_diff.json), escaped."""
    path = folder / DIAGNOSTICS / f"{pair}_diff.json"
    try:
        flags = json.loads(path.read_text()).get("loosened", []) if path.is_file() else []
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        return ["its verdict file is unreadable"]
    return [report.one_line(str(f))[:120] for f in flags] if isinstance(flags, list) else ["its verdict file is malformed"]


def ours(folder: Path) -> bool:
    """A hand-in this pipeline wrote: its diagnostics/ holds Step 1's module statistics with their run record."""
    return (folder / DIAGNOSTICS / f"forward_modules_stats_torch{record.SUFFIX}").is_file()


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
    if not folder.is_dir():
        raise PipelineError(f"{folder} is not a folder: pass a log_reprod/ folder")
    if not ours(folder):  # the library judges it, as it judges any hand-in
        sys.exit(cli.run_check(folder, args))
    if args.threshold or args.strict or args.only:
        raise PipelineError("--threshold, --strict and --only are for a folder this pipeline did not write; this one is "
                            "re-derived with the step checks' own tolerances")
    red, run_problems = 0, handin.last_run(folder)
    for step, pairs in STEPS.items():
        parts = []
        for pair in pairs:
            try:
                result = check_pair(folder, pair, run_problems)
            except PipelineError as e:  # a missing or unreadable file: this step is red, the others still run
                why = run_problems.pop(pair, None)
                parts.append(f"{pair} RED ({report.one_line(str(e))}" + (f"; {why}" if why else "") + ")")
                red += 1
                continue
            failed = [k.key for k in result.failed_keys] + [f.name for f in result.findings if not f.passed]
            red += bool(failed)
            flags = loosened(folder, pair)
            parts.append(f"{pair} {'green' if not failed else 'RED'} ({len(result.keys)} keys"
                         + (f"; failed: {', '.join(report.one_line(f) for f in failed[:4])}" if failed else "")
                         + (f"; its diff log was judged with loosened tolerances: {'; '.join(flags)}" if flags else "")
                         + ")")
        print(f"Step {step}: " + "; ".join(parts))
    for stem, why in run_problems.items():
        print(report.one_line(f"{stem}: RED ({why})"))
        red += 1
    print(f"{paths.shown(folder)}: " + ("every step re-derived green" if not red else f"{red} pair(s) red"))
    sys.exit(1 if red else 0)


if __name__ == "__main__":
    run_main(main)
