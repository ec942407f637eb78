"""Run the ResNet-18 example end to end: export and convert the weights, then Steps 1 to 5, each side and its
check, from the table below (portcheck.steps.run, the runner BERT's pipeline/run_all.py uses).

    python examples/resnet18/run_all.py        # then: python pipeline/check_log_reprod.py examples/resnet18/log_reprod
    python examples/resnet18/run_all.py --max_steps 4    # quick: Step 5 trains 4 steps, Step 4 three; two own runs
    python examples/resnet18/run_all.py --timing         # also write each step's time to docs/run_all_time.json

The hand-in holds no time (a rerun writes the same bytes); --timing writes the run's times apart, to
examples/resnet18/docs/run_all_time.json, the figures the READMEs cite, when every step is green.

Each script runs in its own process, in order; the first that fails stops the run (exit 1) and says which.
The hand-in is examples/resnet18/log_reprod/ (the guide's pairs, their diff logs, diagnostics/). Where one is
already (a fresh clone's committed hand-in), it is left as it was: this run hands in beside it, to
examples/resnet18/log_reprod_rerun/, and one line says whether it reproduced the earlier one bit for bit (torch's
fp32 kernels differ between CPUs, and so do its files); --replace hands in to log_reprod/ itself.
"""
import argparse
import json
import os
import platform
import shutil
import sys
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck.pipeline import steps
from portcheck.core.errors import run_main
from portcheck.core.fileio import atomic_write

F = resnet.FOLDER
SPECS = (  # the step table: which script writes each side of each pair, and the check judging them
    steps.StepSpec(1, "Step1 forward", (steps.Pair("forward", f"{F}/Step1/pt_forward.py", f"{F}/Step1/pd_forward.py"),),
                   f"{F}/Step1/check_step1.py"),
    steps.StepSpec(2, "Step2 data + metric", (steps.Pair("data", f"{F}/Step2/pt_data.py", f"{F}/Step2/pd_data.py"),
                                              steps.Pair("metric", f"{F}/Step2/pt_metric.py", f"{F}/Step2/pd_metric.py")),
                   f"{F}/Step2/check_step2.py"),
    steps.StepSpec(3, "Step3 loss", (steps.Pair("loss", f"{F}/Step3/pt_loss.py", f"{F}/Step3/pd_loss.py"),),
                   f"{F}/Step3/check_step3.py"),
    steps.StepSpec(4, "Step4 lr + backward", tuple(steps.Pair(name, f"{F}/Step4/pt_bp.py", f"{F}/Step4/pd_bp.py")
                                                   for name in ("lr", "bp_align")), f"{F}/Step4/check_step4.py"),
    steps.StepSpec(5, "Step5 training", (steps.Pair("train_align", f"{F}/Step5/pt_train.py", f"{F}/Step5/pd_train.py"),),
                   f"{F}/Step5/check_step5.py"),
)


# Step 5's yardstick, run before it: torch's own runs of the training on this machine, which check_step5.py widens
# its threshold by (a step of its own: the training's time is Step 5's)
OWN = f"{F}/Step5/torch_vs_torch.py"


def table(max_steps=None, hand_in=None) -> list:
    """The runner's steps: torch's own runs of Step 5's training (OWN), then the two trainings side by side, each on
    its own core (portcheck.steps.SideBySide); each check hands in to `hand_in` (default:
    examples/resnet18/log_reprod)."""
    flags, train = ["--max_steps", str(max_steps)] if max_steps else [], SPECS[-1].pair("train_align")
    # a quick run's Step 4 takes resnet.QUICK_BP_STEPS steps (each pair's scripts given the flag: they are the same two)
    quick_bp = {pair.name: ["--steps", str(resnet.QUICK_BP_STEPS)] for pair in SPECS[3].pairs} if max_steps else None
    out = [steps.Step("weights", 0, [[f"{F}/export_weights.py"], [f"{F}/convert_weights.py"]]),
           *(steps.Step.of(spec, quick_bp if spec.number == 4 else None) for spec in SPECS[:-1]),
           steps.Step("Step5 torch's own runs", 0, [[OWN, *flags]]),
           steps.Step.of(SPECS[-1], scripts=[steps.SideBySide([[train.torch, *flags], [train.paddle, *flags]])])]
    for step in (step for step in out if step.checks) if hand_in else ():  # the checks hand in
        step.scripts[-1] = [*step.scripts[-1], "--hand_in", str(hand_in)]
    return out


def files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}


def settle(earlier: Path, rerun: Path) -> str:
    """One line on a run handed in beside an earlier hand-in (a fresh clone's committed one), which is left as it
    was: the same bits (the rerun's copy removed), or which files differ and where this run's hand-in is."""
    old, new = files(earlier), files(rerun)
    # the arrays first: a run's logs and records also hold the time they were written (a fresh clone writes anew)
    differ = sorted((name for name in set(old) | set(new)
                     if name not in old or name not in new or old[name].read_bytes() != new[name].read_bytes()),
                    key=lambda name: (not name.endswith(".npy"), name))
    if not differ:
        shutil.rmtree(rerun)
        return f"this run reproduced {resnet.shown(earlier)} bit for bit"
    arrays = sum(name.endswith(".npy") for name in differ)
    return (f"this run did not reproduce {resnet.shown(earlier)} bit for bit ({len(differ)} of {len(old)} files differ, "
            f"{arrays} of them arrays: "
            f"{', '.join(differ[:3])}{' ...' if len(differ) > 3 else ''}; torch's fp32 kernels differ between CPUs, "
            f"and a log or run record holds the time it was written): left as it was, this run's hand-in is "
            f"{resnet.shown(rerun)} (--replace hands in to {resnet.shown(earlier)} itself)")


def timing_path() -> Path:
    return resnet.folder() / "docs" / "run_all_time.json"


def machine() -> dict:
    """The machine a time was taken on, and its load then: a figure of time is no figure without them (the same
    run took 106 s with the cores to itself and 733 s beside other work)."""
    cpu = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")), "")
    return {"cpu": cpu or platform.machine(), "cores": len(os.sched_getaffinity(0)),
            "load_1min": round(os.getloadavg()[0], 2)}


def _cpuinfo() -> list:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:  # not Linux
        return []


def write_timing(results, max_steps, before: dict):
    """Each step's wall time in seconds, Step 5's and the whole run's, with what they depend on: the machine, its
    load before and after the run (the 1-minute load average: other work on the cores slows every step) and the
    training settings."""
    seconds = {r.step.name: round(r.seconds, 1) for r in results}
    after = machine()
    timing = {"cores": before["cores"], "cpu": before["cpu"], "load_before": before["load_1min"],
              "load_after": after["load_1min"], "train": {**resnet.TRAIN, "max_steps": max_steps},
              "seconds": seconds, "step5_seconds": seconds[SPECS[-1].name],
              "total_seconds": round(sum(r.seconds for r in results), 1)}
    atomic_write(timing_path(), lambda tmp: Path(tmp).write_text(json.dumps(timing, indent=1) + "\n"))
    print(f"wrote {resnet.shown(timing_path())}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--max_steps", type=resnet.positive, help="a quick run: Step 5 stops each training after "
                    f"this many steps (torch's own runs: two), Step 4 takes {resnet.QUICK_BP_STEPS}")
    ap.add_argument("--timing", action="store_true", help="write each step's time to "
                    "examples/resnet18/docs/run_all_time.json (when every step is green)")
    ap.add_argument("--replace", action="store_true", help="hand in to examples/resnet18/log_reprod even where an "
                    "earlier hand-in is (the committed one): by default it is left as it was and this run hands in "
                    "beside it, to examples/resnet18/log_reprod_rerun")
    args = ap.parse_args()
    before = machine()
    earlier = resnet.log_reprod()
    beside = not args.replace and earlier.is_dir() and any(earlier.iterdir())
    hand_in = resnet.rerun_folder() if beside else earlier
    hand_in.mkdir(parents=True, exist_ok=True)
    results, failed = steps.run(table(args.max_steps, hand_in if beside else None), resnet.ROOT,
                                summary="each step's diff log", hand_in=hand_in)
    print()
    for r in results:
        print(f"{r.step.name}: {r.status} ({r.seconds:.1f} s)")
    print(failed or f"every step green; the hand-in: {resnet.shown(hand_in)}")
    if beside and hand_in.is_dir():
        print(settle(earlier, hand_in))
    if args.timing and not failed:
        write_timing(results, args.max_steps, before)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    run_main(main)
