"""What a tensor-parallel comparison costs (issue 76 item 7): compare_split at degree 2 (two ranks under
paddle.distributed.spawn, gloo, on CPU; --degree 4: four, the key-value heads then 4 so that each rank holds one) on
examples/tiny_llama_split.py's Llama, against one plain forward of each side in one process (torch's model, and the
single-card Paddle model holding the same weights).

    nice -n 10 python tools/bench_split.py --hidden 256 --layers 2
    nice -n 10 python tools/bench_split.py --degree 4

Wall seconds, and CPU seconds (this process's and its ranks', every thread's: other work may load the machine, and
a wall clock then measures the load); a plain forward: the best of 3 after a warm-up. Peak resident memory: this
process's, and the largest rank's (each rank's own, report.peak_mb). A rank is a new
interpreter importing Paddle and paddlenlp: most of a small model's comparison is that start.
"""
import argparse
import functools
import resource
import time

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, allocator, before torch/paddle load)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

import numpy as np

from portcheck.core.errors import PipelineError, run_main


def cpu() -> float:
    """CPU seconds of this process and of its children that ended."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn) -> tuple:
    wall, spent = time.perf_counter(), cpu()
    out = fn()
    return out, time.perf_counter() - wall, cpu() - spent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--hidden", type=int, default=256, help="hidden size (default 256; intermediate 3x, 4 heads)")
    ap.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    ap.add_argument("--isolate", action="store_true", help="compare_split(..., isolate=True) too")
    ap.add_argument("--degree", type=int, default=2, choices=(2, 4), help="ranks (default 2; 4 heads: 2 or 4)")
    args = ap.parse_args()
    if args.hidden < 8 or args.hidden % 8 or args.layers < 1:
        raise PipelineError("--hidden must be a multiple of 8 (>= 8) and --layers >= 1")
    import paddle
    import torch
    from examples.tiny_llama_split import IDS, build, torch_and_state
    from portcheck.forward.split import compare_split
    sizes = dict(hidden_size=args.hidden, intermediate_size=3 * args.hidden, num_hidden_layers=args.layers,
                 **({"num_key_value_heads": 4} if args.degree == 4 else {}))
    single = []
    pt, state = torch_and_state(single, **sizes)
    ids = IDS["input_ids"]
    with torch.no_grad():
        pt(torch.from_numpy(ids))  # warm-up: the first kernels
        t_wall, t_cpu = min(timed(lambda: pt(torch.from_numpy(ids)))[1:] for _ in range(3))  # the best of 3
    with paddle.no_grad():
        single[0](paddle.to_tensor(ids))
        p_wall, p_cpu = min(timed(lambda: single[0](paddle.to_tensor(ids)))[1:] for _ in range(3))
    plain_wall, plain_cpu = t_wall + p_wall, t_cpu + p_cpu
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"Llama hidden {args.hidden}, {args.layers} layers, 2 x {ids.shape[1]} tokens, degree {args.degree} on CPU")
    print(f"  one plain forward of each side: {plain_wall:.3f} s wall, {plain_cpu:.3f} s CPU "
          f"(torch {t_wall:.3f} s, Paddle {p_wall:.3f} s)")
    for isolate in (False, True) if args.isolate else (False,):
        report, wall, spent = timed(lambda: compare_split(pt, functools.partial(build, **sizes), IDS, args.degree,
                                                          state, isolate=isolate))
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  compare_split{'(isolate=True)' if isolate else ''}: {'green' if report.passed else 'RED'}, "
              f"{wall:.1f} s wall ({wall / plain_wall:.0f}x), {spent:.1f} s CPU ({spent / plain_cpu:.0f}x); peak "
              f"memory {own:.0f} MB here ({before:.0f} MB before it), "
              f"{max(m or 0 for m in report.peak_mb):.0f} MB the largest rank")


if __name__ == "__main__":
    run_main(main)
