"""Step 5 check: train_align_torch.npy vs train_align_paddle.npy -> train_align_diff.log, plus a plot.

Dev accuracy must agree within 0.0015 (the guide's 0.15% for SST-2; one dev
sentence is 1/872 = 0.00115). Runs made with --deterministic (no dropout) or
--shared_dropout (identical dropout masks) also carry their per-step loss, which
must agree step by step within that mode's tolerance.
"""
import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
import numpy as np  # noqa: E402

from common import diff, hparams, paths, weight_stats  # noqa: E402

ACC_THRESHOLD = 0.0015
# fp32 drift of two correct ports grows over steps (reference run, shared dropout: 1.1e-5 at most over
# 2,105 MiniLM steps); a wrong data order, mask or update differs by ~1e-1 within a few steps
LOSS_TOLERANCE = {"loss": 1e-3, "loss_shared_dropout": 1e-3}
RUN = {"torch": "python pipeline/Step5/pt_train.py", "paddle": "python pipeline/Step5/pd_train.py"}


def curves(fw):
    path = paths.step_dir(5) / f"train_curves_{fw}.npy"
    return diff.load_npy(paths.require(path, RUN[fw]))


def report_training(log, torch_data, paddle_data, weight_table=False):
    c = {fw: curves(fw) for fw in ("torch", "paddle")}
    for fw, data in (("torch", torch_data), ("paddle", paddle_data)):
        log.info(f"{fw}: dev acc per epoch {np.round(data['acc_per_epoch'], 5).tolist()}, {len(c[fw]['loss'])} steps, "
                 f"train {float(c[fw]['train_sent_per_s']):.1f} sent/s ({float(c[fw]['train_seconds']) / 60:.1f} min), "
                 f"eval {float(c[fw]['eval_sent_per_s']):.1f} sent/s")
    log.info(f"acc diff {abs(float(torch_data['acc']) - float(paddle_data['acc'])):.5f} (threshold {ACC_THRESHOLD}); "
             f"paddle/torch train throughput {float(c['paddle']['train_sent_per_s'] / c['torch']['train_sent_per_s']):.2f}, "
             f"eval {float(c['paddle']['eval_sent_per_s'] / c['torch']['eval_sent_per_s']):.2f}")
    for key, tol in LOSS_TOLERANCE.items():
        if key in torch_data and key in paddle_data and torch_data[key].shape == paddle_data[key].shape:
            gap = np.abs(torch_data[key].astype("float64") - paddle_data[key])
            over = np.flatnonzero(~(gap <= tol))
            log.info(f"per-step {key}: max diff {gap.max():.3e} at step {int(gap.argmax()) + 1}; "
                     + (f"curves separate beyond {tol} at step {over[0] + 1}" if over.size else f"never beyond {tol}"))
    weights_side_by_side(log, weight_table, weight_stats.decay_shrink(c["torch"]["lr"], hparams.WEIGHT_DECAY))
    png = plot(c, torch_data, paddle_data, paths.step_dir(5) / "train_align.png")
    log.info(f"plot: {png.name}")


def weights_side_by_side(log, full_table, shrink):
    """The guide's weight-decay check: per-parameter mean/std/norm of both trained models (diagnostic)."""
    d = paths.step_dir(5)
    stats = {fw: diff.load_npy(paths.require(d / f"weight_stats_{fw}.npy", RUN[fw])) for fw in ("torch", "paddle")}
    rows, flagged, missing, limit = weight_stats.compare(stats["torch"], stats["paddle"], shrink)
    if missing:
        log.info(f"weight stats: parameters on one side only: {', '.join(missing)}")
    log.info(f"weight stats: {len(rows)} parameters; paddle/torch norm ratio departing from 1 by more than "
             f"{limit:.2e} (weight decay alone shrinks a weight by {shrink:.2e} over this run): "
             f"{', '.join(flagged) if flagged else 'none'}")
    if flagged or full_table:
        for line in weight_stats.format_rows(rows):
            log.info(line)


def plot(c, torch_data, paddle_data, out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for fw, color, data in (("torch", "tab:orange", torch_data), ("paddle", "tab:blue", paddle_data)):
        loss = c[fw]["loss"]
        window = max(1, len(loss) // 50)  # smoothed: raw per-step loss with dropout is mostly noise
        smooth = np.convolve(loss, np.ones(window) / window, mode="valid")
        ax[0].plot(np.arange(1, len(loss) + 1), loss, color=color, alpha=0.15)
        ax[0].plot(np.arange(window, len(loss) + 1), smooth, color=color, label=f"{fw} (mean of {window})")
        ax[1].plot(np.arange(1, len(c[fw]["lr"]) + 1), c[fw]["lr"], color=color, label=fw,
                   linestyle="-" if fw == "torch" else "--")
        acc = data["acc_per_epoch"]
        ax[2].plot(np.arange(1, len(acc) + 1), acc, "o-", color=color, label=f"{fw} {acc[-1]:.4f}")
    for a, title in zip(ax, ("training loss", "learning rate", "dev accuracy per epoch")):
        a.set_title(title)
        a.set_xlabel("step" if title != "dev accuracy per epoch" else "epoch")
        a.legend()
    fig.tight_layout()
    diff.atomic_write(out, lambda tmp: fig.savefig(tmp, format="png", dpi=80))
    plt.close(fig)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threshold", type=float, default=ACC_THRESHOLD)
    ap.add_argument("--weight_table", action="store_true", help="log the per-parameter weight table even when "
                    "no parameter departs")
    args = ap.parse_args()
    d = paths.step_dir(5)
    passed = diff.check_pair(d / "train_align_torch.npy", d / "train_align_paddle.npy", d / "train_align_diff.log",
                             thresholds={"acc*": args.threshold, **LOSS_TOLERANCE}, how=RUN,
                             extra=lambda log, t, p: report_training(log, t, p, args.weight_table))
    for name in ("train_curves_torch.npy", "train_curves_paddle.npy", "weight_stats_torch.npy",
                 "weight_stats_paddle.npy", "train_align.png"):
        diff.atomic_write(paths.log_reprod() / name, lambda tmp, name=name: shutil.copyfile(d / name, tmp))
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    paths.run_main(main)
