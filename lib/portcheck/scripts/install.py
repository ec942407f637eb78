"""The recorder installed in a user's training script (portcheck.scripts.recorder's Run): scripts/inject/
sitecustomize.py, first on the interpreter's PYTHONPATH, calls install() before the script runs, with the run's
settings in the environment (side_files.SETTINGS: the side, the steps, the folder). install() decides which process
records and in which folder, puts the side's hooks in place (SIDES: hooks_torch's or hooks_paddle's, reporting to the
Run; --full's Run instead: FULL), and how the process ends.

Under a launcher (torchrun, paddle.distributed.launch: run.ranks) each rank records in DIR/rank<r>/<side>,
fed and started from torch's rank r, and writes its progress (portcheck.scripts.progress); the launcher's own process
records nothing. Only the process that installed the recorder records and writes: the settings it leaves in the
environment mark what the script starts (STARTED: a Python monitor, a spawned DataLoader worker), which is not recorded
(only a rank of a launcher portcheck does not know still refuses), and a process forked from it (Run.pid) writes
nothing. A script that ends before N steps leaves what was recorded (status.json says how far it got); a refusal
(recorder.Refused) is its one line in status.json, not a traceback.

Imports the recorder and its side's files; the framework's hooks and --full's Run by name as the recorder starts (they
import the recorder), the progress marker on a launched rank only.
"""
import atexit
import importlib
import json
import os
import sys
from pathlib import Path

from portcheck.scripts.recorder import Refused, Run
from portcheck.scripts.side_files import SETTINGS, STOPPED_EXIT

STARTED = "started"          # in SETTINGS once installed: a process the script starts (install: not recorded)
RUN = None  # the process's Run, once installed
# imported by name as the recorder starts: each framework's hooks (they import wrapping, never the recorder) and
# --full's Run (a Run of its own, which imports the recorder)
SIDES = {"torch": "portcheck.scripts.hooks_torch:TorchSide", "paddle": "portcheck.scripts.hooks_paddle:PaddleSide"}
FULL = "portcheck.scripts.full:Full"


def named(where: str):
    """The class SIDES or FULL names ("module:class"), its module imported."""
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


def install():
    """Called by the injected sitecustomize: the side's hooks in place before the user's script runs."""
    global RUN
    given = json.loads(os.environ[SETTINGS])
    settings = given
    rank = os.environ.get("RANK", os.environ.get("PADDLE_TRAINER_ID"))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("PADDLE_TRAINERS_NUM", "1")) or 1)
    if settings.get("launcher") and rank is None:
        return  # the launcher's own process: its workers record, one rank each
    if settings.get(STARTED) and (world == 1 or settings.get("ranked")):
        return  # a process the script started (a monitor, a spawned DataLoader worker): the script is recorded
    if settings.get("ranked"):  # a launched run (portcheck.scripts.run.ranks): DIR/rank<r>/<side>
        ranked = ("out",) if settings.get("torch_whole") else ("out", "torch_dir")  # torch_whole: DIR/torch read
        settings = {**settings, "world": world, **{k: str(Path(settings[k]).parent / f"rank{rank or 0}" /
                                                        Path(settings[k]).name) for k in ranked}}
        from portcheck.core.fileio import writable
        writable(settings["out"], folder=True).mkdir(parents=True, exist_ok=True)
    fw = named(SIDES["paddle" if settings.get("framework", settings["side"]) == "paddle" else "torch"])(
        settings["side"] == "torch64")
    os.environ[SETTINGS] = json.dumps({**given, STARTED: True})  # the script's children: not recorded (above)
    RUN = (named(FULL) if settings["side"] == "full" else Run)(settings, fw)
    fw.run = RUN  # what its hooks report to
    fw.install(RUN)
    if settings.get("ranked"):  # the rank's progress, which a timeout reads to name the rank that hung
        importlib.import_module("portcheck.scripts.progress").attach(RUN, fw.framework)
    if world > 1 and not settings.get("ranked"):  # a launcher run does not know: its ranks would share one folder
        RUN.refuse(f"it runs as rank {rank} of {world} under a launcher `portcheck run` does not know: give torchrun "
                   "or python -m paddle.distributed.launch, or one process [PC823]")
        os._exit(STOPPED_EXIT)
    atexit.register(_early_exit)
    previous = sys.excepthook

    def refused(kind, value, tb):  # a Refused is our one line, in status.json, which `portcheck run` says (once)
        if isinstance(value, Refused):
            return
        previous(kind, value, tb)
    sys.excepthook = refused


def _early_exit():
    """The script ended before N steps (or was stopped): what was recorded says how far it got."""
    if RUN is not None and not RUN.done:
        RUN.write()
