"""Step 2 check: data_torch.npy against data_paddle.npy and metric_torch.npy against metric_paddle.npy ->
data_diff.log, metric_diff.log, handed in to examples/resnet18/log_reprod/.

Both pairs are exact (the guide's Step 2: the same samples through the same transforms, and the same metric
value on the same predictions): every value equal, integers bit for bit, the same shapes and dtypes. The data
log names the first differing batch, key and index. Exit 1 when red.
"""
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import Handin
from portcheck.core.errors import require, run_main

PAIRS = ("data", "metric")


def main():
    args = resnet.check_args(__doc__)
    d = resnet.step_dir(2)
    for pair in PAIRS:
        for side, fw in (("pt", "torch"), ("pd", "paddle")):
            require(d / f"{pair}_{fw}.npy", f"python {resnet.FOLDER}/Step2/{side}_{pair}.py")
    steps = Handin(resnet.log_reprod(args.hand_in), sides=d)
    verdicts = steps.judge(*PAIRS)  # every output of both pairs checked before the first write
    print(steps)
    sys.exit(0 if all(v.passed for v in verdicts.values()) else 1)


if __name__ == "__main__":
    run_main(main)
