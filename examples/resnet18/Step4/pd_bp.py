"""Step 4, paddle side: paddle.vision's resnet18 trained STEPS steps (--steps) in train mode on the batch of digits with
Momentum, L2Decay and StepDecay (examples/resnet18/resnet.py), everything recorded.

bp_record_paddle.npy: the first forward (every module, batch statistics), every gradient after the first
backward, the loss and lr of each step, BatchNorm's running statistics after each step and every weight after
the last. The guide's pairs: lr_paddle.npy (lr_0..) and bp_align_paddle.npy (each step's loss_i, lr_i,
weights_i, the digest of its update, and running_i, its running means').
"""
try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import record_backward
from portcheck.core.errors import run_main
from portcheck.pipeline.handin import bp_align, per_step, save_side


def main():
    args = resnet.bp_args(__doc__)
    model, weights = resnet.paddle_model()
    images, labels = resnet.batch()
    rec = record_backward(model.train(), images, labels, *resnet.paddle_training(), args.steps)
    out, depends, script = resnet.step_dir(4), resnet.bp_depends(weights, args.steps), f"{resnet.FOLDER}/Step4/pd_bp.py"
    save_side(out, "bp_record", "paddle", rec, depends, script)
    for pair, arrays in (("lr", per_step(rec, "lr")), ("bp_align", bp_align(rec))):
        path = save_side(out, pair, "paddle", arrays, depends, script)
        print(f"wrote {resnet.shown(path)}")


if __name__ == "__main__":
    run_main(main)
