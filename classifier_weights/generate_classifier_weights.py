"""Write one seeded classifier head in both formats.

A BERT checkpoint has no sequence-classification head, and each framework's own
initialiser draws different numbers, so the head is drawn once with numpy and
saved twice: torch's Linear weight is [num_labels, hidden], Paddle's is its transpose.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from bert_sst2 import flags, hparams, paths
from bert_sst2.twins.weights import load_config
from portcheck.core.errors import run_main
from portcheck.core.fileio import atomic_write


def main():
    ap = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    ap.add_argument("--seed", type=int, default=hparams.SEED)
    args = ap.parse_args()
    flags.check(("--seed", args.seed, flags.SEED))
    config = load_config()
    import paddle  # once the flags and the config are known to be good
    import torch
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
    run_main(main)
