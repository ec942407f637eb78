"""Step 1 check: forward_torch.npy vs forward_paddle.npy -> forward_diff.log (exit 1 if not aligned).

The outputs of every watched module (forward_modules_*.npy, recorded by the
forward scripts: embeddings, each layer's attention, feed-forward and output,
pooler, classifier) must also agree within --module_tolerance: a bug in one
middle layer can shrink below the logits threshold by the time it reaches the
logits (a wrong epsilon in one LayerNorm moves MiniLM's logits by only 2.7e-7)
but not at the layer itself. On any failure, or with --diagnose, the per-module
table is appended to the log, naming the first module over tolerance.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
from common import diagnose, diff, paths  # noqa: E402

THRESHOLD = 1e-6  # max abs diff of the logits; see pipeline/Step1/README.md for why this value
RUN = {"torch": "python pipeline/Step1/pt_forward_bert.py", "paddle": "python pipeline/Step1/pd_forward_bert.py"}
MODULE_TOLERANCE = 5e-5  # max abs diff of any module output; aligned MiniLM stays under 1e-5 (see README)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threshold", type=float, default=THRESHOLD)
    ap.add_argument("--diagnose", action="store_true", help="append the per-module table even when aligned")
    ap.add_argument("--module_tolerance", type=float, default=MODULE_TOLERANCE)
    args = ap.parse_args()
    d = paths.step_dir(1)

    verdict = {}

    def layer_by_layer(log, *_):
        torch_modules = diff.load_npy(paths.require(d / "forward_modules_torch.npy", RUN["torch"]))
        paddle_modules = diff.load_npy(paths.require(d / "forward_modules_paddle.npy", RUN["paddle"]))
        rows, first = diagnose.table(torch_modules, paddle_modules, args.module_tolerance)
        verdict["modules"] = first is None
        if log.passed and first is None and not args.diagnose:
            log.info(f"module outputs: all {len(rows)} within {args.module_tolerance}")
            return
        log.info(f"layer-by-layer diagnosis (tolerance {args.module_tolerance} on max abs diff):")
        for line in diagnose.format_table(rows):
            log.info(line)
        log.info(f"diff check failed: module outputs, first diverging module: {first}" if first
                 else "module outputs: none over tolerance")

    passed = diff.check_pair(d / "forward_torch.npy", d / "forward_paddle.npy", d / "forward_diff.log",
                             default=args.threshold, extra=layer_by_layer, how=RUN)
    passed = passed and verdict["modules"]
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    paths.run_main(main)
