"""The fixed inputs that Steps 1, 3 and 4 feed to both models, as numpy arrays, checked against the model:
an id outside the embedding is an IndexError in torch and a crash or garbage in Paddle, so it is refused here."""
import numpy as np

from bert_sst2 import paths
from models.configuration_bert import BertConfig
from portcheck.core.errors import PipelineError, require
from portcheck.core.fileio import load_array, load_npy

GEN_FAKE = "python fake_data/gen_fake_data.py"
EXPORT = "python weights/torch_bert_weights.py"
PADDED_KEYS = ("input_ids", "token_type_ids", "attention_mask")


def _load(path, dtype, ndim):
    array = load_array(path, GEN_FAKE)
    if array.dtype != dtype or array.ndim != ndim:
        raise PipelineError(f"{path} is {array.dtype} {array.shape}, expected {dtype} with {ndim} dims: "
                            f"run `{GEN_FAKE}` again")
    return array


def _config() -> BertConfig:
    """The exported config (twins.weights.load_config's, read here without the layer above)."""
    path = require(paths.model_config(), EXPORT)
    try:
        return BertConfig.from_json(path)
    except ValueError as e:
        raise PipelineError(f"{e}; run `{EXPORT}` again") from None


def check_ids(batch: dict, config: BertConfig, path):
    """batch: {name: int64 [batch, length]}: ids inside the embedding tables, length within max positions,
    an attention mask of 0 and 1 wherever there is padding."""
    ids = batch["input_ids"]
    rules = [("input_ids", config.vocab_size), ("token_type_ids", config.type_vocab_size), ("attention_mask", 2)]
    problems = []
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        problems.append(f"input_ids has shape {ids.shape}, expected [batch >= 1, length >= 1]")
    elif ids.shape[1] > config.max_position_embeddings:
        problems.append(f"{ids.shape[1]} tokens, more than max_position_embeddings {config.max_position_embeddings}")
    for name, size in rules:
        if name not in batch:
            continue
        value = batch[name]
        if value.shape != ids.shape:
            problems.append(f"{name} has shape {value.shape}, input_ids {ids.shape}")
        elif value.size and (value.min() < 0 or value.max() >= size):
            problems.append(f"{name} outside [0, {size}): min {value.min()}, max {value.max()}")
    if problems:
        raise PipelineError(f"{path}: {'; '.join(problems)}; run `{GEN_FAKE}` again")


def fake_batch():
    """(input_ids int64 [4, 64], labels int64 [4])"""
    ids, labels = _load(paths.fake_data(), np.int64, 2), _load(paths.fake_label(), np.int64, 1)
    config = _config()
    check_ids({"input_ids": ids}, config, paths.fake_data())
    if len(labels) != len(ids) or labels.min() < 0 or labels.max() >= config.num_labels:
        raise PipelineError(f"{paths.fake_label()}: {len(labels)} labels for {len(ids)} rows, each must be in "
                            f"[0, {config.num_labels}); run `{GEN_FAKE}` again")
    return ids, labels


def padded_batch() -> dict:
    """{input_ids, token_type_ids, attention_mask}: int64 [batch, longest]"""
    path = require(paths.fake_data_dir() / "fake_padded.npy", GEN_FAKE)
    batch = load_npy(path)
    if set(batch) != set(PADDED_KEYS) or any(v.dtype != np.int64 for v in batch.values()):
        raise PipelineError(f"{path} holds {', '.join(f'{k} {v.dtype}' for k, v in batch.items())}; expected "
                            f"int64 {', '.join(PADDED_KEYS)} (a padded batch without its mask runs unmasked): "
                            f"run `{GEN_FAKE}` again")
    check_ids(batch, _config(), path)
    return batch
