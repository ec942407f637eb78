"""Step 5's yardstick: torch trained against torch on this machine. pt_train.py runs again MOVED times (a quick run's
twice), the same weights, data, order, seeds and flags, each from the weights moved one ulp up or down, the signs
drawn from its own seed (portcheck.backward.moved_one_ulp: the size of rounding fp32 makes, after which each run
takes whatever branches another correct run may take, as a port's or another CPU's kernels do). Each runs in a
scratch copy of the example, at one thread, two at a time on two cores. Each run's training log is kept beside Step
5's as Step5/torch_own_<run>.npy with its run record, and check_step5.py judges the Paddle run at the task's
threshold widened by how far these runs end from Step 5's torch run (portcheck.training.judge_and_log(own=)); where
that run is already there, each is compared with it here too.

    python examples/resnet18/Step5/torch_vs_torch.py                  # run_all.py runs it before Step 5
    python examples/resnet18/Step5/torch_vs_torch.py --max_steps 4    # a quick Step 5's runs: the first two
    python examples/resnet18/Step5/torch_vs_torch.py --record         # after pt_train.py: docs/torch_vs_torch.json

What a clean torch training differs from itself by is what no port can do better than: this training parts from
itself within a few steps, and its final count of 360 test images scatters by several images (docs/cpus.md).
--record writes the figures resnet.THRESHOLD and the READMEs are tested against; without it nothing of the
repository is written.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from examples.resnet18 import resnet
from portcheck.core import record
from portcheck.pipeline import training
from portcheck.core.errors import PipelineError, require, run_main
from portcheck.core.fileio import atomic_write, load_npy, writable
from portcheck.pipeline.steps import core_shares

SCRIPT = f"{resnet.FOLDER}/Step5/pt_train.py"
REFERENCE = "one thread"  # Step 5's torch side, run by pt_train.py
# Six: under ATEN_CPU_CAPABILITY=default the correct Paddle port ends 6 images from torch, and so does torch's fifth
# moved run (docs/cpus.md); two at a time they keep Step 5 within 5 minutes on two cores (docs/run_all_time.json)
MOVED = 6
RUNS = tuple((f"moved {seed}", seed) for seed in range(1, MOVED + 1))  # (name, the seed of its signs)
# a quick run (--max_steps) shows the pipeline works, it measures nothing: two runs, one round on two cores, are
# its yardstick (the six took three rounds, over a third of the suite's quick run_all.py)
QUICK_RUNS = RUNS[:2]
# pt_train.py from moved weights: resnet.torch_model wrapped after the script's imports load and before it runs, the
# script itself unchanged
PRELUDE = """import sys, runpy, portcheck.runtime
from examples.resnet18 import resnet
from portcheck.gradients.against_itself import moved_one_ulp
seed, sys.argv, load = int(sys.argv[1]), sys.argv[2:], resnet.torch_model
def moved():
    model, weights = load()
    moved_one_ulp(model, seed)
    return model, weights  # the fingerprint of the weights as exported: the same training, moved by rounding
resnet.torch_model = moved
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def runs_of(max_steps=None) -> tuple:
    """The moved runs this script makes: RUNS for the whole training, QUICK_RUNS for a quick one."""
    return QUICK_RUNS if max_steps else RUNS


def out_path() -> Path:
    return resnet.folder() / "docs" / "torch_vs_torch.json"


def start(scratch, name, seed, flags, cores=None):
    home = Path(scratch) / resnet.torch_own(name).stem
    shutil.copytree(resnet.torch_weight().parent, home / resnet.FOLDER / "weights")
    env = dict(os.environ, BERT_ALIGN_HOME=str(home), OMP_NUM_THREADS="1")
    print(f"$ python {SCRIPT} {' '.join(flags)}   # weights moved one ulp, seed {seed}"
          f"{f'   # cores {cores}' if cores else ''}", flush=True)
    cmd = [sys.executable, "-c", PRELUDE, str(seed), str(resnet.ROOT / SCRIPT), *flags]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
    return proc, home


def finish(started):
    """Wait for runs started together; the first to fail ends the others (its error is the one reported)."""
    try:
        while True:
            failed = [(proc.returncode, name) for proc, name in started if proc.poll()]
            if failed:
                raise PipelineError(f"the torch run '{failed[0][1]}' exited {failed[0][0]}: its error is above")
            if all(proc.returncode == 0 for proc, _ in started):
                return
            time.sleep(0.5)
    finally:
        for proc, _ in started:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()


def parts_at(a, b):
    """The first step whose losses differ beyond training.LOSS_PARTS, or None."""
    gap = np.abs(a["loss"] - b["loss"])
    over = np.flatnonzero(~(gap <= training.LOSS_PARTS))
    return int(over[0]) if over.size else None


def keep(home: Path, name: str):
    """The run's training log, copied beside Step 5's as resnet.torch_own(name), with its run record bound to the
    copy (record.save_derived)."""
    log, kept = home / resnet.FOLDER / "Step5" / f"{training.LOG}_torch.npy", resnet.torch_own(name)
    atomic_write(kept, lambda tmp: shutil.copyfile(log, tmp))
    record.save_derived(log, kept)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--max_steps", type=resnet.positive, help="the runs of a quick Step 5 (pt_train.py's flag)")
    ap.add_argument("--record", action="store_true", help="also write examples/resnet18/docs/torch_vs_torch.json "
                    "(the whole training only, after pt_train.py)")
    args = ap.parse_args()
    if args.record and args.max_steps:
        raise PipelineError("--record measures the whole training: leave out --max_steps")
    reference = resnet.step_dir(5) / f"{training.LOG}_torch.npy"
    require(resnet.torch_weight(), resnet.EXPORT)
    if args.record:
        require(reference, f"python {SCRIPT}")
    flags, made = (["--max_steps", str(args.max_steps)] if args.max_steps else []), runs_of(args.max_steps)
    for name, _ in made:  # every file kept, checked as a place to write before the first run
        for path in (resnet.torch_own(name), record.path_for(resnet.torch_own(name))):
            writable(path)
    with tempfile.TemporaryDirectory() as scratch:
        # two at a time, a core each, when there are two cores
        n = 2 if len(os.sched_getaffinity(0)) >= 2 else 1
        for group in (list(zip(made[i:i + n], core_shares(len(made[i:i + n])))) for i in range(0, len(made), n)):
            started = []
            for run, cores in group:
                proc, home = start(scratch, *run, flags, cores=cores)
                started.append((proc, run[0], home))
            finish([(proc, name) for proc, name, _ in started])
            for _, name, home in started:
                keep(home, name)
    logs = {name: load_npy(resnet.torch_own(name)) for name, _ in made}
    ours = record.load(reference) if reference.is_file() else None
    same = ours is not None and not record.differences(ours, record.load(resnet.torch_own(made[0][0])))
    if args.record and not same:  # a stale reference: pt_train.py ran with other weights or flags
        raise PipelineError(f"{resnet.shown(reference)} is not this training's (its run record differs from the "
                            f"runs'): run `python {SCRIPT}` again, then this")
    if same:
        logs = {REFERENCE: load_npy(reference), **logs}
    runs = {}
    for name, seed in ((REFERENCE, 0), *made) if same else made:
        log = logs[name]
        acc, f1 = float(log[f"{training.METRIC}accuracy"][-1]), float(log[f"{training.METRIC}macro_f1"][-1])
        runs[name] = {"moved_seed": seed,
                      "correct": int(round(acc * resnet.TEST)), "accuracy": acc, "macro_f1": f1,
                      "max_loss": float(log["loss"].max()),
                      "loss_parts_from_one_thread_at": parts_at(logs[REFERENCE], log) if same and name != REFERENCE
                      else None}
    names = list(runs)
    gap = {k: max(abs(runs[a][k] - runs[b][k]) for a in names for b in names) for k in ("correct", "accuracy",
                                                                                          "macro_f1")}
    print()
    for name, r in runs.items():
        print(f"{name}: {r['correct']} of {resnet.TEST} correct (accuracy {r['accuracy']:.6f}, macro F1 "
              f"{r['macro_f1']:.6f})")
    print(f"largest gap between torch's own runs{'' if same else ' (no Step 5 torch run of this training yet)'}: "
          f"{gap['correct']} image(s), accuracy {gap['accuracy']:.6f}, macro F1 {gap['macro_f1']:.6f}; the task's "
          f"threshold (resnet.THRESHOLD) {resnet.THRESHOLD:.6f}; kept beside Step 5's for check_step5.py: "
          f"{resnet.shown(resnet.step_dir(5))}/{resnet.torch_own()}")
    if args.record:
        result = {"what": "torch's Step 5 training against itself: the same weights, data, order, seeds and flags, "
                          "only the weights moved one ulp (Step5/torch_vs_torch.py)",
                  "train": resnet.TRAIN, "test_images": resnet.TEST, "runs": runs, "largest_gap": gap}
        atomic_write(out_path(), lambda tmp: Path(tmp).write_text(json.dumps(result, indent=1) + "\n"))
        print(f"wrote {resnet.shown(out_path())}")


if __name__ == "__main__":
    run_main(main)
