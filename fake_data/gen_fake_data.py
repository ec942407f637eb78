"""Write the fake batch every step compares on, plus a real padded batch.

fake_data.npy: int64 [4, 64] token ids in [1, vocab_size) (no [PAD], so no mask needed; shorter if
    the model has fewer than 64 positions)
fake_label.npy: int64 [0, 1, 1, 0]
fake_padded.npy: a few real sentences of different lengths, tokenized with the
    exported vocab and padded to the longest, with attention_mask; the batch that
    shows whether the mask is applied.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from bert_sst2 import flags, hparams, paths
from bert_sst2.twins.weights import load_config, vocab
from portcheck.core.errors import run_main
from portcheck.core.fileio import save_array, save_npy

SENTENCES = [
    "a gorgeous, witty, seductive movie.",
    "the plot is nothing but boilerplate clichés from start to finish, and the script is so "
    "clumsily written that even the talented cast cannot save it from sinking.",
    "it's slow -- very , very slow .",
    "a \"beautiful\" film about Paris, its cafés and its rain.",
]


def padded_batch(vocab: str, max_length: int) -> dict:
    # transformers' tokenizer is pure Python here; nothing of torch is used.
    from transformers import BertTokenizer
    tokenizer = BertTokenizer(vocab, do_lower_case=hparams.DO_LOWER_CASE)
    enc = tokenizer(SENTENCES, padding=True, truncation=True, max_length=max_length, return_tensors="np")
    return {k: enc[k].astype("int64") for k in ("input_ids", "token_type_ids", "attention_mask")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--seed", type=int, default=hparams.SEED)
    args = ap.parse_args()
    flags.check(("--seed", args.seed, flags.SEED))
    config = load_config()
    vocab_file = vocab()  # checked before anything is written
    rng = np.random.RandomState(args.seed)
    data = rng.randint(1, config.vocab_size, size=(4, min(64, config.max_position_embeddings))).astype("int64")
    label = np.array([0, 1, 1, 0], dtype="int64")
    save_array(paths.fake_data(), data)
    save_array(paths.fake_label(), label)
    padded = padded_batch(vocab_file, min(hparams.MAX_SEQ_LENGTH, config.max_position_embeddings))
    save_npy(paths.fake_data_dir() / "fake_padded.npy", padded)
    lengths = padded["attention_mask"].sum(1).tolist()
    print(f"wrote {paths.fake_data_dir()}: fake_data {data.shape}, fake_label {label.tolist()}, "
          f"fake_padded {padded['input_ids'].shape} with lengths {lengths}")


if __name__ == "__main__":
    run_main(main)
