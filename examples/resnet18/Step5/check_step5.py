"""Step 5 check: the two trainings -> train_align_diff.log and train_align.png, handed in to
examples/resnet18/log_reprod/ (the curves and the plot under diagnostics/).

The guide's pair is the last evaluation (test accuracy and macro F1), an outcome: within the task's threshold,
resnet.THRESHOLD (half an image of 360 above the largest gap between torch's runs of this training measured when
it was committed, resnet.TORCH_GAP; the guide's 0.15%, SST-2's, would ask for equal counts), widened by how far
torch's own runs of this training on this machine end from this one (Step5/torch_vs_torch.py, which run_all.py
runs before them): this training's final count scatters by several images from one CPU to another.
Behind it (portcheck.training.judge_training): the same steps and evaluations, every step's lr equal, every
step's batch equal, the same dropout/BatchNorm modes, the first step's loss and the weight norm while the runs
are still one computation, the loss finite; the run records' initial weights, data order, seeds and flags
equal. When red, the guide's causes the records show are named. Exit 1 when red.
"""
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from examples.resnet18 import resnet
from portcheck.core import record
from portcheck.pipeline import training
from portcheck.pipeline.own_runs import not_of_training
from portcheck.core.errors import require, run_main
from portcheck.core.fileio import load_npy


def main():
    args = resnet.check_args(__doc__)
    d = resnet.step_dir(5)
    for side, fw in (("pt", "torch"), ("pd", "paddle")):
        for name in (training.PAIR, training.LOG):
            require(d / f"{name}_{fw}.npy", f"python {resnet.FOLDER}/Step5/{side}_train.py")
    result = training.judge_and_log(d, resnet.THRESHOLD, top=resnet.log_reprod(args.hand_in), own=own_runs(d))
    sys.exit(0 if result.passed else 1)


def own_runs(d) -> list:
    """torch's other runs of this very training (the same run record as this run's torch side), the spread
    judge_and_log widens the threshold by: the runs Step5/torch_vs_torch.py made on this machine, and the hand-in's
    committed torch run, made on another CPU, where it did not end with this run's bits (torch's fp32 kernels
    differ between CPUs: an AVX2 host ended 352 of 360 where the committed run, 353). Another training's (a quick
    run's --max_steps, other weights), Paddle's, or a file its record does not describe is no yardstick of this one
    and is left out."""
    mine = d / f"{training.LOG}_torch.npy"
    ours = record.load(mine)
    if ours is None:
        return []
    committed = resnet.log_reprod() / "diagnostics" / f"{training.LOG}_torch.npy"
    here = sorted(d.glob(resnet.torch_own()))
    out, said = [], []
    for path in here + ([committed] if committed.is_file() and committed.resolve() != mine.resolve() else []):
        if not_of_training(path, ours):  # torch's, not edited since, of this very training
            continue
        out.append(load_npy(path))
        said.append(resnet.shown(path))
    print(f"torch's own spread: {len(out)} torch run(s) of this training: {', '.join(said)}" if out else
          f"torch's own spread: no torch run of this training beside it (python {resnet.FOLDER}/Step5/"
          f"torch_vs_torch.py measures them on this machine): the task's threshold alone")
    return out


if __name__ == "__main__":
    run_main(main)
