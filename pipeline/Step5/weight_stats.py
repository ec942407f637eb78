"""Per-parameter weight statistics of two Step 5 checkpoints side by side (the guide's weight-decay check).

    python pipeline/Step5/weight_stats.py                                  # the latest checkpoints of both runs
    python pipeline/Step5/weight_stats.py --torch DIR --paddle DIR         # any two checkpoint folders

check_step5.py prints the same comparison after every Step 5 run; this script
reads two checkpoints saved by pt_train.py / pd_train.py (output/*/checkpoint-N).
Each side's statistics come from its own framework's file.
"""
import argparse
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import hparams, paths
from bert_sst2.twins.train import Checkpoints
from bert_sst2.twins.weights import load_torch_checkpoint, read_paddle_checkpoint
from portcheck.core import report
from portcheck.gradients import weight_stats
from portcheck.core.errors import PipelineError, require, run_main

RUN = {"torch": "python pipeline/Step5/pt_train.py", "paddle": "python pipeline/Step5/pd_train.py"}
AGAIN = "pass another checkpoint folder, or train again to make a new one"


def checkpoint(folder, fw) -> Path:
    folder = Path(folder) if folder else paths.step_dir(5) / "output" / fw
    if folder.is_file():
        raise PipelineError(f"--{fw} {folder} is a file: pass a checkpoint folder (output/{fw}/checkpoint-N)")
    if (folder / "latest").is_file():
        folder = Checkpoints(folder).latest() or folder  # a dangling `latest`: report the folder
    return require(paths.step5_state(folder, fw), RUN[fw])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--torch", help="a torch checkpoint folder (default: the latest in pipeline/Step5/output/torch)")
    ap.add_argument("--paddle", help="a Paddle checkpoint folder (default: the latest in pipeline/Step5/output/paddle)")
    args = ap.parse_args()
    t_path = checkpoint(args.torch, "torch")
    t_state = load_torch_checkpoint(t_path, RUN["torch"], fix=AGAIN)["model"]
    # the lrs the run stepped at set how far fp32 rounding of weight decay alone can move a norm
    lrs = Checkpoints.run_state(t_path.parent).lr
    # the Paddle checkpoint's arrays, read without paddle.load (which would run any pickled code)
    p_state = read_paddle_checkpoint(checkpoint(args.paddle, "paddle"), RUN["paddle"], fix=AGAIN)["model"]
    rows, flagged, missing, limit = weight_stats.compare(
        weight_stats.summarize((n, v.numpy()) for n, v in t_state.items()),
        weight_stats.summarize(p_state.items()),
        weight_stats.decay_shrink(lrs, hparams.WEIGHT_DECAY))
    print("\n".join(report.format_table(weight_stats.HEADER, rows)))
    if missing:
        print(f"on one side only: {', '.join(missing)}")
    print(f"departing from 1 by more than {limit:.2e}: {', '.join(flagged) if flagged else 'none'}")


if __name__ == "__main__":
    run_main(main)
