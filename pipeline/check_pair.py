"""Compare any two reprod_log files: the guide's verdict and this project's strict verdict, side by side.

    python pipeline/check_pair.py forward_torch.npy forward_paddle.npy                 # threshold 1e-6
    python pipeline/check_pair.py train_align_torch.npy train_align_paddle.npy         # 0.0015, by its name
    python pipeline/check_pair.py my_torch.npy my_paddle.npy --threshold 1e-5 --strict --log my_check.log

For results written by your own scripts with reprod_log's ReprodLogger (logger.add(key, array);
logger.save(path)). The guide's verdict is reprod_log's rule: every key's mean abs diff <= the threshold
(1e-6, or 0.0015 for a train_align pair, as the guide sets them). The strict verdict holds the max abs
diff to the same threshold and fails a key missing on one side, a shape or dtype mismatch (a 0-d scalar
and a [1] array count as the same scalar), NaN or Inf, and unequal integers, which reprod_log lets pass.
Exit 1 when the guide's rule fails, a value is NaN or Inf, or the files' run records (this pipeline's
results carry them) show two different runs; with --strict, when the strict verdict fails too. No file is written unless --log FILE is given, and never over a file this script did not write.
Loading never runs code from the files.
"""
import argparse
import math
import sys
from pathlib import Path

try:
    import common.runtime  # first: offline mode, threads, allocator
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from checks import diff, handin, report, same_run
from common import record
from common.errors import PipelineError, run_main
from common.fileio import writable

SIGNATURE = "written by pipeline/check_pair.py"  # the mark of a log this script may overwrite


def ours(log: Path) -> bool:
    try:
        with open(log, "rb") as f:
            return SIGNATURE.encode() in f.read(1 << 20)
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("torch_npy", type=Path, help="the PyTorch side's .npy (a ReprodLogger dict of arrays)")
    ap.add_argument("paddle_npy", type=Path, help="the Paddle side's .npy")
    ap.add_argument("--threshold", type=float, help="the guide's threshold on each key's mean abs diff, and the "
                    "strict verdict's on its max (default 1e-6; 0.0015 for a train_align pair; 0: exact)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the strict verdict fails too")
    ap.add_argument("--log", type=Path, help="also write the log here (reprod_log's format); no file otherwise")
    args = ap.parse_args()
    if args.threshold is not None and not (math.isfinite(args.threshold) and args.threshold >= 0):
        raise PipelineError(f"--threshold must be a finite number >= 0, got {args.threshold}")
    if args.torch_npy.resolve() == args.paddle_npy.resolve():
        raise PipelineError(f"{args.torch_npy} given as both sides: pass the torch file, then the Paddle file")
    name = args.torch_npy.name.removesuffix(".npy").removesuffix("_torch")
    threshold = args.threshold if args.threshold is not None else handin.guide_threshold(name, {})
    if args.log is not None:  # every check on the output before the comparison, not after its report
        inputs = [p.resolve() for f in (args.torch_npy, args.paddle_npy) for p in (f, record.path_for(f))]
        if args.log.resolve() in inputs:
            raise PipelineError(f"--log {args.log} is an input or its run record: choose another file")
        writable(args.log)
        if args.log.exists() and not ours(args.log):
            raise PipelineError(f"--log {args.log} exists and was not written by this script (a diff log of your "
                                "own?): choose another file")
    torch_data, paddle_data = diff.load_pair(args.torch_npy, args.paddle_npy)
    guide = handin.guide_verdict(torch_data, paddle_data, threshold)
    result = handin.strict_verdict(torch_data, paddle_data, threshold, name)
    same_run.check(result, args.torch_npy, args.paddle_npy)  # this pipeline's results carry run records
    other_run = [f.name for f in result.findings if not f.passed]  # run records that differ: not the same run
    failed = not guide.passed or bool(handin.non_finite(result)) or bool(other_run) or (args.strict and not result.passed)
    result.notes[:0] = [handin.describe_guide(guide), handin.describe_strict(result, threshold)]
    result.notes.append(f"exit {int(failed)}: " + ("the guide's rule fails" if not guide.passed else
                        "a value is NaN or Inf" if handin.non_finite(result) else
                        f"not the same run ({', '.join(other_run)})" if other_run else
                        "the strict verdict fails (--strict)" if failed else
                        "the guide's rule passes" + ("" if result.passed else "; the strict verdict does not "
                                                     "(--strict makes that fail)")))
    result.notes.append(SIGNATURE)
    if args.log is not None:
        report.write(result, args.log, verdict=False)
    else:
        for line in report.log_lines(result):
            if line[1]:
                print(report.one_line(line[0]))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    run_main(main)
