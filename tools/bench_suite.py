"""How long the test suite takes from a fresh clone, and what it finds: the README's test command (`python -m
pytest`) in a clone of the committed HEAD, the data beside it as a checkout has it, each test's outcome read from
pytest's own report (JUnit XML).

    python tools/bench_suite.py            # a fresh clone of HEAD, its suite run: docs/bench/suite.json and .md
    python tools/bench_suite.py --page     # docs/bench/suite.md again from suite.json, nothing measured

CI's budget for the suite is ten minutes; the run's figures show how much of it is spent, on which machine and at
what load (other work on the cores slows every test).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (the venv's check, as every tool's)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from portcheck.core.errors import PipelineError, run_main
from tools import bench_doc

COMMAND = "python tools/bench_suite.py"
BUDGET_MINUTES = 10
OUTCOMES = ("passed", "xfailed", "skipped", "failed")


def outcomes(report: Path) -> dict:
    """{outcome: how many} from pytest's JUnit XML: a failure or error is failed (a strict xfail that passed too),
    a skip of type pytest.xfail is xfailed."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for case in ET.parse(report).getroot().iter("testcase"):
        tags = {child.tag: child for child in case}
        if "failure" in tags or "error" in tags:
            counts["failed"] += 1
        elif "skipped" in tags:
            counts["xfailed" if tags["skipped"].get("type") == "pytest.xfail" else "skipped"] += 1
        else:
            counts["passed"] += 1
    return counts


def measure(keep: bool) -> dict:
    """The suite of a fresh clone of HEAD, run with this interpreter, the clone's own code imported (PYTHONPATH: the
    venv installs this checkout editable) and the data beside it (a link to ../shared, as a checkout has it)."""
    work = Path(tempfile.mkdtemp(prefix="portcheck-bench-suite-"))
    try:
        clone = work / "repo"
        subprocess.run(["git", "clone", "-q", str(bench_doc.ROOT), str(clone)], check=True)
        if (bench_doc.ROOT.parent / "shared").is_dir():
            os.symlink(bench_doc.ROOT.parent / "shared", work / "shared")
        env = dict(os.environ, PYTHONPATH=f"{clone / 'lib'}{os.pathsep}{clone}")
        report = work / "suite.xml"
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}"],
                              cwd=clone, env=env)
        seconds = time.monotonic() - began
        if not report.is_file():
            raise PipelineError(f"pytest wrote no report (exit {done.returncode}): run `python -m pytest` in a clone")
        return {**outcomes(report), "seconds": round(seconds, 1), "exit": done.returncode}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{round(seconds % 60):02d}"


def render(data: dict) -> str:
    s = data["suite"]
    tests = sum(s[k] for k in OUTCOMES)
    return "\n".join([
        "# The test suite from a fresh clone", "",
        bench_doc.header(data[bench_doc.RUN], COMMAND), "",
        f"The README's test command in a fresh clone of the repository, one pytest-xdist worker per core, the longest "
        f"files first. CI's budget for the suite is {BUDGET_MINUTES} minutes.", "",
        "| tests | passed | strict xfails | skipped | failed | wall time | of the budget |",
        "|---|---|---|---|---|---|---|",
        f"| {tests} | {s['passed']} | {s['xfailed']} | {s['skipped']} | {s['failed']} | {minutes(s['seconds'])} | "
        f"{s['seconds'] / (60 * BUDGET_MINUTES):.0%} |", "",
        "Each strict xfail is a difference of a library's port that stays red until that library changes "
        "([zoo.md](../zoo.md#what-the-zoo-finds-in-the-ports)).", ""])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "suite.md",
                    help="the page (Markdown); its figures go beside it as .json")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its report (their folder is printed)")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    out = args.out
    if args.page:
        bench_doc.rewrite(out, out.with_suffix(".json"), render, COMMAND)
        return
    run = bench_doc.start()
    data = {"suite": measure(args.keep)}
    data[bench_doc.RUN] = bench_doc.finish(run)
    text = render(data)
    print(text)
    bench_doc.write(out.with_suffix(".json"), json.dumps(data, indent=1) + "\n")
    bench_doc.write(out, text)


if __name__ == "__main__":
    run_main(main)
