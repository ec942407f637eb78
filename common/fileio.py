"""Files the pipeline writes and reads back, safely.

* atomic_write: write to a temporary name, then rename: a kill never leaves a truncated file;
* save_npy / load_npy: ReprodLogger's format (np.save of a dict of numeric arrays). Loading never
  executes code: only the numpy globals a dict of plain arrays needs are unpickled, anything else
  is refused with one line.
"""
import io
import os
import pickle
import tempfile
from pathlib import Path

import numpy as np

from common.errors import PipelineError

# What np.save needs to rebuild a dict of numeric arrays, and nothing else.
_SAFE_GLOBALS = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
}


class _ArraysOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")


def _is_plain_array(v) -> bool:
    return isinstance(v, np.ndarray) and not v.dtype.hasobject and v.dtype.kind in "biuf"


def load_npy(path) -> dict:
    """Load a ReprodLogger .npy (a dict of arrays) without executing any code."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path} not found")
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = read_header(f)
            if not dtype.hasobject:
                raise ValueError(f"holds a bare {dtype} array of shape {shape}, not a dict of arrays")
            obj = _ArraysOnlyUnpickler(io.BytesIO(f.read())).load()
    except (pickle.UnpicklingError, ValueError, EOFError, OSError) as e:
        raise PipelineError(f"{path} is not a ReprodLogger .npy of numeric arrays ({e}); "
                            "re-run the script that writes it") from None
    data = obj.item() if isinstance(obj, np.ndarray) and obj.shape == () else obj
    if not isinstance(data, dict):
        raise PipelineError(f"{path} holds a {type(data).__name__}, not a dict of arrays; "
                            "re-run the script that writes it")
    bad = [k for k, v in data.items() if not isinstance(k, str) or not _is_plain_array(v)]
    if bad:
        raise PipelineError(f"{path}: keys {bad} are not numeric numpy arrays; re-run the script that writes it")
    return data


def atomic_write(path, write):
    """write(tmp_path) then rename: a kill never leaves a truncated file at path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_npy(path, data: dict):
    """Save what a ReprodLogger collected (pass logger.data), in its format, atomically."""
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
