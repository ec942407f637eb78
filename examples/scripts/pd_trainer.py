"""pt_trainer.py ported to paddlenlp's Trainer: a tiny BERT classifier on made-up token ids.

    python examples/scripts/pd_trainer.py --output-dir pd_trainer_out

It does not import portcheck: `python -m portcheck run --torch "python pt_trainer.py" --paddle "python pd_trainer.py"`
checks it against the transformers script (pt_trainer.py) as it is.
"""
import argparse

import numpy as np
from paddlenlp.trainer import Trainer, TrainingArguments
from paddlenlp.transformers import BertConfig, BertForSequenceClassification


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--output-dir", default="pd_trainer_out")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()

    # type_vocab_size: paddlenlp's default is 16, transformers' 2
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=3, type_vocab_size=2)
    model = BertForSequenceClassification(config)

    rng = np.random.RandomState(0)
    ids = rng.randint(1, 64, size=(32, 12))
    mask = (np.arange(12) < rng.randint(6, 13, size=(32, 1))).astype(np.int64)  # each row padded at its tail
    ids = ids * mask  # the pad token: 0
    labels = rng.randint(0, 3, size=32)
    train = [{"input_ids": ids[i].tolist(), "attention_mask": mask[i].tolist(), "labels": int(labels[i])}
             for i in range(32)]

    # paddlenlp's num_train_epochs defaults to 1 (transformers' 3): given, as every setting of the schedule
    training_args = TrainingArguments(
        output_dir=args.output_dir, per_device_train_batch_size=8, num_train_epochs=args.epochs,
        learning_rate=args.lr, weight_decay=0.01, warmup_steps=2, max_grad_norm=1.0,
        logging_steps=1, save_strategy="no", report_to=[], seed=0)
    trainer = Trainer(model=model, args=training_args, train_dataset=train)
    trainer.train()


if __name__ == "__main__":
    main()
