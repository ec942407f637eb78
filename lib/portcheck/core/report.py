"""A CheckResult as text and files: the one place results are formatted.

* key_lines(): one key's lines in reprod_log's log format ("[time] root INFO: key: " then
  "\\tmean diff: ..." and "\\tmax diff: ..." lines, each followed by the bound it is held to), the
  only place they are formatted;
* log_lines(): a CheckResult's log: every key's lines (the guide's bound on the mean, atol + rtol *
  max|torch| on the max), then the check's findings, notes and tables, then one verdict line;
* write(): the log (stdout and <name>_diff.log) and the verdict beside it (<name>_diff.json),
  which run_all.py and SUMMARY.md read; neither is ever parsed back out of the log text;
* hand_in(): copies of a pair and its log into log_reprod/;
* format_table(): every table in the project (module outputs, gradients, weight statistics);
* figures() / frame() / write_csv(): the same results as rows of figures, for pandas (a report's .frame()) and
  for a CSV file (`check --csv`).

The log is written without the logging module, so running several checks in one process
never duplicates lines.
"""
import csv
import filecmp
import json
import math
import re
import shutil
import time
from pathlib import Path

from portcheck.core import record
from portcheck.core.diff import CheckResult, Finding
from portcheck.core.errors import PipelineError, one_line, require  # noqa: F401 (report.one_line: its callers)
from portcheck.core.fileio import atomic_write, open_regular, save_npy, writable

ECHO_LIMIT = 20  # past this many keys, only the failing ones are echoed to stdout (all go to the log)


def _num(x: float) -> str:
    return f"{x:.3e}" if isinstance(x, float) and math.isfinite(x) else str(x)


def safely(result: CheckResult, figures, *args):
    """Run a check's figures(result, *args); a companion value of an odd shape or type (a contestant's own
    file, a hand-edited one) becomes a failed finding in the log instead of a traceback."""
    try:
        figures(result, *args)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, StopIteration) as e:
        result.findings.append(Finding("figures", False, f"could not read the figures ({type(e).__name__}: {e})"))


def format_table(header, rows) -> list:
    """Column-aligned lines; floats as %.3e."""
    cells = [tuple(_num(c) for c in r) for r in [tuple(header)] + [tuple(r) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def key_lines(key: str, mean_diff=None, max_diff=None, notes=()) -> list:
    """One key's lines in reprod_log's format, the one formatter of them (log_lines and portcheck.pipeline.handin's
    MeasuredVerdict write through it; handin.parse_diff_log reads them back): "<key>: ", then for `mean_diff` and
    `max_diff`, each (passed, value, its bound said or None) when given, "\t<method> diff: check passed: <passed>,
    value: <value>" and ", threshold: <bound>"; then each note as a line of its own, indented as they are."""
    out = [f"{key}: "]
    for method, figures in (("mean", mean_diff), ("max", max_diff)):
        if figures is not None:
            passed, value, bound = figures
            # repr of a Python float: every digit, as reprod_log prints it and as parse_diff_log reads it back
            out.append(f"\t{method} diff: check passed: {passed}, value: {float(value)!r}"
                       + (f", threshold: {bound}" if bound is not None else ""))
    return out + [f"\t{note}" for note in notes]


def log_lines(result: CheckResult) -> list:
    """[(message, echo to stdout)] in reprod_log's order: every key, then what the check adds, then the verdict."""
    out = []
    many = len(result.keys) > ECHO_LIMIT
    for r in result.keys:
        echo = not r.passed or not many
        mean = max_ = None
        if r.compared:
            mean = (r.mean_ok, r.mean, f"{r.mean_bound} (the guide's bound)" if r.mean_bound is not None else None)
            max_ = (r.max_ok, r.max, f"{r.allowed}" + (" (exact)" if r.exact else "") if r.rtol == 0 else
                    f"{r.allowed:.3e} = atol {r.atol:g} + rtol {r.rtol:g} * max|torch| {r.scale:.3e}")
        out += [(line, echo) for line in key_lines(r.key, mean, max_, [f"check passed: False, {p}" for p in r.failures])]
    if many:
        out.append((f"{sum(r.passed for r in result.keys)} of {len(result.keys)} keys passed "
                    f"(all in {result.name}_diff.log)", True))
    if not result.keys:
        out.append(("no keys to compare", True))
    out += [(note, True) for note in result.notes]
    for table in result.tables:
        out.append((table.title, True))
        out += [(line, True) for line in format_table(table.header, table.rows)]
    out += [(f"{f.name}: {'passed' if f.passed else 'FAILED'}, {f.detail}", True) for f in result.findings]
    out += [(f"loosened by a flag: {flag}", True) for flag in result.loosened]
    failed = [k.key for k in result.failed_keys] + [f.name for f in result.findings if not f.passed]
    out.append(("diff check passed" + (" with loosened tolerances" if result.loosened else "") if result.passed else
                f"diff check failed: {', '.join(failed) or 'nothing compared'}", True))
    return out


def write(result: CheckResult, log_path, verdict: bool = True) -> Path:
    """Print the log, write it to log_path and (verdict) the verdict to log_path's .json sibling; both places are
    checked before either is written."""
    if verdict:
        writable(log_path)
        writable(verdict_path(log_path))
    write_messages(log_lines(result), log_path)
    if verdict:
        write_verdict(result, verdict_path(log_path))
    return Path(log_path)


def write_messages(messages, log_path):
    """[(message, echo to stdout)] as reprod_log's log lines, each escaped to one line."""
    stamp = time.strftime("%Y/%m/%d %H:%M:%S")
    lines = []
    for message, echo in messages:
        line = f"[{stamp}] root INFO: {one_line(message)}"
        if echo:
            print(line)
        lines.append(line)
    if _unstamped(_read_small(log_path)) == _unstamped("\n".join(lines) + "\n"):
        return  # the same log but for its time stamps: a reproduced result is not a change (git status stays clean)
    atomic_write(log_path, lambda tmp: Path(tmp).write_text("\n".join(lines) + "\n"))


_STAMP = re.compile(r"^\[\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\] ", re.M)


def _unstamped(text):
    return None if text is None else _STAMP.sub("", text)


def _read_small(path, limit: int = 16 << 20):
    """A regular file's text if it is one of at most `limit` bytes, else None (then it is simply rewritten)."""
    try:
        path = Path(path)
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def copy_if_changed(source, target):
    """target as a copy of source, left untouched when it already holds the same result: the same bytes, or a
    log or run record that differs only in when it was written (a reproduced result is not a change)."""
    source, target = Path(source), Path(target)
    if target.is_file() and not target.is_symlink() and _same_result(source, target):
        return
    atomic_write(target, lambda tmp: shutil.copyfile(source, tmp))


def _same_result(source: Path, target: Path) -> bool:
    if filecmp.cmp(source, target, shallow=False):
        return True
    if source.name.endswith(record.SUFFIX):
        return record.same_but_written(_read_small(source), _read_small(target))
    if source.suffix == ".log":
        old = _unstamped(_read_small(target))
        return old is not None and old == _unstamped(_read_small(source))
    return False


def verdict_path(log_path) -> Path:
    return Path(log_path).with_suffix(".json")


def write_verdict(result: CheckResult, path):
    write_json(result.to_json(), path)


def write_json(data: dict, path):
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=1) + "\n"))


def read_verdict(path) -> dict:
    with open_regular(path) as f:
        return json.loads(f.read())


DIAGNOSTICS = "diagnostics"  # log_reprod/ subfolder: everything that is not one of the guide's pairs


def hand_in(*files, top, data=None, data_from=None, diagnostics=()):
    """Copy a check's files into the hand-in folder `top` (a log_reprod/): the pair and its diff log at the top (the guide's layout,
    what reprod_log's ReprodDiffHelper reads), and into log_reprod/diagnostics/ the check's JSON verdict,
    each .npy's run record, and `diagnostics` (curves, statistics, plots). data={name: dict} writes those
    pairs (e.g. a subset of keys) at the top instead of copying them, each bound to its full result's record in
    the folder data_from (default: the first file's). Every .npy's run record goes along."""
    top, data = Path(top), data or {}
    for f in map(Path, files):  # every source and every target before the first write: nothing half handed in
        require(f, "judge the pair first (its check writes it)")
    extra = [f for f in _companions(files, diagnostics) if f.is_file()]
    below = hand_in_folder(top, *files, data=data, diagnostics=diagnostics) / DIAGNOSTICS
    below.mkdir(parents=True, exist_ok=True)
    for f in map(Path, files):
        copy_if_changed(f, top / f.name)
    for name, arrays in data.items():
        save_npy(top / name, arrays)
        # the record of the full result, bound to the keys handed in
        record.save_derived(Path(data_from or Path(files[0]).parent) / name, top / name, below / record.path_for(name).name)
    for f in extra:
        copy_if_changed(f, below / f.name)
    record.list_handed(top, below, [top / Path(f).name for f in files] + [top / name for name in data]
                       + [below / record.path_for(name).name for name in data] + [below / f.name for f in extra])


def _companions(files, diagnostics) -> list:
    """What goes into diagnostics/ beside a pair: `diagnostics`, each diff log's verdict, each .npy's run record."""
    files, diagnostics = list(map(Path, files)), list(map(Path, diagnostics))
    return diagnostics + [verdict_path(f) for f in files if f.name.endswith("_diff.log")] \
        + [record.path_for(f) for f in files + diagnostics if f.suffix == ".npy"]


def hand_in_folder(top, *files, data=(), diagnostics=()) -> Path:
    """`top`, its diagnostics/ and every file hand_in(*files, data=, diagnostics=) would write there, checked as
    places to write (no link in any component, writable), before a check writes anything: a check script calls
    it first, so a refusal leaves every earlier result as it was."""
    top = Path(top)
    below = top / DIAGNOSTICS
    writable(top, folder=True)
    writable(below, folder=True)
    for target in [top / Path(f).name for f in files] + [top / name for name in data] \
            + [below / record.path_for(name).name for name in data] + [below / f.name for f in _companions(files, diagnostics)] \
            + [below / record.MANIFEST]:
        writable(target)
    return top


# ---------------------------------------------------------------- the results as rows of figures
# One row per judged value, the columns every report's .frame() and `check --csv` share: torch's own figures
# (its largest |value|, its own fp32 error against its float64 run), the two sides' differences, what its rule
# allows, the ratios and the verdict.
COLUMNS = ("part", "step", "name", "rule", "shape", "torch max |value|", "max diff", "mean diff", "torch fp32 err",
           "allowed", "mean bound", "diff/err", "of allowed", "verdict", "first diverging", "why")
CSV_SIGNATURE = ",".join(COLUMNS)  # a CSV's header line: the mark of a file `check --csv` may overwrite


def _rule(r) -> str:
    if hasattr(r.rule, "multiple"):
        return f"measured: {r.rule.multiple:g} x torch's own fp32 error"
    if getattr(r.rule, "nan_passes", False):
        return f"the guide's: mean <= {r.rule.threshold:g}"
    return "exact" if r.exact else "tolerance"


def figures(rows, part: str, step=None, first=None) -> list:
    """[{column: value}] of diff.KeyResults `rows`: part (forward, a pair's name, ...), step (1-based, or None),
    first: the row marked as where the runs part (diff.first_diverging's)."""
    out, nan = [], float("nan")
    for r in rows:
        # no float64 run (the guide's rule, a tolerance): no ratio to torch's own error; no bound on the max: no share
        ratio = r.ratio if r.err32 == r.err32 else nan
        used = r.used if math.isfinite(r.allowed) else nan
        out.append(dict(zip(COLUMNS, (
            part, step, r.name, _rule(r), "x".join(map(str, r.shape)), r.scale, r.max, r.mean, r.err32,
            r.allowed, r.mean_bound, ratio, used,
            "not judged" if not r.judged else "green" if r.passed else "RED", r is first, r.why))))
    return out


def frame(rows: list):
    """A pandas DataFrame of figures() rows (pandas imported here: the library needs numpy only)."""
    try:
        import pandas
    except ImportError:
        raise PipelineError("frame() needs pandas, which is not installed: pip install pandas [PC228]") from None
    return pandas.DataFrame(rows, columns=list(COLUMNS))


def csv_is_ours(path) -> bool:
    """Whether `path` is a CSV write_csv wrote (its first line the header), which it may overwrite."""
    try:
        with open_regular(path) as f:
            return f.readline(len(CSV_SIGNATURE) + 3).rstrip(b"\r\n") == CSV_SIGNATURE.encode()
    except OSError:
        return False


def write_csv(rows: list, path):
    """figures() rows as a CSV at `path` (atomically, never through a link); every float with all its digits."""
    def write(tmp):
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(COLUMNS)
            for row in rows:
                w.writerow(["" if row[c] is None else repr(row[c]) if isinstance(row[c], float) else row[c]
                            for c in COLUMNS])
    atomic_write(path, write)

