"""SST-2 the Paddle way: paddlenlp load_dataset, BertTokenizer, DataCollatorWithPadding, paddle.io.

The twin of pt_data.py: same function names and arguments, Paddle calls only.
"""
import paddle
from paddle.io import BatchSampler, DataLoader, Subset
from paddlenlp.data import DataCollatorWithPadding
from paddlenlp.datasets import MapDataset, load_dataset
from paddlenlp.transformers import BertTokenizer

from bert_sst2 import data
from bert_sst2.hparams import BATCH_SIZE, DO_LOWER_CASE, MAX_SEQ_LENGTH
from bert_sst2.twins import weights


def load_tsv(path) -> MapDataset:
    return load_dataset(data.read_tsv, path=path, lazy=False)


def load_split(split: str, data_dir=None) -> MapDataset:
    """data_dir/{split}.tsv, or with data_dir=None paddlenlp's GLUE SST-2 download."""
    if data_dir is not None:
        return load_tsv(data.split_file(split, data_dir))
    ds = data.from_hub(lambda: load_dataset("glue", "sst-2", splits=split), f"glue/sst-2 {split}")
    # paddlenlp's GLUE reader yields the label as a string under "labels"
    return MapDataset([{"sentence": ex["sentence"], "label": int(ex["labels"])} for ex in ds])


def tokenizer() -> BertTokenizer:
    return BertTokenizer(weights.vocab(), do_lower_case=DO_LOWER_CASE)


def encode(dataset, tokenizer, max_length: int = MAX_SEQ_LENGTH) -> MapDataset:
    """Tokenize every sentence once: input_ids, token_type_ids, attention_mask, label."""
    # paddlenlp's tokenizer returns no attention_mask unless asked, unlike transformers'.
    # A new dataset, not dataset.map(): MapDataset.map rewrites the caller's dataset in place.
    return MapDataset([{**tokenizer(ex["sentence"], truncation=True, max_length=max_length,
                                    return_attention_mask=True), "label": ex["label"]} for ex in dataset])


def loader(encoded, tokenizer, order=None, batch_size: int = BATCH_SIZE) -> DataLoader:
    """Batches in exactly the given order (indices into encoded), padded to each batch's longest.

    No shuffling here: the caller passes one order (data.permutation) to both frameworks.
    """
    order = range(len(encoded)) if order is None else order
    subset = Subset(encoded, list(order))
    sampler = BatchSampler(subset, batch_size=batch_size, shuffle=False, drop_last=False)
    return DataLoader(subset, batch_sampler=sampler, collate_fn=DataCollatorWithPadding(tokenizer))


class Accuracy:
    """paddle.metric.Accuracy, as Paddle users write it, behind the calls of pt_data.Accuracy.

    Step 2 proves the two agree; Step 5 evaluates with them.
    """

    def __init__(self):
        self.metric = paddle.metric.Accuracy()

    def update(self, logits: paddle.Tensor, labels: paddle.Tensor):
        self.metric.update(self.metric.compute(logits, labels))

    @property
    def correct(self) -> int:
        return int(self.metric.total[0])

    @property
    def count(self) -> int:
        return int(self.metric.count[0])

    def accumulate(self) -> float:
        return self.metric.accumulate()


def accuracy(logits: paddle.Tensor, labels: paddle.Tensor) -> float:
    metric = Accuracy()
    metric.update(logits, labels)
    return metric.accumulate()
