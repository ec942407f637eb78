"""How far apart, in float32 ulps, torch's and Paddle's float32 metrics run: the measurement behind
portcheck.core.tolerances.ULPS_FLOAT32 (the metric pair's rule for a value held in float32).

    python -m tools.metric_ulps              # writes docs/bench/rules.json's "metric_float32" part and its page
    python -m tools.metric_ulps --sets 300

Each metric as a user writes it in the framework the training runs in (tools/zoo/checks/values.py's metric_fn, the zoo's
own tensor code), computed in float32 on each side on random prediction sets (50 to 3,000 samples, 10 classes, 80%
right; binary scores rounded to 0.05, so that ties occur). A value's distance is counted in float32 ulps of the
larger of the two. Planted: one sample miscounted in the largest set (the smallest change a metric bug makes).
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from portcheck.core import tolerances
from portcheck.core.errors import run_main

try:
    from tools import bench_doc, bench_rules  # the one writer of docs/bench/rules.json and its page
    from tools.zoo.checks.values import metric_fn
except ModuleNotFoundError:  # the project (which installs tools/) is not: the library alone
    raise SystemExit("error: this project's packages are not importable: run `pip install -r requirements.txt` "
                     "in its venv") from None


METRICS = ("accuracy", "auc", "mcc", "macro f1", "micro f1", "weighted f1", "macro precision")
SCORES = ("accuracy", "auc", "mcc")  # these take binary scores, the others class predictions


def ulps_apart(a: float, b: float) -> float:
    return abs(a - b) / float(np.spacing(np.float32(max(abs(a), abs(b)))))


def measure(sets: int) -> dict:
    import paddle
    import torch
    worst = dict.fromkeys(METRICS, 0.0)
    planted = dict.fromkeys(METRICS, float("inf"))
    for seed in range(sets):
        rng = np.random.RandomState(seed)
        n = int(rng.randint(50, 3000))
        y = rng.randint(0, 10, n)
        p = np.where(rng.rand(n) < 0.8, y, rng.randint(0, 10, n))
        s = (np.round(rng.rand(n) * 20) / 20).astype("float32")
        yb = (rng.rand(n) < s).astype("int64")
        for name in METRICS:
            a, b = (s, yb) if name in SCORES else (p, y)
            value = lambda side, a, b: float(metric_fn(side, name, "float32", 10)(  # noqa: E731
                *((torch.from_numpy(a), torch.from_numpy(b)) if side == "torch" else
                  (paddle.to_tensor(a), paddle.to_tensor(b)))))
            t = value("torch", a, b)
            worst[name] = max(worst[name], ulps_apart(t, value("paddle", a, b)))
            if seed == 0:  # one label flipped: one sample counted otherwise
                wrong = b.copy()
                wrong[0] = (1 - wrong[0]) if name in SCORES else (wrong[0] + 1) % 10
                planted[name] = ulps_apart(t, value("paddle", a, wrong))
    rows = [{"metric": m, "clean_ulps": worst[m], "one_sample_ulps": planted[m]} for m in METRICS]
    return {"what": "torch's against Paddle's float32 metric (tools/zoo/checks/values.py's tensor code), in float32 ulps of "
                    "the value", "sets": sets, "rows": rows, "clean_max_ulps": max(worst.values()),
            "planted_min_ulps": min(planted.values()), "bound_ulps": tolerances.ULPS_FLOAT32}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--sets", type=int, default=100, help="random prediction sets (default 100)")
    ap.add_argument("--out", default=str(bench_rules.JSON),
                    help="the JSON to write (its 'metric_float32' part; the page beside it)")
    args = ap.parse_args()
    if args.sets < 1:
        raise SystemExit("error: --sets must be at least 1")
    run = bench_doc.start()
    result = measure(args.sets)
    print(f"{'metric':18} {'clean':>8} {'one sample':>12}")
    for r in result["rows"]:
        print(f"{r['metric']:18} {r['clean_ulps']:8.3g} {r['one_sample_ulps']:12.4g}")
    print(f"clean: at most {result['clean_max_ulps']:g} ulps; one sample: at least {result['planted_min_ulps']:.4g} "
          f"ulps; bound {tolerances.ULPS_FLOAT32} ulps")
    bench_rules.write_part(args.out, "metric_float32", result, bench_doc.finish(run))


if __name__ == "__main__":
    run_main(main)
