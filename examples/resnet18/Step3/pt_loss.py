"""Step 3, torch side: cross-entropy of transformers' ResNet-18 (eval mode) on the batch of digits -> loss_torch.npy,
and torch's float64 run of it (loss_torch64.npy), the yardstick of its own fp32 error."""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import torch

from examples.resnet18 import resnet
from portcheck import record_value
from portcheck.forward.twin import F64
from portcheck.core.errors import run_main
from portcheck.pipeline.handin import save_side


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    model, weights = resnet.torch_model()
    images, labels = resnet.batch()
    labels = torch.from_numpy(labels)
    rec = record_value(model.eval(), images, lambda out: torch.nn.functional.cross_entropy(out.logits, labels))
    path = save_side(resnet.step_dir(3), "loss", "torch", {"loss": rec["value"]}, resnet.depends(weights),
                     f"{resnet.FOLDER}/Step3/pt_loss.py", exact={"loss": rec[F64 + "value"]})
    print(f"wrote {resnet.shown(path)}: loss {rec['value'][0]:.7f}")


if __name__ == "__main__":
    run_main(main)
