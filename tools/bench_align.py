"""The model-agnostic layer measured on a pair no one here wrote: transformers' ResNet-18 and paddle.vision's.

    python tools/bench_align.py            # writes docs/align.md

Random weights (seeded), converted by align.convert through a name map; then align.compare_forward on
fake images: the largest "diff / torch's own fp32 error" of clean code, the same figure for planted bugs
(where each is named), and the cost of the comparison (with its float64 run) against one plain torch
forward plus one Paddle forward at the same batch.
"""
import argparse
import time

try:
    import common.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from pathlib import Path

import numpy as np

from checks import calibrated
from common import paths
from common.errors import run_main
from common.fileio import atomic_write


def stage(m):
    return f"layer{int(m.group(1)) + 1}.{m.group(2)}"


# transformers' ResNet names -> paddle.vision's (the one fact a port of this pair has to write)
RESNET_MAP = [
    (r"^resnet\.embedder\.embedder\.convolution$", "conv1"), (r"^resnet\.embedder\.embedder\.normalization$", "bn1"),
    (r"^resnet\.embedder\.pooler$", "maxpool"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)\.shortcut\.convolution$", lambda m: stage(m) + ".downsample.0"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)\.shortcut\.normalization$", lambda m: stage(m) + ".downsample.1"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)\.layer\.(\d)\.convolution$",
     lambda m: f"{stage(m)}.conv{int(m.group(3)) + 1}"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)\.layer\.(\d)\.normalization$",
     lambda m: f"{stage(m)}.bn{int(m.group(3)) + 1}"),
    (r"^resnet\.encoder\.stages\.(\d)\.layers\.(\d)$", stage),
    (r"^resnet\.pooler$", "avgpool"), (r"^classifier\.1$", "fc"),
]


def models(classes: int):
    import paddle
    import torch
    from transformers import ResNetConfig, ResNetForImageClassification
    torch.manual_seed(0)
    pt = ResNetForImageClassification(ResNetConfig(depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512],
                                                   layer_type="basic", downsample_in_first_stage=False,
                                                   num_labels=classes))
    with torch.no_grad():  # statistics and affine terms a trained model would have, so eval mode uses them
        for m in pt.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1), m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5), m.bias.uniform_(-0.1, 0.1)
    pd = paddle.vision.models.resnet18(num_classes=classes)
    return pt.eval(), pd.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--size", type=int, default=64, help="image side (default 64)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=paths.ROOT / "docs" / "align.md")
    args = ap.parse_args()
    import paddle
    import torch
    from align import compare_forward, convert
    pt, pd = models(10)
    pd.set_state_dict(convert(pt, pd, RESNET_MAP))
    x = np.random.RandomState(0).randn(args.batch, 3, args.size, args.size).astype("float32")

    def plain():
        with torch.no_grad():
            pt(torch.from_numpy(x))
        with paddle.no_grad():
            pd(paddle.to_tensor(x))

    def timed(fn):
        best = float("inf")
        for _ in range(args.repeats):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best
    plain_s, report = timed(plain), compare_forward(pt, pd, x, RESNET_MAP)
    compare_s = timed(lambda: compare_forward(pt, pd, x, RESNET_MAP))
    clean = max(r.ratio for r in report.rows if not r.problem)
    rows = [("clean port", "green" if report.passed else "RED", "-", f"{clean:.2f}")]
    undo = plant_eps(pd)
    r = compare_forward(pt, pd, x, RESNET_MAP)
    at = next(row for row in r.rows if row.name == r.first_diverging)
    rows.append(("BatchNorm epsilon 1e-3 in paddle's layer2.0.bn2", "green" if r.passed else "RED",
                 r.first_diverging, f"{at.ratio:.0f}"))
    undo()
    lines = ["# align: the model-agnostic layer, measured", "",
             f"Written by `python tools/bench_align.py` (transformers' ResNet-18 against paddle.vision's resnet18, "
             f"random seeded weights, batch [{args.batch}, 3, {args.size}, {args.size}], this 2-core CPU).", "",
             f"The rule (checks/calibrated.py): max |paddle - torch| <= K * err32 + FLOOR * eps32 * max|torch|, "
             f"K = {calibrated.K:g}, FLOOR = {calibrated.FLOOR:g}; the guide's mean bound 1e-6 on the model's output.", "",
             "| case | verdict | first diverging module | diff / torch's own fp32 error |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    lines += ["", f"Cost: compare_forward (hooks on every module, the float64 torch run) {compare_s:.3f} s against "
                  f"{plain_s:.3f} s for one plain torch forward plus one Paddle forward: "
                  f"{compare_s / plain_s:.2f}x (target <= 4x). Best of {args.repeats}."]
    atomic_write(args.out, lambda tmp: Path(tmp).write_text("\n".join(lines) + "\n"))
    print("\n".join(lines))


def plant_eps(pd):
    bn = pd.layer2[0].bn2
    bn._epsilon = 1e-3
    return lambda: setattr(bn, "_epsilon", 1e-5)


if __name__ == "__main__":
    run_main(main)
