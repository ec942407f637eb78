"""Step 1 check: the logits (the guide's pair) and every module's output, torch against Paddle -> forward_diff.log.

The logits pass the guide's rule (mean |diff| <= 1e-6, reprod_log's) and the rule measured on the model
(max |diff| <= 16 x torch's own fp32 error + a floor: portcheck/calibrated.py); every module's output
(records/forward_*.npy, each side's whole record), paired through RESNET_MAP, is held to the measured rule too, and
the table names the first module out of tolerance whose input was within: where the two models part. Both sides'
run records must show the same weights and inputs. The pair, its log and records go into
examples/resnet18/log_reprod/. Exit 1 when red.
"""
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import Side, judge_forward
from portcheck.core import record
from portcheck.pipeline import handin
from portcheck.core.errors import require, run_main
from portcheck.core.fileio import load_npy


def main():
    args = resnet.check_args(__doc__)
    d = resnet.step_dir(1)
    modules = [Side(d).whole_record("forward", fw) for fw in ("torch", "paddle")]  # every module's output
    for path, side in zip(modules, ("pt", "pd")):
        require(path, f"python {resnet.FOLDER}/Step1/{side}_forward.py")
    same, detail = record.same_run(*modules)
    # judged here rather than by Handin.judge: through RESNET_MAP (the example of writing a map), the whole records'
    # own same-run line in the log
    report = judge_forward(load_npy(modules[0]), load_npy(modules[1]), resnet.RESNET_MAP)
    where = report.first_diverging
    tables = [f"module outputs same run: {'passed' if same else 'FAILED'}, {detail}",
              f"module outputs: {'passed' if report.passed else 'FAILED'}"
              + (f", first diverging module: {where}" if where else f", all {len(report.paired)} paired module outputs within the measured rule"),
              *report.table().splitlines()]
    if report.stopped:  # no logits to hand in: the modules say where the two part
        print("\n".join(tables[1:]))
        sys.exit(1)
    verdict = handin.judge_and_log(d, "forward", tables=tables, top=resnet.log_reprod(args.hand_in))
    passed = verdict.passed and report.passed and bool(same)
    print(tables[1])
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    run_main(main)
