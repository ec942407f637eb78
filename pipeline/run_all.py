"""The whole pipeline in one command: weights, Steps 1-5, log_reprod/ and its SUMMARY.md.

    python pipeline/run_all.py                                   # offline; Step 5 as a smoke run on demo data
    python pipeline/run_all.py --data_dir ../shared/data/SST-2   # the real SST-2 training alignment
    python pipeline/run_all.py --data_dir ../shared/data/SST-2 --train_limit 3200 --max_steps 100

Each script runs in its own process, in order, except Step 5's two trainings: with two or more
cores they run side by side, each pinned to its own half of the cores with as many threads
(--one_at_a_time: one after the other, each on every core). The first step that fails stops
the run with its message; results of the steps before it stay in place, and
SUMMARY.md says what passed, what failed and what did not run. Exit 0 only if
every check is green.
"""
import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import data, paths
from bert_sst2.flags import TrainArgs
from bert_sst2.steps import BERT, bert_step
from bert_sst2.twins import train
from bert_sst2.twins.weights import check_vocab, read_config
from portcheck.core import report
from portcheck.core.errors import PipelineError, require, run_main
from portcheck.core.fileio import atomic_write, writable
from portcheck.pipeline.steps import SideBySide, Step, core_shares, run


def steps(args) -> list:
    export = ["weights/torch_bert_weights.py"] + (["--model_dir", str(args.model_dir)] if args.model_dir else []) \
        + (["--random_init", "--config", str(args.random_init)] if args.random_init else [])
    data = ["--data_dir", str(args.data_dir)] if args.data_dir else []
    train = step5_args(args).to_argv(forwarded_only=True)
    with_data = {"data": data, "metric": data, "train_align": train}  # the pairs whose scripts read the data
    trainers = Step.of(bert_step(5), with_data).scripts[:-1]  # torch's and Paddle's training, not the check
    if not args.one_at_a_time and len(os.sched_getaffinity(0)) > 1:
        trainers = [SideBySide(trainers)]
    table = [Step("setup", 0, [export, ["weights/torch2paddle.py"], ["classifier_weights/generate_classifier_weights.py"],
                               ["fake_data/gen_fake_data.py"]])]
    table += [Step.of(spec, with_data) for spec in BERT[:-1]]
    step5 = bert_step(5)
    table.append(Step.of(step5, name=step5.name + (" (SMOKE RUN on demo data: not evidence)" if not args.data_dir else "")
                         + (" (re-checked: trained by the run in train_*.log)" if args.recheck else ""),
                         scripts=[] if args.recheck else trainers))
    return table


def rule(k: dict) -> str:
    """The bound a key's max diff was held to, as the verdict file states it."""
    if k["rtol"] == 0:
        return f"allowed {k['allowed']:g}" + (" (exact)" if k["atol"] == 0 else "")
    return f"allowed {k['allowed']:.3g} = atol {k['atol']:g} + rtol {k['rtol']:g} * max|torch| {k['scale']:.3g}"


def brief(verdict: dict, max_keys: int = 6) -> list:
    """A check's verdict in brief: failing keys, then the largest diffs, then its findings and notes."""
    keys = verdict["keys"]
    failed = [k for k in keys if not k["passed"]]
    shown = failed + sorted((k for k in keys if k["passed"]), key=lambda k: -k["max"])
    lines = [f"{k['key']}: {'FAILED ' + '; '.join(k['problems']) if not k['passed'] else 'passed'}, "
             f"max diff {k['max']}, {rule(k)}, mean diff {k['mean']:.3g}"
             + (f" (bound {k['mean_bound']:g})" if k["mean_bound"] is not None else "") for k in shown[:max_keys]]
    if len(keys) > max_keys:
        lines.append(f"... {len(keys) - max_keys} more keys ({len(keys) - len(failed)} of {len(keys)} passed)")
    lines += [f"{f['name']}: {'passed' if f['passed'] else 'FAILED'}, {f['detail']}" for f in verdict["findings"]]
    lines += [n.replace("\t", "    ") for n in verdict["notes"]]  # indented lines belong to the line above
    lines += [f"loosened by a flag: {flag}" for flag in verdict.get("loosened", [])]
    return lines + ["diff check passed" if verdict["passed"] else "diff check failed"]


def step5_args(args) -> TrainArgs:
    """Step 5's flags as run_all gives them: those it forwards, the demo set without --data_dir."""
    return TrainArgs.from_namespace(args, demo=not args.data_dir)


def validate(args):
    """Refuse bad flags and missing inputs up front: a run that would fail at Step 2 or 5 must not
    first re-export the weights and rewrite Step 1 and SUMMARY.md."""
    if args.data_dir:
        args.data_dir = args.data_dir.expanduser()
        for split in data.SPLITS:  # every row: a bad label must not wait until Step 2
            data.read_tsv(data.split_file(split, args.data_dir))
    if args.model_dir and not (args.model_dir.expanduser() / "config.json").is_file():
        raise PipelineError(f"--model_dir {args.model_dir} has no config.json: pass a Hugging Face BERT folder")
    if args.model_dir:
        check_vocab(args.model_dir.expanduser() / "vocab.txt", read_config(args.model_dir.expanduser() / "config.json"),
                    "pass a BERT folder with its vocab.txt as --model_dir")
    if args.random_init:
        if args.model_dir:
            raise PipelineError("--model_dir and --random_init exclude each other")
        read_config(require(args.random_init, "pass an existing config.json as --random_init"))
    for folder in (paths.weights_dir(), paths.classifier_dir(), paths.fake_data_dir(), paths.log_reprod(),
                   *(paths.step_dir(n) for n in range(1, 6))):
        writable(folder, folder=True)  # a folder that is a file, a dangling link: refused before Step 1 runs
    writable(paths.log_reprod() / "SUMMARY.md")
    train.validate(step5_args(args))


def command_line(args) -> list:
    """This run's flags, with paths as paths.shown() gives them."""
    shown = []
    for arg in sys.argv[1:]:
        shown.append(paths.shown(arg) if Path(arg).expanduser().is_absolute() else arg)
    return shown


def versions() -> str:
    names = ["paddlepaddle", "paddlenlp", "torch", "transformers", "datasets", "tokenizers", "numpy", "reprod_log"]
    found = []
    for n in names:
        try:
            found.append(f"{n} {metadata.version(n)}")
        except metadata.PackageNotFoundError:
            found.append(f"{n} (not installed)")
    return f"Python {platform.python_version()}, " + ", ".join(found)


def trainers_placement(args) -> str:
    if args.recheck:
        return "not trained by this run (--recheck)"
    if isinstance(steps(args)[-1].scripts[0], SideBySide):
        return "the two trainings side by side, on cores " + " and ".join(
            ",".join(map(str, share)) for share in core_shares(2))
    return "one training after the other, each on every core"


def write_summary(results, args, started):
    source = paths.weights_dir() / "source.json"
    model = json.loads(source.read_text())["source"] if source.is_file() else "(weights not exported)"
    lines = ["# log_reprod summary", "",
             f"Made by `python pipeline/run_all.py {' '.join(command_line(args))}` on {time.strftime('%Y-%m-%d %H:%M')}, "
             f"{(time.time() - started) / 60:.1f} min.", "",
             f"- model: {model}",
             f"- data: {'GLUE SST-2 TSVs in ' + paths.shown(args.data_dir) if args.data_dir else 'demo.tsv (Step 5 is a smoke run, not evidence)'}",
             f"- versions: {versions()}",
             f"- machine: {platform.machine()}, {len(os.sched_getaffinity(0))} cores",
             f"- Step 5: {trainers_placement(args)}", "",
             "| step | result | seconds |", "|---|---|---|"]
    lines += [f"| {r.step.name} | {r.status} | {r.seconds:.0f} |" for r in results]
    for r in results:
        # a step that broke before its check has no fresh verdict: show none rather than an old one
        for name in r.step.checks if r.checked else ():
            verdict = report.read_verdict(paths.step_dir(r.step.number) / f"{name}_diff.json")
            lines += ["", f"## {r.step.name}: `{name}_diff.log`", "```", *brief(verdict), "```"]
    atomic_write(paths.log_reprod() / "SUMMARY.md", lambda tmp: Path(tmp).write_text("\n".join(lines) + "\n"))


def page_of(folder: Path) -> str:
    """The hand-in's page, as the reviewer's check of it derives it (check_log_reprod.py, beside this script:
    write_page); its line."""
    spec = importlib.util.spec_from_file_location("check_log_reprod", Path(__file__).with_name("check_log_reprod.py"))
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    return checker.write_page(folder)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--model_dir", type=Path, help="a local HF BERT folder instead of the pip-shipped MiniLM")
    ap.add_argument("--random_init", type=Path, metavar="CONFIG",
                    help="seeded random weights from this config.json (no pretrained weights; e.g. tests/tiny_config.json)")
    TrainArgs.add_arguments(ap, forwarded_only=True)  # Step 5's flags that run_all passes on (--data_dir: Step 2 too)
    ap.add_argument("--recheck", action="store_true", help="rerun Steps 1-4 and every check, but reuse Step 5's "
                    "existing training results (after updating this tool: no new hour of training)")
    ap.add_argument("--one_at_a_time", action="store_true", help="Step 5's two trainings one after the other, "
                    "each on every core (default with 2+ cores: side by side, each on half of them)")
    args = ap.parse_args()
    if args.data_dir:  # the steps' hand-in is log_reprod/ (paths.log_reprod); a demo run's, log_reprod_demo/
        os.environ[paths.REAL_DATA] = "1"
    validate(args)  # every flag and input before anything is written

    started = time.time()
    results, failed = run(steps(args), paths.ROOT, lambda results: write_summary(results, args, started),
                          summary=paths.shown(paths.log_reprod() / "SUMMARY.md"), hand_in=paths.log_reprod())
    write_summary(results, args, started)
    if paths.log_reprod().is_dir():  # its page beside the pictures, as the reviewer's check derives it
        print(page_of(paths.log_reprod()))
    print(f"\n{'FAILED: ' + failed if failed else 'all checks passed'}; summary in {paths.log_reprod() / 'SUMMARY.md'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    run_main(main)
