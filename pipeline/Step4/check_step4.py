"""Step 4 check: the lr schedules (lr_*.npy -> lr_diff.log) and the backward pass with AdamW
(bp_align_*.npy -> bp_align_diff.log). Exit 1 if either is not aligned.
"""
import argparse
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from bert_sst2 import diagnose, keys, paths, steps, tolerances
from portcheck.core import diff, record, report, same_run
from portcheck.core.errors import run_main
from portcheck.core.fileio import load_npy, save_npy

RUN = {pair.name: pair.how() for pair in steps.bert_step(4).pairs}
BP_FLAGS = ("loss", "grad", "update")  # --<kind>_threshold / --<kind>_rtol, one per keys.BP_FAMILIES


def lr_notes(torch_data, paddle_data) -> list:
    notes = []
    for key in (k for k in torch_data if k in paddle_data and torch_data[k].shape == paddle_data[k].shape):
        t, p = torch_data[key], paddle_data[key]
        differ = np.flatnonzero(t != p)
        notes.append(f"{key}: {len(t)} steps, lr at step 0 / {int(t.argmax())} (peak) / {len(t) - 1}: "
                     f"{t[0]:.6e} / {t.max():.6e} / {t[-1]:.6e}; "
                     + (f"first differs at step {differ[0]}: torch {t[differ[0]]:.9e}, paddle {p[differ[0]]:.9e}"
                        if differ.size else "identical at every step"))
    return notes


def bp_report(result, torch_data, paddle_data, full_table=False, n=5):
    """The key of each kind closest to its tolerance, the n worst gradients, both loss curves, and on a failure
    (or full_table) every gradient, worst first, with the first and last over tolerance in forward order."""
    compared = [k for k in result.keys if k.compared]
    closest = [(family, max((k for k in compared if family.owns(k.key)), key=lambda k: k.used))
               for family in keys.BP_FAMILIES if any(family.owns(k.key) for k in compared)]
    result.notes.append("closest to its tolerance (max abs diff / allowed): " + ", ".join(
        f"{family.pattern} {k.max:.3e} / {k.allowed:.3e} = {k.used:.2f} ({k.key})" for family, k in closest))
    worst = sorted((k for k in compared if keys.GRAD.owns(k.key)), key=lambda k: -k.used)[:n]
    result.notes.append(f"worst {len(worst)} gradients by max abs diff / allowed:")
    result.notes += [f"\t{k.key}: {k.max:.3e} / {k.allowed:.3e} = {k.used:.2f} "
                     f"(largest |grad| {k.scale:.3e}, relative {k.relative:.2e})" for k in worst]
    grads = diff.CheckResult("gradients", [k for k in result.keys if keys.GRAD.owns(k.key)])
    first = diagnose.first_over(grads)
    if not result.passed or full_table:
        result.tables.append(diagnose.table(grads, "gradient table, worst first:", worst_first=True))
        result.notes.append(f"first parameter over tolerance in forward order: {first}" if first
                            else "no gradient over tolerance")
    if first:
        # The backward pass reaches parameters in reverse forward order and a bug there corrupts every
        # gradient it flows into afterwards: the last one over tolerance in forward order is where it starts.
        # A forward bug disturbs every gradient; Step 1's module table places those.
        result.notes.append("last parameter over tolerance in forward order (the first the backward pass "
                            f"reaches): {diagnose.last_over(grads)}")
    losses = [k for k in keys.STEP_LOSS.ordered(torch_data) if k in paddle_data]
    if losses:
        result.notes.append("loss per iteration (torch/paddle): " + ", ".join(
            f"{float(torch_data[k].reshape(-1)[0]):.7f}/{float(paddle_data[k].reshape(-1)[0]):.7f}" for k in losses))


ALL_KEYS = "_all_keys_diff.log"  # diagnostics/bp_align_all_keys_diff.log: Step 4's log, every gradient's diff


def handed_in_log(top, name: str, tols: dict, loosened=()) -> diff.CheckResult:
    """<top>/<name>_diff.log judged from the handed-in pair itself (losses and updates; the gradients are in
    diagnostics/), so that the log states exactly the keys a reviewer can re-derive from the files beside it."""
    spec, below = tolerances.PAIRS[name], top / report.DIAGNOSTICS
    files = [top / f"{name}_{side}.npy" for side in diff.SIDES]
    result = diff.compare(*(load_npy(f) for f in files), tols, spec.default, name=name)
    result.loosened = list(loosened)
    passed, detail = record.same_run(*files, tuple(below / record.path_for(f).name for f in files))
    result.findings.insert(0, diff.Finding("same run", bool(passed), detail))
    result.notes.append(f"every key's diff, the gradients' with them: {report.DIAGNOSTICS}/{name}{ALL_KEYS}")
    log = report.write(result, top / f"{name}_diff.log", verdict=False)
    report.write_verdict(result, below / report.verdict_path(log).name)
    # written here, not by report.hand_in: listed in the hand-in's manifest as its other files are
    record.list_handed(top, below, [log, below / report.verdict_path(log).name, below / f"{name}{ALL_KEYS}"])
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    for kind, tol in zip(BP_FLAGS, (tolerances.BP_LOSS, tolerances.BP_GRAD, tolerances.BP_UPDATE)):
        ap.add_argument(f"--{kind}_threshold", type=float, default=tol.atol, help=f"{kind}_*'s atol")
        ap.add_argument(f"--{kind}_rtol", type=float, default=tol.rtol, help=f"{kind}_*'s rtol")
    ap.add_argument("--only", choices=list(RUN), help="check one part (default: both)")
    ap.add_argument("--diagnose", action="store_true", help="log the full gradient table even when aligned")
    args = ap.parse_args()
    report.hand_in_folder(paths.log_reprod())  # the hand-in folder checked before the first write
    loosened = []  # flags above the measured tolerances: stated in bp_align's log, its verdict and SUMMARY.md
    measured = tolerances.PAIRS["bp_align"].tolerances
    bp_tols = {family.pattern: tolerances.from_flags(measured[family.pattern], family.pattern, loosened,
                                                     getattr(args, f"{kind}_threshold"), getattr(args, f"{kind}_rtol"),
                                                     f"--{kind}_threshold", f"--{kind}_rtol")
               for kind, family in zip(BP_FLAGS, keys.BP_FAMILIES)}
    d = paths.step_dir(4)
    parts = [args.only] if args.only else list(RUN)
    # every input first: a missing one stops the check before any log is rewritten
    pairs = {name: diff.load_pair(d / f"{name}_torch.npy", d / f"{name}_paddle.npy", how=RUN[name]) for name in parts}
    passed = {}
    for name, (torch_data, paddle_data) in pairs.items():
        spec = tolerances.PAIRS[name]
        if name == "lr":
            result = diff.compare(torch_data, paddle_data, spec.tolerances, spec.default, name=name)
            report.safely(result, lambda r: r.notes.extend(lr_notes(torch_data, paddle_data)))
            hand_in, stats = {}, []
        else:
            result = diff.compare(torch_data, paddle_data, bp_tols, spec.default, name=name)
            result.loosened = loosened
            report.safely(result, bp_report, torch_data, paddle_data, args.diagnose)
            # every gradient is 91 MB a side with MiniLM (the word embeddings' alone is 47 MB):
            # log_reprod gets the losses and updates, the log every key's diff, and diagnostics/ each
            # gradient's statistics, enough for a reviewer to re-check them (pipeline/check_log_reprod.py)
            hand_in = {f"{name}_{side}.npy": diff.select(data, [f.pattern for f in keys.HAND_IN_BP])
                       for side, data in zip(diff.SIDES, (torch_data, paddle_data))}
            stats = [d / f"grad_stats_{side}.npy" for side in diff.SIDES]
            for side, path, data in zip(diff.SIDES, stats, (torch_data, paddle_data)):
                save_npy(path, diagnose.summary(diff.select(data, [keys.GRAD.pattern])))
                record.save_derived(d / f"{name}_{side}.npy", path)
        same_run.check(result, d / f"{name}_torch.npy", d / f"{name}_paddle.npy")
        report.write(result, d / f"{name}_diff.log")
        if hand_in:
            top = paths.log_reprod()
            report.hand_in(top=top, data=hand_in, data_from=d, diagnostics=stats)
            # every key's diff stays with the gradients' statistics; the log beside the pair is the pair's own
            report.copy_if_changed(d / f"{name}_diff.log", top / report.DIAGNOSTICS / f"{name}{ALL_KEYS}")
            handed_in_log(top, name, bp_tols, loosened)
        else:
            report.hand_in(d / f"{name}_torch.npy", d / f"{name}_paddle.npy", d / f"{name}_diff.log", top=paths.log_reprod())
        passed[name] = result.passed
    print("; ".join(f"{name}: {'aligned' if ok else 'NOT aligned'}" for name, ok in passed.items()))
    sys.exit(0 if all(passed.values()) else 1)


if __name__ == "__main__":
    run_main(main)
