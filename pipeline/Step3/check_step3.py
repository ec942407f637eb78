"""Step 3 check: loss_torch.npy vs loss_paddle.npy -> loss_diff.log (exit 1 if not aligned)."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
from common import diff, paths  # noqa: E402

THRESHOLD = 1e-6  # abs diff of the mean loss; see pipeline/Step3/README.md for the measured values


def report_loss(log, torch_data, paddle_data):
    for side, data in (("torch", torch_data), ("paddle", paddle_data)):
        if "loss" in data:
            log.info(f"{side} loss: {data['loss'].tolist()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threshold", type=float, default=THRESHOLD)
    args = ap.parse_args()
    d = paths.step_dir(3)
    passed = diff.check_pair(d / "loss_torch.npy", d / "loss_paddle.npy", d / "loss_diff.log",
                             default=args.threshold, extra=report_loss,
                             how={"torch": "python pipeline/Step3/pt_loss.py",
                                  "paddle": "python pipeline/Step3/pd_loss.py"})
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    paths.run_main(main)
