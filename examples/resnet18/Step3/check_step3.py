"""Step 3 check: loss_torch.npy against loss_paddle.npy -> loss_diff.log, handed in to examples/resnet18/log_reprod/.

The loss passes the guide's rule (mean |diff| <= 1e-6) and the rule measured on the model (16 x torch's own
fp32 error, from loss_torch64.npy, plus a floor); both sides' run records must show the same weights and
inputs. Exit 1 when red."""
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import Handin
from portcheck.core.errors import require, run_main


def main():
    args = resnet.check_args(__doc__)
    d = resnet.step_dir(3)
    for side, fw in (("pt", "torch"), ("pd", "paddle")):
        require(d / f"loss_{fw}.npy", f"python {resnet.FOLDER}/Step3/{side}_loss.py")
    verdict = Handin(resnet.log_reprod(args.hand_in), sides=d).judge("loss")["loss"]
    sys.exit(0 if verdict.passed else 1)


if __name__ == "__main__":
    run_main(main)
