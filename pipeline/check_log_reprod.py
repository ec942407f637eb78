"""Re-derive every step's verdict from a hand-in folder alone (default: log_reprod/).

    python pipeline/check_log_reprod.py                  # the repository's log_reprod/
    python pipeline/check_log_reprod.py path/to/log_reprod

A reviewer's command: it needs no weights, data or framework, only the folder. Each of the
guide's pairs at the top (forward, data, metric, loss, lr, bp_align, train_align) is compared
again with the same tolerances as the step checks (checks/tolerances.py), their run records
(diagnostics/*.run.json) must show the same run, and what is too big to hand in whole is
checked through its statistics: every module output of Step 1 and every gradient of Step 4
as [max |x|, mean |x|, rms] per side, whose differences can never exceed the real diff, so a
tampered value shows. Prints one line per step; exit 1 if any step is red or a file is missing.

A folder this pipeline did not write (no diagnostics/ with run records: a contestant's own hand-in,
written with reprod_log for any model) is judged as the guide judges it, with the strict verdict beside
it, one line per pair it holds (any <name>_torch.npy with its <name>_paddle.npy):

    python pipeline/check_log_reprod.py path/to/their/log_reprod
    python pipeline/check_log_reprod.py path/to/their/log_reprod --threshold train_align=0.002 --strict

guide: reprod_log's rule, every key's mean abs diff <= the pair's threshold (1e-6; train_align 0.0015);
strict: max abs diff within the same threshold, no NaN or Inf, equal shapes and dtypes, no missing key.
Each <name>_diff.log is read back: every logged value must be the recomputed one. Exit 1 when a pair
fails the guide's rule, holds NaN or Inf, or its diff log does not match it; --strict: also when a
pair fails the strict verdict.

A folder written through align/ (examples/resnet18/log_reprod, or your own model's: diagnostics/ holds
<pair>_torch64.npy, torch's float64 run of the pair) is judged by the guide's rule at the pair's threshold
and by the rule measured on the model (checks/calibrated.py), the three run records must show one run,
and every logged value must be the recomputed one:

    python pipeline/check_log_reprod.py examples/resnet18/log_reprod
"""
import argparse
import json
import math
import sys
from pathlib import Path

try:
    import common.runtime  # first: offline mode, threads, allocator
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from checks import calibrated, diagnose, diff, handin, report, tolerances
from common import paths, record, steps
from common.errors import PipelineError, run_main
from common.fileio import load_npy

DIAGNOSTICS = "diagnostics"
STEPS = {spec.number: tuple(p.name for p in spec.pairs) for spec in steps.BERT}
COMPANIONS = {"forward": ("forward_modules_stats",), "bp_align": ("grad_stats",),
              "train_align": ("train_curves", "weight_stats")}
STATS = {"forward": ("forward_modules_stats", tolerances.MODULE_OUTPUTS), "bp_align": ("grad_stats", tolerances.BP_GRAD)}


def load(folder: Path, name: str) -> dict:
    path = folder / name
    if not path.is_file():
        raise PipelineError(f"{path.name} missing")
    return load_npy(path)


def check_pair(folder: Path, pair: str) -> diff.CheckResult:
    spec = tolerances.PAIRS[pair]
    t, p = load(folder, f"{pair}_torch.npy"), load(folder, f"{pair}_paddle.npy")
    result = diff.compare(t, p, spec.tolerances, spec.default, name=pair)
    records = folder / DIAGNOSTICS
    passed, detail = record.same_run(folder / f"{pair}_torch.npy", folder / f"{pair}_paddle.npy",
                                     (records / f"{pair}_torch{record.SUFFIX}", records / f"{pair}_paddle{record.SUFFIX}"))
    result.findings.append(diff.Finding("same run", bool(passed), detail))  # a hand-in must prove it
    for stem in COMPANIONS.get(pair, ()):  # what the pair's statistics and curves are read from: the same run too
        passed, detail = record.same_run(records / f"{stem}_torch.npy", records / f"{stem}_paddle.npy",
                                         (records / f"{stem}_torch{record.SUFFIX}", records / f"{stem}_paddle{record.SUFFIX}"))
        result.findings.append(diff.Finding(f"{stem} same run", bool(passed), detail))
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


def threshold_flag(text: str) -> tuple:
    """PAIR=VALUE for --threshold, VALUE a finite number > 0."""
    name, sep, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not (sep and name and math.isfinite(number) and number > 0):
        raise PipelineError(f"--threshold {text!r}: give PAIR=VALUE with a finite VALUE > 0, e.g. train_align=0.002")
    return name, number


def judge_foreign(folder: Path, overrides: dict, strict: bool) -> int:
    """A hand-in this pipeline did not write: each pair's guide and strict verdicts, its diff log held
    against it. Returns the number of pairs that fail (see the module's docstring for what fails)."""
    found = handin.find_pairs(folder)
    pairs, red = found["pairs"], 0
    if not pairs:
        raise PipelineError(f"{paths.shown(folder)} holds no <name>_torch.npy with its <name>_paddle.npy: "
                            "pass the folder your reprod_log scripts wrote")
    for name, files in pairs.items():
        base = name.rsplit("/", 1)[-1]
        threshold = handin.guide_threshold(base, overrides)
        try:
            t, p = load_npy(files["torch"]), load_npy(files["paddle"])
        except PipelineError as e:
            print(f"{report.one_line(name)}: RED, unreadable ({report.one_line(str(e))})")
            red += 1
            continue
        guide = handin.guide_verdict(t, p, threshold)
        strict_result = handin.strict_verdict(t, p, threshold, name)
        print(report.one_line(f"{name}: {handin.describe_guide(guide)} | {handin.describe_strict(strict_result, threshold)}"))
        failed = not guide.passed or bool(handin.non_finite(strict_result)) or (strict and not strict_result.passed)
        if files["log"] is not None:
            logged, mismatches, unreadable = handin.held(files["log"], guide)
            if unreadable:
                failed = True
                print(report.one_line(f"  {files['log'].name}: {unreadable}"))
            elif logged:
                print(report.one_line(f"  {files['log'].name}: " + handin.describe_log(mismatches, len(logged))))
                if handin.other_threshold(logged, guide):
                    print(report.one_line(f"  {files['log'].name}: " + handin.other_threshold(logged, guide)))
            else:
                print(report.one_line(f"  {files['log'].name}: no reprod_log diff lines in it"))
            failed |= bool(mismatches)
        else:
            print(report.one_line(f"  no {base}_diff.log beside it: nothing to hold against"))
        red += failed
    for path in found["unpaired"]:
        print(report.one_line(f"unpaired: {path.relative_to(folder)} has no twin of the other framework"))
    guide_pairs = [p.name for spec in steps.BERT for p in spec.pairs]
    missing = [p for p in guide_pairs if p not in {n.rsplit("/", 1)[-1] for n in pairs}]
    if missing:
        print(f"not handed in: {', '.join(missing)}")
    print("same run not proven: no run records (diagnostics/*.run.json) tie the two sides to one run")
    return red


def judge_align(folder: Path) -> int:
    """A hand-in written through align/ (the ResNet-18 example, or your own model's): every pair at the top
    judged by the guide's rule at the pair's threshold and by the rule measured on the model, from the float64
    run beside it (diagnostics/<pair>_torch64.npy); the three run records must show one run, and the diff log
    must hold the recomputed values. Returns the number of red pairs."""
    below, red = folder / DIAGNOSTICS, 0
    names = sorted(f.name[:-len("_torch.npy")] for f in folder.glob("*_torch.npy") if f.is_file())
    if not names:
        raise PipelineError(f"{paths.shown(folder)} holds no <name>_torch.npy at its top: pass a log_reprod/ folder")
    for name in names:
        files = [folder / f"{name}_torch.npy", folder / f"{name}_paddle.npy", below / f"{name}{handin.EXACT}"]
        try:
            verdict = handin.judge_measured(
                name, *files, [below / f"{name}_{side}{record.SUFFIX}" for side in ("torch", "paddle", "torch64")],
                calibrated.guide_bound(name))
        except PipelineError as e:  # a missing or unreadable file: this pair is red, the others still run
            print(report.one_line(f"{name}: RED ({e})"))
            red += 1
            continue
        log = folder / f"{name}_diff.log"
        logged, mismatches, unreadable = handin.held(log, verdict.guide) if log.is_file() else ({}, [], "missing")
        passed = verdict.passed and bool(logged) and not mismatches
        red += not passed
        same = {True: "same run", False: "NOT the same run", None: "same run not proven"}[verdict.same_run[0]]
        print(report.one_line(f"{name}: {'green' if passed else 'RED'} | {handin.describe_guide(verdict.guide)} | "
                              f"{verdict.describe_measured()} | {handin.describe_strict(verdict.strict, verdict.guide.threshold)}"
                              f" | {same}" + ("" if verdict.same_run[0] else f" ({verdict.same_run[1]})")))
        print(report.one_line(f"  {log.name}: " + (handin.describe_log(mismatches, len(logged)) if logged
                                                   else f"{unreadable or 'holds no reprod_log diff lines'}: RED")))
    return red


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("folder", nargs="?", type=Path, help="a hand-in folder (default: log_reprod/)")
    ap.add_argument("--threshold", action="append", default=[], metavar="PAIR=VALUE",
                    help="a contestant's folder: the guide's threshold for one pair (repeatable; default 1e-6, "
                         "train_align 0.0015)")
    ap.add_argument("--strict", action="store_true", help="a contestant's folder: strict failures fail too")
    args = ap.parse_args()
    folder = (args.folder or paths.log_reprod()).expanduser()
    if not folder.is_dir():
        raise PipelineError(f"{folder} is not a folder: pass a log_reprod/ folder")
    if not (folder / DIAGNOSTICS).is_dir():  # not written by this pipeline: judged as the guide judges it
        red = judge_foreign(folder, dict(map(threshold_flag, args.threshold)), args.strict)
        print(f"{paths.shown(folder)}: " + ("every pair passes" + (" both verdicts" if args.strict else " the guide's rule")
                                            if not red else f"{red} pair(s) red"))
        sys.exit(1 if red else 0)
    if args.threshold or args.strict:
        raise PipelineError("--threshold and --strict are for a folder this pipeline did not write; this one is "
                            "re-derived with the step checks' own tolerances")
    if any((folder / DIAGNOSTICS).glob(f"*{handin.EXACT}")):
        red = judge_align(folder)
        print(f"{paths.shown(folder)}: " + ("every pair re-derived green" if not red else f"{red} pair(s) red"))
        sys.exit(1 if red else 0)
    red = 0
    for step, pairs in STEPS.items():
        parts = []
        for pair in pairs:
            try:
                result = check_pair(folder, pair)
            except PipelineError as e:  # a missing or unreadable file: this step is red, the others still run
                parts.append(f"{pair} RED ({report.one_line(str(e))})")
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
    print(f"{paths.shown(folder)}: " + ("every step re-derived green" if not red else f"{red} pair(s) red"))
    sys.exit(1 if red else 0)


if __name__ == "__main__":
    run_main(main)
