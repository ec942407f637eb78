"""The first thing every check compares: the two results' run records (portcheck.core.record).

Two results made from different weights, data or flags, or a stale one left by an earlier
run, turn the check red with a finding that names the field that differs, whatever their
numbers say. Files written by a contestant's own scripts carry no record: the log says so
in one line and the pair is still judged.
"""
from portcheck.core import record
from portcheck.core.diff import CheckResult, Finding


def check(result: CheckResult, torch_path, paddle_path, name: str = "same run", record_paths=(None, None)) -> CheckResult:
    """name: the finding's; a companion pair (module outputs, curves) is checked under its own name, after
    the main pair's. record_paths: the records' paths where they are not beside the results (a hand-in's
    diagnostics/)."""
    passed, detail = record.same_run(torch_path, paddle_path, record_paths)
    if passed is None:
        result.notes.append(f"{name}: {detail}" if name != "same run" else detail)
    elif name == "same run":
        result.findings.insert(0, Finding(name, passed, detail))
    else:
        result.findings.append(Finding(name, passed, detail))
    return result
