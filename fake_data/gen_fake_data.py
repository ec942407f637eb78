"""Write the fake batch every step compares on, plus a real padded batch.

fake_data.npy: int64 [4, 64] token ids in [1, vocab_size) (no [PAD], so no mask needed)
fake_label.npy: int64 [0, 1, 1, 0]
fake_padded.npy: a few real sentences of different lengths, tokenized with the
    exported vocab and padded to the longest, with attention_mask; the batch that
    shows whether the mask is applied.
"""
import argparse
from pathlib import Path

import common.runtime  # first: offline mode, threads, allocator, before torch/paddle load
import numpy as np

from common import hparams, paths
from common.fileio import save_array, save_npy
from common.errors import require, run_main
from twins.weights import EXPORT, load_config

SENTENCES = [
    "a gorgeous, witty, seductive movie.",
    "the plot is nothing but boilerplate clichés from start to finish, and the script is so "
    "clumsily written that even the talented cast cannot save it from sinking.",
    "it's slow -- very , very slow .",
    "a \"beautiful\" film about Paris, its cafés and its rain.",
]


def padded_batch(vocab: Path) -> dict:
    # transformers' tokenizer is pure Python here; nothing of torch is used.
    from transformers import BertTokenizer
    tokenizer = BertTokenizer(str(vocab), do_lower_case=hparams.DO_LOWER_CASE)
    enc = tokenizer(SENTENCES, padding=True, truncation=True, max_length=hparams.MAX_SEQ_LENGTH, return_tensors="np")
    return {k: enc[k].astype("int64") for k in ("input_ids", "token_type_ids", "attention_mask")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=hparams.SEED)
    args = ap.parse_args()
    config = load_config()
    rng = np.random.RandomState(args.seed)
    data = rng.randint(1, config.vocab_size, size=(4, 64)).astype("int64")
    label = np.array([0, 1, 1, 0], dtype="int64")
    save_array(paths.fake_data(), data)
    save_array(paths.fake_label(), label)
    padded = padded_batch(require(paths.vocab(), EXPORT))
    save_npy(paths.fake_data_dir() / "fake_padded.npy", padded)
    lengths = padded["attention_mask"].sum(1).tolist()
    print(f"wrote {paths.fake_data_dir()}: fake_data {data.shape}, fake_label {label.tolist()}, "
          f"fake_padded {padded['input_ids'].shape} with lengths {lengths}")


if __name__ == "__main__":
    run_main(main)
