"""The diff half: compare the two demo files; `misaligned` fails, so this exits 1 on purpose."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
from common import diff, paths  # noqa: E402


def main():
    d = paths.work() / "pipeline" / "reprod_log_demo"
    passed = diff.check_pair(d / "demo_torch.npy", d / "demo_paddle.npy", d / "demo_diff.log", default=1e-6,
                             how={"torch": "python pipeline/reprod_log_demo/write_log.py",
                                  "paddle": "python pipeline/reprod_log_demo/write_log.py"},
                             hand_in=False)  # a demo, not evidence: keep it out of log_reprod/
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    paths.run_main(main)
