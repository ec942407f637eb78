"""Step 3, paddle side: cross-entropy of paddle.vision's resnet18 (eval mode) on the batch of digits -> loss_paddle.npy."""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import paddle

from examples.resnet18 import resnet
from portcheck import record_value
from portcheck.core.errors import run_main
from portcheck.pipeline.handin import save_side


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    model, weights = resnet.paddle_model()
    images, labels = resnet.batch()
    labels = paddle.to_tensor(labels)
    rec = record_value(model.eval(), images, lambda out: paddle.nn.functional.cross_entropy(out, labels))
    path = save_side(resnet.step_dir(3), "loss", "paddle", {"loss": rec["value"]}, resnet.depends(weights),
                     f"{resnet.FOLDER}/Step3/pd_loss.py")
    print(f"wrote {resnet.shown(path)}: loss {rec['value'][0]:.7f}")


if __name__ == "__main__":
    run_main(main)
