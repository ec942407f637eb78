"""Step 1 check: forward_torch.npy vs forward_paddle.npy -> forward_diff.log (exit 1 if not aligned).

Every key is held to max abs diff <= atol + rtol * max |torch| and mean abs diff <= the
guide's 1e-6 (bert_sst2/tolerances.py). The outputs of every watched module
(forward_modules_*.npy, recorded by the forward scripts: embeddings, each layer's
attention, feed-forward and output, pooler, classifier) must agree too: a bug in one
middle layer can shrink below the logits' tolerance by the time it reaches the logits
(a wrong epsilon in one LayerNorm moves MiniLM's logits by only 2.9e-7) but not at the
layer itself. On any failure, or with --diagnose, the per-module table is appended to
the log, naming the first module over tolerance. The module files are optional (results
written by your own scripts may not have them): without them the log says so in one line.
With forward_modules_torch64.npy (the torch model in float64), the log also gives align's verdict, the rule
measured on the model (portcheck/calibrated.py), in one line beside this tuned one, which decides the step.
"""
import argparse
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import diagnose, paths, steps, tolerances
from portcheck.core import calibrated, diff, record, report, same_run
from portcheck.core.errors import run_main
from portcheck.core.fileio import load_npy, save_npy

RUN = steps.bert_pair("forward").how()


def measured_rows(exact: dict, torch_data: dict, paddle_data: dict, torch_modules: dict, paddle_modules: dict):
    """align's rule (portcheck/calibrated.py) on the same keys: every module in run order, then the logits, which
    the guide's mean bound holds too."""
    rows = [calibrated.measure(k, torch_modules[k], exact.get(k), paddle_modules[k])
            for k in torch_modules if k in paddle_modules]
    return rows + [calibrated.measure(k, torch_data[k], exact.get(k), paddle_data[k], calibrated.MEAN_BOUND)
                   for k in torch_data if k in paddle_data]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--threshold", type=float, default=tolerances.LOGITS.atol, help="the logits' atol")
    ap.add_argument("--rtol", type=float, default=tolerances.LOGITS.rtol, help="the logits' rtol")
    ap.add_argument("--diagnose", action="store_true", help="append the per-module table even when aligned")
    ap.add_argument("--module_tolerance", type=float, default=tolerances.MODULE_OUTPUTS.atol, help="modules' atol")
    ap.add_argument("--module_rtol", type=float, default=tolerances.MODULE_OUTPUTS.rtol, help="modules' rtol")
    args = ap.parse_args()
    report.hand_in_folder(paths.log_reprod())  # the hand-in folder checked before the first write
    loosened = []  # flags above the measured tolerances: stated in the log, the verdict and SUMMARY.md
    logits_tol = tolerances.from_flags(tolerances.LOGITS, "the logits", loosened, args.threshold, args.rtol)
    module_tol = tolerances.from_flags(tolerances.MODULE_OUTPUTS, "the module outputs", loosened, args.module_tolerance,
                                       args.module_rtol, "--module_tolerance", "--module_rtol")
    rule = f"max diff <= {module_tol.atol:g} + {module_tol.rtol:g} * max|torch|, mean diff <= {module_tol.mean:g}"
    d = paths.step_dir(1)
    # every input first: a missing one stops the check before any log is rewritten
    torch_data, paddle_data = diff.load_pair(d / "forward_torch.npy", d / "forward_paddle.npy", how=RUN)
    module_files = [d / f"forward_modules_{fw}.npy" for fw in diff.SIDES]
    result = diff.compare(torch_data, paddle_data, default=logits_tol, name="forward")
    result.loosened = loosened
    same_run.check(result, d / "forward_torch.npy", d / "forward_paddle.npy")
    stats = []
    if all(f.is_file() for f in module_files):
        torch_modules, paddle_modules = diff.load_pair(*module_files)
        same_run.check(result, *module_files, name="module outputs same run")
        modules = diff.compare(torch_modules, paddle_modules, default=module_tol)
        first = diagnose.first_over(modules)
        result.findings.append(diff.Finding(
            "module outputs", first is None,
            f"first diverging module: {first}" if first else f"all {len(modules.keys)} within {rule}"))
        if not result.passed or args.diagnose:
            result.tables.append(diagnose.table(modules, f"layer-by-layer diagnosis ({rule}):"))
        exact_file = d / "forward_modules_torch64.npy"
        if exact_file.is_file() and not record.twin_problem(d / "forward_torch.npy", exact_file):  # align's measured rule beside the tuned one
            result.notes.append(calibrated.beside(measured_rows(load_npy(exact_file), torch_data, paddle_data,
                                                                torch_modules, paddle_modules), result.passed))
        # the module outputs are too big to hand in; their statistics let a reviewer re-check them
        for fw, data in zip(diff.SIDES, (torch_modules, paddle_modules)):
            stats.append(d / f"forward_modules_stats_{fw}.npy")
            save_npy(stats[-1], diagnose.summary(data))
            record.save_derived(d / f"forward_modules_{fw}.npy", stats[-1])
    else:
        result.notes.append("module outputs: forward_modules_*.npy not found, layer-by-layer check skipped")
    report.write(result, d / "forward_diff.log")
    report.hand_in(d / "forward_torch.npy", d / "forward_paddle.npy", d / "forward_diff.log", top=paths.log_reprod(), diagnostics=stats)
    sys.exit(0 if result.passed else 1)


if __name__ == "__main__":
    run_main(main)
