"""The record half of the record-and-diff tool: two frameworks' results saved with ReprodLogger.

Writes demo_torch.npy and demo_paddle.npy. Key `aligned` is the same computation
in both; key `misaligned` differs by 1e-3, as a forgotten LayerNorm epsilon might.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np
from reprod_log import ReprodLogger

from bert_sst2 import paths
from portcheck.core.errors import run_main
from portcheck.core.fileio import save_npy


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False).parse_args()
    x = np.random.RandomState(0).rand(4, 2).astype("float32")
    out = paths.work() / "pipeline" / "reprod_log_demo"
    for name, offset in (("torch", 0.0), ("paddle", 1e-3)):
        logger = ReprodLogger()
        logger.add("aligned", x * 2)
        logger.add("misaligned", x + np.float32(offset))
        save_npy(out / f"demo_{name}.npy", logger.data)
    print(f"wrote {out}/demo_torch.npy and demo_paddle.npy")


if __name__ == "__main__":
    run_main(main)
