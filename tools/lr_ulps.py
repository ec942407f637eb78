"""How far apart, in float64 ulps, torch's lr schedulers and their Paddle counterparts run: the measurement behind
portcheck.core.tolerances.ULPS (the lr pair, Step 5's lr row and judge_backward's lr rows) and behind its bound's margin
to a planted schedule bug.

    python tools/lr_ulps.py              # writes docs/bench/rules.json's "lr" part and its page (seconds)
    python tools/lr_ulps.py --steps 20000

Every torch scheduler with a Paddle counterpart, each over a long schedule (--steps), read as a training loop
reads it: the lr of step i after i scheduler steps. Two correct ports compute the same schedule, one in closed
form (gamma ** k * lr), the other recursively (lr * gamma, k times), or with the same formula's terms in another
order: a few float64 roundings apart. A value's distance is counted in ulps of the schedule's own size (the
largest lr of the run, torch's: np.spacing of it), as the library's rules count an error against the size of the
terms, not of each result (a cosine ending at 0 is a difference of terms of the size of the base lr). Planted:
each schedule stepped once too often on the Paddle side (off by one step) and, where it has one, a decay factor
off by 1% (a wrong gamma); the table keeps each one's largest distance over the run, the distance that turns it
red.
"""
import argparse
import math

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
except ModuleNotFoundError:  # the project (which installs tools/) is not: the library alone
    raise SystemExit("error: this project's packages are not importable: run `pip install -r requirements.txt` "
                     "in its venv") from None

LONG = 100_000  # a long training's steps: the recursive forms' drift grows with them
LRS = (0.1, 0.05, 3e-4, 5e-5)  # base lrs: where an lr sits in its binade moves its roundings


def torch_lrs(make, steps, lr, metrics=None):
    import torch
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    sched = make(opt)
    out = []
    for i in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step(metrics[i]) if metrics is not None else sched.step()
    return np.array(out, dtype=np.float64)


def paddle_lrs(make, steps, metrics=None, ahead=0):
    sched = make()
    for _ in range(ahead):  # ReduceOnPlateau: one reading of the first metric too many
        sched.step(metrics[0]) if metrics is not None else sched.step()
    out = []
    for i in range(steps):
        out.append(sched.last_lr)
        sched.step(metrics[i]) if metrics is not None else sched.step()
    return np.array(out, dtype=np.float64)


def cases(steps, LR):
    """(name, torch scheduler factory, Paddle scheduler factory with its decay factor scaled by f, metrics)."""
    import paddle.optimizer.lr as P
    import torch.optim.lr_scheduler as T
    third = max(steps // 3, 1)
    plateau = np.abs(np.sin(np.arange(steps) / 7.0)) + 1.0 / (1 + np.arange(steps) / 50)  # a loss that stalls
    yield "StepLR / StepDecay (gamma 0.1)", lambda o: T.StepLR(o, 4, 0.1), lambda f=1: P.StepDecay(LR, 4, 0.1 * f), None
    yield "StepLR / StepDecay (gamma 0.5)", lambda o: T.StepLR(o, 30, 0.5), lambda f=1: P.StepDecay(LR, 30, 0.5 * f), None
    ms = [third // 4, third, 2 * third]
    yield ("MultiStepLR / MultiStepDecay", lambda o: T.MultiStepLR(o, ms, 0.1),
           lambda f=1: P.MultiStepDecay(LR, ms, 0.1 * f), None)
    yield ("MultiStepLR / PiecewiseDecay", lambda o: T.MultiStepLR(o, ms, 0.1),
           lambda f=1: P.PiecewiseDecay(ms, [LR * (0.1 * f) ** i for i in range(4)]), None)
    yield ("ExponentialLR / ExponentialDecay", lambda o: T.ExponentialLR(o, 0.999),
           lambda f=1: P.ExponentialDecay(LR, 1 - 0.001 * f), None)
    yield ("CosineAnnealingLR / CosineAnnealingDecay", lambda o: T.CosineAnnealingLR(o, steps, 0.0),
           lambda f=1: P.CosineAnnealingDecay(LR, steps, 0.0 + (f - 1) * LR), None)
    yield ("CosineAnnealingLR / CosineAnnealingDecay (eta_min, past T_max)", lambda o: T.CosineAnnealingLR(o, third, 1e-3),
           lambda f=1: P.CosineAnnealingDecay(LR, third, 1e-3 * f), None)
    yield ("CosineAnnealingWarmRestarts", lambda o: T.CosineAnnealingWarmRestarts(o, 50, 2, 1e-4),
           lambda f=1: P.CosineAnnealingWarmRestarts(LR, 50, 2, 1e-4 * f), None)
    yield ("LinearLR / LinearLR", lambda o: T.LinearLR(o, 0.25, 1.0, third),
           lambda f=1: P.LinearLR(LR, third, 0.25 * f, 1.0), None)
    yield ("OneCycleLR / OneCycleLR", lambda o: T.OneCycleLR(o, LR, total_steps=steps + 1),
           lambda f=1: P.OneCycleLR(LR, steps + 1, 25.0 * f, LR / 25 / 1e4), None)
    yield ("PolynomialLR / PolynomialDecay", lambda o: T.PolynomialLR(o, steps, 2.0),
           lambda f=1: P.PolynomialDecay(LR, steps, 0.0, 2.0 * f), None)
    yield ("CyclicLR / CyclicLR (triangular2)", lambda o: T.CyclicLR(o, 1e-3, LR, 40, mode="triangular2",
                                                                     cycle_momentum=False),
           lambda f=1: P.CyclicLR(1e-3, LR * f, 40, mode="triangular2"), None)
    yield ("CyclicLR / CyclicLR (exp_range)", lambda o: T.CyclicLR(o, 1e-3, LR, 40, mode="exp_range", gamma=0.999,
                                                                   cycle_momentum=False),
           lambda f=1: P.CyclicLR(1e-3, LR, 40, mode="exp_range", exp_gamma=1 - 0.001 * f), None)
    yield ("LambdaLR / LambdaDecay", lambda o: T.LambdaLR(o, lambda e: 0.95 ** (e // 10)),
           lambda f=1: P.LambdaDecay(LR, lambda e: (0.95 * f) ** (e // 10)), None)
    yield ("MultiplicativeLR / MultiplicativeDecay", lambda o: T.MultiplicativeLR(o, lambda e: 0.999),
           lambda f=1: P.MultiplicativeDecay(LR, lambda e: 1 - 0.001 * f), None)
    yield ("LambdaLR / InverseTimeDecay", lambda o: T.LambdaLR(o, lambda e: 1 / (1 + 0.5 * e)),
           lambda f=1: P.InverseTimeDecay(LR, 0.5 * f), None)
    yield ("LambdaLR / NaturalExpDecay", lambda o: T.LambdaLR(o, lambda e: math.exp(-0.001 * e)),
           lambda f=1: P.NaturalExpDecay(LR, 0.001 * f), None)
    yield ("LambdaLR / LinearWarmup", lambda o: T.LambdaLR(o, lambda e: min(1.0, e / 100)),
           lambda f=1: P.LinearWarmup(LR * f, 100, 0.0, LR * f), None)
    yield ("ReduceLROnPlateau / ReduceOnPlateau", lambda o: T.ReduceLROnPlateau(o, "min", 0.5, patience=3),
           lambda f=1: P.ReduceOnPlateau(LR, "min", 0.5 * f, patience=3), plateau)


def ulps(t, p):
    """Each step's |torch - paddle| in ulps of the schedule's size (np.spacing of its largest torch lr)."""
    return np.abs(t - p) / np.spacing(np.abs(t).max())


def measure(steps: int) -> dict:
    rows = {}
    for lr in LRS:
        for name, t_make, p_make, metrics in cases(steps, lr):
            t = torch_lrs(t_make, steps, lr, metrics)
            p = paddle_lrs(p_make, steps, metrics)
            d = ulps(t, p)
            own = np.abs(t - p) / np.spacing(np.maximum(np.abs(t), np.finfo(np.float64).tiny))
            ahead = ulps(t, paddle_lrs(p_make, steps, metrics, ahead=1))
            gamma = ulps(t, paddle_lrs(lambda: p_make(1.01), steps, metrics))
            row = rows.setdefault(name, {"pair": name, "clean_ulps": 0.0, "clean_steps_apart": 0,
                                         "clean_ulps_of_each_value": 0.0, "one_step_ahead_ulps": math.inf,
                                         "wrong_factor_ulps": math.inf})
            row["clean_ulps"] = max(row["clean_ulps"], float(d.max()))
            row["clean_steps_apart"] = max(row["clean_steps_apart"], int((d > 0).sum()))
            row["clean_ulps_of_each_value"] = max(row["clean_ulps_of_each_value"], float(own.max()))
            row["one_step_ahead_ulps"] = min(row["one_step_ahead_ulps"], float(ahead.max()))
            row["wrong_factor_ulps"] = min(row["wrong_factor_ulps"], float(gamma.max()))
    rows = list(rows.values())
    import paddle.optimizer.lr as P
    import torch.optim.lr_scheduler as T
    for name, t_make, p_make in (  # the forms that drift with the length: each step rounds the last one's lr again
            ("PolynomialLR / PolynomialDecay (power 1, a linear decay)", lambda o: T.PolynomialLR(o, LONG, 1.0),
             lambda lr: P.PolynomialDecay(lr, LONG, 0.0, 1.0)),
            ("PolynomialLR / PolynomialDecay (power 2)", lambda o: T.PolynomialLR(o, LONG, 2.0),
             lambda lr: P.PolynomialDecay(lr, LONG, 0.0, 2.0)),
            ("ExponentialLR / ExponentialDecay (gamma 0.99999)", lambda o: T.ExponentialLR(o, 0.99999),
             lambda lr: P.ExponentialDecay(lr, 0.99999))):
        worst = max(float(ulps(torch_lrs(t_make, LONG, lr), paddle_lrs(lambda: p_make(lr), LONG)).max())
                    for lr in (LRS[0], LRS[-1]))
        rows.append({"pair": f"{name}, {LONG:,} steps", "clean_ulps": worst})
    return {"steps": steps, "long_steps": LONG, "base_lrs": list(LRS), "rows": rows,
            "clean_max_ulps": max(r["clean_ulps"] for r in rows),
            "planted_min_ulps": min(min(r["one_step_ahead_ulps"], r["wrong_factor_ulps"]) for r in rows
                                    if "wrong_factor_ulps" in r),
            "bound_ulps": tolerances.ULPS}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--steps", type=int, default=3000, help="the schedule's length (default 3000)")
    ap.add_argument("--out", default=str(bench_rules.JSON),
                    help="the JSON to write (its 'lr' part; the page beside it)")
    args = ap.parse_args()
    if args.steps < 10:
        raise SystemExit("error: --steps must be at least 10")
    run = bench_doc.start()
    result = measure(args.steps)
    print(f"{'pair':62} {'clean':>8} {'(each)':>10} {'ahead':>12} {'factor':>12}")
    for r in result["rows"]:
        print(f"{r['pair']:62} {r['clean_ulps']:8.3g}" + (f" {r['clean_ulps_of_each_value']:10.3g} "
              f"{r['one_step_ahead_ulps']:12.4g} {r['wrong_factor_ulps']:12.4g}" if "wrong_factor_ulps" in r else ""))
    print(f"clean: at most {result['clean_max_ulps']:g} ulps; planted: at least {result['planted_min_ulps']:.4g} ulps;"
          f" bound {tolerances.ULPS} ulps")
    bench_rules.write_part(args.out, "lr", result, bench_doc.finish(run))


if __name__ == "__main__":
    run_main(main)
