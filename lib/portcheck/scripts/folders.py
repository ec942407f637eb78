"""`portcheck run`'s folder DIR and its seals: the side folders it holds (SIDES, TAKING), a rerun's clearing of a
previous run's records and hand-in (prepare, handed_in), the sides' records digested and made read-only as each
side ends (Sealed), and a side's status.json read (status_of).

May import portcheck.core, gradients.backward, pipeline (handin; training lazily) and scripts.side_files (a
side's files); never scripts.launch or scripts.run (they import it).
"""
import contextlib
import json
import os
from pathlib import Path

from portcheck.pipeline import handin
from portcheck.core import record
from portcheck.core import report
from portcheck.gradients.backward import AGAINST_ITSELF
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import atomic_write, open_regular, writable
from portcheck.scripts.side_files import CROSSED, INIT, RECORD, STATUS

MARK = ".portcheck_run"   # in DIR: the folder is ours, a rerun may replace what is in it
DIGESTS = "records.sha256"  # in DIR: each finished side's files as Sealed digested them (sha256sum -c reads it)
# torch's runs against itself, one per backward.AGAINST_ITSELF (its index the recorder's "against")
MOVED_SIDES = tuple(f"moved{i + 1}" if i else "moved" for i in range(len(AGAINST_ITSELF)))
SIDES = (("torch", "torch"), ("paddle", "paddle"), ("torch64", "torch"),  # torch64 reads Paddle's pairing
         *((side, "torch") for side in MOVED_SIDES))
TAKING = "taking"  # the fifth run's side (taking_run): made only for a red run crossing a kink
PAIRS = ("forward", "data", "loss", "lr", "bp_align")


def prepare(out: Path):
    """DIR created, or one of ours emptied of a previous run's records and hand-in (handed_in); someone else's is
    refused, and so is a file, a link (DIR itself, a folder in it, a file we write) or a folder on the way that is a
    file: one line, before anything is written."""
    writable(out, folder=True)
    if out.is_dir() and any(out.iterdir()) and not (out / MARK).is_file():
        raise PipelineError(f"--out {out} is not empty and was not written by `portcheck run`: give a new folder "
                            "[PC803]")
    released(out)  # a killed run's sealed folders (Sealed): ours to clear
    sides = [out / side for side, _ in SIDES] + [out / TAKING]
    for folder in [*sides, *handed_in_folders(out)]:
        writable(folder, folder=True)
    records = [folder / name for folder in sides for name in (RECORD, STATUS, INIT, CROSSED)]
    for f in [out / MARK, out / DIGESTS, *records]:
        writable(f)
    for folder in sides[:-1]:
        folder.mkdir(parents=True, exist_ok=True)
    atomic_write(out / MARK, lambda tmp: Path(tmp).write_text("written by python -m portcheck run\n"))
    for f in [out / DIGESTS, *records, *handed_in(out)]:
        if f.is_file() and not f.is_symlink():  # a previous run's, never read as this one's
            f.unlink()


def handed_in_folders(out: Path) -> list:
    """The folders a run hands in to (each rank's, under a launcher): DIR/pairs, DIR/log_reprod and its diagnostics/,
    DIR/full."""
    tops = [out, *(f for f in sorted(out.glob("rank*")) if f.name[4:].isdigit() and not f.is_symlink())]
    return [top / sub for top in tops for sub in ("pairs", "log_reprod", f"log_reprod/{report.DIAGNOSTICS}", "full")]


def handed_in(out: Path) -> list:
    """The files a previous run of ours handed in to DIR (handed_in_folders), each named as handin and training name
    what they write (a file of another name, or a link, is left as it is): removed before a rerun (prepare), so
    that `check` of DIR/log_reprod never judges an earlier run's pairs after a failed one."""
    from portcheck.pipeline import training
    from portcheck.pipeline.guide import handed_in as pair_files
    made = []
    for pair in (*PAIRS, training.PAIR):
        made += [*pair_files(Path(), pair), *handin._diagnostics(Path(), pair), Path(f"{pair}{handin.PLOT}")]
    made += [Path(f"{name}_{fw}.npy") for name in (training.LOG, training.OWN) for fw in ("torch", "paddle")]
    made += [Path(training.PLOT), *(Path(f"{STATUS[:-5]}_{fw}.json") for fw in ("torch", "paddle"))]
    names = {f.name for f in made} | {record.path_for(f).name for f in made if f.suffix == ".npy"} | \
        {report.verdict_path(f).name for f in made if f.name.endswith("_diff.log")} | {record.MANIFEST}
    return [folder / name for folder in handed_in_folders(out) for name in sorted(names)
            if (folder / name).is_file() and not (folder / name).is_symlink()]


class Sealed:
    """The records of the sides that ended, as this process saw them when each side's process group ended: every
    file in the side's folder digested (sha256, kept here and listed in DIR/records.sha256), the folder made
    read-only while the run lasts (released at its end). A process the script started outside its group (setsid)
    can outlive it and write there (making the folder writable again: it runs as the same user); changed() names
    what it changed, and judge is red on it before anything is judged or handed in (docs/guarantees.md)."""

    def __init__(self, out: Path):
        self.out, self.digests = out, {}  # {file: (the side's script as SAID says it, sha256)}

    def side(self, folder: Path, said: str):
        for f in sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else ():
            if f.is_file() and not f.is_symlink():
                self.digests[f] = (said, digest(f))
                with contextlib.suppress(OSError):
                    f.chmod(f.stat().st_mode & ~0o222)
        if folder.is_dir() and not folder.is_symlink():
            with contextlib.suppress(OSError):
                folder.chmod(folder.stat().st_mode & ~0o222)
        lines = [f"{h}  {f.relative_to(self.out).as_posix()}\n" for f, (_, h) in self.digests.items()]
        atomic_write(self.out / DIGESTS, lambda tmp: Path(tmp).write_text("".join(lines)))

    def changed(self) -> str:
        """The first sealed file changed since its side ended, said in one line; "" where none is."""
        for f, (said, kept) in self.digests.items():
            now = digest(f)
            if now != kept:
                how = "was removed or replaced by what is not a file" if now is None else "was changed"
                return (f"{f} {how} after {said} ended (a process it started outlived it and wrote there): these "
                        "records are not that run's, nothing is judged; end what the script starts with it, then "
                        "run again")
        return ""


digest = record.file_digest  # a regular file's sha256, None where there is none


def released(out: Path):
    """The side folders a run of ours sealed (Sealed) writable again, and their files: at the run's end, and before
    a rerun clears them (a killed run left them read-only). Links are left as they are."""
    tops = [out, *(f for f in out.glob("rank*") if f.name[4:].isdigit() and f.is_dir() and not f.is_symlink())]
    for folder in (top / side for top in tops for side in (*(s for s, _ in SIDES), TAKING)):
        if folder.is_dir() and not folder.is_symlink():
            with contextlib.suppress(OSError):  # not ours to change: its own line comes where it is written
                folder.chmod(folder.stat().st_mode | 0o700)
                for f in folder.iterdir():
                    if f.is_file() and not f.is_symlink():
                        f.chmod(f.stat().st_mode | 0o200)


SAID = {"torch": "torch", "torch64": "torch (its float64 run)", "paddle": "Paddle",
        **{side: "torch (its run against itself)" for side in MOVED_SIDES},
        TAKING: "torch (its run taking Paddle's side of a kink crossed)"}


def status_of(said: str, folder: Path, code: int, steps: int) -> dict:
    """A side's (or rank's) status.json, or the one line saying why it cannot be checked."""
    status = read_status(folder / STATUS, said)
    fields = {"steps": int, "root": (str, type(None)), "config": dict, "error": (str, type(None)), "world": int}
    for key, kind in fields.items() if status is not None else ():  # written by another process: its fields' types
        if key in status and (not isinstance(status[key], kind) or isinstance(status[key], bool)) or \
                key not in status and key != "world":
            raise PipelineError(f"{said}: its {STATUS} is not the one portcheck's recorder writes ({key!r} is "
                                f"{type(status[key]).__name__ if key in status else 'missing'}): the script or a "
                                "process it started wrote it; run it again [PC815]")
    if status and status.get("error"):
        raise PipelineError(f"{said} cannot be checked: {status['error']}")
    if status is None:
        raise PipelineError(f"{said} left no record (exit {code}): portcheck's recorder did not start in its "
                            "interpreter (an 'Error in sitecustomize' line above says why) or the process was killed "
                            "[PC806]")
    if status.get("root") is None:
        if code:
            raise PipelineError(f"{said} crashed (exit {code}; its traceback above) before it trained [PC816]")
        raise PipelineError(f"{said} never called a model whose parameters an optimizer holds (all or some), in "
                            "train mode with gradients on: it must train a model (model.train(), "
                            "forward, loss.backward(), optimizer.step()) [PC807]")
    if status["steps"] < steps:
        if code:
            raise PipelineError(f"{said} crashed (exit {code}; its traceback above) after "
                                f"{status['steps']} of {steps} step(s) [PC817]")
        raise PipelineError(f"{said} ended after {status['steps']} optimizer step(s), before the {steps} "
                            f"asked: give --steps {max(1, status['steps'])} or a longer run [PC808]")
    return status


def read_status(path: Path, said: str):
    """A status file the recorder wrote (a dict), None where there is none; anything else one line."""
    if not os.path.lexists(path):
        return None
    try:
        with open_regular(path, follow=False) as f:
            status = json.loads(f.read(1 << 24))
        if not isinstance(status, dict):
            raise ValueError(f"a {type(status).__name__}, not the recorder's dict")
        return status
    except (OSError, ValueError) as e:
        raise PipelineError(f"{said}: its {path.name} is not the one portcheck's recorder writes ({e}): the script or "
                            "a process it started wrote it; run it again [PC818]") from None

