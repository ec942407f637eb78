"""Step 1 check: forward_torch.npy vs forward_paddle.npy -> forward_diff.log (exit 1 if not aligned)."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
from common import diff, paths  # noqa: E402

THRESHOLD = 1e-6  # max abs diff of the logits; see pipeline/Step1/README.md for why this value


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threshold", type=float, default=THRESHOLD)
    args = ap.parse_args()
    d = paths.step_dir(1)
    passed = diff.check_pair(d / "forward_torch.npy", d / "forward_paddle.npy", d / "forward_diff.log",
                             default=args.threshold,
                             how={"torch": "python pipeline/Step1/pt_forward_bert.py",
                                  "paddle": "python pipeline/Step1/pd_forward_bert.py"})
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    paths.run_main(main)
