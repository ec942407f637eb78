"""Compare any two reprod_log files: the guide's verdict and the strict verdict, side by side.

    python pipeline/check_pair.py forward_torch.npy forward_paddle.npy                 # threshold 1e-6
    python pipeline/check_pair.py train_align_torch.npy train_align_paddle.npy         # 0.0015, by its name
    python pipeline/check_pair.py my_torch.npy my_paddle.npy --threshold 1e-5 --strict --log my_check.log

The library's `python -m portcheck pair` (portcheck/cli.py), from the checkout: the guide's verdict is
reprod_log's rule (every key's mean abs diff <= the threshold: 1e-6, or the guide's for a pair it names);
the strict one holds the max to the same threshold and fails a missing key, a shape or dtype mismatch, NaN
or Inf and unequal integers. Exit 1 when the guide's rule fails, a value is NaN or Inf, or the run records
show two runs; with --strict, when the strict verdict fails too. No file is written unless --log FILE is
given, and never over a file this command did not write. Loading never runs code from the files.
"""
try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import sys

from portcheck import cli
from portcheck.core.errors import run_main


def main():
    args = cli.parser("pipeline/check_pair.py").parse_args(["pair", *sys.argv[1:]])
    return cli.pair(args.torch_npy, args.paddle_npy, args.threshold, args.strict, args.log)


if __name__ == "__main__":
    sys.exit(run_main(main))
