"""Step 4 check: the lr of each step (the guide's lr pair), each step's loss, lr and update digest (its bp_align
pair: handin.bp_align, what judge_backward judges each step by, so that the hand-in checker re-derives this
verdict from the folder), and everything behind them, torch against Paddle -> lr_diff.log, bp_align_diff.log,
handed in to examples/resnet18/log_reprod/.

Both pairs pass the guide's rule (mean |diff| <= 1e-6) and the rule measured on the model (portcheck/calibrated.py).
Behind them (records/bp_align_*.npy, each side's whole record, judged by align.judge_backward through RESNET_MAP):
every module's output in the first forward in train mode, every gradient after the first backward, BatchNorm's
running statistics after each step and every weight after the last. One difference is by design and is said in one
line per module, not hidden under a looser tolerance: torch updates running_var with the unbiased batch variance,
Paddle with the biased one; the check applies that rule exactly and judges what is left. The first place the two runs
part is named. Exit 1 when red.
"""
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import Side, judge_backward
from portcheck.core import record
from portcheck.pipeline import handin
from portcheck.core.errors import require, run_main
from portcheck.core.fileio import load_npy


def main():
    args = resnet.check_args(__doc__)
    d = resnet.step_dir(4)
    records = [Side(d).whole_record("bp_align", fw) for fw in ("torch", "paddle")]
    for path, side in zip(records, ("pt", "pd")):
        require(path, f"python {resnet.FOLDER}/Step4/{side}_bp.py")
    same, detail = record.same_run(*records)
    # judged here rather than by Handin.judge: through RESNET_MAP (the example of writing a map), the whole records'
    # own same-run line in the log
    report = judge_backward(load_npy(records[0]), load_npy(records[1]), resnet.RESNET_MAP)
    where = report.first_diverging
    tables = [f"training record same run: {'passed' if same else 'FAILED'}, {detail}",
              f"training record: {'passed' if report.passed else 'FAILED'}"
              + (f", the runs part at {where}" if where else ", every module, gradient, statistic and weight within"),
              *report.table().splitlines()]
    top = resnet.log_reprod(args.hand_in)
    handin.check_outputs(d, ["lr", "bp_align"], top)  # every output of both pairs before the first write
    verdicts = [handin.judge_and_log(d, "lr", top=top),
                handin.judge_and_log(d, "bp_align", tables=tables, after_steps=True, top=top)]
    print(tables[1])
    sys.exit(0 if all(v.passed for v in verdicts) and report.passed and same else 1)


if __name__ == "__main__":
    run_main(main)
