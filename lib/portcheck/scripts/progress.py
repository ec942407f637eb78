"""Each launched rank's progress, so that a run past --timeout names the rank that hung, not the ranks left waiting
on it in a collective. On a rank (attach, from the recorder): a marker file in its folder (PROGRESS), rewritten at
each step of progress (the model's call, a step taken, a collective of its framework's distributed package entered
and left): how many so far, its step, the time, and the collective it is inside, if any. In `run` (stalled, at the
timeout, after every process ended): the ranks behind read from their markers.

May import portcheck.core; the framework only on the ranks (its distributed package, wrapped).
"""
import functools
import importlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

PROGRESS = "progress.json"  # a launched rank's marker, in its folder beside status.json
MAX_WORLD = 1 << 16  # a marker saying more ranks is not believed (its ranks are listed)
WIDTH = 256  # the marker's bytes: rewritten in place, one write, never shorter than the last
# the collectives that block until every rank of the group enters them (the nonblocking i* ones return at once)
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_object", "broadcast", "broadcast_object_list", "reduce",
               "scatter", "gather", "reduce_scatter", "all_to_all", "alltoall", "barrier", "send", "recv")


class Beat:
    """A rank's marker, open for its life: each beat one write in place (a kill leaves the last whole). Only the
    process that opened it writes (a DataLoader worker forked from it does not)."""

    def __init__(self, folder: Path, step, world: int = 1):
        from portcheck.core.fileio import open_new
        self.file, self.step, self.world = open_new(Path(folder) / PROGRESS), step, world
        self.beats, self.pid = 0, os.getpid()

    def __call__(self, waiting=None):
        if os.getpid() != self.pid:
            return
        self.beats += 1
        said = json.dumps({"beats": self.beats, "step": self.step(), "world": self.world, "at": time.time(),
                           "waiting": waiting})
        self.file.seek(0)
        self.file.write(said.ljust(WIDTH))
        self.file.flush()

    def collective(self, name: str, fn):
        """fn beating as it is entered (waiting inside) and as it returns; one that raises (the rank interrupted
        inside it) leaves its marker waiting there."""
        @functools.wraps(fn)
        def entered(*args, **kwargs):
            self(name)
            out = fn(*args, **kwargs)
            self()
            return out
        return entered


def attach(run, framework: str):
    """A launched rank's marker (run: its recorder's Run): a beat at each call of the model and each step closed, and
    inside each collective of the framework's distributed package."""
    beat = Beat(run.out, lambda: run.step, run.world)
    for name in ("_root_call", "_close_step"):  # the Run's own: each beats before it runs
        method = getattr(run, name)
        setattr(run, name, functools.partial(_beating, beat, method))
    dist = importlib.import_module(f"{framework}.distributed")
    for name in COLLECTIVES:
        if callable(getattr(dist, name, None)):
            setattr(dist, name, beat.collective(name, getattr(dist, name)))
    beat()


def _beating(beat, method, *args, **kwargs):
    beat()
    return method(*args, **kwargs)


@dataclass
class Stall:
    """The ranks behind at the timeout (behind), those of them that hung (hung: named), the rest waiting on them."""
    behind: list
    hung: list
    inside: dict = field(default_factory=dict)  # {rank: the collective it was inside, "" where none}
    last: dict = field(default_factory=dict)  # {rank: (steps it took, seconds from its last progress to the judging)}

    @property
    def waiting(self) -> list:
        return [r for r in self.behind if r not in self.hung]


def read(folder: Path):
    """A rank's marker, None where it wrote none (or what is there is not one)."""
    from portcheck.core.fileio import is_regular
    if not is_regular(folder, PROGRESS):
        return None
    try:
        with open(Path(folder) / PROGRESS, encoding="utf-8") as f:
            said = json.loads(f.read(WIDTH * 4))  # ours is WIDTH: what is longer is not ours, not read whole
    except (OSError, ValueError):
        return None
    ok = isinstance(said, dict) and isinstance(said.get("beats"), int) and isinstance(said.get("step"), int) and \
        isinstance(said.get("at"), (int, float)) and isinstance(said.get("waiting"), (str, type(None)))
    return said if ok else None


def world(folders: dict) -> int:
    """The ranks the launch has, as its ranks' markers say (a rank that never started made no folder); 0 unsaid."""
    said = [m.get("world") for m in map(read, folders.values()) if m]
    return max([w for w in said if isinstance(w, int) and 0 < w <= MAX_WORLD] or [0])


def stalled(folders: dict, behind: list) -> Stall:
    """Which of the ranks behind (folders: {rank: its folder}) hung: those inside no collective where others wait in
    one; where all wait in one, or none says so (Paddle's own ops on GPUs are no collective it wraps), those that
    progressed least (a rank with no marker least of all). The rest wait on them."""
    now = time.time()
    said = {r: read(folders[r]) if r in folders else None for r in behind}
    inside = {r: m["waiting"] for r, m in said.items() if m and m["waiting"]}
    free = [r for r in behind if r not in inside]
    if free and inside:
        hung = free
    else:
        least = min((m["beats"] if m else -1) for m in said.values())
        hung = [r for r in behind if (said[r]["beats"] if said[r] else -1) == least]
    return Stall(list(behind), sorted(hung), {r: inside.get(r, "") for r in behind},
                 {r: (m.get("step"), max(0.0, now - m["at"])) for r, m in said.items() if m})
