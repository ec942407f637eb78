"""The guide's pairs as reprod_log writes and judges them: its own rule (ReprodDiffHelper.compare_info + report)
recomputed as reprod_log computes it (guide_verdict), this project's strict rule beside it at the same threshold
(strict_verdict), each said in one line; a contestant's <pair>_diff.log read back and held against the pair (read_log,
parse_diff_log, hold_log); and a pair's name and files (<pair>_torch.npy, <pair>_paddle.npy, <pair>_diff.log; the
bp_align pair's keys). The folder, the measured rule and the hand-in are portcheck.pipeline.handin.

Imports core only.
"""
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from portcheck.core import diff, report, tolerances
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import open_regular
from portcheck.core.tolerances import Tol

# A logged value is the recomputed one when they agree to float32's printed precision (a numpy of another
# version may sum in another order: the last bit or two of a float32 mean); any edit a reader could see differs more.
LOG_RTOL = 1e-5


STOPS = "reprod_log stops"  # the guide verdict's finding where reprod_log itself would stop (an assert, a raise)


def guide_verdict(torch_data: dict, paddle_data: dict, threshold: float, name: str = "") -> diff.CheckResult:
    """reprod_log's verdict on a pair, in the one result type: per key a diff.KeyResult judged by its own rule
    (tolerances.ReprodLog: mean <= threshold, a NaN passing), what it did silently (transposed, broadcast, a
    NaN passed) in the key's notes, an empty array a problem; where reprod_log itself would stop, a failed
    finding (STOPS) and no further key. Green: every key within the rule, and at least one key compared."""
    verdict, rule = diff.CheckResult(name), tolerances.ReprodLog(threshold)
    only = sorted(set(torch_data) ^ set(paddle_data))
    if only:  # reprod_log's check_data asserts the key sets are equal
        verdict.findings.append(diff.Finding(STOPS, False, f"keys on one side only: {', '.join(only[:5])}"
                                             + (" ..." if len(only) > 5 else "")))
        return verdict
    for key, a in torch_data.items():
        b, note = paddle_data[key], ""
        if a.shape != b.shape and a.T.shape == b.shape:
            a, note = a.T, "transposed by reprod_log"
        try:
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: a NaN, said below as what it is
                d = np.abs(a - b)
        except (ValueError, TypeError) as e:  # shapes that do not broadcast, bools that numpy will not subtract
            verdict.findings.append(diff.Finding(STOPS, False, (
                f"{key}: {a.dtype}{list(a.shape)} and {b.dtype}{list(b.shape)} cannot be subtracted as reprod_log "
                f"subtracts them ({type(e).__name__}): hand in numbers")))
            return verdict
        if not note and a.shape != b.shape and {a.shape, b.shape} != {(), (1,)}:  # a 0-d and a [1] scalar: one scalar
            note = f"broadcast by reprod_log ({a.shape} vs {b.shape})"
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":  # integers judged as integers, in a type that cannot wrap
            exact = diff.abs_diff(a, b)
            if d.size and not np.array_equal(d.astype(np.float64), exact):
                verdict.as_logged[key] = {"mean": float(d.mean()), "max": float(d.max())}
                note = (f"{note}; " if note else "") + (
                    f"reprod_log's own {a.dtype} - {b.dtype} in {d.dtype} wraps or rounds (it would log mean "
                    f"{float(d.mean()):.6g}): judged on the exact integers")
            d = exact
        if not d.size:  # reprod_log passes an empty array (its mean is NaN): nothing was compared
            verdict.keys.append(diff.KeyResult(key, rule, tuple(d.shape), problems=[diff.EMPTY]))
            continue
        mean, mx = float(d.mean()), float(d.max())
        note = note or ("NaN passes reprod_log's rule" if mean != mean else "")
        verdict.keys.append(diff.KeyResult(key, rule, tuple(d.shape), mx, mean, notes=[note] if note else []))
    return verdict


def stopped(guide: diff.CheckResult) -> str:
    """Why reprod_log itself would stop on the pair (guide_verdict's STOPS finding), or ""."""
    return next((f.detail for f in guide.findings if f.name == STOPS and not f.passed), "")


def largest_mean(keys: list):
    """The key of the largest mean diff, a NaN first (None: no keys)."""
    return max(keys, key=lambda k: (k.mean != k.mean, k.mean), default=None)


def strict_verdict(torch_data: dict, paddle_data: dict, threshold: float, name: str = "") -> diff.CheckResult:
    """This project's rule at the same threshold, on the max as well as the mean: every key, shape, dtype, NaN
    and integer (so it fails wherever the guide's rule does, and more)."""
    return diff.compare(torch_data, paddle_data, default=Tol.absolute(threshold), name=name)


def non_finite(strict: diff.CheckResult) -> list:
    return [k for k in strict.keys if any("NaN" in p for p in k.problems)]


# reprod_log's log lines: "[time] root INFO: <key>: " then "\t<method> diff: check passed: <bool>, value: <v>"
_PREFIX = r"^(?:\[[^\]]*\]\s+\S+\s+\w+:\s)?"
_KEY = re.compile(_PREFIX + r"(\t*)(\S.*?):\s*$")
_END = re.compile(_PREFIX + r"diff check (passed|failed)\s*$")
_VALUE = re.compile(_PREFIX + r"(\t+)(min|max|mean) diff: check passed: (True|False), value: ([-+0-9.eEinfa]+)")


LOG_BYTES = 4 << 20  # a diff log is kilobytes; only its head is read, whatever its size


def read_log(path) -> str:
    """The head of a diff log, read without blocking (a FIFO or a device named *_diff.log is refused, not
    waited on) and decoded as reprod_log's users write it: UTF-8 (a byte-order mark dropped, as Windows editors
    add one), else GBK (a Chinese Windows console's)."""
    with open_regular(path, follow=False) as f:
        data = f.read(LOG_BYTES)
    for encoding in ("utf-8-sig", "gbk"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            pass
    return data.decode("utf-8", errors="replace")


def parse_diff_log(text: str) -> dict:
    """{key: {"mean": value, "max": ..., ...}} from a reprod_log diff log (nested keys joined by '/')."""
    logged, path = {}, []
    for line in text.splitlines():
        if _END.match(line):
            # reprod_log adds a file handler to its root logger at every report(): a later report in the same
            # process appends its own pair's lines to this file too. This pair's block is the first one.
            break
        value = _VALUE.match(line)
        if value and path:
            try:
                entry = logged.setdefault("/".join(path), {})
                entry[value.group(2)] = float(value.group(4))
                entry[f"{value.group(2)} passed"] = value.group(3) == "True"
            except ValueError:
                pass
            continue
        key = _KEY.match(line)
        if key and " diff: check passed" not in line:
            depth = len(key.group(1))
            path = path[:depth] + [key.group(2)]
    return logged


def held(path, guide: diff.CheckResult) -> tuple:
    """A diff log held against its pair: (logged values, mismatches, why it could not be read or "")."""
    try:
        logged = parse_diff_log(read_log(path))
    except OSError as e:
        return {}, [], f"unreadable ({e.strerror or e}): hand in the log reprod_log wrote, as a file"
    return logged, hold_log(logged, guide) if logged else [], ""


@dataclass
class LogMismatch:
    key: str
    method: str
    logged: float
    recomputed: float  # NaN when the pair has no such key


def hold_log(logged: dict, verdict: diff.CheckResult) -> list:
    """Every logged value that is not the recomputed one (nor, for integers reprod_log's own arithmetic wraps, the
    figure it gives: verdict.as_logged), and every key the log and the pair do not share."""
    recomputed = {k.key: {"mean": k.mean, "max": k.max} for k in verdict.keys}
    out = []
    close = lambda value, now: (value != value and now != now) or \
        abs(value - now) <= LOG_RTOL * max(abs(value), abs(now)) + 1e-30
    for key, methods in logged.items():
        for method, value in methods.items():
            if method not in ("mean", "max"):
                continue
            now = recomputed.get(key, {}).get(method, float("nan"))
            same = close(value, now) or (key in verdict.as_logged and close(value, verdict.as_logged[key][method]))
            if not same:
                out.append(LogMismatch(key, method, value, now))
    out += [LogMismatch(k, "mean", float("nan"), v["mean"]) for k, v in recomputed.items() if k not in logged]
    return out


def describe_guide(guide: diff.CheckResult, threshold: float, copy: str = "", spread: float = 0.0) -> str:
    """'guide green (...)' or 'guide RED (...)': the rule at `threshold`, the worst key and what reprod_log did
    silently; RED whatever the figures when one side is a copy of the other (record.copied: `copy` says how).
    spread: the part of `threshold` that is torch's own spread (tolerances.looser_task)."""
    rule = f"mean <= {tolerances.looser_task(guide.name, threshold, spread) or f'{threshold:g}'}"
    if copy:
        return f"guide RED (one side is a copy of the other: {copy}) [PC101]"
    if stopped(guide):
        return f"guide RED (reprod_log stops: {stopped(guide)}) [PC102]"
    bad = [k for k in guide.keys if not k.passed]
    shown = diff.first_diverging(guide.keys) or largest_mean(guide.keys)
    figures = f"{shown.key} mean {shown.mean:.3g}" if shown else "no keys"
    notes = sorted({note for k in guide.keys for note in k.notes + k.problems})
    return (f"guide {'green' if not bad else 'RED'} ({rule}: {len(guide.keys) - len(bad)}/{len(guide.keys)} keys; "
            + ("failed: " if bad else "largest: ") + figures
            + (f", and {len(bad) - 1} more" if len(bad) > 1 else "") + ("; " + "; ".join(notes[:2]) if notes else "") + ")"
            + (" [PC147]" if bad else ""))


def describe_strict(result: diff.CheckResult, threshold: float, copy: str = "") -> str:
    if copy:
        return "strict RED (one side is a copy of the other) [PC103]"
    failed = result.failed_keys
    if not failed:
        worst = max(result.keys, key=lambda k: k.max, default=None)
        return f"strict green (max <= {threshold:g}" + (f"; largest: {worst.key} max {worst.max:.3g})" if worst else ")")
    first = diff.first_diverging(result.keys)
    return (f"strict RED ({first.key}: {'; '.join(first.failures)}"
            + (f"; and {len(failed) - 1} more key(s)" if len(failed) > 1 else "") + ") [PC148]")


def describe_log(mismatches: list, n_logged: int) -> str:
    if not mismatches:
        return f"every logged value is the recomputed one ({n_logged} keys)"
    m = mismatches[0]
    what = (f"{m.key} is not in the pair (logged {m.method} {m.logged!r})" if m.recomputed != m.recomputed
            else f"{m.key} is not in the log" if m.logged != m.logged
            else f"{m.key} {m.method} logged {m.logged!r}, recomputed {m.recomputed!r}")
    more = f"; and {len(mismatches) - 1} more" if len(mismatches) > 1 else ""
    return f"RED: does not match the pair: {what}{more} [PC104]"


def other_threshold(logged: dict, guide: diff.CheckResult, threshold: float) -> str:
    """A note when the contestant's own log marks a key otherwise than the guide's rule at this threshold
    (their report() was called with another diff_threshold, which the log does not record)."""
    differ = [k for k in guide.keys if k.key in logged and "mean passed" in logged[k.key]
              and logged[k.key]["mean passed"] != k.passed]
    if not differ:
        return ""
    k = differ[0]
    return (f"its log marks {k.key} (mean {k.mean:.3g}) {'passed' if logged[k.key]['mean passed'] else 'failed'}: "
            f"it was made at another threshold than {threshold:g} (--threshold PAIR=VALUE "
            "judges at yours)")


def pair_name(pair) -> str:
    """A pair's name as a file name's stem in the given folder: a path in it (a '/', '..') would write elsewhere."""
    if not isinstance(pair, str) or not pair or not pair.isprintable() or pair in (".", "..") or \
            any(c in pair for c in "/\\") or len(pair) > 100:
        raise PipelineError(f"pair {report.one_line(repr(pair))[:60]}: name a pair by a plain name (forward, loss, "
                            "my_pair), no folder in it [PC114]")
    return pair


def handed_in(folder: Path, pair: str) -> tuple:
    return folder / f"{pair}_torch.npy", folder / f"{pair}_paddle.npy", folder / f"{pair}_diff.log"


# what a bp_align carries per step, from record_backward's <kind>/<i> (and portcheck run's, backward.KEPT: the modules
# a script keeps beside its model, digested as the weights are)
BP_ALIGN = ("loss", "lr", "weights", "running", "kept", "kept_running")


def bp_key(key: str) -> str:
    """A bp_align key (loss_3) from a record_backward key of what it carries (loss/3), else ""."""
    kind, _, step = key.partition("/")
    return f"{kind}_{step}" if kind in BP_ALIGN and step.isdigit() else ""
