"""How far a correct kernel's normalization over a row of n values lies from float64 when it sums the row in
another order than torch: the measurement behind portcheck.core.calibrated.ROOT (the floor's sqrt(n) roundings).

    python tools/floor_rows.py           # prints the table (about a minute)

torch's CPU kernels sum a row pairwise, and are within a rounding of float64 whatever ATEN_CPU_CAPABILITY says;
Paddle's CPU mean sums left to right (its RMSNorm's variance equals np.cumsum's last value in float32, checked
first below). RMSNorm and LayerNorm over rows of n bf16 values (a checkpoint's embeddings, at six scales) are
computed in float32 with left-to-right sums and held to float64, each tensor of 32 rows as one compared output:
its max abs diff in roundings (eps32) of its largest value, over sqrt(n).
"""
try:
    import portcheck.core.runtime  # noqa: F401 - first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import argparse
import sys

import numpy as np

from portcheck.core import calibrated
from portcheck.core.errors import run_main

WIDTHS = (1024, 2048, 4096, 5120, 8192, 16384)
SCALES = (0.005, 0.02, 0.05, 0.3, 1.0, 3.0)
ROWS, TENSOR = 512, 32


def bf16(x):
    """float32 rounded to bfloat16 (to nearest), as a bf16 checkpoint holds it."""
    return ((x.view(np.uint32) + 0x8000) & 0xFFFF0000).view(np.float32)


def left_to_right(x):
    """The row's mean, summed left to right in float32."""
    return np.cumsum(x, axis=-1, dtype=np.float32)[:, -1:] / np.float32(x.shape[-1])


def paddle_sums_left_to_right() -> bool:
    import paddle
    x = bf16(np.random.default_rng(0).standard_normal((32, 4096), dtype=np.float32) * np.float32(0.02))
    return bool((paddle.to_tensor(x).pow(2).mean(-1, keepdim=True).numpy() == left_to_right(x * x)).all())


def worst(out32, out64) -> float:
    """The largest, over tensors of TENSOR rows, max abs diff in roundings of the tensor's largest value."""
    e = np.abs(out32 - out64)
    return max(e[i:i + TENSOR].max() / np.abs(out64[i:i + TENSOR]).max() / calibrated.EPS32
               for i in range(0, len(e), TENSOR))


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    print(f"Paddle's CPU mean sums left to right: {paddle_sums_left_to_right()}")
    print("| n | scale | RMSNorm (roundings / sqrt(n)) | LayerNorm |\n|---|---|---|---|")
    top = 0.0
    for n in WIDTHS:
        for std in SCALES:
            rng = np.random.default_rng(n)
            x = bf16(rng.standard_normal((ROWS, n), dtype=np.float32) * np.float32(std))
            w = (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
            x64 = x.astype(np.float64)
            rms64 = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w
            rms32 = x * (1 / np.sqrt(left_to_right(x * x) + np.float32(1e-6))).astype(np.float32) * w
            c = x - left_to_right(x)
            ln32 = c / np.sqrt(left_to_right(c * c) + np.float32(1e-6)) * w
            c64 = x64 - x64.mean(-1, keepdims=True)
            ln64 = c64 / np.sqrt((c64 ** 2).mean(-1, keepdims=True) + 1e-6) * w
            rms, ln = worst(rms32, rms64) / np.sqrt(n), worst(ln32, ln64) / np.sqrt(n)
            top = max(top, rms, ln)
            print(f"| {n} | {std:g} | {rms:.2f} | {ln:.2f} |", flush=True)
    print(f"largest: {top:.2f} x sqrt(n) roundings; the floor allows ROOT = {calibrated.ROOT:g} x sqrt(n)")


if __name__ == "__main__":
    sys.exit(run_main(main))
