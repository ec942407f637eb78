"""Step 5's measured figures (pipeline.training.NOISE, OWN_MULTIPLE's reach, the weight norm with dropout's own
masks), on the digits CNN with a conv bias before a BatchNorm of examples/digits_pair.py (tests/test_steps25.py's
too):

    python -m tools.step5_rules   # from the repository's root: docs/bench/rules.json's "step5" part, its page (minutes)

* each parameter's gradient norm as a share of the step's largest, over the 30 steps, with momentum SGD and with
  AdamW: the conv bias feeding the BatchNorm (rounding noise) against every other parameter;
* the weight norm's largest relative gap to torch's run, with dropout 0.5 and 0.2 on both sides drawing their own
  masks: torch with masks of two other seeds, Paddle, and Paddle missing its weight decay.
"""
import argparse
import json

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from portcheck.pipeline import training
from portcheck.core.errors import run_main

try:
    from tools import bench_doc, bench_rules  # the one writer of docs/bench/rules.json and its page
except ModuleNotFoundError:  # the project (which installs tools/) is not: the library alone
    raise SystemExit("error: this project's packages are not importable: run `pip install -r requirements.txt` "
                     "in its venv") from None


def gradients(train, t):
    out = {}
    for name, adamw in (("momentum SGD", False), ("AdamW", True)):
        log = train("torch", wd=t.ADAMW_WD if adamw else t.WD, adamw=adamw)[0].arrays()
        share = log["grad_norm"] / log["grad_norm"].max(axis=1, keepdims=True)
        names = training._names(log)
        out[name] = {n: {"largest": float(share[:, i].max()), "smallest": float(share[:, i].min())}
                     for i, n in enumerate(names)}
    return out


def dropout(train):
    out = {}
    for p in (0.5, 0.2):
        runs = {"torch": train("torch", both_dropout=p), "torch, masks of seed 1": train("torch", both_dropout=p, mask_seed=1),
                "torch, masks of seed 2": train("torch", both_dropout=p, mask_seed=2),
                "paddle": train("paddle", both_dropout=p), "paddle, weight decay missing": train("paddle", both_dropout=p, wd=0.0)}
        norm = {k: v[0].arrays()["weight_norm"] for k, v in runs.items()}
        out[str(p)] = {k: float((np.abs(v - norm["torch"]) / norm["torch"]).max()) for k, v in norm.items() if k != "torch"}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", default=str(bench_rules.JSON),
                    help="the JSON to write (its 'step5' part; the page beside it)")
    args = ap.parse_args()
    from examples import digits_pair as t
    run = bench_doc.start()
    result = {"model": "examples/digits_pair.py's digits CNN (conv, BatchNorm, ReLU, pool, dropout, linear), 30 steps",
              "gradient_share": gradients(t.train, t), "noise": training.NOISE,
              "weight_norm_gap_with_own_masks": dropout(t.train)}
    print(json.dumps(result, indent=1))
    bench_rules.write_part(args.out, "step5", result, bench_doc.finish(run))


if __name__ == "__main__":
    run_main(main)
