"""The reviewer's command: judge any hand-in, ours or a contestant's, from the folder alone.

    python -m portcheck check path/to/log_reprod                   # every <name>_torch.npy with its _paddle.npy
    python -m portcheck check path/to/log_reprod --threshold train_align=0.002 --strict
    python -m portcheck check portcheck_quickstart/log_reprod --only forward   # a partial hand-in
    python -m portcheck check path/to/log_reprod --csv figures.csv  # and every key's figures, a row per key and rule
    python -m portcheck pair forward_torch.npy forward_paddle.npy  # any two reprod_log files
    python -m portcheck layers --torch llama-hf/ --paddle llama-pd/  # two checkpoints, block by block (stream.py)
    python -m portcheck layers --torch llama-hf/ --paddle llama-pd/ --tp 2  # Paddle's split across 2 ranks
    python -m portcheck generate --torch llama-hf/ --paddle llama-pd/ --prompt-ids prompt.npy  # decoding, step by step
    python -m portcheck check path/to/log_reprod --html page.html  # and the verdicts as one page (portcheck.view)
    python -m portcheck view path/to/log_reprod     # that page, made anew and opened in your browser

Every pair gets one line with its verdicts:
  guide     reprod_log's rule (ReprodDiffHelper's compare_info and report), recomputed: the same keys, every
            key's mean abs diff <= the pair's threshold; what reprod_log transposed, broadcast or passed as NaN
            is said;
  measured  where the hand-in holds torch's float64 run (diagnostics/<pair>_torch64.npy, written through
            portcheck.pipeline.handin): every key's max diff within K x torch's own fp32 error, and its mean within
            the threshold;
  strict    the max abs diff within the same threshold, no NaN or Inf, equal shapes and dtypes, no key missing,
            integers exactly equal;
  same run  the run records (diagnostics/<pair>_{torch,paddle}.run.json, or beside the files) tie both sides to
            one run; without them, "not proven";
  training  train_align with the training logs portcheck.pipeline.training wrote (diagnostics/train_log_*.npy): the
            curves judged again step by step (lr, data order, modes, weight norm), the guide's cause named.
A pair's kind (diagnostics/<pair>_diff.json): computed pairs need the float64 run, exact pairs (data, metric,
lr) every value, shape and dtype equal (the first difference is named), outcomes (train_align) the task's
threshold.
Each <name>_diff.log is read back: every logged value must be the recomputed one. A verdict its writer judged
with tolerances a flag loosened (the "loosened" list of diagnostics/<pair>_diff.json) says so on its line.
A client adds its own verdicts to a pair's line through check(..., extra=): its findings, each red one red.
A `portcheck run` hand-in also holds `config` (diagnostics/config_{torch,paddle}.json with their run records): every
configuration line run said, re-derived from the two records (runconfig.from_folder), a difference run judged by
its steps (padding_idx) from what run handed in of them; one line, red for each red one. Its records name the run
its pairs' records name, and a run's pairs handed in without it are red.
A folder the library's writers handed in lists every file with its sha256 (diagnostics/manifest.json, sealed): a file
changed, gone or added since is one red line, "handed in" (record.manifest_problems).

The rule of a pair comes from the reviewer and the library, never from the folder: its threshold is
--threshold PAIR=VALUE, else the guide's (portcheck.core.tolerances.GUIDE), else reprod_log's default 1e-6; its kind
--kind PAIR=KIND, else the guide's, else computed; K the library's. What a hand-in's own verdict file declares
(diagnostics/<pair>_diff.json: threshold, K, kind) is read and any difference said on the pair's line, red under
--strict; a computed pair the library wrote is red without its float64 run.
A hand-in holds the five pairs the guide lists as handed in (forward, metric, loss, bp_align, train_align); each
one missing is red; data and lr, which the guide walks through, are judged when present. --only PAIR,... judges
a partial hand-in (your own model's forward alone, say): those pairs must be there, and the verdict says it is
partial. A pair named <name>_torch_<tag>.npy with <name>_paddle_<tag>.npy is the pair <name>.
Exit 1 when a pair fails the guide's rule or the measured one, holds NaN or Inf, its diff log does not
match it, its run records show two runs, or a pair asked for is missing; --strict: also when a pair fails the
strict verdict. Exit 2 on bad input, with one line.
"""
import argparse
import contextlib
import json
import math
import os
import sys
from pathlib import Path

from portcheck import view
from portcheck.core import calibrated, notices, page, record, report, same_run, tolerances
from portcheck.pipeline import bound_page, handin, kink_files, own_runs, training, training_log, whole
from portcheck.pipeline import guide as reprod  # reprod_log's rule and diff log (`guide` is a verdict here)
from portcheck.core.diff import Finding, first_diverging, load_pair
from portcheck.core.errors import PipelineError, fail, run_main
from portcheck.core.fileio import load_npy, open_regular, writable

DIAGNOSTICS = report.DIAGNOSTICS
PAIR_SIGNATURE = "written by portcheck pair"  # the mark of a log `pair --log` may overwrite


def kind_flag(text: str) -> tuple:
    """PAIR=KIND for --kind, KIND one of tolerances.KINDS."""
    name, sep, kind = text.partition("=")
    if not (sep and name and kind in tolerances.KINDS):
        raise PipelineError(f"--kind {text!r}: give PAIR=KIND with KIND one of {', '.join(tolerances.KINDS)}, "
                            "e.g. acc=outcome [PC120]")
    return name, kind


def threshold_flag(text: str) -> tuple:
    """PAIR=VALUE for --threshold, VALUE a finite number > 0."""
    name, sep, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not (sep and name and math.isfinite(number) and number > 0):
        raise PipelineError(f"--threshold {text!r}: give PAIR=VALUE with a finite VALUE > 0, e.g. train_align=0.002 "
                            "[PC121]")
    return name, number


def verdict_file(below, name: str) -> tuple:
    """(<below>/<name>_diff.json's data, or None; why it is unreadable, or ""): the verdict the hand-in's writer
    left in our diagnostics/ folder `below` (None: a contestant's folder), read once for declared_rule and
    loosened."""
    if below is None or not os.path.lexists(below / f"{name}_diff.json"):
        return None, ""
    path = below / f"{name}_diff.json"
    try:
        data = json.loads(reprod.read_log(path))
    except (ValueError, RecursionError, OSError):
        return None, f"{path.name} is unreadable"
    return (data, "") if isinstance(data, dict) else (None, f"{path.name} is unreadable")


def declared_rule(name: str, data, unreadable: str = "") -> tuple:
    """(threshold, k, kind, problem) the hand-in's writer declares it judged a pair by (its verdict_file, written
    by handin.judge_and_log), Nones where it declares none: a contestant's pair (no data), or a client's own tuned
    verdict (no threshold). What it declares is read, never used: own_rule says what judges the pair."""
    if data is None:
        return None, None, None, unreadable
    file = f"{name}_diff.json"
    threshold, k, kind = data.get("threshold"), data.get("k"), data.get("kind")
    if data.get("name", name) != name:  # the pair's files and verdict replaced by another pair's
        return None, None, None, f"{file} is the verdict of {report.one_line(repr(data['name']))[:40]}: one " \
                                 "pair's files handed in as another's"
    if threshold is None:
        if k is None and kind is None:  # a verdict written by a client's own tuned check: no rule of the library's
            return None, None, None, ""
        return None, None, None, f"{file} gives a K or kind but no threshold: not a verdict the library wrote"
    for field, value in (("threshold", threshold), ("K", k)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 < value < math.inf):
            return None, None, None, f"{file} gives {field} {report.one_line(repr(value))[:40]}"
    if kind is not None and kind not in tolerances.KINDS:
        return None, None, None, f"{file} gives a kind the library does not know ({report.one_line(repr(kind))[:40]})"
    return float(threshold), None if k is None else float(k), kind, ""


def own_rule(name: str, overrides: dict, kinds: dict) -> tuple:
    """(threshold, k, kind, what set them) a pair is judged by: the reviewer's flags (--threshold, --kind), else
    the guide's table, else the library's defaults (reprod_log's 1e-6, K, computed). Never the folder's own."""
    guide = tolerances.GUIDE.get(name)
    threshold = overrides.get(name, tolerances.guide_threshold(name))
    k = calibrated.multiple(bool(guide and guide.after_steps))
    kind = kinds.get(name) or tolerances.kind_of(name)
    said = "--threshold" if name in overrides else "the guide's" if guide else "reprod_log's default"
    return threshold, k, kind, said


def declared_differs(name: str, declared: tuple, used: tuple, said: str) -> list:
    """What a pair's own verdict file declares otherwise than the rule that judges it (own_rule), one phrase each:
    said on the pair's line, red under --strict; the folder's own value never decides."""
    out = []
    for field, mine, theirs in zip(("threshold", "K", "kind"), used, declared):
        if theirs is not None and theirs != mine and not (field != "kind" and math.isclose(theirs, mine, rel_tol=1e-5)):
            # a threshold given as printed (0.00694444 for 2.5 / 360) is the one judged at
            looser = (theirs > mine) if field != "kind" else tolerances.looser_kind(theirs, mine)
            out.append(f"{field} {theirs:g}" if field != "kind" else f"kind {theirs}")
            out[-1] += f" ({'looser' if looser else 'other'} than the {mine:g} it is judged at)" if field != "kind" \
                else f" ({'looser' if looser else 'other'} than the {mine} it is judged as)"
    if not out:
        return []
    how = (f"--threshold {name}={declared[0]:g}" if declared[0] is not None and declared[0] != used[0] else "") + \
        (f" --kind {name}={declared[2]}" if declared[2] is not None and declared[2] != used[2] else "")
    return [f"its {DIAGNOSTICS}/{name}_diff.json declares {', '.join(out)}, not used (a folder's own files never "
            f"loosen its verdict; threshold: {said}" + (f"; a reviewer's {how.strip()} judges at it" if how else "")
            + ")"]


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
               extra=None, kinds: dict = None, rows: list = None) -> tuple:
    """Print one pair's line (and its diff log's); (whether it is red, its torch side's keys when no run record
    ties the pair to its run, else None). run_problem: why the pair is not of the hand-in's run (handin.last_run);
    extra: a client's findings on the pair (check's); rows: a list its keys' figures are added to (report.figures:
    each key by the guide's rule, and by the measured rule where the pair is judged by it)."""
    base, kinds = name.rsplit("/", 1)[-1], kinds or {}
    below = handin.ours(files["torch"].parent)  # None: a contestant's folder, or a diagnostics/ of their own
    verdict, unreadable = verdict_file(below, base)
    *declared, problem = declared_rule(base, verdict, unreadable)
    threshold, k, kind, said = own_rule(base, overrides, kinds)
    if declared[2] and base not in kinds and tolerances.looser_kind(kind, declared[2]):
        kind = declared[2]  # a stricter kind than the pair's own (exact for computed) loosens nothing: judged by it
    differs = declared_differs(base, tuple(declared), (threshold, k, kind), said)
    try:
        t, p = load_npy(files["torch"]), load_npy(files["paddle"])
    except PipelineError as e:
        print(report.one_line(f"{name}: RED, unreadable ({e}) [PC135]"))
        return True, None
    records = [below / f"{base}_{side}{record.SUFFIX}" if below else None for side in ("torch", "paddle", "torch64")]
    records = [r if r and r.is_file() else None for r in records]
    if below and "/" not in name and any(records[:2]) and not problem:
        problem = handin.checks_gone(files["torch"].parent, base)  # a pair this project wrote, as its check left it
    exact = below / f"{base}{handin.EXACT}" if below else None
    measured = None
    # judged by its kind: a pair the library wrote (its verdict file declares a rule, or its float64 run is there),
    # or one the reviewer names a kind for; a computed one without its float64 run cannot be, and is red
    library = declared[0] is not None or bool(exact and os.path.lexists(exact)) or base in kinds
    if library and kind == "computed" and not (exact and exact.is_file()) and not problem:
        problem = (f"{DIAGNOSTICS}/{base}{handin.EXACT} missing: a computed pair is judged on torch's float64 run, "
                   "which its check writes; run its check again")
    taken_lines = []
    try:
        if library and not (kind == "computed" and problem):
            # torch's runs taking Paddle's side of a kink, where the pair's check judged with them (bound to this run)
            taken, taken_lines = kink_files.load_kinks(below, base, files["torch"], files["paddle"], records[0]) \
                if kind == "computed" and below else ({}, [])
            measured = handin.judge_measured(base, files["torch"], files["paddle"], exact, records[:3], threshold,
                                             k, kind, taken.get(kink_files.TAKEN), taken.get(kink_files.BRANCH))
            guide, strict_result, same = measured.guide, measured.strict, measured.same_run
        else:
            guide = reprod.guide_verdict(t, p, threshold, base)
            strict_result = reprod.strict_verdict(t, p, threshold, name)
            same = record.same_run(files["torch"], files["paddle"], records[:2])
            same = (same[0], same[1])
    except PipelineError as e:  # a record that is not one, a float64 run that cannot be read
        print(report.one_line(f"{name}: RED ({e}) [PC136]"))
        return True, None
    if rows is not None:
        rows += report.figures(guide.keys, name) + (report.figures(
            measured.rows, name, first=first_diverging(measured.rows)) if measured is not None else [])
    red = (not guide.passed or bool(reprod.non_finite(strict_result)) or same[0] is False
           or (measured is not None and not (measured.measured_passed and all(ok for _, ok, _ in measured.also)))
           or bool(problem)
           or (strict and not strict_result.passed))
    log_line = ""
    if files["log"] is not None:
        logged, mismatches, unreadable = reprod.held(files["log"], guide)
        if unreadable:
            red, log_line = True, f"{unreadable}: RED [PC137]"
        elif logged:
            log_line = reprod.describe_log(mismatches, len(logged))
            other = reprod.other_threshold(logged, guide, threshold)
            log_line += f"; {other}" if other else ""
        else:
            log_line = "no reprod_log diff lines in it"
        red |= bool(mismatches)
    trained, own_line = None, ""
    if base == training.PAIR and below and all((below / f"{training.LOG}_{side}.npy").is_file() for side in ("torch", "paddle")):
        try:  # the curves a portcheck training log handed in beside the outcome: judged again, from the files
            torch_log, paddle_log, logged = training_log.logs(below, records[:2])
            own, own_line = own_runs.load_own(below, logged[0])  # torch's own runs where the hand-in was made
            trained = training.judge_training(torch_log, paddle_log, threshold, logged, own,
                                              where="on the machine that made the hand-in")
        except PipelineError as e:
            print(report.one_line(f"{name}: RED (its training logs: {e}) [PC138]"))
            return True, None
        red |= not trained.passed
        if trained.spread and not guide.passed:  # the reviewer's threshold decides, its measured cause said
            own_line = training.below_own_spread(trained, threshold)
    copy = record.copied(files["torch"], files["paddle"], base, records[:2])  # same_run is False too where it reads the records
    red |= bool(copy)
    findings = client_findings(extra, folder, name)
    red |= bool(problem or run_problem) or not all(f.passed for f in findings)
    # Step 4's every parameter and step, from each side's whole record where the hand-in holds them (whole.judged)
    beside = whole.judged(below, base, files, records[:2]) if below and base in whole.JUDGED else None
    red |= beside is not None and not beside[0]
    parts = [f"{name}: {'RED' if red else 'green'}", reprod.describe_guide(guide, threshold, copy)]
    if measured is not None:
        parts.append(measured.describe_measured())
        parts += measured.also_lines()  # a generate pair's choices that differ: each a tie or a differing choice
    parts.append(reprod.describe_strict(strict_result, threshold, copy))
    parts.append({True: "same run", False: f"NOT the same run ({same[1]}) [PC110]",
                  None: "same run not proven"}[same[0]])
    parts += [f"{whole.BACKWARD}, from {DIAGNOSTICS}/{whole.RECORDS}/: {'green' if beside[0] else 'RED'} ({beside[1]})"
              + ("" if beside[0] else " [PC463]")] if beside is not None else []
    parts += [f"{f.name} {'green' if f.passed else 'RED'} "
              f"({f.detail}){'' if f.passed else ' [PC139]'}" for f in findings]
    flags = loosened(verdict)
    parts += [f"judged with loosened tolerances: {'; '.join(flags)}"] if flags else []
    parts += [f"{'RED' if strict else 'said'}: {d}{' [PC140]' if strict else ''}" for d in differs]
    red |= strict and bool(differs)
    parts += [f"RED: {why} [PC141]" for why in (problem, run_problem) if why]
    print(report.one_line(" | ".join(parts)))
    print(report.one_line(f"  {files['log'].name}: {log_line}" if files["log"] is not None
                          else f"  no {base}_diff.log beside it: nothing to hold against"))
    if beside is None and base in whole.JUDGED and whole.digest_only(t):  # what its figures cannot show, said
        print(report.one_line(f"  {whole.unjudged_line(base)}"))
    for line in taken_lines:
        print(report.one_line(f"  {DIAGNOSTICS}/{line}"))
    for line in trained.lines() if trained is not None else ():
        print(report.one_line(f"  {line}"))
    if trained is not None and own_line:  # torch's own runs left out, or what they show the threshold cannot meet
        print(report.one_line(f"  {own_line}"))
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


def check(folder, overrides: dict = None, strict: bool = False, only=None, extra=None, kinds: dict = None,
          rows: list = None, said: list = None) -> int:
    """Judge every pair of a hand-in folder and print one line each; the number of red pairs. A hand-in holds
    the pairs the guide lists as handed in (tolerances.HANDED_IN; data and lr are judged when present): each one
    missing is red, unless `only` names the pairs a partial hand-in is asked for (those must be there; the
    verdict says it is partial). overrides, kinds: the reviewer's {pair: threshold} and {pair: kind}. extra: a client's own verdicts, a callable
    (folder, pair name) -> [diff.Finding] whose findings join the pair's line, each red one making it red. rows: a
    list every pair's figures are added to (judge_pair's), for `--csv`; said: a list each pair's (name, whether red,
    the lines printed for it) is added to, for `--html`."""
    folder = Path(folder).expanduser()
    expected = tolerances.HANDED_IN if only is None else _asked(only)
    if not folder.is_dir():
        raise PipelineError(f"{folder} is not a folder: pass a log_reprod/ folder [PC122]")
    found = handin.find_pairs(folder)
    pairs, red = found["pairs"], 0
    if not pairs:
        unread = f" (and not all of it was read: {found['unread'][0]})" if found["unread"] else ""
        raise PipelineError(f"{report.one_line(str(folder))} holds no <name>_torch.npy with its <name>_paddle.npy"
                            f"{unread}: pass the folder your reprod_log scripts wrote [PC123]")
    for flag, given in (("--threshold", overrides), ("--kind", kinds)):
        unknown = [n for n in (given or {}) if n not in {p.rsplit("/", 1)[-1] for p in pairs}]
        if unknown:  # a mistyped name would leave its pair judged by another rule than the one meant
            raise PipelineError(f"{flag} {unknown[0]}: the folder holds no pair of that name (its pairs: "
                                f"{', '.join(sorted(p for p in pairs if '/' not in p))}); name one of them [PC129]")
    held = {}
    run_problems = handin.last_run(folder)
    for name, files in pairs.items():
        lines = []
        with view.said(lines) if said is not None else contextlib.nullcontext():
            is_red, keys = judge_pair(folder, name, files, overrides or {}, strict,
                                      run_problems.pop(name, None) if "/" not in name else None, extra, kinds, rows)
        if said is not None:
            said.append((name, bool(is_red), lines))
        red += is_red
        if keys:
            held[name] = keys
    for stem, why in run_problems.items():  # a companion of a pair, the run's record itself
        print(report.one_line(f"{stem}: RED | {why} [PC142]"))
        red += 1
    for line in borrowed(held):
        print(report.one_line(line))
    for path in found["unpaired"]:
        print(report.one_line(f"unpaired: {path.relative_to(folder)} has no twin of the other framework"))
    for what in found["unread"]:  # a pair there was never judged: the folder is not green
        print(report.one_line(f"RED: not all of the folder was read: {what}; hand in a folder of the pairs alone "
                              "[PC111]"))
    red += bool(found["unread"])
    names = {n.rsplit("/", 1)[-1] for n in pairs}
    below = handin.ours(folder)
    edited = record.manifest_problems(folder, below) if below is not None else []
    if edited:  # a file changed, gone or added after the writers handed the folder in
        more = f" (and {len(edited) - 1} more)" if len(edited) > 1 else ""
        print(report.one_line(f"handed in: RED | {edited[0]}{more}: the folder is not as its writers handed it in; "
                              "hand it in again [PC151]"))
        red += 1
    if below is not None:  # `portcheck run`'s configuration entry: every line re-derived from the two records
        from portcheck.scripts import runconfig
        lines, problem, shown = runconfig.from_folder(below)
        if lines is not None:
            names.add(runconfig.CONFIG)
            red += bool(lines or problem)
            print(report.one_line(f"{runconfig.CONFIG}: " + (f"RED | {problem} [PC143]" if problem else
                                  f"RED | {len(lines)} configuration difference(s) [PC144]" if lines else
                                  ("green | every difference within the rule on the steps' numbers " if any(
                                      label == "DIFFERS" for label, _ in shown) else
                                   "green | the same configuration on both sides ") +
                                  f"({DIAGNOSTICS}/{runconfig.CONFIG}_*.json)")))
            for label, line in [*(("DIFFERS", line) for line in lines), *shown]:
                print(report.one_line(f"  {label} {line}"))
    judged = sorted(f.name.removesuffix("_diff.json") for f in below.glob("*_diff.json")) if below else []
    for name in (n for n in judged if n not in names):  # its writer judged it: the hand-in lists it
        print(report.one_line(f"{name}: RED | judged ({DIAGNOSTICS}/{name}_diff.json) but its pair is not in the "
                              "folder: hand in its _torch.npy and _paddle.npy [PC145]"))
        red += 1
    judged_red = red  # what the folder holds: a page of fewer pairs than the guide's says theirs alone
    missing = [p for p in expected if p not in names | set(judged)]
    if missing:  # less than was asked for is never green
        print(report.one_line(f"not handed in: {', '.join(missing)}: RED | the guide asks for every one of "
                              + (f"{', '.join(tolerances.HANDED_IN)} (--only names the ones a partial hand-in holds)"
                                 if only is None else "its pairs (asked for by --only)") + " [PC146]"))
        red += len(missing)
    if below is not None:  # the page the folder holds says its verdict, or the folder is red
        why = bound_page.disagrees(folder, green=not judged_red, whole=not red)
        if why:
            print(report.one_line(f"page: RED | {why}: a page beside a folder says the folder's verdict; hand the "
                                  "folder in again, or remove the page [PC970]"))
            red += 1
    if only is not None:
        print(report.one_line(f"partial hand-in: only {', '.join(expected)} asked for (--only); the guide's other "
                              "pairs not judged"))
    return red


def _asked(only) -> tuple:
    names = tuple(dict.fromkeys(n.strip() for n in (only.split(",") if isinstance(only, str) else only)))
    if not names or not all(names):
        raise PipelineError(f"--only {only!r}: name the pairs, comma-separated, e.g. --only forward,loss [PC124]")
    return names


def pair(torch_npy: Path, paddle_npy: Path, threshold=None, strict: bool = False, log: Path = None) -> int:
    """Two reprod_log files: both verdicts printed (and written to `log`, never over a file `pair` did not
    write); the exit code."""
    if threshold is not None and not (math.isfinite(threshold) and threshold >= 0):
        raise PipelineError(f"--threshold must be a finite number >= 0, got {threshold} [PC125]")
    if torch_npy.absolute() == paddle_npy.absolute():  # a link or a copy is judged red below (record.copied)
        raise PipelineError(f"{torch_npy} given as both sides: pass the torch file, then the Paddle file [PC126]")
    name = torch_npy.name.removesuffix(".npy").removesuffix("_torch")
    threshold = threshold if threshold is not None else tolerances.guide_threshold(name)
    if log is not None:  # every check on the output before the comparison, not after its report
        inputs = [p.resolve() for f in (torch_npy, paddle_npy) for p in (f, record.path_for(f))]
        if log.resolve() in inputs:
            raise PipelineError(f"--log {log} is an input or its run record: choose another file [PC130]")
        writable(log)
        if log.exists() and not _ours(log):
            raise PipelineError(f"--log {log} exists and was not written by this command (a diff log of your "
                                "own?): choose another file [PC131]")
    torch_data, paddle_data = load_pair(torch_npy, paddle_npy)
    guide = reprod.guide_verdict(torch_data, paddle_data, threshold, name)
    result = reprod.strict_verdict(torch_data, paddle_data, threshold, name)
    same_run.check(result, torch_npy, paddle_npy, record_paths=handed_in_records(torch_npy, paddle_npy))
    other_run = [f.name for f in result.findings if not f.passed]
    copy = record.copied(torch_npy, paddle_npy, record_paths=handed_in_records(torch_npy, paddle_npy))
    nan = reprod.non_finite(result)
    failed = not guide.passed or bool(nan) or bool(other_run) or (strict and not result.passed)
    result.notes[:0] = [reprod.describe_guide(guide, threshold, copy), reprod.describe_strict(result, threshold, copy)]
    result.notes.append(f"exit {int(failed)}: " + ("the guide's rule fails" if not guide.passed else
                        f"a value is NaN or Inf ({nan[0].key}: {next(p for p in nan[0].problems if 'NaN' in p)})"
                        if nan else
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


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose bad input ends in one line, as every other error here (argparse prints its usage
    too): the flag and what is wrong with it, exit 2. Sub-commands' parsers are of this class too."""

    def error(self, message):
        fail(f"{self.prog}: {message} (--help lists the flags) [PC127]")


def parser(prog: str = "python -m portcheck") -> argparse.ArgumentParser:
    ap = OneLineParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{check,pair,run,layers,generate,view}")
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
    from portcheck.scripts import run  # two unedited training scripts: portcheck.scripts.run
    run.add_parser(sub)
    from portcheck.checkpoints import stream  # two checkpoint folders, block by block: portcheck.checkpoints.stream
    stream.add_parser(sub)
    from portcheck.generation import command  # two checkpoint folders decoding step by step: portcheck.generation
    command.add_parser(sub)
    view.add_parser(sub, add_check_flags)  # check's page, opened in a browser
    return ap


def add_check_flags(ap):
    ap.add_argument("--threshold", action="append", default=[], metavar="PAIR=VALUE",
                    help="one pair's threshold (repeatable; default: the hand-in's own, else the guide's)")
    ap.add_argument("--strict", action="store_true", help="strict failures fail too")
    ap.add_argument("--kind", action="append", default=[], metavar="PAIR=KIND",
                    help=f"one pair's kind ({', '.join(tolerances.KINDS)}; repeatable; default: the guide's, else "
                    "computed; a hand-in's own declared kind never loosens it)")
    ap.add_argument("--only", metavar="PAIR,...", help="a partial hand-in: the pairs it is asked for (default: "
                    "every pair of the guide, each missing one red)")
    ap.add_argument("--csv", type=Path, metavar="FILE", help="also write every key's figures and verdicts here, a "
                    "row per key and rule (never over a file this flag did not write)")
    ap.add_argument("--html", type=Path, metavar="PAGE", help="also write the verdicts as one page here, which "
                    "opens offline in a browser (never over a file portcheck did not write)")


def once_each(flag: str, given) -> dict:
    """{pair: value} of a repeatable PAIR=VALUE flag; a pair given twice is one line."""
    given = list(given)
    twice = sorted({n for n, _ in given if [m for m, _ in given].count(n) > 1})
    if twice:
        raise PipelineError(f"{flag} given twice for {', '.join(twice)}: give each pair's once [PC128]")
    return dict(given)


def run_check(folder, args, extra=None) -> int:
    given, kinds = once_each("--threshold", map(threshold_flag, args.threshold)), once_each("--kind", map(kind_flag, args.kind))
    csv = getattr(args, "csv", None)
    if csv is not None:  # every check on the output before the first pair is judged
        writable(csv)
        if csv.exists() and not report.csv_is_ours(csv):
            raise PipelineError(f"--csv {csv} exists and was not written by --csv (a file of your own?): choose "
                                "another file [PC132]")
    html = getattr(args, "html", None)
    if html is not None:
        page.writable_page(html)
    rows = [] if csv is not None or html is not None else None
    said, printed = ([], []) if html is not None else (None, None)
    with view.said(printed) if html is not None else contextlib.nullcontext():
        red = check(folder, given, args.strict, args.only, extra, kinds, rows, said)
    if csv is not None:
        report.write_csv(rows, csv)
        print(report.one_line(f"figures: {csv} ({len(rows)} rows)"))
    last = report.one_line(f"{folder}: " + ("every pair green" + (" on every verdict" if args.strict else "")
                                           + (f" (partial: --only {args.only})" if args.only else "")
                                           if not red else f"{red} pair(s) red"))
    if html is not None:  # the pairs' lines first in what was printed, each pair's block as check said it
        rest = printed[sum(len(lines) for _, _, lines in said):]
        shown = view.folder_view(folder, red, said, rest, rows, last)
        own = html.resolve() == bound_page.path(folder).resolve()  # the folder's own page: bound to it
        print(report.one_line(bound_page.write(shown, folder) if own else page.write(shown, html)))
    print(last)
    return 1 if red else 0


def main(argv=None):
    def go():
        args = parser().parse_args(argv)
        if args.command == "check":
            return run_check(args.folder, args)
        if args.command == "run":
            from portcheck.scripts import run
            return run.main(args)
        if args.command == "view":
            return view.main(args, run_check)
        if args.command == "layers":
            from portcheck.checkpoints import formers_folders, formers_split, split_folders, stream
            with notices.quiet_imports():  # the frameworks load within, their notices before a refusal's one line
                if args.convert_from_hf or formers_folders.is_formers(args.paddle):
                    return (formers_folders.main if args.tp is None else formers_split.main)(args)
                return (stream.main if args.tp is None else split_folders.main)(args)
        if args.command == "generate":
            from portcheck.generation import command
            with notices.quiet_imports():
                return command.main(args)
        return pair(args.torch_npy, args.paddle_npy, args.threshold, args.strict, args.log)
    sys.exit(run_main(go))
