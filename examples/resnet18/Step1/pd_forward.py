"""Step 1, paddle side: paddle.vision's resnet18 in eval mode on the batch of digits -> forward_paddle.npy, the
logits (the guide's pair), and records/forward_paddle.npy, every module's output, from which check_step1.py names
the module where the two models part.
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
    images, _ = resnet.batch()
    side = portcheck.Side(resnet.step_dir(1), script=resnet.script(__file__), depends=resnet.depends(weights))
    print(f"wrote {resnet.shown(side.forward(model.eval(), images))}")


if __name__ == "__main__":
    run_main(main)
