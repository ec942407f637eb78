"""Records of large runs on disk: compare_forward(..., record_dir=folder), record_forward(..., record_dir=folder).

A record (compare._Recorder) is a flat dict of arrays in run order: every module's output and first input, the
torch side's twice (float32 and float64). At LLM size it is the largest thing a comparison holds besides the
two models, so a Spill writes each array as it is recorded, <n>.npy in its folder through the project's safe
writer (no link in any component of the path, atomic), and keeps only its name. An array is read back
memory-mapped when it is looked up and released once judged: the judgement holds one module's arrays at a
time, and judges exactly as it would the same record in memory.

A Spill's folder also holds index.json ({key: file}, in run order), written when the run ends: Spill.open reads
it back, so a record written by one process can be judged by another (judge_forward takes it as it takes a dict).
"""
import json
from collections.abc import MutableMapping
from pathlib import Path

import numpy as np

from portcheck.errors import PipelineError
from portcheck.fileio import atomic_write, map_array, open_regular, save_array, writable

INDEX = "index.json"


class Spill(MutableMapping):
    """{record key: numpy array}, each array in a file of `folder` (made if need be)."""

    def __init__(self, folder, files: dict = None):
        self.folder = writable(folder, folder=True)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PipelineError(f"{self.folder} cannot be made ({e.strerror or e}): choose another record_dir") from None
        self._files = dict(files or {})  # {key: file name}
        # files are numbered on from the last one named: a key deleted (a run made again) frees no number
        self._next = 1 + max((int(Path(n).stem) for n in self._files.values() if Path(n).stem.isdigit()), default=-1)

    @classmethod
    def open(cls, folder) -> "Spill":
        """A Spill written before (its index.json), to judge again."""
        path = Path(folder) / INDEX
        try:
            with open_regular(path, follow=False) as f:
                files = json.loads(f.read())
        except (OSError, ValueError) as e:
            raise PipelineError(f"{path} cannot be read ({e}): record_dir holds no finished record") from None
        if not isinstance(files, dict) or not all(isinstance(v, str) and Path(v).name == v for v in files.values()):
            raise PipelineError(f"{path} is not a record's index: record the run again")
        return cls(folder, files)

    def __setitem__(self, key, array):
        name = f"{self._next}.npy"
        self._next += 1
        save_array(self.folder / name, np.ascontiguousarray(array))
        self._files[key] = name

    def link(self, key, to):
        """key holds what `to` holds (a container returns its last child's output): one file, judged once."""
        self._files[key] = self._files[to]

    def source(self, key) -> str:
        """The file behind key: two keys holding one file hold one array."""
        return self._files[key]

    def __getitem__(self, key) -> np.ndarray:
        return map_array(self.folder / self._files[key])

    def __delitem__(self, key):
        del self._files[key]

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def close(self):
        """Write the index: the record is whole."""
        atomic_write(self.folder / INDEX, lambda tmp: Path(tmp).write_text(json.dumps(self._files, indent=0) + "\n"))


def store(record_dir, name: str):
    """Where a record goes: a Spill in record_dir/name, or a plain dict (record_dir None)."""
    return {} if record_dir is None else Spill(Path(record_dir) / name)


def link(record, key, to):
    """record[key] = record[to], without reading or writing an array."""
    if isinstance(record, Spill):
        record.link(key, to)
    else:
        record[key] = record[to]


def identity(record, key):
    """One value per stored array: the same for two keys holding one array, in memory or on disk."""
    if isinstance(record, Spill):
        return record.source(key) if key in record else None
    return id(record.get(key))
