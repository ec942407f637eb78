"""Dropout benchmark: how far apart two correct ports land by chance, and what shared masks cost.

    python tools/bench_dropout.py --data_dir ../shared/data/SST-2                    # 3 seeds, 100 steps
    python tools/bench_dropout.py --data_dir ../shared/data/SST-2 --seeds 4 5 --append     # more seeds, same table

Not a test: it measures, it does not assert. For every seed it fine-tunes both
frameworks with their own dropout (Step 5's default) on the first --train_limit
training rows for --max_steps steps and evaluates on the whole dev set, then does
the same with --shared_dropout. It reports per seed the dev-accuracy difference
(in sentences) and the largest per-step loss difference of each mode, and the
train sentences/s of each mode and framework (shared vs own dropout, same run, same
machine load). Writes docs/bench/bench_dropout.{json,md}; --page writes the .md again from the .json.

Runs the real pipeline/Step5 scripts in a temporary BERT_ALIGN_HOME holding a copy of
the exported weights, head and fake data (run the setup scripts first).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from bert_sst2 import paths
from bert_sst2.flags import TrainArgs
from portcheck.core.errors import PipelineError, require, run_main
from portcheck.core.fileio import load_npy
from tools import bench_doc

ROOT = paths.ROOT
FRAMEWORKS = {"torch": "pipeline/Step5/pt_train.py", "paddle": "pipeline/Step5/pd_train.py"}
DEV_SENTENCES = 872  # SST-2 dev: accuracy differences are reported in sentences


def step5_args(args, seed: int, shared: bool) -> TrainArgs:
    return TrainArgs(data_dir=args.data_dir, train_limit=args.train_limit, max_steps=args.max_steps, lr=args.lr,
                     seed=seed, log_every=args.max_steps, shared_dropout=shared)


def train(home: Path, fw: str, args, seed: int, shared: bool) -> dict:
    cmd = [sys.executable, str(ROOT / FRAMEWORKS[fw]), *step5_args(args, seed, shared).to_argv()]
    proc = subprocess.run(cmd, env=dict(os.environ, BERT_ALIGN_HOME=str(home)), capture_output=True, text=True)
    if proc.returncode:
        raise PipelineError(f"{' '.join(cmd[1:])} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    out = home / "pipeline" / "Step5"
    curves = load_npy(out / f"train_curves_{fw}.npy")
    return {"acc": float(load_npy(out / f"train_align_{fw}.npy")["acc"]), "loss": curves["loss"].astype("float64"),
            "train_sent_per_s": float(curves["train_sent_per_s"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--data_dir", type=Path, default=paths.SST2_DIR)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--train_limit", type=int, default=3200)
    ap.add_argument("--max_steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "bench_dropout", help="writes OUT.json and OUT.md")
    ap.add_argument("--append", action="store_true", help="keep the rows already in --out's JSON (same budget "
                    "only) and add these seeds")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    if args.page:
        require(args.out.with_suffix(".json"), "python tools/bench_dropout.py")
        bench_doc.write(args.out.with_suffix(".md"), render(json.loads(args.out.with_suffix(".json").read_text())))
        return
    run = bench_doc.start()
    problems = sorted({p for seed in args.seeds for p in step5_args(args, seed, True).problems()})
    if problems:  # every seed's Step 5 flags, by Step 5's own rules, before an hour of training
        raise PipelineError("; ".join(problems))
    rows = previous_rows(args) if args.append else []
    if rows:  # earlier seeds: their run's facts kept beside this one's
        run = [*earlier_runs(args), run]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        require(paths.work() / "weights" / "paddle_weight.pdparams", "python weights/torch2paddle.py")
        require(paths.work() / "classifier_weights" / "classifier_weights.pdparams",
                      "python classifier_weights/generate_classifier_weights.py")
        for folder in ("weights", "classifier_weights", "fake_data"):
            shutil.copytree(paths.work() / folder, home / folder)
        for seed in args.seeds:
            row = {"seed": seed}
            for mode, shared in (("own", False), ("shared", True)):
                r = {fw: train(home, fw, args, seed, shared) for fw in FRAMEWORKS}
                row[mode] = {
                    "acc_torch": r["torch"]["acc"], "acc_paddle": r["paddle"]["acc"],
                    "acc_diff": abs(r["torch"]["acc"] - r["paddle"]["acc"]),
                    "max_loss_diff": float(np.abs(r["torch"]["loss"] - r["paddle"]["loss"]).max()),
                    "train_sent_per_s_torch": r["torch"]["train_sent_per_s"],
                    "train_sent_per_s_paddle": r["paddle"]["train_sent_per_s"],
                }
                print(f"seed {seed} {mode:6s} dropout: acc torch {r['torch']['acc']:.5f} paddle {r['paddle']['acc']:.5f} "
                      f"diff {row[mode]['acc_diff'] * DEV_SENTENCES:.0f} sentences; max loss diff {row[mode]['max_loss_diff']:.2e}; "
                      f"train sent/s torch {r['torch']['train_sent_per_s']:.1f} paddle {r['paddle']['train_sent_per_s']:.1f}",
                      flush=True)
            rows.append(row)
    write(rows, args, [*run[:-1], bench_doc.finish(run[-1])] if isinstance(run, list) else bench_doc.finish(run))


def earlier_runs(args) -> list:
    """The facts of the runs --append keeps the rows of (none for rows measured before they were recorded)."""
    was = json.loads(args.out.with_suffix(".json").read_text()).get(bench_doc.RUN) or {}
    return was if isinstance(was, list) else [was]  # {}: rows whose facts were not recorded


def previous_rows(args) -> list:
    path = args.out.with_suffix(".json")
    if not path.is_file():
        return []
    old = json.loads(path.read_text())
    budget = ("train_limit", "max_steps", "lr")
    was = {k: old["args"][k] for k in budget}
    if any(was[k] != str(getattr(args, k)) for k in budget):
        raise PipelineError(f"--append: {path} was run with {was}; drop --append or use the same budget")
    return [r for r in old["rows"] if r["seed"] not in args.seeds]


def write(rows, args, run):
    # paths as the repository shows them: no machine's absolute path in a committed file
    data = {"args": {k: paths.shown(v) if isinstance(v, Path) else str(v) for k, v in vars(args).items()},
            "rows": rows, bench_doc.RUN: run}
    bench_doc.write(args.out.with_suffix(".json"), json.dumps(data, indent=1))
    text = render(data)
    bench_doc.write(args.out.with_suffix(".md"), text)
    print(text)


def render(data: dict) -> str:
    """The page, from the JSON (docs/bench/bench_dropout.json) alone."""
    args, rows = data["args"], data["rows"]
    command = (f"python tools/bench_dropout.py --seeds {' '.join(str(r['seed']) for r in rows)} "
               f"--train_limit {args['train_limit']} --max_steps {args['max_steps']} --lr {args['lr']}")
    lines = ["# bench_dropout: two correct ports' dev accuracy apart by chance, and shared masks' cost", "",
             bench_doc.header(data.get(bench_doc.RUN), command), "",
             f"MiniLM fine-tuned on the first rows of SST-2 train, evaluated on all {DEV_SENTENCES} dev sentences; "
             "own = each framework's dropout RNG, shared = `--shared_dropout`. One dev sentence = 0.00115.", "",
             "| seed | mode | acc torch | acc paddle | diff (sentences) | max per-step loss diff | train sent/s torch | paddle |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for mode in ("own", "shared"):
            m = row[mode]
            lines.append(f"| {row['seed']} | {mode} | {m['acc_torch']:.5f} | {m['acc_paddle']:.5f} | "
                         f"{m['acc_diff'] * DEV_SENTENCES:.0f} | {m['max_loss_diff']:.2e} | "
                         f"{m['train_sent_per_s_torch']:.1f} | {m['train_sent_per_s_paddle']:.1f} |")
    cost = {fw: np.mean([r["shared"][f"train_sent_per_s_{fw}"] / r["own"][f"train_sent_per_s_{fw}"] for r in rows])
            for fw in FRAMEWORKS}
    gap = {mode: [round(r[mode]["acc_diff"] * DEV_SENTENCES) for r in rows] for mode in ("own", "shared")}
    lines += ["", "Dev-accuracy difference in sentences over seeds: "
              + "; ".join(f"{mode} dropout {sorted(v)} (mean {np.mean(v):.1f}, max {max(v)})" for mode, v in gap.items()),
              "", "Shared masks' cost, train sentences/s shared / own, mean over seeds: "
              + ", ".join(f"{fw} {v:.3f}" for fw, v in cost.items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    run_main(main)
