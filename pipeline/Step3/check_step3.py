"""Step 3 check: loss_torch.npy vs loss_paddle.npy -> loss_diff.log (exit 1 if not aligned).

A 0-d loss (torch, Paddle >= 2.5) and a [1] loss (Paddle before 2.5, reprod_log's examples)
are the same scalar. With loss_torch64.npy (the torch model in float64), the log also gives align's
verdict, the rule measured on the model (portcheck/calibrated.py), beside this tuned one, which decides."""
import argparse
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import paths, steps, tolerances
from portcheck.core import calibrated, diff, record, report, same_run
from portcheck.core.errors import run_main
from portcheck.core.fileio import load_npy

RUN = steps.bert_pair("loss").how()


def main():
    ap = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    ap.add_argument("--threshold", type=float, default=tolerances.LOSS.atol, help="atol")
    ap.add_argument("--rtol", type=float, default=tolerances.LOSS.rtol)
    args = ap.parse_args()
    report.hand_in_folder(paths.log_reprod())  # the hand-in folder checked before the first write
    loosened = []  # flags above the measured tolerance: stated in the log, the verdict and SUMMARY.md
    tol = tolerances.from_flags(tolerances.LOSS, "the loss", loosened, args.threshold, args.rtol)
    d = paths.step_dir(3)
    torch_data, paddle_data = diff.load_pair(d / "loss_torch.npy", d / "loss_paddle.npy", how=RUN)
    result = diff.compare(torch_data, paddle_data, default=tol, name="loss")
    result.loosened = loosened
    same_run.check(result, d / "loss_torch.npy", d / "loss_paddle.npy")
    result.notes += [f"{side} loss: {data['loss'].tolist()}"
                     for side, data in zip(diff.SIDES, (torch_data, paddle_data)) if "loss" in data]
    exact = d / "loss_torch64.npy"
    if exact.is_file() and not record.twin_problem(d / "loss_torch.npy", exact):  # align's measured rule beside the tuned one
        result.notes.append(calibrated.beside(calibrated.judge_pair(torch_data, paddle_data, load_npy(exact), tolerances.GUIDE["loss"].threshold),
                                              result.passed))
    report.write(result, d / "loss_diff.log")
    report.hand_in(d / "loss_torch.npy", d / "loss_paddle.npy", d / "loss_diff.log", top=paths.log_reprod())
    sys.exit(0 if result.passed else 1)


if __name__ == "__main__":
    run_main(main)
