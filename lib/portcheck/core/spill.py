"""Records of large runs on disk: compare_forward(..., record_dir=folder), record_forward(..., record_dir=folder).

A record (trace.Recorder) is a flat dict of arrays in run order: every module's output and first input, the
torch side's twice (float32 and float64). At LLM size it is the largest thing a comparison holds besides the
two models, so a Spill writes each array as it is recorded, <n>.npy in its folder, and keeps only its name. The
folder is checked once as the project's writer checks a path (no link in any component) and then held open:
every file is written through that descriptor and never through a link (O_NOFOLLOW), so no folder swapped for a
link later can redirect it, without a check, a temporary file and a rename per array (a third of the
comparison's time at LLM size, ~1500 arrays). A Spill writes only in a folder of its own: one it finds new or
empty, which it marks (OWNED), or one marked so before; any other is refused, nothing in it touched. There an
earlier record's file of the same name is written over in place, its pages reused: removing it and making a
new one cost 5x as much at LLM size (the kernel frees the pages and hands out fresh ones, 0.75 s against
0.14 s for 1.5 GB here), a sixth of a comparison's own overhead. A file with a second hard link is replaced,
never written through. An array is read back memory-mapped when it is looked up (one of up to SMALL
bytes read, its copy cheaper than a map) and released once judged: the judgement holds one module's arrays at a time, and judges exactly as it would the
same record in memory.

A Spill's folder also holds index.json ({key: file}, in run order), written when the run ends: Spill.open reads
it back, so a record written by one process can be judged by another (judge_forward takes it as it takes a dict).
A new record in a folder removes the index there first: a run killed halfway never leaves an index naming its
files as the earlier record's.
"""
import contextlib
import errno
import functools
import json
import math
import mmap
import os
import stat
import weakref
from collections.abc import MutableMapping
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.core.fileio import atomic_write, claim_folder, map_array, open_regular, writable

INDEX = "index.json"
SMALL = 64 << 10  # bytes: an array up to this size is read back, a larger one mapped
RECENT = 8  # arrays read back kept at hand (read-only: every lookup of one key gets the same values)
OWNED = ".portcheck-record"  # in a folder a Spill writes: the numbered files beside it are the project's own


class Spill(MutableMapping):
    """{record key: numpy array}, each array in a file of `folder` (made if need be)."""

    def __init__(self, folder, files: dict = None):
        self.folder = writable(folder, folder=True)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PipelineError(f"{self.folder} cannot be made ({e.strerror or e}): choose another record_dir "
                                "[PC220]") from None
        try:
            self._dir = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as e:
            raise PipelineError(f"{self.folder} cannot be opened ({e.strerror or e}): choose another record_dir "
                                "[PC221]") from None
        weakref.finalize(self, os.close, self._dir)
        self._files = dict(files or {})  # {key: file name}
        self._layout = {}  # {file name: (shape, dtype, offset)} of the files this Spill wrote: mapped without a header
        # files are numbered on from the last one named: a key deleted (a run made again) frees no number
        self._next = 1 + max((int(Path(n).stem) for n in self._files.values() if Path(n).stem.isdigit()), default=-1)
        self._claimed = False
        self._recent = {}  # {file name: its array}, the last RECENT read: a judgement reads one value 2-4 times
        if files is None:
            self._claim()
            self._unlink(INDEX)

    @classmethod
    def open(cls, folder) -> "Spill":
        """A Spill written before (its index.json), to judge again."""
        path = Path(folder) / INDEX
        try:
            with open_regular(path, follow=False) as f:
                files = json.loads(f.read())
        except (OSError, ValueError) as e:
            raise PipelineError(f"{path} cannot be read ({e}): record_dir holds no finished record [PC222]") from None
        if not isinstance(files, dict) or not all(isinstance(v, str) and Path(v).name == v for v in files.values()):
            raise PipelineError(f"{path} is not a record's index: record the run again [PC218]")
        return cls(folder, files)

    def _claim(self):
        """Raise one line unless the folder is the project's own: marked (OWNED), or new or empty (marked now)."""
        if not self._claimed:
            _claim(self.folder, self._dir)
            self._claimed = True

    def _unlink(self, name):
        """An earlier record's file out of the way."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self._dir)

    def _opened(self, name) -> int:
        """A descriptor to write file `name` from its start: an earlier record's regular file of that name with no
        other link, written over in place (its pages reused), else a new file in its place (O_EXCL)."""
        try:
            old = os.stat(name, dir_fd=self._dir, follow_symlinks=False)
            if stat.S_ISREG(old.st_mode) and old.st_nlink == 1:
                # O_NONBLOCK: were it swapped for a FIFO meanwhile, the open fails rather than waits
                fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self._dir)
                now = os.fstat(fd)
                if (now.st_ino, now.st_dev, now.st_nlink) == (old.st_ino, old.st_dev, 1) and stat.S_ISREG(now.st_mode):
                    return fd
                os.close(fd)
        except OSError:  # none there, or not a file to write over: replaced below
            pass
        self._unlink(name)
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=self._dir)

    def __setitem__(self, key, array):
        """array written now (a later in-place change of the tensor it views cannot reach the file)."""
        array = np.ascontiguousarray(array)
        name = f"{self._next}.npy"
        self._next += 1
        self._claim()
        header = _header(array.shape, array.dtype.str)
        try:
            fd = self._opened(name)
            try:
                # two plain writes, no file object nor write_array's header built anew: ~1500 arrays a run
                _write_all(fd, header)
                _write_all(fd, array.reshape(-1).view(np.uint8))
                if os.fstat(fd).st_size > len(header) + array.nbytes:
                    os.ftruncate(fd, len(header) + array.nbytes)  # an earlier, longer file's tail
            finally:
                os.close(fd)
        except OSError as e:  # a full disk: the index is never written, so nothing judges a part of the record
            what = "free space or choose another record_dir" if e.errno == errno.ENOSPC else "choose another record_dir"
            raise PipelineError(f"{self.folder / name} could not be written ({e.strerror or e}): {what} "
                                "[PC224]") from None
        self._files[key] = name
        self._layout[name] = array.shape, array.dtype, len(header)

    def link(self, key, to):
        """key holds what `to` holds (a container returns its last child's output): one file, judged once."""
        self._files[key] = self._files[to]

    def source(self, key) -> str:
        """The file behind key: two keys holding one file hold one array."""
        return self._files[key]

    def __getitem__(self, key) -> np.ndarray:
        name = self._files[key]
        recent = self._recent.get(name)
        if recent is not None:
            return recent
        array = self._read(name)
        self._recent[name] = array
        if len(self._recent) > RECENT:
            del self._recent[next(iter(self._recent))]
        return array

    def _read(self, name) -> np.ndarray:
        known = self._layout.get(name)
        if known is None or not math.prod(known[0]):  # a file read from an index (its header checked), or nothing to map
            return map_array(self.folder / name)
        shape, dtype, offset = known
        size = dtype.itemsize * math.prod(shape)
        try:
            with open_regular(name, follow=False, dir_fd=self._dir) as f:
                if os.fstat(f.fileno()).st_size < offset + size:
                    raise ValueError("shorter than the array written")
                if size <= SMALL:  # read: a map's setup costs more than a small array's copy
                    data = os.pread(f.fileno(), size, offset)
                    if len(data) < size:
                        raise ValueError("shorter than the array written")
                    return np.frombuffer(data, dtype=dtype).reshape(shape)
                # a plain mmap under the array (np.memmap's own bookkeeping is most of a lookup's time); read-only
                mapped = mmap.mmap(f.fileno(), offset + size, access=mmap.ACCESS_READ)
                return np.frombuffer(mapped, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)
        except (ValueError, OSError) as e:
            raise PipelineError(f"{self.folder / name} cannot be read back ({e}): record the run again "
                                "[PC205]") from None

    def shape(self, key) -> tuple:
        """The array's shape, without mapping it when this Spill wrote it (pairing reads every shape)."""
        known = self._layout.get(self._files[key])
        return known[0] if known else self[key].shape

    def __delitem__(self, key):
        del self._files[key]

    def __contains__(self, key) -> bool:
        return key in self._files  # without reading the array

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def close(self):
        """Write the index: the record is whole."""
        atomic_write(self.folder / INDEX, lambda tmp: Path(tmp).write_text(json.dumps(self._files, indent=0) + "\n"))


@functools.lru_cache(maxsize=1024)
def _header(shape: tuple, dtype: str) -> bytes:
    """The .npy header of a C-ordered array (write_array's own, format 1.0): one per shape and dtype."""
    import io
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"shape": shape, "fortran_order": False, "descr": dtype})
    return buffer.getvalue()


def _write_all(fd: int, data):
    """Every byte of data to fd (os.write may write part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _claim(folder: Path, fd: int):
    """Raise one line unless the open folder fd is the project's own: marked (OWNED), or empty (marked now)."""
    try:
        mine = claim_folder(fd, OWNED)
    except OSError as e:
        raise PipelineError(f"{folder} cannot be written ({e.strerror or e}): choose another record_dir "
                            "[PC223]") from None
    if not mine:
        raise PipelineError(f"{folder} holds files portcheck did not write (it writes records only in a new "
                            "or empty folder, or one it wrote before): choose another record_dir [PC219]")


def claim(record_dir):
    """record_dir made the project's own before records are written in folders under it (compare_forward's torch/
    and paddle/): new or empty (marked now) or marked before, else one line, nothing in it touched."""
    folder = writable(record_dir, folder=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise PipelineError(f"{folder} cannot be made ({e.strerror or e}): choose another record_dir [PC220]") from None
    try:
        _claim(folder, fd)
    finally:
        os.close(fd)


def store(record_dir, name: str):
    """Where a record goes: a Spill in record_dir/name, or a plain dict (record_dir None)."""
    return {} if record_dir is None else Spill(Path(record_dir) / name)


def link(record, key, to):
    """record[key] = record[to], without reading or writing an array."""
    if isinstance(record, Spill):
        record.link(key, to)
    else:
        record[key] = record[to]


def shape(record, key) -> tuple:
    """The shape of record[key] (a dict or a Spill), without reading the array from disk."""
    return record.shape(key) if isinstance(record, Spill) else np.shape(record[key])


def identity(record, key):
    """One value per stored array: the same for two keys holding one array, in memory or on disk."""
    if isinstance(record, Spill):
        return record.source(key) if key in record else None
    return id(record.get(key))
