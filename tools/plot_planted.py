"""Draw the picture the docs show of a planted bug: a small convolutional network ported to Paddle with one
BatchNorm's epsilon 1e-3 instead of torch's 1e-5, compared module by module (compare_forward, isolate=True) and
drawn by ForwardReport.plot: the first diverging module is marked, the cumulative run beside the isolated one.

    python tools/plot_planted.py                 # writes docs/img/planted_forward.png
    python tools/plot_planted.py --out x.png     # elsewhere
"""
import argparse
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, before torch and Paddle load)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from portcheck import compare_forward, convert
from portcheck.core.errors import PipelineError, run_main

ROOT = Path(__file__).resolve().parents[1]
EPS = {"torch": 1e-5, "planted": 1e-3}  # BatchNorm's epsilon: torch's default, and the planted one


def models(planted_block=1):
    """(torch, Paddle) nets of three conv-BN-ReLU blocks and a head, the Paddle one's block `planted_block` with
    the planted epsilon (None: a clean port)."""
    import paddle
    import torch
    torch.manual_seed(0)
    widths = [3, 8, 16, 16]
    t, p = torch.nn.Sequential(), paddle.nn.Sequential()  # torch's modules named, Paddle's numbered: paired by the run
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        for name, module in (("conv", torch.nn.Conv2d(a, b, 3, padding=1)), ("bn", torch.nn.BatchNorm2d(b)),
                             ("relu", torch.nn.ReLU())):
            t.add_module(f"block{i}_{name}", module)
        eps = EPS["planted"] if i == planted_block else EPS["torch"]
        for layer in (paddle.nn.Conv2D(a, b, 3, padding=1), paddle.nn.BatchNorm2D(b, epsilon=eps), paddle.nn.ReLU()):
            p.add_sublayer(str(len(p._sub_layers)), layer)
    for name, module in (("pool", torch.nn.AdaptiveAvgPool2d(1)), ("flat", torch.nn.Flatten()),
                         ("head", torch.nn.Linear(16, 4))):
        t.add_module(name, module)
    for layer in (paddle.nn.AdaptiveAvgPool2D(1), paddle.nn.Flatten(), paddle.nn.Linear(16, 4)):
        p.add_sublayer(str(len(p._sub_layers)), layer)
    if planted_block is not None:  # the planted block's running variance small, as trained ones are: its epsilon shows
        getattr(t, f"block{planted_block}_bn").running_var.uniform_(1e-3, 1e-2)
    return t, p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "planted_forward.png", help="the PNG to write")
    out = ap.parse_args().out
    if out.suffix != ".png":
        raise PipelineError(f"--out {out}: give a .png path")
    t, p = models()
    x = np.random.RandomState(0).randn(2, 3, 16, 16).astype("float32")
    convert(t, p, inputs=x)
    t.eval(), p.eval()
    report = compare_forward(t, p, x, isolate=True)
    print(f"first diverging: {report.first_diverging}; own computation differs: {', '.join(report.differing)}")
    print(report.plot(out))
    return 0


if __name__ == "__main__":
    run_main(main)
