"""Convert examples/resnet18/weights/torch_resnet18.bin into paddle_resnet18.pdparams for paddle.vision's resnet18.

The whole port of the weights is portcheck.convert with RESNET_MAP (examples/resnet18/resnet.py): layouts follow
each torch module's type (Conv2d kept, BatchNorm2d's running_mean/running_var as _mean/_variance with
num_batches_tracked dropped, the classifier's Linear transposed), every key and shape checked both ways.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import paddle

from examples.resnet18 import resnet
from portcheck import convert
from portcheck.core import record
from portcheck.core.errors import run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    torch_model, weights = resnet.torch_model()
    path = resnet.paddle_weight()
    state = convert(torch_model, paddle.vision.models.resnet18(num_classes=resnet.CLASSES), resnet.RESNET_MAP,
                    path=path)
    record.write(record.path_for(path), {"framework": "paddle", "script": f"{resnet.FOLDER}/convert_weights.py",
                                         "result": record.state_fingerprint(state), "depends": {"weights": weights}})
    print(f"wrote {resnet.shown(path)}: {len(state)} tensors from {len(torch_model.state_dict())} torch tensors "
          "(num_batches_tracked has no Paddle counterpart)")


if __name__ == "__main__":
    run_main(main)
