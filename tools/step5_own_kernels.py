"""Step 5's yardstick for a count metric, measured (docs/bench/rules.md): torch's own runs of the zoo's AdamW digits
CNN (tools/zoo/cases.py: a conv bias before a BatchNorm, 200 test images), each from its weights moved one ulp by a
seed, under each of the zoo's kernels (tools/zoo/checks/training.KERNELS: 1 to 4 threads, oneDNN on and off), their
final accuracy beside torch's run and Paddle's at this process's threads:

    python -m tools.step5_own_kernels   # from the repository's root: docs/bench/rules.json's "own_kernels" part
                                        # and its page (minutes)
"""
import argparse

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, allocator, before torch/paddle load)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import json

from portcheck.core.errors import run_main

try:
    from tools import bench_doc, bench_rules  # the one writer of docs/bench/rules.json and its page
except ModuleNotFoundError:  # the project (which installs tools/) is not: the library alone
    raise SystemExit("error: this project's packages are not importable: run `pip install -r requirements.txt` "
                     "in its venv") from None

CASE = "training, conv bias before BatchNorm, AdamW"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", default=str(bench_rules.JSON),
                    help="the JSON to write (its 'own_kernels' part; the page beside it)")
    ap.add_argument("--seeds", type=int, default=12, help="moved runs under each kernel (seeds 1 to this)")
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error(f"--seeds must be at least 1, got {args.seeds}")
    import torch
    from portcheck.pipeline.training import torch_kernels
    from portcheck.pipeline.training_log import METRIC
    from tools.zoo import cases
    from tools.zoo.checks import training
    case, key = cases.by_name()[CASE], f"{METRIC}accuracy"
    run = bench_doc.start(env=("OMP_NUM_THREADS", "ATEN_CPU_CAPABILITY"))
    final = lambda side, **kw: float(training.train_one(side, case, case[side], None, **kw).arrays()[key][-1])
    result = {"model": f"the zoo's \"{CASE}\" ({case['train']} training images, {case['epochs']} epochs)",
              "test_images": case["test"], "threads": torch.get_num_threads(), "torch": final("torch"),
              "paddle": final("paddle"), "kernels": [list(k) for k in training.KERNELS],
              "seeds": list(range(1, args.seeds + 1)), "final": []}
    for seed in result["seeds"]:
        row = []
        for kernel in training.KERNELS:
            with torch_kernels(*kernel):
                row.append(final("torch", moved=seed))
        result["final"].append(row)
        print(seed, " ".join(f"{a:.3f}" for a in row), flush=True)
    print(json.dumps({k: v for k, v in result.items() if k != "final"}))
    bench_rules.write_part(args.out, "own_kernels", result, bench_doc.finish(run))


if __name__ == "__main__":
    run_main(main)
