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
import sys

try:
    import portcheck.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from examples.resnet18 import resnet
from portcheck import record, training
from portcheck.errors import require, run_main
from portcheck.fileio import load_npy


def main():
    args = resnet.check_args(__doc__)
    d = resnet.step_dir(5)
    for side, fw in (("pt", "torch"), ("pd", "paddle")):
        for name in (training.PAIR, training.LOG):
            require(d / f"{name}_{fw}.npy", f"python {resnet.FOLDER}/Step5/{side}_train.py")
    result = training.judge_and_log(d, resnet.THRESHOLD, top=resnet.log_reprod(args.hand_in), own=own_runs(d))
    sys.exit(0 if result.passed else 1)


def own_runs(d) -> list:
    """torch's committed run of this very training (the hand-in's torch log, made on another CPU), when this run's
    torch side is the same training (the same run record) and did not end with the same bits: torch against itself
    across CPUs, the spread judge_and_log widens the threshold by (torch's fp32 kernels differ between CPUs: an
    AVX2 host ended 352 of 360 where the committed run, 353)."""
    committed = resnet.log_reprod() / "diagnostics" / f"{training.LOG}_torch.npy"
    mine = d / f"{training.LOG}_torch.npy"
    if not committed.is_file() or committed.resolve() == mine.resolve():
        return []
    theirs, ours = record.load(committed), record.load(mine)
    if theirs is None or ours is None or record.differences(theirs, ours):
        return []  # another training (a quick run's --max_steps, other flags): no yardstick of this one
    log = load_npy(committed)
    if all(np.array_equal(v, load_npy(mine).get(k)) for k, v in log.items()):
        return []  # the same bits: nothing to widen by
    print(f"torch's own spread: this run against the committed torch run of the same training "
          f"({resnet.shown(committed)})")
    return [log]


if __name__ == "__main__":
    run_main(main)
