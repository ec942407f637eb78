"""Step 5's yardstick: torch trained against torch. pt_train.py runs three times, the same weights, data, order,
seeds and flags, only the order of fp32 additions inside the kernels differing: at one thread (the run Step 5
hands in), at two threads, and at one thread with oneDNN's kernels off (torch's own convolutions: another
implementation of the same ops, as Paddle's are). Each runs in a scratch copy of the example; the library's judge
compares each with the one-thread run as it compares torch with Paddle, and the figures are written to
examples/resnet18/docs/torch_vs_torch.json, which resnet.THRESHOLD and the READMEs are tested against.

    python examples/resnet18/Step5/torch_vs_torch.py

What a clean torch training differs from itself by is what no port can do better than: where torch's own runs
end with different counts of the 360 test images, the guide's 0.15% (equal counts) is out of any port's reach.
It takes about three times Step 5 (the run without oneDNN is the slow one). Nothing of the repository is written
but the JSON.
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
    import portcheck.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from examples.resnet18 import resnet
from portcheck import training
from portcheck.errors import PipelineError, require, run_main
from portcheck.fileio import atomic_write, load_npy
from portcheck.steps import core_shares

SCRIPT = f"{resnet.FOLDER}/Step5/pt_train.py"
# pt_train.py with oneDNN's kernels off: set after portcheck.runtime and torch load, before the script runs
NO_ONEDNN = ("import sys, runpy, portcheck.runtime, torch; torch.backends.mkldnn.enabled = False; "
             "sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__')")
# (name, OMP_NUM_THREADS, oneDNN on); the first is the reference, Step 5's torch side
RUNS = (("one thread", 1, True), ("two threads", 2, True), ("one thread, oneDNN off", 1, False))


def out_path() -> Path:
    return resnet.folder() / "docs" / "torch_vs_torch.json"


def start(scratch, name, threads, onednn, cores=None):
    home = Path(scratch) / name.replace(" ", "_").replace(",", "")
    shutil.copytree(resnet.torch_weight().parent, home / resnet.FOLDER / "weights")
    env = dict(os.environ, BERT_ALIGN_HOME=str(home), OMP_NUM_THREADS=str(threads))
    script = str(resnet.ROOT / SCRIPT)
    cmd = [sys.executable, script] if onednn else [sys.executable, "-c", NO_ONEDNN, script]
    print(f"$ OMP_NUM_THREADS={threads} python {SCRIPT}{'' if onednn else '   # oneDNN off'}"
          f"{f'   # cores {cores}' if cores else ''}", flush=True)
    proc = subprocess.Popen(cmd, env=env, preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
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


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    require(resnet.torch_weight(), resnet.EXPORT)
    homes = {}
    with tempfile.TemporaryDirectory() as scratch:
        # the two one-thread runs side by side, a core each, when there are two; then the two-thread run alone
        one, shares = [r for r in RUNS if r[1] == 1], core_shares(2) if len(os.sched_getaffinity(0)) >= 2 else None
        groups = [list(zip(one, shares))] if shares else [[(run, None)] for run in one]
        for group in groups + [[(run, None)] for run in RUNS if run[1] != 1]:
            started = []
            for run, cores in group:
                proc, homes[run[0]] = start(scratch, *run, cores=cores)
                started.append((proc, run[0]))
            finish(started)
        logs = {name: load_npy(homes[name] / resnet.FOLDER / "Step5" / f"{training.LOG}_torch.npy")
                for name, _, _ in RUNS}
    reference = RUNS[0][0]
    runs = {}
    for name, threads, onednn in RUNS:
        log = logs[name]
        acc, f1 = float(log[f"{training.METRIC}accuracy"][-1]), float(log[f"{training.METRIC}macro_f1"][-1])
        runs[name] = {"threads": threads, "onednn": onednn, "correct": int(round(acc * resnet.TEST)),
                      "accuracy": acc, "macro_f1": f1, "max_loss": float(log["loss"].max()),
                      "loss_parts_from_one_thread_at": None if name == reference else parts_at(logs[reference], log)}
        if name != reference:
            print(f"\ntorch '{reference}' against torch '{name}', judged as torch against Paddle (below, 'torch' is "
                  f"the first, 'paddle' the second):")
            for line in training.judge_training(logs[reference], log, resnet.THRESHOLD).lines():
                print(line)
    names = list(runs)
    gap = {k: max(abs(runs[a][k] - runs[b][k]) for a in names for b in names) for k in ("correct", "accuracy",
                                                                                          "macro_f1")}
    result = {"what": "torch's Step 5 training against itself: the same weights, data, order, seeds and flags, only "
                      "the order of fp32 additions differing (Step5/torch_vs_torch.py)",
              "train": resnet.TRAIN, "test_images": resnet.TEST, "runs": runs, "largest_gap": gap}
    atomic_write(out_path(), lambda tmp: Path(tmp).write_text(json.dumps(result, indent=1) + "\n"))
    print()
    for name, r in runs.items():
        print(f"{name}: {r['correct']} of {resnet.TEST} correct (accuracy {r['accuracy']:.6f}, macro F1 "
              f"{r['macro_f1']:.6f})")
    print(f"largest gap between torch's own runs: {gap['correct']} image(s), accuracy {gap['accuracy']:.6f}, "
          f"macro F1 {gap['macro_f1']:.6f}; the task's threshold (resnet.THRESHOLD) {resnet.THRESHOLD:.6f}")
    print(f"wrote {resnet.shown(out_path())}")


if __name__ == "__main__":
    run_main(main)
