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

import common.runtime  # first: offline mode, threads, allocator, before torch/paddle load
from checks import diagnose, diff, report, same_run, tolerances
from common import paths
from common.errors import run_main

RUN = {"torch": "python pipeline/Step1/pt_forward_bert.py", "paddle": "python pipeline/Step1/pd_forward_bert.py"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threshold", type=float, default=tolerances.LOGITS)
    ap.add_argument("--diagnose", action="store_true", help="append the per-module table even when aligned")
    ap.add_argument("--module_tolerance", type=float, default=tolerances.MODULE_OUTPUTS)
    args = ap.parse_args()
    d = paths.step_dir(1)
    # every input first: a missing one stops the check before any log is rewritten
    torch_data, paddle_data = diff.load_pair(d / "forward_torch.npy", d / "forward_paddle.npy", how=RUN)
    torch_modules, paddle_modules = diff.load_pair(d / "forward_modules_torch.npy", d / "forward_modules_paddle.npy",
                                                   how=RUN)
    result = diff.compare(torch_data, paddle_data, default=args.threshold, name="forward")
    same_run.check(result, d / "forward_torch.npy", d / "forward_paddle.npy")
    modules = diff.compare(torch_modules, paddle_modules, default=args.module_tolerance)
    first = diagnose.first_over(modules)
    result.findings.append(diff.Finding(
        "module outputs", first is None,
        f"first diverging module: {first}" if first else f"all {len(modules.keys)} within {args.module_tolerance}"))
    if not result.passed or args.diagnose:
        result.tables.append(diagnose.table(
            modules, f"layer-by-layer diagnosis (tolerance {args.module_tolerance} on max abs diff):"))
    report.write(result, d / "forward_diff.log")
    report.hand_in(d / "forward_torch.npy", d / "forward_paddle.npy", d / "forward_diff.log")
    sys.exit(0 if result.passed else 1)


if __name__ == "__main__":
    run_main(main)
