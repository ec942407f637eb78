"""Step 2, paddle side: the digits through paddle.io's DataLoader (examples/resnet18/resnet.py), the transform in
paddle -> data_paddle.npy: the first DATA_BATCHES batches of the first epoch's training order and of the test set.
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
    _, test = resnet.split()
    batch = resnet.TRAIN["batch"]
    loaders = {"train": resnet.paddle_loader(resnet.train_orders()[0], batch, drop_last=True),
               "test": resnet.paddle_loader(test, batch)}
    side = portcheck.Side(resnet.step_dir(2), script=resnet.script(__file__),
                          depends={"data": resnet.data_fingerprint()})
    print(f"wrote {resnet.shown(side.data(loaders, resnet.DATA_BATCHES, names=('images', 'labels')))}")


if __name__ == "__main__":
    run_main(main)
