"""Files the pipeline writes and reads back, safely.

* writable: the pre-flight every write passes: the path can be written, and is not a symbolic link
  (nothing is ever written through one), checked before any old output is touched;
* atomic_write: write to a temporary name, then rename: a kill never leaves a truncated file;
  open_new: a log written as a run goes, never through a link;
* claim_folder: a folder the project made, marked by a file of its own (never a link), its files written again;
* save_npy / load_npy: ReprodLogger's format (np.save of a dict of numeric arrays). Loading never
  executes code: only the numpy globals a dict of plain arrays needs are unpickled, anything else
  is refused with one line; its cost (array bytes, containers counted at every shared reference)
  is bounded by the file's size.
"""
import errno
import io
import mmap
import os
import pickle
import stat
import tempfile
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError, remedy, require

MAX_KEY_LENGTH = 200
# A reprod_log file holds a pair's keys: hundreds (a model's outputs, a few batches, steps), not millions. Each key
# costs a few hundred bytes of Python objects whatever its array's size, so memory is bounded by the key count as by
# the file's size: a file of more arrays is refused as it is read, before they are built.
MAX_ARRAYS = 100_000


class _Budget:
    """What one file may cost: the bytes of every array it builds and the containers a walk of it visits,
    counted against the file's own size. A pickle can name one object many times (its memo), so a few
    hundred bytes can describe a list that holds itself a thousand times over, or a thousand arrays that
    share one buffer: each reference is counted as if it were a copy."""

    SHARED = 4  # a key may repeat another's array (the file holds it once): up to 4 x the file in all

    def __init__(self, size: int):
        self.size, self.left = size, size
        self.shared, self.arrays, self.built = self.SHARED * size, set(), 0

    def array(self):
        """One more array built: at most MAX_ARRAYS in a file."""
        self.built += 1
        if self.built > MAX_ARRAYS + 1:  # the 0-d object array np.save wraps a dict in is one of them
            raise pickle.UnpicklingError(f"more than {MAX_ARRAYS} arrays: a reprod_log pair holds hundreds of keys; "
                                         "record fewer (a few batches, the steps compared)")

    def reference(self, array: np.ndarray):
        """An array met again through the pickle memo is charged its bytes again: every later step (a diff,
        a float64 copy) handles it once per key."""
        if id(array) in self.arrays:
            self.shared -= array.nbytes
            if self.shared < 0:
                raise pickle.UnpicklingError(f"arrays shared between keys, counted at every key, need more than "
                                             f"{self.SHARED} x the file's {self.size} bytes")
        self.arrays.add(id(array))

    def spend(self, n: int, what):
        """what: the thing charged, said when it is over (a callable: formatted only then)."""
        self.left -= n
        if self.left < 0:
            raise pickle.UnpicklingError(f"{what() if callable(what) else what}: more than the file's {self.size} "
                                         "bytes hold")


_budget = _Budget(0)


def _count(shape) -> int:
    n = 1
    for d in shape:
        if int(d) < 0:
            raise pickle.UnpicklingError(f"a negative dimension in {tuple(shape)}")
        n *= int(d)
    return n


class _CheckedArray(np.ndarray):
    """The array class the restricted unpickler builds: before numpy allocates anything its size is
    charged to the file's budget (a 240-byte file must not be able to ask for gigabytes), and object
    arrays are allowed only as the 0-d holder np.save wraps a dict in."""

    def __setstate__(self, state):
        if not isinstance(state, tuple) or len(state) != 5 or not isinstance(state[2], np.dtype):
            raise pickle.UnpicklingError("an array state numpy does not write")
        shape, dtype = state[1], state[2]
        n = _count(shape)
        if dtype.hasobject and n > 1:
            raise pickle.UnpicklingError(f"an object array of shape {tuple(shape)}")
        if not dtype.hasobject:
            _budget.spend(n * dtype.itemsize, lambda: f"an array of shape {tuple(shape)} {dtype} needs "
                                                      f"{n * dtype.itemsize} bytes")
        super().__setstate__(state)


def _reconstruct(cls, shape, dtype):
    # numpy pickles every array as an empty one plus its state; a non-empty shape here would be memory
    # numpy never fills (no state follows it), so two copies of one file would read differently
    if _count(shape) != 0:
        raise pickle.UnpicklingError(f"an array of shape {tuple(shape)} without its contents")
    _budget.array()
    return np.ndarray.__new__(_CheckedArray, shape, dtype)


# What np.save and paddle.save need to rebuild dicts of numeric arrays, and nothing else.
_SAFE_GLOBALS = {
    ("numpy", "ndarray"): _CheckedArray, ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct, ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "scalar"): None, ("numpy._core.multiarray", "scalar"): None,
    ("collections", "OrderedDict"): None, ("builtins", "tuple"): tuple,
}


class _ArraysOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in _SAFE_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")
        return _SAFE_GLOBALS[module, name] or super().find_class(module, name)


def _plain(obj):
    """The unpickled tree with every array a plain ndarray again (they were built as _CheckedArray).
    Each node visited is charged to the budget, shared ones at every reference: the tree a file
    unfolds to, which every later walk of it sees, is at most as many nodes as the file has bytes."""
    _budget.spend(1, "its containers, counted at every reference")
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            return _plain(obj.item())
        _budget.reference(obj)
        # a small array copied (a view would keep the checked one alive beside it: two objects a key), a large one a view
        return np.array(obj, subok=False) if obj.nbytes <= 4096 else np.asarray(obj).view(np.ndarray)
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    return obj


def unpickle_arrays(data: bytes, size: int = None):
    """Unpickle containers of numeric numpy arrays, numbers and strings; anything else (code) is refused,
    and so is a file whose arrays and containers, counting every shared reference, outgrow its size. data: the
    bytes, or a file-like object holding `size` of them (read only as far as the pickle goes)."""
    global _budget
    _budget = _Budget(len(data) if size is None else size)
    try:
        return _plain(_ArraysOnlyUnpickler(io.BytesIO(data) if size is None else data).load())
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError, AttributeError, IndexError, KeyError,
            MemoryError, RecursionError, OverflowError) as e:
        raise ValueError(f"{type(e).__name__}: {e}") from None


def load_pickled_arrays(path, how: str):
    """A pickle of plain containers and numeric arrays (paddle.save's .pdparams) without running code."""
    path = require(path, how)
    try:
        with open_regular(path) as f:
            return unpickle_arrays(f.read())
    except (ValueError, OSError) as e:
        raise PipelineError(f"{path} is not a file of plain arrays this project wrote ({e}); {remedy(how, 'again')} "
                            "[PC202]") from None


def _is_plain_array(v) -> bool:
    return isinstance(v, np.ndarray) and not v.dtype.hasobject and v.dtype.kind in "biuf"


def _key_problem(k, v) -> str:
    """Why k: v is no entry of a file of plain arrays, one phrase ("" where it is). A newline or other control
    character in a key name could forge lines in a diff log, a bidirectional override reorder them."""
    if not isinstance(k, str) or not k:
        return f"a key {k!r} that is no name"
    if len(k) > MAX_KEY_LENGTH:
        return f"a key of {len(k)} characters, over the {MAX_KEY_LENGTH} a key may have"
    odd = next((c for c in k if not c.isprintable()), None)
    if odd is not None:
        return f"a key holding {repr(odd)[1:-1]}, which is not printable"
    return "" if _is_plain_array(v) else f"a value that is a {type(v).__name__}" + (
        f" of {v.dtype}" if isinstance(v, np.ndarray) else "") + ", not a numeric array"


def _read_header(f, order: bool = False) -> tuple:
    """(shape, dtype) of a .npy's header; order=True: (shape, Fortran order, dtype)."""
    version = np.lib.format.read_magic(f)
    read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}.get(version)
    if read_header is None:
        raise ValueError(f"unsupported .npy version {version}")
    shape, fortran, dtype = read_header(f)
    return (shape, fortran, dtype) if order else (shape, dtype)


def read_json(path, limit: int, follow: bool = True):
    """A JSON file's value, read through open_regular and at most `limit` bytes of it (a forged file takes no more
    memory than the record it stands for may): ValueError for one larger or not JSON, OSError for one not there or
    not a regular file; the caller says which file, in its words."""
    import json
    with open_regular(path, follow=follow) as f:
        text = f.read(limit + 1)
    if len(text) > limit:
        raise ValueError(f"more than {limit} bytes")
    return json.loads(text)


KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int):
    """What a file of this st_mode is, in words, where it is no regular file (a FIFO, /dev/zero's character
    device): a refusal names it as what it is, never as missing; None for a regular file."""
    return None if stat.S_ISREG(mode) else next((said for test, said in KINDS if test(mode)), "an unknown kind of file")


def file_kind(path):
    """kind_of the file at path (through a link: where it leads)."""
    return kind_of(os.stat(path).st_mode)


def open_regular(path, follow: bool = True, dir_fd=None):
    """A file opened for reading only if it is a regular file: a FIFO, a device or a socket given a result's
    name (*.npy, *_diff.log, *.json) is refused, never waited on (O_NONBLOCK: opening a FIFO does not block;
    then fstat says what it is). follow=False also refuses a symbolic link (O_NOFOLLOW); dir_fd: path is
    relative to that open folder. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else getattr(os, "O_NOFOLLOW", 0)), dir_fd=dir_fd)
    kind = kind_of(os.fstat(fd).st_mode)
    if kind:
        os.close(fd)
        raise OSError(errno.EINVAL, f"{kind}, not a regular file")
    return os.fdopen(fd, "rb")


def _missing(path: Path):
    """Why a result cannot be read, said before it is opened, or None."""
    if path.is_dir():
        return f"{path} is a folder, not a file [PC231]"
    if not path.exists():
        return f"{path} not found [PC232]"
    if not path.is_file():
        return f"{path} is {file_kind(path)}, not a regular file: hand in the file itself [PC233]"
    return None


def load_npy(path) -> dict:
    """Load a ReprodLogger .npy (a dict of arrays) without executing any code."""
    path = Path(path)
    problem = _missing(path)
    if problem:
        raise PipelineError(problem)
    try:
        with open_regular(path) as f:
            shape, dtype = _read_header(f)
            if not dtype.hasobject:
                raise ValueError(f"holds a bare {dtype} array of shape {shape}, not a dict of arrays")
            if shape != ():
                raise ValueError(f"holds an object array of shape {shape}, not a dict")
            data = _unpickle_mapped(f)
    except (ValueError, EOFError, OSError) as e:
        raise PipelineError(f"{path} is not a ReprodLogger .npy of numeric arrays ({e}); "
                            "re-run the script that writes it [PC203]") from None
    if not isinstance(data, dict):
        raise PipelineError(f"{path} holds a {type(data).__name__}, not a dict of arrays; "
                            "re-run the script that writes it [PC200]")
    bad = [(k, why) for k, v in data.items() for why in [_key_problem(k, v)] if why]
    if bad:
        shown = ", ".join(repr(k)[:60] + ("...'" if len(repr(k)) > 60 else "") for k, _ in bad[:5])
        raise PipelineError(f"{path}: keys {shown} are not numeric numpy arrays with printable names ({bad[0][1]}); "
                            "re-run the script that writes it [PC201]")
    return data


def _unpickle_mapped(f):
    """The pickle after a .npy header, read from the file mapped, only as far as the pickle goes: a file made
    large (sparse, or padded after the pickle) costs no memory, and anything after the pickle is refused, since
    np.save writes nothing there."""
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        m.seek(f.tell())
        data = unpickle_arrays(m, len(m) - f.tell())
        if m.tell() != len(m):
            raise ValueError(f"{len(m) - m.tell()} bytes follow the pickled dict (np.save writes none)")
    return data


def load_array(path, how: str) -> np.ndarray:
    """A bare .npy array (np.save without pickle), its header checked against the file size first."""
    path = require(path, how)
    try:
        with open_regular(path) as f:
            shape, dtype = _read_header(f)
            n = 1
            for d in shape:
                n *= int(d)
            if dtype.hasobject or n * dtype.itemsize > os.fstat(f.fileno()).st_size:
                raise ValueError(f"its header asks for {shape} {dtype}, which the file cannot hold")
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise PipelineError(f"{path} is not a plain .npy array ({e}): {remedy(how, 'again')} [PC204]") from None


def map_array(path) -> np.ndarray:
    """A bare .npy array this process wrote (portcheck.core.spill), read-only and memory-mapped: its pages are read
    when used and can be given back to the disk, so a record larger than memory can still be judged. Never
    through a link; a header the file cannot hold is refused."""
    try:
        with open_regular(path, follow=False) as f:
            shape, fortran, dtype = _read_header(f, order=True)
            n = 1
            for d in shape:
                n *= int(d)
            if dtype.hasobject or f.tell() + n * dtype.itemsize > os.fstat(f.fileno()).st_size:
                raise ValueError(f"its header asks for {shape} {dtype}, which the file cannot hold")
            if n == 0 or shape == ():  # nothing to map (mmap refuses an empty range): read it
                return np.fromfile(f, dtype=dtype, count=n).reshape(shape)
            return np.memmap(f, dtype=dtype, mode="r", shape=shape, order="F" if fortran else "C", offset=f.tell())
    except (ValueError, OSError) as e:
        raise PipelineError(f"{path} cannot be read back ({e}): record the run again [PC205]") from None


def linked_component(path):
    """The first folder on the way to `path` (made absolute, not resolved) that is a symbolic link, or None."""
    path = Path(path).absolute()
    here = Path(path.anchor)
    for part in path.parts[1:-1]:
        here = here / part
        if part != ".." and here.is_symlink():
            return here
    return None


def _target(link: Path) -> str:
    try:
        return str(link.resolve(strict=True))
    except (OSError, RuntimeError):
        return "it points at nothing"


def writable(path, folder: bool = False) -> Path:
    """Pre-flight for an output: raise one line unless `path` can be written as a file (or made a folder)
    without following a link, before any old output is touched. Every write of the pipeline passes here
    (atomic_write, open_new), so no file is ever written through a symbolic link, in any component of its
    path: a link at a name we write, or at a folder on the way (log_reprod/ made a link), may point at
    anyone's files. A dangling link or a loop cannot be written either."""
    path = Path(path)
    what = "folder" if folder else "file"
    try:
        if path.is_symlink():
            raise PipelineError(f"{path} is a symbolic link{'' if path.exists() else ' to nothing (or a loop)'}; "
                                f"this pipeline never writes through a link: remove it or choose another {what} "
                                "[PC206]")
        link = linked_component(path)
        if link is not None:
            raise PipelineError(f"{link} is a symbolic link{'' if link.exists() else ' to nothing (or a loop)'}, "
                                f"so {path} would be written through it; this pipeline never writes through a "
                                f"link: use the real folder ({_target(link)}) or another path [PC207]")
        if path.exists() and path.is_dir() != folder:
            raise PipelineError(f"{path} is a {'file' if folder else 'folder'}, not a {what}: choose another path "
                                "[PC208]")
        if folder and path.is_dir():
            ancestor = path
        else:
            ancestor = path.parent
            while not ancestor.is_dir():
                if ancestor.is_symlink() or ancestor.exists():
                    kind = "a file" if ancestor.exists() else "a dangling symbolic link (or a loop)"
                    raise PipelineError(f"{ancestor} is {kind}, so {path} cannot be made: choose another path [PC212]")
                ancestor = ancestor.parent
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise PipelineError(f"{ancestor} is not writable, so {path} cannot be written: choose another path [PC209]")
    except OSError as e:  # a name too long, a loop in a folder of the path, a permission on the way
        raise PipelineError(f"{path} cannot be written ({os.strerror(e.errno) if e.errno else e}): "
                            "choose another path [PC210]") from None
    return path


def atomic_write(path, write):
    """write(tmp_path) then rename: a kill never leaves a truncated file at path, and path is never
    written through a link (writable)."""
    path = writable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise PipelineError(f"{path} cannot be written ({e.strerror or e}): choose another path [PC210]") from None
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        writable(path)  # what was checked before a long write still holds: no link appeared meanwhile
        os.replace(tmp, path)
    except OSError as e:  # a full disk (ENOSPC), a permission (EPERM): the old file is still whole at path
        raise PipelineError(f"{path} could not be written ({e.strerror or e}); what was there is left as it was: "
                            "free space or fix the folder's permissions, then run again [PC211]") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def open_new(path, append: bool = False):
    """A text file opened for writing (or appending) that is not a link (O_NOFOLLOW): a log written as a
    run goes, which atomic_write cannot do."""
    path = writable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    try:
        return os.fdopen(os.open(path, flags, 0o644), "a" if append else "w", encoding="utf-8")
    except OSError as e:
        raise PipelineError(f"{path} cannot be written ({e.strerror or e}): choose another path [PC210]") from None


def is_regular(folder, name: str) -> bool:
    """Whether `name` in `folder` (a path, or an open folder's descriptor) is a regular file of its own: a link by
    that name is never followed, and a folder, a FIFO or a link is none."""
    try:
        held = os.stat(name, dir_fd=folder, follow_symlinks=False) if isinstance(folder, int) else \
            os.stat(Path(folder) / name, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(held.st_mode)


def claim_folder(fd: int, mark: str, names=None) -> bool:
    """Whether the open folder `fd` is the project's own to write its files in, marked now where it is new: the
    one way a folder the project made is marked (a record's, the graphs'). It is where it carries `mark` (a regular
    file of that name: a link by that name marks nothing, and is never followed or written through), or where it
    holds nothing (names None) or none of `names`: then the mark is made (O_EXCL, O_NOFOLLOW). Raises OSError."""
    present = set(os.listdir(fd))
    if mark in present:
        return is_regular(fd, mark)
    if present if names is None else present & set(names):
        return False
    os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd))
    return True


def save_npy(path, data: dict):
    """Save a dict of numeric arrays in ReprodLogger's format (what its save() writes), atomically.

    The pipeline's scripts fill a plain dict rather than a ReprodLogger, which is a dict with an ndarray
    check (done here too): importing reprod_log imports Paddle, ~1.4 s and a second framework in every
    torch process. A ReprodLogger's logger.data can be passed as it is."""
    bad = [k for k, v in data.items() if not _is_plain_array(v)]
    if bad:
        raise TypeError(f"values for {bad} must be numeric numpy arrays")

    atomic_write(path, lambda tmp: _np_save(tmp, data))


def save_array(path, array: np.ndarray):
    """np.save, atomically (np.save on a path would also append .npy to the temp name)."""
    atomic_write(path, lambda tmp: _np_save(tmp, array))


def _np_save(path, obj):
    with open(path, "wb") as f:
        np.save(f, obj, allow_pickle=isinstance(obj, dict))


def shown(path, *bases) -> str:
    """A path as committed files and logs show it: relative to the first of `bases` that holds it, never the
    machine's absolute path; outside all of them, relative to the first with '..'."""
    path = Path(path).expanduser().resolve()
    for base in bases:
        try:
            return str(path.relative_to(Path(base).resolve()))
        except ValueError:
            pass
    return os.path.relpath(path, bases[0]) if bases else str(path)


JSON_DEPTH = 32  # a record's, config's or index's nesting: a few levels; deeper, json's own parser recurses into it
JSON_DIGITS = 20  # a whole number of more digits is no size, count, seed or setting (2**64 has 20)


def parse_json(text, depth: int = JSON_DEPTH, constants: bool = False):
    """JSON read without recursion into what no file of ours nests (json.loads recurses once per level: a file of
    [[[...]]] raises RecursionError) and with bounded numbers (a 400-digit integer reaches float() and formats as
    an OverflowError; 1e400 is no setting's value, nor NaN and Infinity unless constants: json.dumps writes them, a
    file of ours may hold them, max_norm=inf): ValueError, saying which, for either."""
    import json
    import re
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text).encode()  # a bracket inside a string nests nothing
    b = np.frombuffer(bare, dtype=np.uint8)
    steps = np.isin(b, (ord("["), ord("{"))).astype(np.int64) - np.isin(b, (ord("]"), ord("}")))
    if steps.size and int(np.cumsum(steps).max()) > depth:
        raise ValueError(f"nested more than {depth} levels deep")

    def whole(s):
        if len(s.lstrip("-")) > JSON_DIGITS:
            raise ValueError(f"a number of {len(s.lstrip('-'))} digits")
        return int(s)

    def real(s):
        value = float(s)
        if not np.isfinite(value):
            raise ValueError(f"the number {s[:20]} is out of a float's range")
        return value

    def constant(s):
        raise ValueError(f"{s} is no number a file of settings holds")
    return json.loads(text, parse_int=whole, parse_float=real, **({} if constants else {"parse_constant": constant}))
