"""Step 3, Paddle side: cross-entropy of pd_bert's logits on the fake batch -> loss_paddle.npy.

The loss is saved as [1] on both sides, on purpose: torch and Paddle 3 give a 0-d loss, Paddle before 2.5 [1]."""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import paddle

import portcheck
from bert_sst2 import inputs, paths
from bert_sst2.twins.weights import paddle_fingerprint, paddle_model
from portcheck.core import record
from portcheck.core.errors import run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    model = paddle_model()
    weights = paddle_fingerprint(model)  # as loaded, before anything runs
    model.eval()  # dropout off: the two frameworks draw different masks
    ids, labels = inputs.fake_batch()
    depends = {"weights": weights, "inputs": record.fingerprint(zip(("ids", "labels"), (ids, labels)))}
    side = portcheck.Side(paths.step_dir(3), script="pipeline/Step3/pd_loss.py", depends=depends)
    criterion = paddle.nn.CrossEntropyLoss()  # classes on axis -1 of [batch, classes], mean over the batch
    print(f"wrote {side.loss(model, ids, labels, criterion)}")


if __name__ == "__main__":
    run_main(main)
