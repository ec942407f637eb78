"""A benchmark's page (docs/bench/<name>.md): the machine's facts a run is taken at, kept in the tool's JSON beside
its figures, and the page's header line made from them and the exact command. A module the bench_ tools share,
not a command.

A tool calls `start()` before measuring and `finish()` after, stores what they return under RUN in its JSON, and
renders its page from that JSON alone (`--page`: nothing measured), so a page is always its figures' and the
figures' circumstances are never retyped by hand. Figures measured before these facts were recorded keep their
JSON as it is: their page says in one line that the facts were not recorded, and which command records them.
"""
import datetime
import json
import os
import shlex
import sys
from pathlib import Path

from portcheck.core.errors import require
from portcheck.core.fileio import atomic_write

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "bench"                   # every benchmark's page and its JSON
RUN = "run"                                        # the JSON key (beside the figures) of the facts below
FACTS = ("date", "cpu", "cores", "load before", "load after")
SAID = {"cpu": "CPU", "load before": "load"}       # a missing fact as the header names it
NOT_RECORDED = "not recorded with these figures"   # the header's words when facts are missing (tested)


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (/proc/cpuinfo), else the architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def load() -> float:
    """The 1-minute load average: above 0, other work shared the cores during the run."""
    return round(os.getloadavg()[0], 2)


def command(argv=None) -> str:
    """The command as typed from the repository's root: `python tools/<tool>.py <its arguments>`, a path inside the
    repository shown relative to it (no machine's path on a committed page)."""
    argv = sys.argv if argv is None else argv
    inside = lambda a: Path(a).resolve().relative_to(ROOT).as_posix() if ROOT in Path(a).resolve().parents else a
    return shlex.join(["python", inside(argv[0]), *(inside(a) if a.startswith("/") else a for a in argv[1:])])


def setting(env=()) -> str:
    """What the command ran under that its arguments do not show, as typed before it: the environment variables
    named in `env` that are set (`OMP_NUM_THREADS=1 `), and the process's niceness (`nice -n 10 `)."""
    said = "".join(f"{name}={shlex.quote(os.environ[name])} " for name in env if name in os.environ)
    return said + (f"nice -n {os.nice(0)} " if hasattr(os, "nice") and os.nice(0) > 0 else "")


def start(argv=None, env=()) -> dict:
    """The facts before a run: the command (with the `env` variables it ran under, and its niceness), the UTC date,
    the CPU, the cores this process may use, the load."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return {"command": setting(env) + command(argv), "date": date,
            "cpu": cpu_model(), "cores": cores, "load before": load()}


def finish(run: dict) -> dict:
    """The facts with the load after the run added."""
    return {**run, "load after": load()}


def header(run, command: str, again: str = None) -> str:
    """The page's line under its title: the command, and the date, CPU, cores and load it ran at; where the JSON
    does not hold them (figures measured before they were recorded), one line saying so and what records them
    (`again`: said instead, where the command is not the tool's and records nothing itself).
    A list: the runs whose figures one page holds (rows added by later runs), each its line."""
    if isinstance(run, list):
        return " ".join(dict.fromkeys(header(r, command, again) for r in run)) if run else header({}, command, again)
    run = run or {}
    said = run.get("command", command)
    missing = [k for k in FACTS if run.get(k) is None]
    again = again or ("running it again records them" if said == command else f"`{command}` records them")
    if len(missing) == len(FACTS):
        return f"Measured by `{said}`; the date, CPU and load of the run were {NOT_RECORDED} ({again})."
    loads = [f"{run[k]:.1f} {k.split()[1]}" for k in ("load before", "load after") if run.get(k) is not None]
    facts = [f"on {run['date']} (UTC)" if run.get("date") else None, run.get("cpu"),
             f"{run['cores']} cores" if run.get("cores") else None,
             "1-min load " + " and ".join(loads) if loads else None]
    line = f"Measured by `{said}`: " + ", ".join(f for f in facts if f) + "."
    if missing:
        names = [SAID.get(k, k) for k in missing if not (k == "load after" and "load before" in missing)]
        named = " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]
        line += f" Its {named} {'was' if len(names) == 1 else 'were'} {NOT_RECORDED} ({again})."
    return line


def write(path: Path, text: str) -> None:
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def rewrite(page: Path, source: Path, render, command: str) -> None:
    """--page: `page` written again by render() from its recorded JSON (`source`; where it is missing, one line naming
    `command`, which records it). Nothing is measured."""
    require(source, command)
    write(page, render(json.loads(Path(source).read_text())))


def add_page_flag(ap) -> None:
    ap.add_argument("--page", action="store_true",
                    help="write the page again from the recorded JSON beside it: nothing is measured")


if __name__ == "__main__":
    import argparse
    argparse.ArgumentParser(description="A module the bench_ tools share, not a command: each tool's --page writes "
                            "its page again from its JSON.").parse_args()
    print("tools/bench_doc.py is a module: run a benchmark (python tools/bench_align.py) or its --page",
          file=sys.stderr)
    sys.exit(2)
