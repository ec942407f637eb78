"""Step 2, torch side: the digits through torch's DataLoader (examples/resnet18/resnet.py), the transform in
torch -> data_torch.npy: the first DATA_BATCHES batches of the first epoch's training order and of the test set.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck.pipeline import data
from portcheck.core.errors import run_main
from portcheck.pipeline.handin import save_side


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    _, test = resnet.split()
    batch, names = resnet.TRAIN["batch"], ("images", "labels")
    rec = {**data.record_batches(resnet.torch_loader(resnet.train_orders()[0], batch, drop_last=True),
                                 resnet.DATA_BATCHES, names, prefix="train/"),
           **data.record_batches(resnet.torch_loader(test, batch), resnet.DATA_BATCHES, names, prefix="test/")}
    path = save_side(resnet.step_dir(2), "data", "torch", rec, {"data": resnet.data_fingerprint()},
                     f"{resnet.FOLDER}/Step2/pt_data.py")
    print(f"wrote {resnet.shown(path)}: {len(rec)} arrays")


if __name__ == "__main__":
    run_main(main)
