"""The first thing every check compares: the two results' run records (common.record).

Two results made from different weights, data or flags, or a stale one left by an earlier
run, turn the check red with a finding that names the field that differs, whatever their
numbers say. Files written by a contestant's own scripts carry no record: the log says so
in one line and the pair is still judged.
"""
from checks.diff import CheckResult, Finding
from common import record


def check(result: CheckResult, torch_path, paddle_path) -> CheckResult:
    passed, detail = record.same_run(torch_path, paddle_path)
    if passed is None:
        result.notes.append(detail)
    else:
        result.findings.insert(0, Finding("same run", passed, detail))
    return result
