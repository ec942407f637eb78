"""Step 3, torch side: cross-entropy of pt_bert's logits on the fake batch -> loss_torch.npy."""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import torch

from bert_sst2 import inputs, paths
from bert_sst2.twins.weights import torch_fingerprint, torch_model
from portcheck.core import record
from portcheck.forward.twin import float64
from portcheck.core.errors import run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False).parse_args()
    model = torch_model()
    weights = torch_fingerprint(model)  # as loaded, before anything runs
    model.eval()  # dropout off: the two frameworks draw different masks
    ids, labels = (torch.from_numpy(a) for a in inputs.fake_batch())
    criterion = torch.nn.CrossEntropyLoss()  # classes on dim 1 of [batch, classes], mean over the batch
    with torch.no_grad():
        loss = criterion(model(ids), labels)
        with float64(model):  # torch's own fp32 error
            exact = criterion(model(ids), labels)
    results = {}
    # torch and Paddle 3 give a 0-d loss, Paddle before 2.5 [1]: both sides save [1], on purpose
    results["loss"] = loss.numpy().reshape(1)
    # the long form, not Side.loss: the committed hand-in's measured line was made with torch's float64 run of the
    # whole model (float64(model)), where Side.loss casts torch's module by module as called (twin.float64_run)
    out = paths.step_dir(3) / "loss_torch.npy"
    record.save_results({out: results, out.with_name("loss_torch64.npy"): {"loss": exact.numpy().reshape(1)}}, "torch",
                        "pipeline/Step3/pt_loss.py",
                        {"weights": weights, "inputs": record.fingerprint(zip(("ids", "labels"), inputs.fake_batch()))})
    print(f"wrote {out}: loss {loss.item():.8f}")


if __name__ == "__main__":
    run_main(main)
