"""Compare any two reprod_log files with this project's strict rules.

    python pipeline/check_pair.py forward_torch.npy forward_paddle.npy --threshold 1e-6
    python pipeline/check_pair.py my_loss_torch.npy my_loss_paddle.npy --threshold 1e-6 --log loss_diff.log

For results written by your own scripts with reprod_log's ReprodLogger (logger.add(key, array);
logger.save(path)). Unlike ReprodDiffHelper: a key missing on one side, a shape or dtype mismatch,
NaN or Inf fail (a 0-d scalar and a [1] array count as the same scalar); integers compare exactly;
the exit code is 1 when anything fails. The log keeps reprod_log's format; without --log, a JSON
verdict is written beside it (with --log FILE, that file alone). Loading never runs code from the files.
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
from checks import diff, report, same_run
from common import record
from common.errors import PipelineError, run_main
from common.fileio import writable


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("torch_npy", type=Path, help="the PyTorch side's .npy (a ReprodLogger dict of arrays)")
    ap.add_argument("paddle_npy", type=Path, help="the Paddle side's .npy")
    ap.add_argument("--threshold", type=float, required=True, help="largest max abs diff any key may show")
    ap.add_argument("--log", type=Path, help="where to write the log (default: <torch stem>_diff.log beside it)")
    args = ap.parse_args()
    if not (math.isfinite(args.threshold) and args.threshold >= 0):
        raise PipelineError(f"--threshold must be a finite number >= 0, got {args.threshold}")
    name = args.torch_npy.stem.removesuffix("_torch")
    log = args.log or args.torch_npy.with_name(f"{name}_diff.log")
    inputs = [p.resolve() for f in (args.torch_npy, args.paddle_npy) for p in (f, record.path_for(f))]
    if log.resolve() in inputs or (args.log is None and report.verdict_path(log).resolve() in inputs):
        raise PipelineError(f"--log {log} would overwrite an input or its run record: choose another file")
    writable(log)  # before the comparison, not after its report
    torch_data, paddle_data = diff.load_pair(args.torch_npy, args.paddle_npy)
    result = diff.compare(torch_data, paddle_data, default=args.threshold, name=name)
    same_run.check(result, args.torch_npy, args.paddle_npy)
    report.write(result, log, verdict=args.log is None)  # --log FILE: that file and no other name
    sys.exit(0 if result.passed else 1)


if __name__ == "__main__":
    run_main(main)
