"""Export transformers' ResNet-18, seeded random weights, to examples/resnet18/weights/torch_resnet18.bin.

The torch side of the port: what a user's trained checkpoint would be. convert_weights.py turns it into
Paddle's names and layouts.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import torch

from examples.resnet18 import resnet
from portcheck.core import record
from portcheck.core.errors import run_main
from portcheck.core.fileio import atomic_write


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    state = resnet.new_torch_model().state_dict()
    path = resnet.torch_weight()
    atomic_write(path, lambda tmp: torch.save(state, tmp))
    fingerprint = record.state_fingerprint({k: v.numpy() for k, v in state.items()})
    record.write(record.path_for(path), {"framework": "torch", "script": f"{resnet.FOLDER}/export_weights.py",
                                         "result": fingerprint, "depends": {"weights": fingerprint, "seed": resnet.SEED}})
    print(f"wrote {resnet.shown(path)}: {len(state)} tensors")


if __name__ == "__main__":
    run_main(main)
