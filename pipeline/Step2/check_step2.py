"""Step 2 check: data_*.npy -> data_diff.log and metric_*.npy -> metric_diff.log (exit 1 if not aligned).

Data: the dataset length, every example's input_ids/token_type_ids/label and every
batch's input_ids/token_type_ids/attention_mask/labels, in loader order: all exact.
Metric: accuracy on seeded random logits and on each model's own predictions: exact;
the model logits themselves within Step 1's threshold.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
from common import diff, paths  # noqa: E402

LOGITS_THRESHOLD = 1e-6  # as Step 1: the same model on the same batches
# name: (torch script, paddle script, per-key thresholds; every other key must match exactly)
PAIRS = {
    "data": ("pt_data_loader.py", "pd_data_loader.py", {}),
    "metric": ("pt_metric.py", "pd_metric.py", {"model_logits": LOGITS_THRESHOLD}),
}


def sizes(log, torch_data, paddle_data):
    for side, d in (("torch", torch_data), ("paddle", paddle_data)):
        n_batches = len({k[:len("batch_000")] for k in d if k.startswith("batch_")})
        log.info(f"{side}: length {int(d['length']) if 'length' in d else '?'}, {n_batches} batches")


def main():
    d = paths.step_dir(2)
    # every file first, so a missing one stops before any log is rewritten
    for name, (pt, pd, _) in PAIRS.items():
        paths.require(d / f"{name}_torch.npy", f"python pipeline/Step2/{pt}")
        paths.require(d / f"{name}_paddle.npy", f"python pipeline/Step2/{pd}")
    passed = True
    for name, (_, _, thresholds) in PAIRS.items():
        passed &= diff.check_pair(d / f"{name}_torch.npy", d / f"{name}_paddle.npy", d / f"{name}_diff.log",
                                  thresholds=thresholds, default=0.0, extra=sizes if name == "data" else None)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    paths.run_main(main)
