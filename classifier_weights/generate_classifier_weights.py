"""Write one seeded classifier head in both formats.

A BERT checkpoint has no sequence-classification head, and each framework's own
initialiser draws different numbers, so the head is drawn once with numpy and
saved twice: torch's Linear weight is [num_labels, hidden], Paddle's is its transpose.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
import numpy as np  # noqa: E402
import paddle  # noqa: E402
import torch  # noqa: E402

from common import paths  # noqa: E402
from common.diff import atomic_write  # noqa: E402
from common.weights import load_config  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seed", type=int, default=2021)
    args = ap.parse_args()
    config = load_config()
    rng = np.random.RandomState(args.seed)
    weight = rng.normal(0.0, config.initializer_range, (config.num_labels, config.hidden_size)).astype("float32")
    bias = np.zeros(config.num_labels, dtype="float32")
    torch_head = {"classifier.weight": torch.from_numpy(weight), "classifier.bias": torch.from_numpy(bias)}
    paddle_head = {"classifier.weight": paddle.to_tensor(weight.T), "classifier.bias": paddle.to_tensor(bias)}
    atomic_write(paths.classifier_torch(), lambda tmp: torch.save(torch_head, tmp))
    atomic_write(paths.classifier_paddle(), lambda tmp: paddle.save(paddle_head, tmp))
    print(f"wrote {paths.classifier_torch()} and {paths.classifier_paddle()}: "
          f"head [{config.num_labels}, {config.hidden_size}], seed {args.seed}")


if __name__ == "__main__":
    paths.run_main(main)
