"""Step 3, torch side: cross-entropy of pt_bert's logits on the fake batch -> loss_torch.npy,
and torch's float64 run of it (loss_torch64.npy), the yardstick of its own fp32 error.

The loss is saved as [1] on both sides, on purpose: torch and Paddle 3 give a 0-d loss, Paddle before 2.5 [1]."""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import torch

import portcheck
from bert_sst2 import inputs, paths
from bert_sst2.twins.weights import torch_fingerprint, torch_model
from portcheck.core import record
from portcheck.core.errors import run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    model = torch_model()
    weights = torch_fingerprint(model)  # as loaded, before anything runs
    model.eval()  # dropout off: the two frameworks draw different masks
    ids, labels = inputs.fake_batch()
    depends = {"weights": weights, "inputs": record.fingerprint(zip(("ids", "labels"), (ids, labels)))}
    side = portcheck.Side(paths.step_dir(3), script="pipeline/Step3/pt_loss.py", depends=depends)
    criterion = torch.nn.CrossEntropyLoss()  # classes on dim 1 of [batch, classes], mean over the batch
    print(f"wrote {side.loss(model, ids, labels, criterion)}")


if __name__ == "__main__":
    run_main(main)
