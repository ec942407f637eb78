"""What a tensor-parallel comparison costs: compare_split at degree 2 (two ranks under paddle.distributed.spawn,
gloo, on CPU; --degree 4: four, the key-value heads then 4 so that each rank holds one) on
examples/tiny_llama_split.py's Llama, against one plain forward of each side in one process (torch's model, and the
single-card Paddle model holding the same weights).

    nice -n 10 python tools/bench_split.py --isolate
    nice -n 10 python tools/bench_split.py --degree 4
    python tools/bench_split.py --page     # docs/bench/split.md again from split.json, nothing measured

Wall seconds, and CPU seconds (this process's and its ranks', every thread's: other work may load the machine, and
a wall clock then measures the load); a plain forward: the best of 3 after a warm-up. Peak resident memory: this
process's, and the largest rank's (each rank's own, report.peak_mb). A rank is a new interpreter importing Paddle
and paddlenlp: most of a small model's comparison is that start, measured alone in a process of its own. Each
degree's figures go to docs/bench/split.json (the other degrees' kept), the page (split.md) written from it.
"""
import argparse
import functools
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, allocator, before torch/paddle load)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

import numpy as np

from portcheck.core.errors import PipelineError, first_line, run_main
from tools import bench_doc

COMMAND = "python tools/bench_split.py"


def cpu() -> float:
    """CPU seconds of this process and of its children that ended."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn) -> tuple:
    wall, spent = time.perf_counter(), cpu()
    out = fn()
    return out, time.perf_counter() - wall, cpu() - spent


def rank_start() -> float:
    """CPU seconds of what each rank starts with: a new interpreter importing Paddle and paddlenlp."""
    return round(timed(lambda: subprocess.run([sys.executable, "-c", "import paddle, paddlenlp"], check=True,
                                              capture_output=True))[2], 2)


def measure(hidden: int, layers: int, degree: int, isolate: bool) -> dict:
    import paddle
    import torch
    from examples.tiny_llama_split import IDS, build, torch_and_state
    from portcheck.parallel.split import compare_split
    sizes = dict(hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                 **({"num_key_value_heads": 4} if degree == 4 else {}))
    single = []
    pt, state = torch_and_state(single, **sizes)
    ids = IDS["input_ids"]
    with torch.no_grad():
        pt(torch.from_numpy(ids))  # warm-up: the first kernels
        t_wall, t_cpu = min(timed(lambda: pt(torch.from_numpy(ids)))[1:] for _ in range(3))  # the best of 3
    with paddle.no_grad():
        single[0](paddle.to_tensor(ids))
        p_wall, p_cpu = min(timed(lambda: single[0](paddle.to_tensor(ids)))[1:] for _ in range(3))
    result = {"hidden": hidden, "layers": layers, "tokens": list(ids.shape), "rank start cpu": rank_start(),
              "plain": {"seconds": round(t_wall + p_wall, 3), "cpu": round(t_cpu + p_cpu, 3)},
              "peak mb before": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    for name, isolated in (("compare", False), ("isolated", True))[:2 if isolate else 1]:
        try:
            report, wall, spent = timed(lambda: compare_split(pt, functools.partial(build, **sizes), IDS, degree,
                                                              state, isolate=isolated))
        except PipelineError as e:  # a launch that stopped (on 2 cores, fleet's own setup can): said, not measured
            result[name] = {"stopped": first_line(e)}
            continue
        result[name] = {"passed": report.passed, "seconds": round(wall, 1), "cpu": round(spent, 1),
                        "peak mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                        "largest rank mb": round(max(m or 0 for m in report.peak_mb))}
    return result


def start(degree: str, r: dict) -> str:
    """A rank's start, and the share of the comparison's CPU seconds that its ranks' starts are."""
    said = f"{r['rank start cpu']:g} s of CPU"
    if "cpu" in r.get("compare", {}):
        said += (f", so degree {degree}'s {degree} starts are {int(degree) * r['rank start cpu']:.1f} s of "
                 f"`compare_split`'s {r['compare']['cpu']:g} s")
    return said


def render(results: dict) -> str:
    """The page (docs/bench/split.md), from the JSON beside it alone: one row per degree and comparison."""
    degrees = sorted(results, key=int)
    lines = ["# compare_split: a tensor-parallel comparison's cost", "",
             bench_doc.header([results[d].get(bench_doc.RUN) or {"command": COMMAND} for d in degrees], COMMAND), "",
             "examples/tiny_llama_split.py's Llama (4 heads; at degree 4 its key-value heads 4, one a rank), CPU, the "
             "ranks under `paddle.distributed.spawn` over gloo. A plain forward: one of each side in one process "
             "(torch's model, and the single-card Paddle model), the best of 3 after a warm-up. CPU seconds: this "
             "process's and its ranks', every thread's. Peak: resident memory, this process's and the largest "
             "rank's.", "",
             "| degree | hidden, layers, tokens | plain forward of each side | comparison | verdict | wall s | CPU s "
             "(x plain) | peak here (before it) | largest rank |", "|---|---|---|---|---|---|---|---|---|"]
    for d in degrees:
        r = results[d]
        for name in ("compare", "isolated"):
            f = r.get(name)
            if f is None:
                continue
            call = "`compare_split`" + (", `isolate=True`" if name == "isolated" else "")
            head = (f"| {d} | {r['hidden']}, {r['layers']}, {' x '.join(map(str, r['tokens']))} | "
                    f"{r['plain']['seconds']:.3f} s wall, {r['plain']['cpu']:.3f} s CPU | {call} |")
            if "stopped" in f:
                lines.append(f"{head} stopped: {f['stopped']} | - | - | - | - |")
                continue
            lines.append(f"{head} {'green' if f['passed'] else 'RED'} | {f['seconds']:g} | {f['cpu']:g} "
                         f"({f['cpu'] / r['plain']['cpu']:.0f}x) | {f['peak mb']} MB ({r['peak mb before']} MB) | "
                         f"{f['largest rank mb']} MB |")
    lines += ["", "A rank's start alone, a new interpreter importing Paddle and paddlenlp, measured beside each "
              "degree's run: " + "; ".join(start(d, results[d]) for d in degrees) + ". \"Before it\": this process with the two "
              "libraries and the torch model loaded."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--hidden", type=int, default=256, help="hidden size (default 256; intermediate 3x, 4 heads)")
    ap.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    ap.add_argument("--isolate", action="store_true", help="compare_split(..., isolate=True) too")
    ap.add_argument("--degree", type=int, default=2, choices=(2, 4), help="ranks (default 2; 4 heads: 2 or 4)")
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "split.md",
                    help="the page; its .json beside it (the other degrees' figures kept)")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    json_path = args.out.with_suffix(".json")
    if args.page:
        bench_doc.rewrite(args.out, json_path, render, COMMAND)
        return
    if args.hidden < 8 or args.hidden % 8 or args.layers < 1:
        raise PipelineError("--hidden must be a multiple of 8 (>= 8) and --layers >= 1")
    results = json.loads(json_path.read_text()) if json_path.is_file() else {}
    facts = bench_doc.start()
    results[str(args.degree)] = {**measure(args.hidden, args.layers, args.degree, args.isolate),
                                 bench_doc.RUN: bench_doc.finish(facts)}
    bench_doc.write(json_path, json.dumps(results, indent=1) + "\n")
    bench_doc.write(args.out, render(results))
    print(render(results))


if __name__ == "__main__":
    run_main(main)
