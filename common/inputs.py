"""The fixed inputs that Steps 1, 3 and 4 feed to both models, as numpy arrays."""
import numpy as np

from common import paths
from common.errors import PipelineError, require
from common.fileio import load_array, load_npy

GEN_FAKE = "python fake_data/gen_fake_data.py"


def _load(path, dtype, ndim):
    array = load_array(path, GEN_FAKE)
    if array.dtype != dtype or array.ndim != ndim:
        raise PipelineError(f"{path} is {array.dtype} {array.shape}, expected {dtype} with {ndim} dims: "
                            f"run `{GEN_FAKE}` again")
    return array


def fake_batch():
    """(input_ids int64 [4, 64], labels int64 [4])"""
    return _load(paths.fake_data(), np.int64, 2), _load(paths.fake_label(), np.int64, 1)


def padded_batch() -> dict:
    """{input_ids, token_type_ids, attention_mask}: int64 [batch, longest]"""
    return load_npy(require(paths.fake_data_dir() / "fake_padded.npy", GEN_FAKE))
