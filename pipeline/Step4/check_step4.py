"""Step 4 check: the lr schedules (lr_*.npy -> lr_diff.log) and the backward pass with AdamW
(bp_align_*.npy -> bp_align_diff.log). Exit 1 if either is not aligned.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
import numpy as np  # noqa: E402

from common import diagnose, diff, paths  # noqa: E402

# Both sides evaluate the same Python double expressions, so every lr must be bit-identical.
LR_THRESHOLD = 0.0
# Thresholds set from measured runs (pipeline/Step4/README.md), clean vs the subtlest planted bug:
# loss_NN: fp32 drift of two correct ports grows to 6e-7 by loss_09 on MiniLM (1.2e-7 on the tests'
#   tiny model); float64 twins agree to 6e-14, so it is rounding, not a different update rule.
LOSS_THRESHOLD = 1e-6
# grad_*: clean <= 3.9e-8 on MiniLM, 5.2e-8 tiny; Paddle's LayerNorm epsilon 1e-5 makes 3.4e-5 / 3.1e-6.
GRAD_THRESHOLD = 3e-7
# update_*: [mean, mean |.|] of each parameter's total change over the iterations. Clean <= 1.2e-9
#   on MiniLM, 5.3e-9 tiny; weight decay on LayerNorm and bias makes 2.1e-6 / 3.3e-6, which the
#   losses barely catch (1.01e-6) or miss (2.4e-7).
UPDATE_THRESHOLD = 1e-7
RUN = {"lr": {"torch": "python pipeline/Step4/pt_lr.py", "paddle": "python pipeline/Step4/pd_lr.py"},
       "bp_align": {"torch": "python pipeline/Step4/pt_bp.py", "paddle": "python pipeline/Step4/pd_bp.py"}}


def report_lr(log, torch_data, paddle_data):
    for key in (k for k in torch_data if k in paddle_data and torch_data[k].shape == paddle_data[k].shape):
        t, p = torch_data[key], paddle_data[key]
        differ = np.flatnonzero(t != p)
        log.info(f"{key}: {len(t)} steps, lr at step 0 / {int(t.argmax())} (peak) / {len(t) - 1}: "
                 f"{t[0]:.6e} / {t.max():.6e} / {t[-1]:.6e}; "
                 + (f"first differs at step {differ[0]}: torch {t[differ[0]]:.9e}, paddle {p[differ[0]]:.9e}"
                    if differ.size else "identical at every step"))


def gradient_table(log, torch_data, paddle_data, tolerance):
    """Every parameter's gradient diff, worst first, and the first over tolerance in forward order
    (the save order is named_parameters(), which follows the forward pass): hooks on every gradient,
    as the guide does by hand, but for all of them at once."""
    grads = [{k: v for k, v in d.items() if k.startswith("grad_")} for d in (torch_data, paddle_data)]
    rows, first = diagnose.table(*grads, tolerance)
    # The backward pass reaches parameters in reverse forward order and a bug there corrupts every
    # gradient it flows into afterwards: the last one over tolerance in forward order is where it starts.
    # A forward bug disturbs every gradient; Step 1's module table places those.
    last = [r[0] for r in rows if r[5]][-1] if first else None
    rows.sort(key=lambda r: -float(r[2]) if r[2][0].isdigit() else -float("inf"))
    log.info(f"gradient table, worst first (tolerance {tolerance} on max abs diff):")
    for line in diagnose.format_table(rows):
        log.info(line)
    log.info(f"first parameter over tolerance in forward order: {first}" if first
             else "no gradient over tolerance")
    if first:
        log.info(f"last parameter over tolerance in forward order (the first the backward pass reaches): {last}")


def report_bp(log, torch_data, paddle_data, n=5, grad_threshold=GRAD_THRESHOLD, full_table=False):
    """The largest diff of each kind of key, the n worst gradients, and both loss curves."""
    gaps = {k: float(np.abs(torch_data[k].astype(np.float64) - paddle_data[k]).max())
            for k in torch_data if k in paddle_data and torch_data[k].shape == paddle_data[k].shape}
    kinds = [(kind, max((g, k) for k, g in gaps.items() if k.startswith(kind)))
             for kind in ("loss_", "grad_", "update_") if any(k.startswith(kind) for k in gaps)]
    log.info("largest max abs diff: " + ", ".join(f"{kind}* {g:.3e} ({k})" for kind, (g, k) in kinds))
    worst = sorted(((g, k) for k, g in gaps.items() if k.startswith("grad_")), reverse=True)[:n]
    log.info(f"worst {len(worst)} gradients by max abs diff:")
    for gap, key in worst:
        log.info(f"\t{key}: {gap:.3e} (largest |grad| {float(np.abs(torch_data[key]).max()):.3e})")
    if not log.passed or full_table:
        gradient_table(log, torch_data, paddle_data, grad_threshold)
    losses = sorted(k for k in torch_data if k.startswith("loss_") and k in paddle_data)
    if losses:
        log.info("loss per iteration (torch/paddle): "
                 + ", ".join(f"{float(torch_data[k][0]):.7f}/{float(paddle_data[k][0]):.7f}" for k in losses))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--loss_threshold", type=float, default=LOSS_THRESHOLD)
    ap.add_argument("--grad_threshold", type=float, default=GRAD_THRESHOLD)
    ap.add_argument("--update_threshold", type=float, default=UPDATE_THRESHOLD)
    ap.add_argument("--only", choices=list(RUN), help="check one part (default: both)")
    ap.add_argument("--diagnose", action="store_true", help="log the full gradient table even when aligned")
    args = ap.parse_args()
    d = paths.step_dir(4)
    parts = [args.only] if args.only else list(RUN)
    # every input first: a missing one stops the check before any log is rewritten
    for name in parts:
        for side in ("torch", "paddle"):
            paths.require(d / f"{name}_{side}.npy", RUN[name][side])
    checks = {"lr": dict(default=LR_THRESHOLD, extra=report_lr),
              "bp_align": dict(thresholds={"loss_*": args.loss_threshold, "grad_*": args.grad_threshold,
                                           "update_*": args.update_threshold},
                               default=0.0, extra=lambda log, t, p: report_bp(
                                   log, t, p, grad_threshold=args.grad_threshold, full_table=args.diagnose),
                               # every gradient is 91 MB a side with MiniLM (the word embeddings' alone is
                               # 47 MB): log_reprod gets the losses and updates, the log every key's diff
                               hand_in_keys=["loss_*", "update_*"])}
    passed = {name: diff.check_pair(d / f"{name}_torch.npy", d / f"{name}_paddle.npy", d / f"{name}_diff.log",
                                    how=RUN[name], **checks[name]) for name in parts}
    print("; ".join(f"{name}: {'aligned' if ok else 'NOT aligned'}" for name, ok in passed.items()))
    sys.exit(0 if all(passed.values()) else 1)


if __name__ == "__main__":
    paths.run_main(main)
