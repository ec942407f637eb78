"""Step 2, Paddle side: every tokenized example and every batch of common/pd_data.py's loader.

    python pipeline/Step2/pd_data_loader.py                      # the demo set (40 sentences)
    python pipeline/Step2/pd_data_loader.py --data_dir ../shared/data/SST-2   # its dev.tsv
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
from reprod_log import ReprodLogger  # noqa: E402

from common import data, paths  # noqa: E402
from common import pd_data  # noqa: E402
from common.diff import save_npy  # noqa: E402
from common.hparams import SEED  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data_dir", help="a GLUE SST-2 folder: use its dev.tsv instead of the demo set")
    ap.add_argument("--seed", type=int, default=SEED, help="seed of the example order both sides share")
    args = ap.parse_args()
    dataset = pd_data.load_split("dev", args.data_dir) if args.data_dir else pd_data.load_tsv(data.DEMO)
    tokenizer = pd_data.tokenizer()
    encoded = pd_data.encode(dataset, tokenizer)
    # a seeded permutation, as Step 5 passes: the loader must follow it exactly
    loader = pd_data.loader(encoded, tokenizer, order=data.permutation(len(encoded), args.seed))
    logger = ReprodLogger()
    for key, value in data.record(list(encoded), ({k: v.numpy() for k, v in b.items()} for b in loader)).items():
        logger.add(key, value)
    out = paths.step_dir(2) / "data_paddle.npy"
    save_npy(out, logger.data)
    print(f"wrote {out}: {len(encoded)} examples, {len(loader)} batches")


if __name__ == "__main__":
    paths.run_main(main)
