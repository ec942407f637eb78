"""Run the ResNet-18 example end to end: export and convert the weights, then Steps 1, 3 and 4, each side and
its check, from the table below (portcheck.steps.run, the runner BERT's pipeline/run_all.py uses).

    python examples/resnet18/run_all.py        # then: python pipeline/check_log_reprod.py examples/resnet18/log_reprod

Each script runs in its own process, in order; the first that fails stops the run (exit 1) and says which.
The hand-in is examples/resnet18/log_reprod/ (the guide's pairs, their diff logs, diagnostics/).
"""
import argparse
import sys

try:
    import portcheck.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import steps
from portcheck.errors import run_main

F = resnet.FOLDER
SPECS = (  # the step table: which script writes each side of each pair, and the check judging them
    steps.StepSpec(1, "Step1 forward", (steps.Pair("forward", f"{F}/Step1/pt_forward.py", f"{F}/Step1/pd_forward.py"),),
                   f"{F}/Step1/check_step1.py"),
    steps.StepSpec(3, "Step3 loss", (steps.Pair("loss", f"{F}/Step3/pt_loss.py", f"{F}/Step3/pd_loss.py"),),
                   f"{F}/Step3/check_step3.py"),
    steps.StepSpec(4, "Step4 lr + backward", tuple(steps.Pair(name, f"{F}/Step4/pt_bp.py", f"{F}/Step4/pd_bp.py")
                                                   for name in ("lr", "bp_align")), f"{F}/Step4/check_step4.py"),
)
TABLE = [steps.Step("weights", 0, [[f"{F}/export_weights.py"], [f"{F}/convert_weights.py"]]),
         *(steps.Step.of(spec) for spec in SPECS)]

def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    results, failed = steps.run(TABLE, resnet.ROOT, summary="each step's diff log",
                                hand_in=resnet.log_reprod())
    print()
    for r in results:
        print(f"{r.step.name}: {r.status} ({r.seconds:.1f} s)")
    print(failed or f"every step green; the hand-in: {resnet.shown(resnet.log_reprod())}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    run_main(main)
