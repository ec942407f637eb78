"""Step 4, torch side: transformers' ResNet-18 trained STEPS steps (--steps) in train mode on the batch of
digits with momentum SGD, weight decay and a step schedule (examples/resnet18/resnet.py) -> the guide's pairs
lr_torch.npy (lr_0..) and bp_align_torch.npy (each step's loss_i, lr_i, weights_i, the digest of its update, and
running_i, its running means'), with their float64 runs.

records/bp_align_torch.npy: everything behind them, which check_step4.py judges: the first forward (every module,
batch statistics), every gradient after the first backward, BatchNorm's running statistics after each step and
every weight after the last.
"""
try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import portcheck
from examples.resnet18 import resnet
from portcheck.core.errors import run_main


def main():
    args = resnet.bp_args(__doc__)
    model, weights = resnet.torch_model()
    images, labels = resnet.batch()
    side = portcheck.Side(resnet.step_dir(4), script=resnet.script(__file__),
                          depends=resnet.bp_depends(weights, args.steps))
    path = side.backward(model.train(), images, labels, *resnet.torch_training(), steps=args.steps)
    print(f"wrote {resnet.shown(path)}")


if __name__ == "__main__":
    run_main(main)
