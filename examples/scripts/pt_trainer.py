"""Fine-tune a tiny BERT classifier with transformers' Trainer: the kind of script a user ports to paddlenlp.

    python examples/scripts/pt_trainer.py --output-dir pt_trainer_out

The model is built from a config (no download) and trained on made-up token ids. It does not import portcheck:
`python -m portcheck run --torch "python pt_trainer.py" --paddle "python pd_trainer.py"` checks it against its
paddlenlp port (pd_trainer.py) as it is.
"""
import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded
import numpy as np
from datasets import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--output-dir", default="pt_trainer_out")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()

    # pad_token_id 0 is the word embeddings' padding_idx, paddlenlp's have none: the pads are masked, so the pad
    # row's gradient is ~0 on both sides and `portcheck run` measures it green (docs/run.md, the Trainers' table)
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=3)
    model = BertForSequenceClassification(config)

    rng = np.random.RandomState(0)
    ids = rng.randint(1, 64, size=(32, 12))
    mask = (np.arange(12) < rng.randint(6, 13, size=(32, 1))).astype(np.int64)  # each row padded at its tail
    ids = ids * mask  # the pad token: 0
    train = Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": mask.tolist(),
                               "labels": rng.randint(0, 3, size=32).tolist()})

    training_args = TrainingArguments(
        output_dir=args.output_dir, per_device_train_batch_size=8, num_train_epochs=args.epochs,
        learning_rate=args.lr, weight_decay=0.01, warmup_steps=2, max_grad_norm=1.0,
        logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, seed=0)
    trainer = Trainer(model=model, args=training_args, train_dataset=train)
    trainer.train()


if __name__ == "__main__":
    main()
