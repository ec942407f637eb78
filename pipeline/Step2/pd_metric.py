"""Step 2, Paddle side: paddle.metric.Accuracy on seeded random logits and on pd_bert's own predictions.

    python pipeline/Step2/pd_metric.py                           # model predictions on the demo set
    python pipeline/Step2/pd_metric.py --data_dir ../shared/data/SST-2    # ... on its dev.tsv
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from bert_sst2 import data, paths
from bert_sst2.twins.weights import paddle_fingerprint, paddle_model
from portcheck.core import record
from portcheck.core.errors import run_main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--data_dir", help="a GLUE SST-2 folder: predict its dev.tsv instead of the demo set")
    args = ap.parse_args()
    # imported once the flags are good: --help and a bad flag answer in a second, not after paddlenlp has loaded
    import paddle
    from bert_sst2.twins import pd_data
    results = {}
    logits, labels = data.random_logits()
    acc = pd_data.accuracy(paddle.to_tensor(logits), paddle.to_tensor(labels))
    results["random_accuracy"] = np.array(acc, dtype="float32")

    model = paddle_model()
    weights = paddle_fingerprint(model)  # as loaded, before anything runs
    model.eval()  # dropout off: the two frameworks draw different masks
    dataset = pd_data.load_split("dev", args.data_dir) if args.data_dir else pd_data.load_tsv(paths.DEMO_TSV)
    tokenizer = pd_data.tokenizer()
    # counted batch by batch by the same pd_data.Accuracy that Step 5 evaluates with
    metric, logits, labels = pd_data.Accuracy(), [], []
    with paddle.no_grad():
        for batch in pd_data.loader(pd_data.encode(dataset, tokenizer), tokenizer):
            labels.append(batch.pop("labels"))
            logits.append(model(**batch))
            metric.update(logits[-1], labels[-1])
    logits, acc = paddle.concat(logits), metric.accumulate()
    results["model_logits"] = logits.numpy()
    results["model_accuracy"] = np.array(acc, dtype="float32")
    # the long form, not Side.metric: this pair is two accuracies (seeded random logits, the model's own
    # predictions counted batch by batch) and the model's logits; Side.metric's is one metric on given predictions
    out = paths.step_dir(2) / "metric_paddle.npy"
    record.save_results({out: results}, "paddle", "pipeline/Step2/pd_metric.py",
                {"weights": weights, "rows": data.fingerprint_rows(dataset)})
    print(f"wrote {out}: model accuracy {acc:.4f} on {metric.count} examples, "
          f"random-logits accuracy {results['random_accuracy']:.4f}")


if __name__ == "__main__":
    run_main(main)
