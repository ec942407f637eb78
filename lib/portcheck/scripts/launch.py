"""Starting `portcheck run`'s scripts: a CMD read (command, interpreter, launcher), the environment that injects
the recorder (environment, side_settings), each script run in a session of its own and its group ended with it
(script, Stopped on SIGTERM and SIGHUP), and a side run once, or its ranks under a launcher (run_side, run_ranks).

May import portcheck.core, scripts.side_files (what run and the recorder hand each other), scripts.folders (DIR,
its seals and status files) and scripts.progress (each launched rank's progress, read at a timeout); never scripts.run
(it imports this).
"""
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

from portcheck.core import fileio
from portcheck.core.errors import PipelineError
from portcheck.scripts import progress
from portcheck.scripts.folders import MOVED_SIDES, SAID, Sealed, read_status, status_of
from portcheck.scripts.side_files import INIT, RECORD, SETTINGS, STATUS

INJECT = Path(__file__).resolve().parent / "inject"
LIB = Path(__file__).resolve().parents[2]
LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "paddle.distributed.launch")  # run.ranks
GRACE = 5  # seconds a script's process group is given to end on a signal before it is killed
STOPPING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def command(text: str, side: str) -> list:
    """A CMD as argv, its first word a Python interpreter that can import this library, or a script one runs (its
    #! line names it: torchrun's console script). What the first word is is read from its file (interpreter) before
    anything runs: a shell script or another program is refused unrun; only a Python is then asked to import the
    recorder."""
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise PipelineError(f"--{side} {text!r}: {e}; quote it as a shell would [PC811]") from None
    if not argv:
        raise PipelineError(f"--{side} is empty: give the command that runs the script, e.g. \"python train.py\" "
                            "[PC800]")
    exe = shutil.which(argv[0])
    if exe is None and os.sep in argv[0] and os.path.exists(argv[0]):  # there, but no program: say what it is
        raise PipelineError(f"--{side}: {argv[0]!r} is {file_kind(argv[0])}, not a program: the command's first word "
                            "is a Python interpreter (python, /path/venv/bin/python) or a launcher it runs (torchrun) "
                            "[PC186]")
    if exe is None:
        raise PipelineError(f"--{side}: {argv[0]!r} is not found: the command's first word is a Python interpreter "
                            "[PC801]")
    python = interpreter(exe)
    if python is None:
        raise PipelineError(f"--{side}: {argv[0]!r} is not a Python interpreter: the command's first word is one "
                            "(python, /path/venv/bin/python) or a launcher it runs (torchrun) [PC802]")
    try:
        probe = subprocess.run([python, "-c", "import sys, portcheck.scripts.install; print('portcheck-ok')"],
                               env=environment({}), capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PipelineError(f"--{side}: {argv[0]!r} is not a Python interpreter ({e}) [PC812]") from None
    if "portcheck-ok" not in probe.stdout:
        missing = re.search(r"No module named '([\w.]+)'", probe.stderr)
        if missing:  # the library itself is on its path (environment): what it imports is not in that venv
            raise PipelineError(f"--{side}: {argv[0]} cannot import portcheck's recorder (no module named "
                                f"{missing.group(1)!r}): install the library's requirements in that interpreter's "
                                f"environment ({Path(python).parent / 'pip'} install "
                                f"{missing.group(1).split('.')[0]}, or pip install -e lib from this repository) "
                                "[PC813]")
        raise PipelineError(f"--{side}: {argv[0]!r} is not a Python interpreter: the command's first word is one "
                            "(python, /path/venv/bin/python) or a launcher it runs (torchrun) [PC802]")
    return [exe, *argv[1:]]


def file_kind(path: str) -> str:
    """What a path that exists but is no program is, in words."""
    return fileio.file_kind(path) or "a file that is not executable (no x permission)"


# the names a Python interpreter's file goes by (python3.11, pypy3, python3.13t, python3-dbg), whole: a shell script
# named python_train.sh or python-wrapper is no interpreter, and taken as one it ran when asked for its Python
PYTHONS = re.compile(r"(python|pypy)(\d+(\.\d+)*)?[dmtw]*(-dbg)?(\.exe)?")
# an executable's first bytes: ELF, Mach-O (both byte orders, 32 and 64 bits, universal)
BINARY = (b"\x7fELF", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
          b"\xca\xfe\xba\xbe")


def pythonic(path: str) -> bool:
    """The file goes by a Python's name, as given or where its links lead (a venv's python -> python3.11)."""
    return any(PYTHONS.fullmatch(Path(p).name) for p in (path, os.path.realpath(path)))


def interpreter(exe: str):
    """The Python that runs exe, read from its file and never by running it: a script's #! line's where that names
    a Python (torchrun is a console script of its venv's Python); exe itself where it is a binary, or a script
    whose #! names a shell, that goes by a Python's name (pyenv's `python` shim, #!/usr/bin/env bash); None for
    anything else (a shell script, `ls`): run, it would do what it does, not answer as a Python."""
    try:
        with open(exe, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return exe if head.startswith(BINARY) and pythonic(exe) else None
    words = head[2:].split(b"\n")[0].decode(errors="replace").split()
    if words[:1] and Path(words[0]).name == "env":  # #!/usr/bin/env [-S] python3
        words = [w for w in words[1:] if not w.startswith("-")][:1]
        words = [shutil.which(words[0]) or words[0]] if words else []
    if words and PYTHONS.fullmatch(Path(words[0]).name):
        return words[0]
    return exe if pythonic(exe) else None


def launcher(argv: list) -> bool:
    """The command starts a launcher (torchrun, python -m paddle.distributed.launch): each of its workers is a rank."""
    if Path(argv[0]).name in LAUNCHERS:
        return True
    words = iter(argv[1:])
    for w in words:  # the interpreter's options, up to -m's module or the script
        if w == "-m":
            return next(words, None) in LAUNCHERS
        if not w.startswith("-"):
            return False
        if w in ("-X", "-W"):
            next(words, None)
    return False


def environment(settings: dict) -> dict:
    path = os.pathsep.join([str(INJECT), str(LIB), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = dict(os.environ, PYTHONPATH=path)
    if settings:
        env[SETTINGS] = json.dumps(settings)
    return env


def launch(side: str, argv: list, out: Path, steps: int, folders, timeout=None, **settings) -> int:
    """One side's script with the recorder injected, after its folders' previous records are removed (never read
    as this run's); its exit code. timeout: the seconds it may take (run's --timeout), then ended (script)."""
    print(f"\n$ {shlex.join(argv)}   # portcheck run: the {side} side, {steps} step(s)", flush=True)
    for folder in folders:
        with contextlib.suppress(OSError):  # sealed by an earlier run in this process (Sealed)
            folder.chmod(folder.stat().st_mode | 0o700)
        for name in (RECORD, STATUS, INIT, progress.PROGRESS):
            if (folder / name).is_file() and not (folder / name).is_symlink():
                (folder / name).unlink()
    return script(argv, environment({**side_settings(side, out, steps), **settings}), timeout)


class Stopped(BaseException):
    """SIGTERM or SIGHUP to `portcheck run` (STOPPING): raised where it runs, as Ctrl-C raises KeyboardInterrupt (an
    `except Exception` on the way does not take it for an error)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def stopped(signum, frame):
    raise Stopped(signum)


def script(argv: list, env: dict, timeout=None) -> int:
    """A script run in a session of its own, its exit code; its process group is ended with it (killed): what it
    started (a DataLoader's workers left by the recorder's exit, a launcher's ranks, a monitor) does not outlive it.
    Ctrl-C, a Stopped signal to `portcheck run` or the timeout (subprocess.TimeoutExpired, raised on) is passed on to
    the group as SIGINT, given GRACE seconds to end."""
    proc = subprocess.Popen(argv, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except BaseException as e:  # noqa: BLE001 - Ctrl-C, a Stopped signal: passed on, then raised on
        signal_group(proc.pid, e.signum if isinstance(e, Stopped) else signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=GRACE)
        raise
    finally:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def signal_group(pgid: int, signum: int):
    with contextlib.suppress(ProcessLookupError, PermissionError):  # nothing left in it
        os.killpg(pgid, signum)


def side_settings(side: str, out: Path, steps: int) -> dict:
    """A side's recorder settings (side_files.SETTINGS): its records in out/side, torch's read from out/torch (absolute:
    a script may change directory)."""
    out = out.absolute()
    return {"side": side, "steps": steps, "out": str(out / side), "torch_dir": str(out / "torch"),
            **({"against": MOVED_SIDES.index(side)} if side in MOVED_SIDES else {})}


def run_side(side: str, argv: list, out: Path, steps: int, sealed: Sealed = None, **settings) -> dict:
    """One side's script, one process; its status (steps taken, configuration). sealed: its folder sealed as the
    script's process group ended; settings: the run's own (layouts)."""
    try:
        code = launch(side, argv, out, steps, [out / side], **settings)
    except subprocess.TimeoutExpired as e:
        raise timed_out(f"the {SAID[side]} script", steps, e.timeout) from None
    if sealed is not None:
        sealed.side(out / side, f"the {SAID[side]} script")
    return status_of(f"the {SAID[side]} script", out / side, code, steps)


def run_ranks(side: str, argv: list, out: Path, steps: int, launched: bool, sealed: Sealed = None,
              **settings) -> dict:
    """One side of a launched run: each rank (env RANK, PADDLE_TRAINER_ID; a one-process command is rank 0)
    records in DIR/rank<r>/<side>. {rank: its status}."""
    ranked = lambda: {int(f.parent.name[4:]): f for f in out.glob(f"rank*/{side}") if f.parent.name[4:].isdigit()}
    try:
        code = launch(side, argv, out, steps, ranked().values(), ranked=True, launcher=launched, **settings)
    except subprocess.TimeoutExpired as e:  # of the ranks that had not taken the steps, the one(s) that hung named
        done = {r for r, f in ranked().items() if (f / STATUS).is_file() and not f.is_symlink() and
                ((read_status(f / STATUS, "") or {}).get("steps") or 0) >= steps}
        if not ranked():
            raise timed_out(f"the {SAID[side]} script", steps, e.timeout, "no rank of it started recording") from None
        behind = sorted((set(ranked()) | set(range(progress.world(ranked())))) - done)
        if not behind:
            raise timed_out(f"the {SAID[side]} script", steps, e.timeout,
                            "each rank recorded its steps; its launcher did not end") from None
        stall = progress.stalled(ranked(), behind)
        raise timed_out(f"the {SAID[side]} script's rank{'s' * (len(stall.hung) > 1)} "
                        f"{', '.join(map(str, stall.hung))}", steps, e.timeout, stall_said(stall)) from None
    for r, f in ranked().items() if sealed is not None else ():
        sealed.side(f, f"the {SAID[side]} script's rank {r}")
    found = {r: f for r, f in ranked().items() if (f / STATUS).is_file()}
    if not found:
        status_of(f"the {SAID[side]} script", out / side, code, steps)  # nothing recorded: it says why
    said = {r: read_status(f / STATUS, f"the {SAID[side]} script's rank {r}") or {} for r, f in found.items()}
    world = max(s.get("world", 1) if isinstance(s.get("world", 1), int) else 1 for s in said.values())
    # a rank killed (it wrote nothing), else the rank that ended first, named: a rank that dies leaves the others
    # failing in a collective after it
    missing = sorted(set(range(world)) - set(found))
    if missing:
        raise PipelineError(f"the {SAID[side]} script's rank(s) {', '.join(map(str, missing))} of {world} recorded "
                            f"nothing (exit {code}; the launcher's log above or in its log folder) [PC804]")
    first = sorted(found, key=lambda r: (found[r] / STATUS).stat().st_mtime_ns)
    statuses = {r: status_of(f"the {SAID[side]} script's rank {r}", found[r], code, steps) for r in first}
    return dict(sorted(statuses.items()))


def timed_out(said: str, steps: int, timeout: float, why: str = "") -> PipelineError:
    return PipelineError(f"{said} did not take {steps} step(s) within --timeout {timeout:g} s ("
                         f"{why or 'hung, or waiting on a rank that hung'}): every process it started was ended; give "
                         "a longer --timeout, or look at the script's log above [PC938]")


def stall_said(stall) -> str:
    """Where the ranks that hung stopped (progress.Stall), and which wait on them, in words."""
    hung = []
    for r in stall.hung:
        if r not in stall.last:
            hung.append(f"rank {r} wrote no progress, its recorder never started")
            continue
        taken, ago = stall.last[r]
        hung.append(f"rank {r} made no progress for {ago:.0f} s, in step {taken + 1} "
                    + (f"inside {stall.inside[r]} with the least progress" if stall.inside[r] else
                       "outside any collective"))
    where = {}
    for r in stall.waiting:
        where.setdefault(stall.inside[r], []).append(str(r))
    them = "it" if len(stall.hung) == 1 else "them"
    waiting = [f"rank{'s' * (len(ranks) > 1)} {', '.join(ranks)} waiting on {them} "
               + (f"in {inside}" if inside else "further along") for inside, ranks in where.items()]
    return "; ".join(hung + waiting)


def same_ranks(found: dict):
    """Every side ran the torch side's ranks (found: {side: {rank: status}}), else one line."""
    for side, statuses in found.items():
        if sorted(statuses) != sorted(found["torch"]):
            raise PipelineError(f"the torch script ran {len(found['torch'])} rank(s), the {SAID[side]} script "
                                f"{len(statuses)}: give both commands the same number of processes (rank r is "
                                "compared with rank r) [PC819]")

