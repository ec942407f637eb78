"""Step 2 check: data_*.npy -> data_diff.log and metric_*.npy -> metric_diff.log (exit 1 if not aligned).

Data: the dataset length, every example's input_ids/token_type_ids/label and every
batch's input_ids/token_type_ids/attention_mask/labels, in loader order: all exact.
Metric: accuracy on seeded random logits and on each model's own predictions: exact;
the model logits themselves within Step 1's threshold.
"""
import argparse
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import keys, paths, steps, tolerances
from portcheck.core import diff, report, same_run
from portcheck.core.errors import run_main

PAIRS = steps.bert_step(2).pairs  # tolerances.PAIRS says how each is judged


def sizes(torch_data, paddle_data) -> list:
    notes = []
    for side, d in (("torch", torch_data), ("paddle", paddle_data)):
        n_batches = keys.BATCH.count(d)
        notes.append(f"{side}: length {int(d['length']) if 'length' in d else '?'}, {n_batches} batches")
    return notes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.parse_args()
    report.hand_in_folder(paths.log_reprod())  # the hand-in folder checked before the first write
    d = paths.step_dir(2)
    # every file first, so a missing one stops before any log is rewritten
    pairs = {p.name: diff.load_pair(d / f"{p.name}_torch.npy", d / f"{p.name}_paddle.npy", how=p.how()) for p in PAIRS}
    passed = True
    for name, (torch_data, paddle_data) in pairs.items():
        spec = tolerances.PAIRS[name]
        result = diff.compare(torch_data, paddle_data, spec.tolerances, spec.default, name=name)
        same_run.check(result, d / f"{name}_torch.npy", d / f"{name}_paddle.npy")
        if name == "data":
            report.safely(result, lambda r: r.notes.extend(sizes(torch_data, paddle_data)))
        report.write(result, d / f"{name}_diff.log")
        report.hand_in(d / f"{name}_torch.npy", d / f"{name}_paddle.npy", d / f"{name}_diff.log", top=paths.log_reprod())
        passed &= result.passed
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    run_main(main)
