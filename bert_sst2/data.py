"""SST-2 data, framework-free: the TSV reader both pipelines share, the hub switch, the seeded orders.

twins/pt_data.py and twins/pd_data.py build each framework's own dataset, tokenizer and
loader on top of this; only reading the file (and refusing a bad one) lives here,
because a row that one side reads differently from the other is not a porting
question but a data bug, and should stop both sides the same way.
"""
import csv
import json
import hashlib
import os
from pathlib import Path

import numpy as np

from bert_sst2 import keys
from bert_sst2.hparams import SEED
from bert_sst2.paths import SST2_DIR
from portcheck.core.errors import PipelineError

HEADER = ["sentence", "label"]
SPLITS = ("train", "dev")  # GLUE's test.tsv has no labels


def read_tsv(path) -> list:
    """[{"sentence": str, "label": int}] from a GLUE TSV; any malformed row is a PipelineError."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path} is a folder, not a file" if path.is_dir() else f"{path} not found")
    examples = []
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            # QUOTE_NONE: SST-2 sentences contain bare double quotes that csv's default quoting eats.
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, None)
            if header != HEADER:
                raise PipelineError(f"{path}:1: header must be 'sentence<TAB>label', "
                                    f"got {header if header else 'an empty file'}")
            for row in reader:
                where = f"{path}:{reader.line_num}"
                if len(row) != 2:
                    raise PipelineError(f"{where}: expected 2 tab-separated columns, got {len(row)}")
                if row[1] not in ("0", "1"):
                    raise PipelineError(f"{where}: label must be 0 or 1, got {row[1]!r}")
                examples.append({"sentence": row[0], "label": int(row[1])})
    except UnicodeDecodeError as e:
        raise PipelineError(f"{path}: not UTF-8 ({e})") from None
    except csv.Error as e:  # e.g. a field over csv's 131,072-character limit: no sentence is that long
        raise PipelineError(f"{path}:{reader.line_num}: not a GLUE TSV row ({e})") from None
    if not examples:
        raise PipelineError(f"{path}: no examples after the header")
    return examples


def split_file(split: str, data_dir) -> Path:
    if split not in SPLITS:
        raise PipelineError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    path = Path(data_dir).expanduser().resolve() / f"{split}.tsv"
    if not path.is_file():
        raise PipelineError(f"{path} {'is a folder' if path.is_dir() else 'not found'}: --data_dir must be a GLUE SST-2 folder with train.tsv "
                            f"and dev.tsv (on this workplace: {SST2_DIR})")
    return path


HUB_HINT = f"pass --data_dir DIR with SST-2's train.tsv and dev.tsv (on this workplace: {SST2_DIR})"


def hub_off() -> bool:
    """portcheck.runtime turns the dataset hub off; Paddle's loader does not read this variable, so it is checked here."""
    return os.environ.get("HF_DATASETS_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")


def from_hub(load, what: str):
    """Run an ecosystem's hub loader; offline, or on any failure, say to pass --data_dir."""
    if hub_off():
        raise PipelineError(f"cannot load {what}: the dataset hub is off (HF_DATASETS_OFFLINE=1); {HUB_HINT}")
    try:
        return load()
    except Exception as e:  # no network, unknown name, bad cache: all mean the same to the user
        raise PipelineError(f"cannot load {what} ({type(e).__name__}: {e}); {HUB_HINT}") from None


def rank_order(order, batch_size: int, rank: int, world: int) -> list:
    """The part of `order` that process `rank` of `world` trains on, to be cut into batches of
    batch_size // world: global batch k is order[k*B:(k+1)*B] and process r takes its r-th slice,
    so the processes together train on exactly the single-process batches."""
    if world == 1:
        return list(order)
    if batch_size % world:
        raise PipelineError(f"--batch_size {batch_size} does not split over {world} processes")
    per_rank, tail = batch_size // world, len(order) % batch_size
    if tail and tail <= (world - 1) * per_rank:
        raise PipelineError(f"the last batch ({tail} sentences) would leave a process without data; "
                            f"change --train_limit or --batch_size")
    return [i for k in range(0, len(order), batch_size)
            for i in order[k + rank * per_rank:k + (rank + 1) * per_rank]]


def permutation(n: int, seed: int = SEED) -> list:
    """One seeded example order, computed once and handed to both loaders."""
    return np.random.RandomState(seed).permutation(n).tolist()


# Batches per length-sorted chunk (--group_by_length). SST-2 train, MiniLM vocabulary: random batches of 32
# hold 3.0x the real tokens once padded, chunks of 50 batches 1.05x; larger chunks gain little more and
# make each batch's sentences less random (every batch then spans a narrow band of lengths).
GROUP_CHUNK_BATCHES = 50


def group_by_length(order, lengths, batch_size: int, seed: int, chunk_batches: int = GROUP_CHUNK_BATCHES) -> list:
    """`order` regrouped so that each batch holds sentences of similar length, as Hugging Face's
    group_by_length does: cut into chunks of chunk_batches * batch_size, each chunk sorted by length
    (stable: ties keep the shuffled order), cut into batches, and the full batches shuffled with `seed`.
    A short last batch stays last, so cutting the result into batch_size pieces gives the same batches."""
    chunk = chunk_batches * batch_size
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: lengths[i])
        batches += [part[k:k + batch_size] for k in range(0, len(part), batch_size)]
    tail = [batches.pop()] if batches and len(batches[-1]) < batch_size else []
    shuffled = [batches[b] for b in np.random.RandomState(seed).permutation(len(batches))] + tail
    return [i for batch in shuffled for i in batch]


def random_logits(n: int = 1000, seed: int = SEED):
    """(logits float32 [n, 2], labels int64 [n]): the same numbers for both metric implementations."""
    rng = np.random.RandomState(seed)
    return rng.randn(n, 2).astype("float32"), rng.randint(0, 2, size=n).astype("int64")


def record(examples, batches) -> dict:
    """What Step 2 compares: every tokenized example and every batch, as int64 arrays in order.

    examples: dicts with input_ids, token_type_ids, label; batches: dicts of numpy arrays.
    """
    out = {"length": np.array(len(examples), dtype="int64")}
    for i, ex in enumerate(examples):
        for key in ("input_ids", "token_type_ids", "label"):
            out[keys.EXAMPLE.key(i, key)] = np.asarray(ex[key], dtype="int64")
    for b, batch in enumerate(batches):
        for key, value in sorted(batch.items()):
            out[keys.BATCH.key(b, key)] = np.asarray(value)  # dtype as the collator made it
    return out


def fingerprint_rows(rows) -> str:
    """sha256 of data rows ({"sentence", "label"} dicts) in order: what a run record binds of the data."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps([row["sentence"], int(row["label"])], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()
