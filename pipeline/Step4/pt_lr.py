"""Step 4, torch side: the lr of each warmup schedule at every step -> lr_torch.npy.

Defaults are the guide's figures (hparams.SCHED_*): lr 3e-5, warmup 345, total 1024.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np
import torch

from bert_sst2 import flags, hparams, paths
from bert_sst2.twins import pt_optim
from portcheck.core import record
from portcheck.core.errors import run_main


def main():
    ap = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    ap.add_argument("--lr", type=float, default=hparams.LEARNING_RATE)
    ap.add_argument("--warmup_steps", type=int, default=hparams.SCHED_WARMUP_STEPS)
    ap.add_argument("--total_steps", type=int, default=hparams.SCHED_TOTAL_STEPS)
    args = ap.parse_args()
    flags.check(("--lr", args.lr, flags.LR), ("--warmup_steps", args.warmup_steps, flags.Whole(0)),
                ("--total_steps", args.total_steps, flags.Whole(1)))
    results = {}
    for name in pt_optim.SCHEDULES:
        stand_in = torch.nn.Linear(1, 1)  # a schedule never looks at the parameters
        optimizer, scheduler = pt_optim.build(stand_in, args.lr, name, args.warmup_steps, args.total_steps)
        lrs = []
        for _ in range(args.total_steps):
            lrs.append(pt_optim.current_lr(optimizer))  # the lr this step's update uses
            optimizer.step()  # no gradients, so no update; kept for the order a training loop uses
            scheduler.step()
        results[f"lr_{name}"] = np.array(lrs, dtype=np.float64)  # Python floats: keep all 53 bits
    # the long form, not Side.backward: this pair is each warmup schedule's lr at every one of the guide's steps,
    # with no model; Side.backward's lr is the lr of K optimizer steps of one model
    out = paths.step_dir(4) / "lr_torch.npy"
    record.save_results({out: results}, "torch", "pipeline/Step4/pt_lr.py", {"flags": vars(args)})
    print(f"wrote {out}")


if __name__ == "__main__":
    run_main(main)
