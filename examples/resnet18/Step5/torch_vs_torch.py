"""Step 5's yardstick: torch trained against torch. pt_train.py runs twice, at one thread and at two (the same
weights, data, order, seeds and flags; only the order of fp32 additions inside the kernels differs), each in a
scratch copy of the example, and the library's judge compares the two runs as it compares torch with Paddle.

    python examples/resnet18/Step5/torch_vs_torch.py

What a clean torch training differs from itself by is what no port can do better than: where this is red at
the guide's 0.15% (equal counts of 360 test images), so is every port. Nothing of the repository is written.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import portcheck.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import training
from portcheck.errors import require, run_main
from portcheck.fileio import load_npy


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    require(resnet.torch_weight(), resnet.EXPORT)
    logs = []
    with tempfile.TemporaryDirectory() as scratch:
        for threads in (1, 2):
            home = Path(scratch) / f"threads{threads}"
            shutil.copytree(resnet.torch_weight().parent, home / resnet.FOLDER / "weights")
            env = dict(os.environ, BERT_ALIGN_HOME=str(home), OMP_NUM_THREADS=str(threads))
            print(f"$ OMP_NUM_THREADS={threads} python {resnet.FOLDER}/Step5/pt_train.py", flush=True)
            subprocess.run([sys.executable, str(resnet.ROOT / resnet.FOLDER / "Step5" / "pt_train.py")], env=env,
                           check=True)
            logs.append(load_npy(home / resnet.FOLDER / "Step5" / f"{training.LOG}_torch.npy"))
    report = training.judge_training(*logs)
    print("torch at one thread against torch at two, judged as torch against Paddle (below, 'torch' is the run at "
          "one thread, 'paddle' the torch run at two):")
    for line in report.lines():
        print(line)


if __name__ == "__main__":
    run_main(main)
