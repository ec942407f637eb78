"""SST-2 the PyTorch way: datasets, transformers' BertTokenizer, DataCollatorWithPadding, DataLoader.

pd_data.py is its Paddle twin, with the same function names and arguments; the
pair is what Step 2 proves equal and what Step 5 trains on.
"""
import hashlib

import datasets
import torch
from torch.utils.data import DataLoader, Subset
from transformers import BertTokenizer, DataCollatorWithPadding

from bert_sst2 import data
from bert_sst2.hparams import BATCH_SIZE, DO_LOWER_CASE, MAX_SEQ_LENGTH
from bert_sst2.twins import weights

datasets.disable_progress_bars()


def load_tsv(path) -> datasets.Dataset:
    return datasets.Dataset.from_list(data.read_tsv(path))


def load_split(split: str, data_dir=None) -> datasets.Dataset:
    """data_dir/{split}.tsv, or with data_dir=None the Hugging Face hub's GLUE SST-2."""
    if data_dir is not None:
        return load_tsv(data.split_file(split, data_dir))
    hub_split = {"train": "train", "dev": "validation"}.get(split, split)
    ds = data.from_hub(lambda: datasets.load_dataset("glue", "sst2", split=hub_split), f"glue/sst2 {hub_split}")
    return ds.remove_columns("idx")


def tokenizer() -> BertTokenizer:
    return BertTokenizer(weights.vocab(), do_lower_case=DO_LOWER_CASE)


def encode(dataset, tokenizer, max_length: int = MAX_SEQ_LENGTH):
    """Tokenize every sentence once: input_ids, token_type_ids, attention_mask, label.

    new_fingerprint: datasets would otherwise name the result by pickling the whole tokenizer to hash it
    (2.4 s a call here); these datasets live in memory and are never cached, so a name made of the rows'
    own fingerprint and the tokenizer settings serves."""
    name = hashlib.sha256(f"{dataset._fingerprint}|{len(tokenizer)}|{tokenizer.do_lower_case}|{max_length}"
                          .encode()).hexdigest()[:16]
    return dataset.map(lambda batch: tokenizer(batch["sentence"], truncation=True, max_length=max_length),
                       batched=True, remove_columns=["sentence"], new_fingerprint=name)


def loader(encoded, tokenizer, order=None, batch_size: int = BATCH_SIZE) -> DataLoader:
    """Batches in exactly the given order (indices into encoded), padded to each batch's longest.

    No shuffling here: the caller passes one order (data.permutation) to both frameworks.
    """
    order = range(len(encoded)) if order is None else order
    return DataLoader(Subset(encoded, list(order)), batch_size=batch_size, shuffle=False, drop_last=False,
                      collate_fn=DataCollatorWithPadding(tokenizer))


class Accuracy:
    """Correct predictions counted by hand, as torch users write it (no `evaluate`, no load_metric).

    pd_data.Accuracy is its twin. Step 2 proves the two agree; Step 5 evaluates with them.
    """

    def __init__(self):
        self.correct, self.count = 0, 0

    def update(self, logits: torch.Tensor, labels: torch.Tensor):
        self.correct += int((logits.argmax(-1) == labels).sum())
        self.count += len(labels)

    def accumulate(self) -> float:
        return self.correct / self.count


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    metric = Accuracy()
    metric.update(logits, labels)
    return metric.accumulate()
