"""The reviewer's command: judge any hand-in, ours or a contestant's, from the folder alone.

    python -m portcheck check path/to/log_reprod                   # every <name>_torch.npy with its _paddle.npy
    python -m portcheck check path/to/log_reprod --threshold train_align=0.002 --strict
    python -m portcheck check portcheck_quickstart/log_reprod --only forward   # a partial hand-in
    python -m portcheck pair forward_torch.npy forward_paddle.npy  # any two reprod_log files

Every pair gets one line with its verdicts:
  guide     reprod_log's rule (ReprodDiffHelper's compare_info and report), recomputed: the same keys, every
            key's mean abs diff <= the pair's threshold; what reprod_log transposed, broadcast or passed as NaN
            is said;
  measured  where the hand-in holds torch's float64 run (diagnostics/<pair>_torch64.npy, written through
            portcheck.handin): every key's max diff within K x torch's own fp32 error, and its mean within
            the threshold;
  strict    the max abs diff within the same threshold, no NaN or Inf, equal shapes and dtypes, no key missing,
            integers exactly equal;
  same run  the run records (diagnostics/<pair>_{torch,paddle}.run.json, or beside the files) tie both sides to
            one run; without them, "not proven";
  training  train_align with the training logs portcheck.training wrote (diagnostics/train_log_*.npy): the
            curves judged again step by step (lr, data order, modes, weight norm), the guide's cause named.
A pair's kind (diagnostics/<pair>_diff.json): computed pairs need the float64 run, exact pairs (data, metric,
lr) every value, shape and dtype equal (the first difference is named), outcomes (train_align) the task's
threshold.
Each <name>_diff.log is read back: every logged value must be the recomputed one. A verdict its writer judged
with tolerances a flag loosened (the "loosened" list of diagnostics/<pair>_diff.json) says so on its line.
A client adds its own verdicts to a pair's line through check(..., extra=): its findings, each red one red.

The threshold of a pair: --threshold PAIR=VALUE, else the one the hand-in's writer judged it at
(diagnostics/<pair>_diff.json, when portcheck wrote it; never looser than the guide's own, but for an outcome's,
a task's own, whose line then says "the task's X, looser than the guide's"), else the guide's
(portcheck.tolerances.GUIDE), else reprod_log's default 1e-6.
A hand-in holds every pair of the guide (forward, data, metric, loss, lr, bp_align, train_align); each one
missing is red. --only PAIR,... judges a partial hand-in (your own model's forward alone, say): those pairs
must be there, and the verdict says it is partial.
Exit 1 when a pair fails the guide's rule or the measured one, holds NaN or Inf, its diff log does not
match it, its run records show two runs, or a pair asked for is missing; --strict: also when a pair fails the
strict verdict. Exit 2 on bad input, with one line.
"""
import argparse
import json
import math
import os
import sys
from pathlib import Path

from portcheck import calibrated, handin, record, report, same_run, tolerances, training
from portcheck.diff import Finding, load_pair
from portcheck.errors import PipelineError, run_main
from portcheck.fileio import load_npy, open_regular, writable

DIAGNOSTICS = report.DIAGNOSTICS
PAIR_SIGNATURE = "written by portcheck pair"  # the mark of a log `pair --log` may overwrite


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


def verdict_file(below, name: str) -> tuple:
    """(<below>/<name>_diff.json's data, or None; why it is unreadable, or ""): the verdict the hand-in's writer
    left in our diagnostics/ folder `below` (None: a contestant's folder), read once for declared_rule and
    loosened."""
    if below is None or not os.path.lexists(below / f"{name}_diff.json"):
        return None, ""
    path = below / f"{name}_diff.json"
    try:
        data = json.loads(handin.read_log(path))
    except (ValueError, RecursionError, OSError):
        return None, f"{path.name} is unreadable"
    return (data, "") if isinstance(data, dict) else (None, f"{path.name} is unreadable")


def declared_rule(name: str, data, unreadable: str = "") -> tuple:
    """(threshold, k, problem, kind) the hand-in's writer judged a pair by (its verdict_file, written by
    handin.judge_and_log), or Nones: a contestant's pair (no data), or a client's own tuned verdict."""
    if data is None:
        return None, None, unreadable, None
    file = f"{name}_diff.json"
    threshold, k, kind = data.get("threshold"), data.get("k", calibrated.K), data.get("kind", "computed")
    if data.get("name", name) != name:  # the pair's files and verdict replaced by another pair's
        return None, None, f"{file} is the verdict of {report.one_line(repr(data['name']))[:40]}: one pair's " \
                           "files handed in as another's", None
    if threshold is None:  # a verdict written by a client's own tuned check: no rule of the library's in it
        return None, None, "", None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold < math.inf:
        return None, None, f"{file} gives threshold {report.one_line(repr(threshold))[:40]}", None
    if k not in (calibrated.K, calibrated.K_BACKWARD):
        return None, None, (f"{file} gives K {report.one_line(repr(k))[:40]}, not the library's "
                            f"{calibrated.K:g} or {calibrated.K_BACKWARD:g}"), None
    problem = ""
    try:
        kind = tolerances.kind_of(name, kind)
    except PipelineError:
        problem, kind = f"{file} gives a kind the library does not know", None
    if kind and name in tolerances.GUIDE and kind != tolerances.GUIDE[name].kind:  # e.g. no float64 run
        problem = f"judged as {kind}, but the guide's {name} is {tolerances.GUIDE[name].kind}"
    return float(threshold), float(k), problem, kind


def loosened(data) -> list:
    """The flags that loosened the tolerances a pair's verdict was judged with (the "loosened" list a
    CheckResult writes into its verdict_file), one line each; [] without one (an unreadable verdict is
    declared_rule's problem)."""
    flags = data.get("loosened", []) if data else []
    return [report.one_line(str(f))[:120] for f in flags] if isinstance(flags, list) else ["a malformed list"]


def client_findings(extra, folder: Path, name: str) -> list:
    """extra(folder, name) -> [diff.Finding], a client's own verdicts on a pair; its error is a red one."""
    try:
        return list(extra(folder, name)) if extra else []
    except PipelineError as e:
        return [Finding("its client's check", False, report.one_line(str(e)))]


def judge_pair(folder: Path, name: str, files: dict, overrides: dict, strict: bool, run_problem: str = None,
               extra=None) -> tuple:
    """Print one pair's line (and its diff log's); (whether it is red, its torch side's keys when no run record
    ties the pair to its run, else None). run_problem: why the pair is not of the hand-in's run (handin.last_run);
    extra: a client's findings on the pair (check's)."""
    base = name.rsplit("/", 1)[-1]
    below = handin.ours(files["torch"].parent)  # None: a contestant's folder, or a diagnostics/ of their own
    verdict, unreadable = verdict_file(below, base)
    threshold, k, problem, kind = declared_rule(base, verdict, unreadable)
    guide_own = tolerances.guide_threshold(base)
    if base in overrides:
        threshold = overrides[base]
    elif threshold is None:
        threshold = guide_own
    elif base in tolerances.GUIDE and threshold > guide_own and kind != "outcome":  # an outcome's is the task's:
        # green at it, its line saying "the task's X, looser than the guide's" (tolerances.looser_task)
        problem = f"judged at {threshold:g}, looser than the guide's {guide_own:g} for {base}"
    try:
        t, p = load_npy(files["torch"]), load_npy(files["paddle"])
    except PipelineError as e:
        print(report.one_line(f"{name}: RED, unreadable ({e})"))
        return True, None
    records = [below / f"{base}_{side}{record.SUFFIX}" if below else None for side in ("torch", "paddle", "torch64")]
    records = [r if r and r.is_file() else None for r in records]
    if below and "/" not in name and any(records[:2]) and not problem:
        problem = handin.checks_gone(files["torch"].parent, base)  # a pair this project wrote, as its check left it
    exact = below / f"{base}{handin.EXACT}" if below else None
    measured = None
    try:
        if (exact and exact.is_file()) or kind in ("exact", "outcome"):  # written by the library: judged by its kind
            measured = handin.judge_measured(base, files["torch"], files["paddle"], exact, records[:3], threshold,
                                             k or calibrated.K, kind or "computed")
            guide, strict_result, same = measured.guide, measured.strict, measured.same_run
        else:
            guide = handin.guide_verdict(t, p, threshold, base)
            strict_result = handin.strict_verdict(t, p, threshold, name)
            same = record.same_run(files["torch"], files["paddle"], records[:2])
            same = (same[0], same[1])
    except PipelineError as e:  # a record that is not one, a float64 run that cannot be read
        print(report.one_line(f"{name}: RED ({e})"))
        return True, None
    red = (not guide.passed or bool(handin.non_finite(strict_result)) or same[0] is False
           or (measured is not None and not measured.measured_passed) or bool(problem)
           or (strict and not strict_result.passed))
    log_line = ""
    if files["log"] is not None:
        logged, mismatches, unreadable = handin.held(files["log"], guide)
        if unreadable:
            red, log_line = True, f"{unreadable}: RED"
        elif logged:
            log_line = handin.describe_log(mismatches, len(logged))
            other = handin.other_threshold(logged, guide, threshold)
            log_line += f"; {other}" if other else ""
        else:
            log_line = "no reprod_log diff lines in it"
        red |= bool(mismatches)
    trained = None
    if base == training.PAIR and below and all((below / f"{training.LOG}_{side}.npy").is_file() for side in ("torch", "paddle")):
        try:  # the curves a portcheck training log handed in beside the outcome: judged again, from the files
            torch_log, paddle_log, logged = training.logs(below, records[:2])
            trained = training.judge_training(torch_log, paddle_log, threshold, logged)
        except PipelineError as e:
            print(report.one_line(f"{name}: RED (its training logs: {e})"))
            return True, None
        red |= not trained.passed
    copy = record.copied(files["torch"], files["paddle"])  # then same_run is False too: red
    findings = client_findings(extra, folder, name)
    red |= bool(problem or run_problem) or not all(f.passed for f in findings)
    parts = [f"{name}: {'RED' if red else 'green'}", handin.describe_guide(guide, threshold, copy)]
    if measured is not None:
        parts.append(measured.describe_measured())
    parts.append(handin.describe_strict(strict_result, threshold, copy))
    parts.append({True: "same run", False: f"NOT the same run ({same[1]})", None: "same run not proven"}[same[0]])
    parts += [f"{f.name} {'green' if f.passed else 'RED'} ({f.detail})" for f in findings]
    flags = loosened(verdict)
    parts += [f"judged with loosened tolerances: {'; '.join(flags)}"] if flags else []
    parts += [f"RED: {why}" for why in (problem, run_problem) if why]
    print(report.one_line(" | ".join(parts)))
    print(report.one_line(f"  {files['log'].name}: {log_line}" if files["log"] is not None
                          else f"  no {base}_diff.log beside it: nothing to hold against"))
    for line in trained.lines() if trained is not None else ():
        print(report.one_line(f"  {line}"))
    return red, tuple(t) if same[0] is None else None


def borrowed(held: dict) -> list:
    """Flags for pairs whose keys look like another pair's ({pair: its torch keys}, for the pairs no run record
    ties to their run): pairs holding the same keys, or a key named after another pair of the folder (forward
    holding 'loss'). Run records and diff logs make such a hand-in red; without them (a contestant's folder)
    only the keys can say it, and may be wrong."""
    out, groups, bases = [], {}, {n.rsplit("/", 1)[-1] for n in held}
    for name, keys in held.items():
        groups.setdefault(tuple(sorted(keys)), []).append(name)
        named = [k for k in keys if k in bases and k != name.rsplit("/", 1)[-1]]
        if named:
            out.append(f"flagged: {name} holds key {named[0]!r}, the name of another pair here: check each pair's "
                       "files are its own")
    out += [f"flagged: {', '.join(names)} hold the same keys ({', '.join(keys[:3])}): check each pair's files are "
            "its own" for keys, names in groups.items() if len(names) > 1]
    return out


def check(folder, overrides: dict = None, strict: bool = False, only=None, extra=None) -> int:
    """Judge every pair of a hand-in folder and print one line each; the number of red pairs. A hand-in holds
    every pair of the guide: each one missing is red, unless `only` names the pairs a partial hand-in is asked
    for (those must be there; the verdict says it is partial). extra: a client's own verdicts, a callable
    (folder, pair name) -> [diff.Finding] whose findings join the pair's line, each red one making it red."""
    folder = Path(folder).expanduser()
    expected = tolerances.GUIDE if only is None else _asked(only)
    if not folder.is_dir():
        raise PipelineError(f"{folder} is not a folder: pass a log_reprod/ folder")
    found = handin.find_pairs(folder)
    pairs, red = found["pairs"], 0
    if not pairs:
        raise PipelineError(f"{report.one_line(str(folder))} holds no <name>_torch.npy with its <name>_paddle.npy: "
                            "pass the folder your reprod_log scripts wrote")
    unknown = [n for n in (overrides or {}) if n not in {p.rsplit("/", 1)[-1] for p in pairs}]
    if unknown:  # a mistyped name would leave its pair judged at another threshold than the one meant
        raise PipelineError(f"--threshold {unknown[0]}: the folder holds no pair of that name (its pairs: "
                            f"{', '.join(sorted(p for p in pairs if '/' not in p))}); name one of them")
    held = {}
    run_problems = handin.last_run(folder)
    for name, files in pairs.items():
        is_red, keys = judge_pair(folder, name, files, overrides or {}, strict,
                                  run_problems.pop(name, None) if "/" not in name else None, extra)
        red += is_red
        if keys:
            held[name] = keys
    for stem, why in run_problems.items():  # a companion of a pair, the run's record itself
        print(report.one_line(f"{stem}: RED | {why}"))
        red += 1
    for line in borrowed(held):
        print(report.one_line(line))
    for path in found["unpaired"]:
        print(report.one_line(f"unpaired: {path.relative_to(folder)} has no twin of the other framework"))
    for what in found["unread"]:  # a pair there was never judged: the folder is not green
        print(report.one_line(f"RED: not all of the folder was read: {what}; hand in a folder of the pairs alone"))
    red += bool(found["unread"])
    names = {n.rsplit("/", 1)[-1] for n in pairs}
    below = handin.ours(folder)
    judged = sorted(f.name.removesuffix("_diff.json") for f in below.glob("*_diff.json")) if below else []
    for name in (n for n in judged if n not in names):  # its writer judged it: the hand-in lists it
        print(report.one_line(f"{name}: RED | judged ({DIAGNOSTICS}/{name}_diff.json) but its pair is not in the "
                              "folder: hand in its _torch.npy and _paddle.npy"))
        red += 1
    missing = [p for p in expected if p not in names | set(judged)]
    if missing:  # less than was asked for is never green
        print(report.one_line(f"not handed in: {', '.join(missing)}: RED | the guide asks for every one of its pairs"
                              + (" (--only names the ones a partial hand-in holds)" if only is None else
                                 " (asked for by --only)")))
        red += len(missing)
    if only is not None:
        print(report.one_line(f"partial hand-in: only {', '.join(expected)} asked for (--only); the guide's other "
                              "pairs not judged"))
    return red


def _asked(only) -> tuple:
    names = tuple(dict.fromkeys(n.strip() for n in (only.split(",") if isinstance(only, str) else only)))
    if not names or not all(names):
        raise PipelineError(f"--only {only!r}: name the pairs, comma-separated, e.g. --only forward,loss")
    return names


def pair(torch_npy: Path, paddle_npy: Path, threshold=None, strict: bool = False, log: Path = None) -> int:
    """Two reprod_log files: both verdicts printed (and written to `log`, never over a file `pair` did not
    write); the exit code."""
    if threshold is not None and not (math.isfinite(threshold) and threshold >= 0):
        raise PipelineError(f"--threshold must be a finite number >= 0, got {threshold}")
    if torch_npy.absolute() == paddle_npy.absolute():  # a link or a copy is judged red below (record.copied)
        raise PipelineError(f"{torch_npy} given as both sides: pass the torch file, then the Paddle file")
    name = torch_npy.name.removesuffix(".npy").removesuffix("_torch")
    threshold = threshold if threshold is not None else tolerances.guide_threshold(name)
    if log is not None:  # every check on the output before the comparison, not after its report
        inputs = [p.resolve() for f in (torch_npy, paddle_npy) for p in (f, record.path_for(f))]
        if log.resolve() in inputs:
            raise PipelineError(f"--log {log} is an input or its run record: choose another file")
        writable(log)
        if log.exists() and not _ours(log):
            raise PipelineError(f"--log {log} exists and was not written by this command (a diff log of your "
                                "own?): choose another file")
    torch_data, paddle_data = load_pair(torch_npy, paddle_npy)
    guide = handin.guide_verdict(torch_data, paddle_data, threshold, name)
    result = handin.strict_verdict(torch_data, paddle_data, threshold, name)
    same_run.check(result, torch_npy, paddle_npy, record_paths=handed_in_records(torch_npy, paddle_npy))
    other_run = [f.name for f in result.findings if not f.passed]
    copy = record.copied(torch_npy, paddle_npy)
    failed = not guide.passed or bool(handin.non_finite(result)) or bool(other_run) or (strict and not result.passed)
    result.notes[:0] = [handin.describe_guide(guide, threshold, copy), handin.describe_strict(result, threshold, copy)]
    result.notes.append(f"exit {int(failed)}: " + ("the guide's rule fails" if not guide.passed else
                        "a value is NaN or Inf" if handin.non_finite(result) else
                        f"not the same run ({', '.join(other_run)})" if other_run else
                        "the strict verdict fails (--strict)" if failed else
                        "the guide's rule passes" + ("" if result.passed else "; the strict verdict does not "
                                                     "(--strict makes that fail)")))
    result.notes.append(PAIR_SIGNATURE)
    if log is not None:
        report.write(result, log, verdict=False)
    else:
        for message, echo in report.log_lines(result):
            if echo:
                print(report.one_line(message))
    return 1 if failed else 0


def handed_in_records(*files) -> list:
    """Each result's run record where a hand-in keeps it: beside the file, else in portcheck's diagnostics/ beside
    it (a log_reprod/ folder; None: beside, or none). Results written through portcheck carry run records."""
    out = []
    for f in map(Path, files):
        below = handin.ours(f.parent)
        kept = below / record.path_for(f).name if below is not None else None
        out.append(kept if kept is not None and not record.path_for(f).exists() and kept.is_file() else None)
    return out


def _ours(log: Path) -> bool:
    try:
        with open_regular(log) as f:
            head = f.read(1 << 20)
    except OSError:
        return False
    return PAIR_SIGNATURE.encode() in head or b"written by pipeline/check_pair.py" in head


def parser(prog: str = "python -m portcheck") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{check,pair}")
    c = sub.add_parser("check", help="judge every pair of a hand-in folder", allow_abbrev=False)
    c.add_argument("folder", type=Path, help="a hand-in folder (log_reprod/)")
    add_check_flags(c)
    p = sub.add_parser("pair", help="judge two reprod_log files", allow_abbrev=False)
    p.add_argument("torch_npy", type=Path, help="the PyTorch side's .npy (a ReprodLogger dict of arrays)")
    p.add_argument("paddle_npy", type=Path, help="the Paddle side's .npy")
    p.add_argument("--threshold", type=float, help="the guide's threshold on each key's mean abs diff, and the "
                   "strict verdict's on its max (default: the guide's for the pair's name, else 1e-6; 0: exact)")
    p.add_argument("--strict", action="store_true", help="exit 1 when the strict verdict fails too")
    p.add_argument("--log", type=Path, help="also write the log here (reprod_log's format); no file otherwise")
    return ap


def add_check_flags(ap):
    ap.add_argument("--threshold", action="append", default=[], metavar="PAIR=VALUE",
                    help="one pair's threshold (repeatable; default: the hand-in's own, else the guide's)")
    ap.add_argument("--strict", action="store_true", help="strict failures fail too")
    ap.add_argument("--only", metavar="PAIR,...", help="a partial hand-in: the pairs it is asked for (default: "
                    "every pair of the guide, each missing one red)")


def run_check(folder, args, extra=None) -> int:
    given = [threshold_flag(t) for t in args.threshold]
    twice = sorted({n for n, _ in given if [m for m, _ in given].count(n) > 1})
    if twice:
        raise PipelineError(f"--threshold given twice for {', '.join(twice)}: give each pair's once")
    red = check(folder, dict(given), args.strict, args.only, extra)
    print(report.one_line(f"{folder}: " + ("every pair green" + (" on every verdict" if args.strict else "")
                                            + (f" (partial: --only {args.only})" if args.only else "")
                                            if not red else f"{red} pair(s) red")))
    return 1 if red else 0


def main(argv=None):
    def go():
        args = parser().parse_args(argv)
        if args.command == "check":
            return run_check(args.folder, args)
        return pair(args.torch_npy, args.paddle_npy, args.threshold, args.strict, args.log)
    sys.exit(run_main(go))
