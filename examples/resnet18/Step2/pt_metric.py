"""Step 2, torch side: accuracy and macro F1 (resnet.torch_metric) on the test set's nearest-centroid predictions,
the same inputs on both sides -> metric_torch.npy.
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
    predictions, labels = resnet.centroid_predictions()
    side = portcheck.Side(resnet.step_dir(2), script=resnet.script(__file__))
    print(f"wrote {resnet.shown(side.metric(resnet.torch_metric, predictions, labels, framework='torch'))}")


if __name__ == "__main__":
    run_main(main)
