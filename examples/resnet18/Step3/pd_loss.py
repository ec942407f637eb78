"""Step 3, paddle side: cross-entropy of paddle.vision's resnet18 (eval mode) on the batch of digits -> loss_paddle.npy.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import portcheck
from examples.resnet18 import resnet
from portcheck.core.errors import run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    model, weights = resnet.paddle_model()
    images, labels = resnet.batch()
    loss, _, _ = resnet.paddle_training()
    side = portcheck.Side(resnet.step_dir(3), script=resnet.script(__file__), depends=resnet.depends(weights))
    print(f"wrote {resnet.shown(side.loss(model.eval(), images, labels, loss))}")


if __name__ == "__main__":
    run_main(main)
