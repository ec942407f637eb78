"""Step 5 check: the two trainings -> train_align_diff.log and train_align.png, handed in to
examples/resnet18/log_reprod/ (the curves and the plot under diagnostics/).

The guide's pair is the last evaluation (test accuracy and macro F1), an outcome: within the task's threshold,
resnet.THRESHOLD: half an image of 360 above the largest gap between three torch runs of this training
(resnet.TORCH_GAP, measured by Step5/torch_vs_torch.py), which end with different counts; the guide's 0.15%,
SST-2's, would ask for equal ones.
Behind it (portcheck.training.judge_training): the same steps and evaluations, every step's lr equal, every
step's batch equal, the same dropout/BatchNorm modes, the first step's loss and the weight norm while the runs
are still one computation, the loss finite; the run records' initial weights, data order, seeds and flags
equal. When red, the guide's causes the records show are named. Exit 1 when red.
"""
import argparse
import sys

try:
    import portcheck.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import training
from portcheck.errors import require, run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    d = resnet.step_dir(5)
    for side, fw in (("pt", "torch"), ("pd", "paddle")):
        for name in (training.PAIR, training.LOG):
            require(d / f"{name}_{fw}.npy", f"python {resnet.FOLDER}/Step5/{side}_train.py")
    verdict, curves = training.judge_and_log(d, resnet.THRESHOLD, top=resnet.log_reprod())
    sys.exit(0 if verdict.passed and curves.passed else 1)


if __name__ == "__main__":
    run_main(main)
