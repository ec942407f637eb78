"""Step 2, Paddle side: paddle.metric.Accuracy on seeded random logits and on pd_bert's own predictions.

    python pipeline/Step2/pd_metric.py                           # model predictions on the demo set
    python pipeline/Step2/pd_metric.py --data_dir ../shared/data/SST-2    # ... on its dev.tsv
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
import numpy as np  # noqa: E402
import paddle  # noqa: E402
from reprod_log import ReprodLogger  # noqa: E402

from common import data, paths  # noqa: E402
from common import pd_data  # noqa: E402
from common.diff import save_npy  # noqa: E402
from common.weights import paddle_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data_dir", help="a GLUE SST-2 folder: predict its dev.tsv instead of the demo set")
    args = ap.parse_args()
    logger = ReprodLogger()
    logits, labels = data.random_logits()
    acc = pd_data.accuracy(paddle.to_tensor(logits), paddle.to_tensor(labels))
    logger.add("random_accuracy", np.array(acc, dtype="float32"))

    model = paddle_model()
    model.eval()  # dropout off: the two frameworks draw different masks
    dataset = pd_data.load_split("dev", args.data_dir) if args.data_dir else pd_data.load_tsv(data.DEMO)
    tokenizer = pd_data.tokenizer()
    logits, labels = [], []
    with paddle.no_grad():
        for batch in pd_data.loader(pd_data.encode(dataset, tokenizer), tokenizer):
            labels.append(batch.pop("labels"))
            logits.append(model(**batch))
    logits, labels = paddle.concat(logits), paddle.concat(labels)
    acc = pd_data.accuracy(logits, labels)
    logger.add("model_logits", logits.numpy())
    logger.add("model_accuracy", np.array(acc, dtype="float32"))
    out = paths.step_dir(2) / "metric_paddle.npy"
    save_npy(out, logger.data)
    print(f"wrote {out}: model accuracy {acc:.4f} on {len(labels)} examples, "
          f"random-logits accuracy {logger.data['random_accuracy']:.4f}")


if __name__ == "__main__":
    paths.run_main(main)
