"""Steps 4 and 5's rules measured (docs/bench/rules.md): the page, written from docs/bench/rules.json alone, and the
one writer of that JSON's parts. Each part is measured by its own tool, which records its run and writes the page
again; this command measures nothing.

    python tools/lr_ulps.py           # the "lr" part: portcheck.core.tolerances.ULPS (seconds)
    python -m tools.metric_ulps       # the "metric_float32" part: tolerances.ULPS_FLOAT32
    python -m tools.step5_rules       # the "step5" part: pipeline.training.NOISE, dropout's own masks (minutes)
    python -m tools.step5_own_kernels # the "own_kernels" part: torch's own runs of a count metric, kernels (minutes)
    python tools/bench_rules.py --page  # the page again from rules.json, nothing measured

The JSON's "by hand" part holds what was measured by hand (Step 5 on torch's own spread, its first loss, RMSprop
and Adamax), each section saying its run; the page prints it as it stands.
"""
import argparse
import json
from pathlib import Path

try:
    from portcheck.core.errors import require, run_main
    from portcheck.core.fileio import atomic_write
    from tools import bench_doc
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

JSON = bench_doc.PAGES / "rules.json"
COMMAND = "python tools/bench_rules.py --page"
# each part of the JSON and the command that measures it
PARTS = {"lr": "python tools/lr_ulps.py", "metric_float32": "python -m tools.metric_ulps",
         "step5": "python -m tools.step5_rules", "own_kernels": "python -m tools.step5_own_kernels"}
BY_HAND = "by hand"


def write_part(out, key: str, result: dict, run: dict = None):
    """The JSON's `key` part replaced by `result` (with its run's facts, bench_doc.start/finish), the other parts
    (another tool's) kept; the page beside it written again."""
    out = Path(out)
    doc = json.loads(out.read_text()) if out.is_file() else {}
    doc[key] = {**result, **({bench_doc.RUN: run} if run else {})}
    atomic_write(out, lambda tmp: Path(tmp).write_text(json.dumps(doc, indent=1) + "\n"))
    if all(k in doc for k in (*PARTS, BY_HAND)):
        bench_doc.write(out.with_suffix(".md"), render(doc))
    print(f"wrote {out.relative_to(bench_doc.ROOT) if out.is_relative_to(bench_doc.ROOT) else out}")


def sci(v: float, digits: int = 1) -> str:
    """A figure in scientific notation as the page writes it: 7.2e10, 3.9e-7."""
    mantissa, exp = f"{v:.{digits}e}".split("e")
    return f"{mantissa}e{int(exp)}"


def lr_lines(lr: dict) -> list:
    short = [r for r in lr["rows"] if "wrong_factor_ulps" in r]
    long = [r for r in lr["rows"] if "wrong_factor_ulps" not in r]
    bound, clean, planted = lr["bound_ulps"], lr["clean_max_ulps"], lr["planted_min_ulps"]
    lines = ["## An lr: a closed form against a recursive one", "",
             "torch's `StepLR` computes `gamma ** k * lr` in closed form at a milestone and `lr * gamma` otherwise; "
             "Paddle's `StepDecay` the same in another order: `3.0000000000000004e-05` against "
             "`3.0000000000000008e-05` at step 4 (gamma 0.1). `MultiStepLR` against `PiecewiseDecay` with the values "
             "a user types: `0.010000000000000002` against `0.01`. `LambdaLR` against `InverseTimeDecay`: "
             "`0.04000000000000001` against `0.04`.", "",
             "A value's distance is counted in ulps of the schedule's largest lr (`np.spacing` of it). As every rule "
             "of the project, it is an error against the size of the terms, not of each result: a cosine ending at 0 "
             "is a difference of terms the size of the base lr.", "",
             f"Every torch scheduler with a Paddle counterpart, {lr['steps']:,} steps at base lrs "
             + ", ".join(f"{x:g}" for x in lr["base_lrs"][:-1]) + f" and {lr['base_lrs'][-1]:g}, read as a training "
             "loop reads it. Planted: Paddle's schedule stepped once before the first step, and its decay factor off "
             "by 1%:", "",
             "| pair | clean, ulps of the largest lr | one step ahead | factor off by 1% |", "|---|---|---|---|"]
    lines += [f"| {r['pair']} | {r['clean_ulps']:.2g} | {sci(r['one_step_ahead_ulps'])} | "
              f"{sci(r['wrong_factor_ulps'])} |" for r in short]
    lines += ["", f"The recursive forms drift with the length, each step rounding the last one's lr again. Over "
              f"{lr['long_steps']:,} steps: " + "; ".join(f"{r['pair'].rsplit(', ', 1)[0]}: {r['clean_ulps']:,.4g} ulps"
                                                          for r in long) + ".",
              f"`ULPS = {bound}`: {bound / clean:.1f} times the longest drift measured, {sci(planted / bound)} times "
              f"under the smallest plant ({sci(planted)} ulps).", "",
              f"The line says the rule: \"every value equal within {bound} ulps of the pair's largest value (two "
              "correct ports round an lr's closed and recursive forms, or a metric's sum, differently)\". A plant's "
              "line gives the gap and the allowance.", "",
              "A float64 macro-F1 whose per-class terms are summed in another order differs by an ulp in part of "
              "random prediction sets (tests/test_rules.py): the guide's `metric` pair takes the same rule. The `data` "
              "pair stays bit for bit: the same samples through the same transforms.", ""]
    return lines


def metric_lines(metric: dict, ulps: int) -> list:
    bound, eps = metric["bound_ulps"], 2.0 ** -23  # float32's ulp at 1.0
    lines = ["A metric a framework computes on its float32 tensors is held in float32 (`data.record_metric` keeps its "
             f"dtype), and its rounding is float32's: `ULPS_FLOAT32 = {bound}` float32 ulps of the pair's largest "
             f"value, since {ulps} of them would pass a sample miscounted.", "",
             f"{metric['what'][0].upper()}{metric['what'][1:]}, on {metric['sets']} random prediction sets of 50 to "
             f"3,000 samples. Planted: one sample counted otherwise:", "",
             "| metric | clean, ulps | one sample, ulps |", "|---|---|---|"]
    lines += [f"| {r['metric']} | {r['clean_ulps']:g} | {r['one_sample_ulps']:,.0f} |" for r in metric["rows"]]
    lines += ["", f"Clean at most {metric['clean_max_ulps']:g} ulps apart (MCC's square root, F1's divisions); one "
              f"sample counted otherwise moves the value at least {metric['planted_min_ulps']:,.0f} ulps. {bound} ulps "
              f"of a metric of 1.0 is {sci(bound * eps)}: one sample in {round(1 / (bound * eps), -5):,.0f}.", "",
              "A float32 value on one side and a float64 one on the other is a dtype difference, red.", "",
              "The BERT pipeline's own Step 4 (`pipeline/Step4`) keeps its declared `bert_sst2.tolerances.LR`, exact: "
              "both of its sides evaluate the same Python double expressions for every lr, and they are bit for bit "
              "equal.", ""]
    return lines


def noise_figures(step5: dict) -> dict:
    """The rounding-noise parameters' largest gradient share (each optimizer) and every other's smallest."""
    shares = step5["gradient_share"]
    noisy = {n for s in shares.values() for n, v in s.items() if v["largest"] < step5["noise"]}
    return {"noise": {opt: max(s[n]["largest"] for n in noisy) for opt, s in shares.items()},
            "real": min(v["smallest"] for s in shares.values() for n, v in s.items() if n not in noisy)}


def step5_lines(step5: dict, by_hand: dict) -> list:
    f = noise_figures(step5)
    noise = sorted(f["noise"].items(), key=lambda kv: -kv[1])
    lines = ["## A parameter whose gradient is rounding noise", "",
             "A conv bias feeding a BatchNorm (torch's default `bias=True`) has a gradient of exactly 0 in exact "
             f"arithmetic: the BatchNorm subtracts it again. fp32 leaves rounding. On {step5['model']}, it is at most "
             f"{sci(noise[0][1])} of the step's largest parameter gradient ({noise[0][0]}; "
             + "; ".join(f"{o}: {sci(v)}" for o, v in noise[1:]) + f"), while every other parameter's is at least "
             f"{f['real']:.2g} of it.", "", *by_hand["noise"], "",
             "## Step 5 with each framework's own dropout masks", "",
             "Dropout drawing its own masks on each side makes the two trainings two samples of it. On the digits CNN "
             "(30 steps, lr 0.2, momentum SGD, weight decay 5e-4), the largest relative weight-norm gap to torch's "
             "run:", ""]
    gaps = step5["weight_norm_gap_with_own_masks"]
    runs = list(next(iter(gaps.values())))
    lines += ["| dropout | " + " | ".join(r.replace("paddle", "Paddle") for r in runs) + " |",
              "|---" * (len(runs) + 1) + "|"]
    lines += [f"| {p} | " + " | ".join(f"{g[r]:.2%}" for r in runs) + " |" for p, g in gaps.items()]
    return lines + ["", *by_hand["dropout"], ""]


def own_kernels_lines(own: dict) -> list:
    """torch's own runs of a count metric, moved one ulp, under each kernel: which end away from torch's run."""
    n, base = own["test_images"], own["torch"]
    said = lambda threads, onednn: f"{threads} thread{'s' if threads > 1 else ''}{'' if onednn else ', oneDNN off'}"
    kernels = [said(*k) for k in own["kernels"]]
    at_own = kernels.index(said(own["threads"], True)) if said(own["threads"], True) in kernels else None
    away = [[a != base for a in row] for row in own["final"]]
    here = sum(row[at_own] for row in away) if at_own is not None else None
    others = sum(sum(r for j, r in enumerate(row) if j != at_own) for row in away)
    count = len(own["seeds"]) * (len(kernels) - (at_own is not None))
    images = lambda a: f"{round(a * n)}"
    zoo = [own["final"][s][s] for s in range(min(len(kernels), len(own["final"])))]  # seed s + 1, the s-th kernel
    lines = ["## Step 5's final metric: torch's own runs over kernels", "",
             f"A count metric on {n} test images moves by one image, {1 / n:g}, over the guide's 0.0015: the bound "
             "holds only where the counts are equal. On " + own["model"] + f", at {said(own['threads'], True)}, "
             f"torch's run counts {images(base)} right and Paddle's {images(own['paddle'])}. The images right in "
             "torch's runs "
             "from its weights moved one ulp (`backward.moved_one_ulp`), each seed under each kernel:", "",
             "| seed | " + " | ".join(kernels) + " |", "|---" * (len(kernels) + 1) + "|"]
    lines += [f"| {s} | " + " | ".join(images(a) for a in row) + " |" for s, row in zip(own["seeds"], own["final"])]
    lines += ["", (f"Under this run's own kernels ({kernels[at_own]}) {here} of {len(own['seeds'])} moved runs end "
                   "away from torch's run; " if at_own is not None else "") +
              f"under the other kernels, {others} of {count}. The weights moved one ulp alone are no yardstick here: "
              "the count flips with the order of a sum (a conv bias before a BatchNorm under AdamW moves +-lr on the "
              "sign of its rounding). The zoo's own runs take seed s under the s-th kernel "
              "(`tools/zoo/checks/training.py`): " + ", ".join(images(a) for a in zoo) + ". Where they end an image "
              "apart, the final metric's threshold is the task's plus that image, and the row says the task's bound "
              "is one no port can meet there.", ""]
    return lines


def render(doc: dict) -> str:
    """The page, from the JSON alone."""
    by_hand = doc[BY_HAND]
    sections = by_hand["sections"]
    head = " ".join(bench_doc.header(doc[k].get(bench_doc.RUN), c) for k, c in PARTS.items())
    lines = ["# Steps 4 and 5's rules, measured", "",
             head + f" The \"{BY_HAND}\" part's figures were {by_hand['how']}.", "",
             "The measurements behind the rules of [rules.md](../rules.md): `portcheck.core.tolerances.ULPS` (the `lr` pair, "
             "Step 5's lr row, `judge_backward`'s lr rows and the guide's `metric` pair) and `ULPS_FLOAT32`, "
             "`portcheck.pipeline.training.NOISE` (a parameter whose gradient is rounding noise), Step 5's weight norm "
             "with dropout's own masks and with torch's own runs (`judge_training(..., own=)`), its first step's loss, "
             "and the optimizers red by design.", ""]
    lines += lr_lines(doc["lr"]) + metric_lines(doc["metric_float32"], doc["lr"]["bound_ulps"])
    lines += step5_lines(doc["step5"], sections)
    for title, key in (("Step 5's final metric on torch's own spread", "own"),
                       ("Step 5's first step's loss, while the runs are deterministic", "first loss"),
                       ("RMSprop: red by design, said in one line", "rmsprop")):
        lines += [f"## {title}", "", *sections[key], ""]
        if key == "own":
            lines += own_kernels_lines(doc["own_kernels"])
    return "\n".join(lines).rstrip("\n") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "rules.md",
                    help="the page (Markdown), written from the .json beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    if not args.page:
        ap.error(f"this command measures nothing: run one of {', '.join(PARTS.values())} (each writes its part "
                 "and the page), or give --page")
    source = args.out.with_suffix(".json")
    require(source, PARTS["lr"])
    bench_doc.write(args.out, render(json.loads(source.read_text())))


if __name__ == "__main__":
    run_main(main)
