"""K for gradients and optimizer steps (portcheck/calibrated.py's K_BACKWARD and K_STEP) from data: the multiple of
torch's own fp32 error each clean port needs, and each planted bug shows, in compare_backward (plain and
isolate=True).

    python tools/bench_k_backward.py            # writes docs/k_backward.md and docs/k_backward.json

For every row compare_backward judges (a gradient after the first backward; a loss, an lr, a weight or a statistic
after a step), the multiple it needs to pass: (max diff - the floor) / torch's own fp32 error there. A clean port's
largest is the least K that keeps it green; a plant's largest is what it shows, and it is red at any K below it.
Cases, each clean and planted, on one batch, momentum SGD (the ResNet-18 example's optimizer), eval mode unless
said:
  * transformers' DistilBERT against paddlenlp's (tiny config, a pair no one here wrote), planted: one LayerNorm
    epsilon 1e-5 (the others 1e-12), the false green of issue 47;
  * transformers' BertModel against paddlenlp's (tiny, tools/bench_align.py's), the same plant;
  * this project's twin BERTs (models/, tests/tiny_config.json), the same plant;
  * the ResNet-18 example (examples/resnet18) in train mode, its own Step 4 training (its 5 steps, tools/
    bench_align.py's batch): BatchNorm's batch statistics; planted: one BatchNorm epsilon 1e-3.
"""
import argparse
import json
import math
import sys

try:
    import portcheck.runtime  # noqa: F401 - first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from pathlib import Path

import numpy as np

from bert_sst2 import paths
from portcheck import calibrated
from portcheck.errors import run_main
from portcheck.fileio import atomic_write

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_align  # noqa: E402 - its model builders, shared

CLASSES = 3
STEPS = 3
EPS_PLANT = "one LayerNorm epsilon 1e-5 (the others 1e-12)"


def needed(r) -> float:
    """The multiple of torch's own fp32 error row r needs to pass (0: within the floor alone; inf: no own error to
    scale and over the floor)."""
    over = r.max - calibrated.Measured.floor(r)
    if over <= 0:
        return 0.0
    return over / r.err32 if r.err32 > 0 else math.inf


def first_token_loss(side):
    """Cross entropy on the first CLASSES features of the first token of the model's first output."""
    if side == "torch":
        import torch
        return lambda out, y: torch.nn.functional.cross_entropy(out[0][:, 0, :CLASSES], y)
    import paddle
    return lambda out, y: paddle.nn.functional.cross_entropy((out if isinstance(out, paddle.Tensor) else out[0])
                                                             [:, 0, :CLASSES], y)


def momentum():
    import paddle
    import torch
    return (lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
            lambda p: paddle.optimizer.Momentum(0.05, momentum=0.9, parameters=p))


def distilbert():
    import torch
    from paddlenlp.transformers import DistilBertConfig as PaddleConfig, DistilBertModel as PaddleDistil
    from transformers import DistilBertConfig, DistilBertModel
    from portcheck import convert
    torch.manual_seed(0)
    pt = DistilBertModel(DistilBertConfig(vocab_size=99, dim=32, n_layers=2, n_heads=4, hidden_dim=37,
                                          max_position_embeddings=64, dropout=0.0, attention_dropout=0.0)).eval()
    pd = PaddleDistil(PaddleConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=37, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                   attention_probs_dropout_prob=0.0)).eval()
    ids = np.random.RandomState(0).randint(1, 99, (4, 12)).astype("int64")
    convert(pt, pd, inputs=ids)

    def plant():
        pd.encoder.layers[0].norm1._epsilon = 1e-5
    return pt, pd, ids, None, plant


def library_bert():
    pt, pd, inputs, name_map, plant = bench_align.library_berts()
    return pt, pd, inputs["input_ids"], name_map, plant


def twin_bert():
    pt, pd, (ids,), name_map, _ = bench_align.twins(paths.ROOT / "tests" / "tiny_config.json")

    def plant():
        pd.encoder.layer[0].attention.output.LayerNorm._epsilon = 1e-5
    return pt, pd, ids[:, :16], name_map, plant


def figures(report) -> dict:
    """The largest multiple needed over the gradients and over the rows after the steps, with where."""
    out = {}
    for part, rows in (("grads", report.grads), ("steps", [r for rows in report.steps for r in rows])):
        worst = max(rows, key=needed)
        out[part] = (needed(worst), worst.name)
    return out


def case(name, build, plant_name, train=None, isolate=False):
    """{clean: figures, plant: figures, verdicts} of one pair, plain or isolated."""
    from portcheck import compare_backward
    row = {"case": name, "planted": plant_name, "isolate": isolate}
    for planted in (False, True):
        pt, pd, x, name_map, plant = build()
        if planted:
            plant()
        if train is None:
            y = np.random.RandomState(1).randint(0, CLASSES, x.shape[0])
            args = dict(loss=(first_token_loss("torch"), first_token_loss("paddle")), optimizer=momentum())
        else:
            pt.train(), pd.train()
            x, y = train["batch"]
            args = train["args"]
        report = compare_backward(pt, pd, x, y, steps=(train or {}).get("steps", STEPS), name_map=name_map,
                                  isolate=isolate, **args)
        row["plant" if planted else "clean"] = {
            "passed": report.passed, "first_diverging": report.first_diverging,
            **{part: {"needed": v, "at": at} for part, (v, at) in figures(report).items()}}
    return row


def resnet_training():
    import paddle
    from examples.resnet18 import resnet as ex
    from portcheck import convert

    def build():
        pt = ex.new_torch_model()
        pd = paddle.vision.models.resnet18(num_classes=ex.CLASSES)
        pd.set_state_dict(convert(pt, pd, ex.RESNET_MAP))

        def plant():
            pd.layer2[0].bn2._epsilon = 1e-3
        return pt, pd, None, ex.RESNET_MAP, plant
    t, p = ex.torch_training(), ex.paddle_training()
    return build, {"batch": ex.random_batch(2), "steps": ex.STEPS,
                   "args": dict(loss=(t[0], p[0]), optimizer=(t[1], p[1]), scheduler=(t[2], p[2]))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=paths.ROOT / "docs" / "k_backward.md")
    ap.add_argument("--quick", action="store_true", help="the three BERT-like pairs only (no ResNet-18 training)")
    ap.add_argument("--render", action="store_true", help="rewrite the .md from the .json beside it, nothing run")
    args = ap.parse_args()
    if args.out.suffix != ".md":
        raise SystemExit("error: --out must name a .md file (its .json is written beside it)")
    if args.render:
        source = args.out.with_suffix(".json")
        if not source.is_file():
            raise SystemExit(f"error: {source} not found: run `python tools/bench_k_backward.py` first")
        text = "\n".join(report_lines(json.loads(source.read_text()))) + "\n"
        atomic_write(args.out, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        print(text)
        return
    cases = [("transformers DistilBERT / paddlenlp DistilBERT (tiny)", distilbert, EPS_PLANT, None),
             ("transformers BertModel / paddlenlp BertModel (tiny)", library_bert, EPS_PLANT, None),
             ("twin BERTs (tiny)", twin_bert, EPS_PLANT, None)]
    if not args.quick:
        build, train = resnet_training()
        cases.append(("ResNet-18 example, train mode (its Step 4 training)", build,
                      "one BatchNorm epsilon 1e-3 (layer2.0.bn2)", train))
    rows = []
    for name, build, plant, train in cases:
        for isolate in (False, True):
            rows.append(case(name, build, plant, train, isolate))
            print(json.dumps(rows[-1]), flush=True)
    atomic_write(args.out.with_suffix(".json"), lambda tmp: Path(tmp).write_text(json.dumps(rows, indent=1) + "\n"))
    text = "\n".join(report_lines(rows)) + "\n"
    atomic_write(args.out, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    print(text)


def report_lines(rows) -> list:
    fmt = lambda v: "inf" if v == math.inf else f"{v:.3g}"
    lines = ["English | [中文](k_backward_cn.md)", "", "# K for gradients and steps, from data", "",
             "Written by `python tools/bench_k_backward.py` (this 2-core CPU). For every row compare_backward judges, "
             "the multiple of torch's own fp32 error it needs to pass: (max diff - the floor) / torch's own fp32 "
             f"error. Momentum SGD, {STEPS} steps (the ResNet-18 example: its own), one batch. Now: K_GRAD = "
             f"{calibrated.K_GRAD:g} (gradients after the first backward), K_BACKWARD = {calibrated.K_BACKWARD:g} (the "
             f"plain run's steps), K_STEP = {calibrated.K_STEP:g} (each step of isolate=True).", "",
             "| case | isolate | clean: gradients | clean: steps | plant | plant: gradients | plant: steps | "
             "plant verdict, first diverging |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, p = r["clean"], r["plant"]
        lines.append(f"| {r['case']} | {r['isolate']} | {fmt(c['grads']['needed'])} ({c['grads']['at']}) | "
                     f"{fmt(c['steps']['needed'])} ({c['steps']['at']}) | {r['planted']} | "
                     f"{fmt(p['grads']['needed'])} ({p['grads']['at']}) | {fmt(p['steps']['needed'])} "
                     f"({p['steps']['at']}) | {'RED' if not p['passed'] else 'green'}, {p['first_diverging']} |")
    # K_BACKWARD judges the gradients (plain and isolated) and the plain run's steps; K_STEP the isolated steps
    for constant, parts in (("K_GRAD", [(False, "grads"), (True, "grads")]), ("K_BACKWARD", [(False, "steps")]),
                            ("K_STEP", [(True, "steps")])):
        clean = max(r["clean"][part]["needed"] for r in rows for isolate, part in parts if r["isolate"] == isolate)
        plants = [max(r["plant"][part]["needed"] for isolate, part in parts if r["isolate"] == isolate)
                  for r in rows if any(r["isolate"] == isolate for isolate, _ in parts)]
        k, least = getattr(calibrated, constant), min(plants)
        lines += ["", f"{constant} = {k:g}: clean ports need at most {fmt(clean)}; the least visible plant shows "
                  f"{fmt(least)}" + (f"; a K between them separates every case, and {k:g} is {k / max(clean, 1e-9):.3g}"
                                     f" x the clean maximum and {least / k:.3g} x under the least visible plant"
                                     if clean < k < least else
                                     "; a K between them separates every case, but not this one" if clean < least else
                                     "; no single K separates every clean port from every plant here")]
    at_grads = all(r["plant"]["grads"]["needed"] > calibrated.K_GRAD for r in rows)
    over = [r for r in rows if not r["isolate"] and r["clean"]["steps"]["needed"] > calibrated.K_BACKWARD]
    lines += ["", "Reading: every plant here is " + ("red at its gradients" if at_grads else "not red at its gradients")
              + f" (K_GRAD = {calibrated.K_GRAD:g}), whatever K_BACKWARD is: the gradients of one backward separate "
              "clean ports from plants, the steps of a plain run do not (BatchNorm's batch statistics and each update "
              "compound both sides' rounding, and a plant's own effect grows no faster)."]
    lines += [f"Not solved: {r['case']} is red on its clean port at K_BACKWARD = {calibrated.K_BACKWARD:g} "
              f"({fmt(r['clean']['steps']['needed'])} needed at {r['clean']['steps']['at']}); isolate=True keeps it "
              "green (each step judged alone, at K_STEP)." for r in over]
    return lines


if __name__ == "__main__":
    run_main(main)
