"""The record half of the record-and-diff tool: two frameworks' results saved with ReprodLogger.

Writes demo_torch.npy and demo_paddle.npy. Key `aligned` is the same computation
in both; key `misaligned` differs by 1e-3, as a forgotten LayerNorm epsilon might.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
import numpy as np  # noqa: E402
from reprod_log import ReprodLogger  # noqa: E402

from common import paths  # noqa: E402
from common.diff import save_npy  # noqa: E402


def main():
    x = np.random.RandomState(0).rand(4, 2).astype("float32")
    out = paths.work() / "pipeline" / "reprod_log_demo"
    for name, offset in (("torch", 0.0), ("paddle", 1e-3)):
        logger = ReprodLogger()
        logger.add("aligned", x * 2)
        logger.add("misaligned", x + np.float32(offset))
        save_npy(out / f"demo_{name}.npy", logger.data)
    print(f"wrote {out}/demo_torch.npy and demo_paddle.npy")


if __name__ == "__main__":
    paths.run_main(main)
