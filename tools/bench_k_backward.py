"""K for gradients and optimizer steps (portcheck/calibrated.py's K_BACKWARD and K_STEP) from data: the multiple of
torch's own fp32 error each clean port needs, and each planted bug shows, in compare_backward (plain and
isolate=True).

    python tools/bench_k_backward.py            # writes docs/bench/k_backward.md and its figures, k_backward.json
    python tools/bench_k_backward.py --kinks 8  # the small conv/BatchNorm nets only: docs/bench/k_backward_kinks.json
    python tools/bench_k_backward.py --page     # the page again from the two JSONs, nothing measured

For every row compare_backward judges (a gradient after the first backward; a loss, an lr, a weight or a statistic
after a step), the multiple it needs to pass: (max diff - the floor) / torch's own fp32 error there. A clean port's
largest is the least K that keeps it green; a plant's largest is what it shows, and it is red at any K below it.
Cases, each clean and planted, on one batch, momentum SGD (the ResNet-18 example's optimizer), eval mode unless
said:
  * transformers' DistilBERT against paddlenlp's (tiny config, a pair no one here wrote), planted: one LayerNorm
    epsilon 1e-5 (the others 1e-12), a plant a K_BACKWARD of 128 alone let through;
  * transformers' BertModel against paddlenlp's (tiny, tools/bench_align.py's), the same plant;
  * this project's twin BERTs (models/, tests/tiny_config.json), the same plant;
  * the ResNet-18 example (examples/resnet18) in train mode, its own Step 4 training (its 5 steps, tools/
    bench_align.py's batch): BatchNorm's batch statistics; planted: one BatchNorm epsilon 1e-3, and Paddle's
    momentum 0.8 (a plant only the steps show: its gradients are the clean port's).
A plain run's steps are judged by the larger of K_BACKWARD x torch's own error and calibrated.SPREAD x torch against
itself (its run again with every weight moved one ulp, with other threads); the share of that
allowance each row uses is reported too. --kinks: small conv/BatchNorm nets (conv_bn_nets) over several seeds, widths
and batches, where Paddle may cross a ReLU kink in a later step, each clean and with optimizer and BatchNorm plants
(tools/kink_nets.py).
"""
import argparse
import json
import math

try:
    import portcheck.core.runtime  # noqa: F401 - first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from pathlib import Path

import numpy as np

from bert_sst2 import paths
from portcheck.core import calibrated
from portcheck.core.errors import require, run_main
from portcheck.core.fileio import atomic_write

try:
    from tools import bench_align  # its model builders, shared
    from tools import bench_doc
    from tools.kink_nets import KINK_LR, KINK_STEPS, kinks
except ModuleNotFoundError:  # the project (which installs tools/) is not: the library alone
    raise SystemExit("error: this project's packages are not importable: run `pip install -r requirements.txt` "
                     "in its venv") from None

CLASSES = 3
STEPS = 3
EPS_PLANT = "one LayerNorm epsilon 1e-5 (the others 1e-12)"
COMMAND = "python tools/bench_k_backward.py"


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


def used(r) -> float:
    """max diff / the allowance the library applied (a plain run's steps: the larger of K_BACKWARD x torch's own
    error and SPREAD x torch against itself, moved one ulp with other threads, plus the floor)."""
    return 0.0 if r.max == 0 else r.max / r.allowed if r.allowed > 0 else math.inf


def figures(report) -> dict:
    """The largest multiple needed over the gradients and over the rows after the steps, with where; and the
    largest share of its allowance a row after the steps uses."""
    out = {}
    steps = [r for rows in report.steps for r in rows if r.name != "lr"]  # an lr is judged in ulps, not here
    for part, rows in (("grads", report.grads), ("steps", steps)):
        worst = max(rows, key=needed)
        out[part] = {"needed": needed(worst), "at": worst.name}
    worst = max(steps, key=used)
    out["steps"].update(used=used(worst), used_at=worst.name,
                        spread=getattr(worst.rule, "spread", 0.0) / worst.err32 if worst.err32 > 0 else 0.0)
    return out


_CLEAN = {}  # (case, isolate): the clean port's figures, run once for all of its plants


def case(name, build, plant_name, train=None, isolate=False, plant_args=None):
    """{clean: figures, plant: figures, verdicts} of one pair, plain or isolated; plant_args: compare_backward's
    arguments the plant changes (an optimizer's), else build's plant() changes the Paddle model."""
    from portcheck import compare_backward
    row = {"case": name, "planted": plant_name, "isolate": isolate}
    for planted in (False, True):
        if not planted and (name, isolate) in _CLEAN:
            row["clean"] = _CLEAN[name, isolate]
            continue
        pt, pd, x, name_map, plant = build()
        if planted and plant_args is None:
            plant()
        if train is None:
            y = np.random.RandomState(1).randint(0, CLASSES, x.shape[0])
            args = dict(loss=(first_token_loss("torch"), first_token_loss("paddle")), optimizer=momentum())
        else:
            pt.train(), pd.train()
            x, y = train["batch"]
            args = train["args"]
        if planted and plant_args:
            args = {**args, **plant_args}
        report = compare_backward(pt, pd, x, y, steps=(train or {}).get("steps", STEPS), name_map=name_map,
                                  isolate=isolate, **args)
        row["plant" if planted else "clean"] = {
            "passed": report.passed, "first_diverging": report.first_diverging, **figures(report)}
    _CLEAN[name, isolate] = row["clean"]
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

    def planted(momentum=0.9, decay=ex.WEIGHT_DECAY):  # plants only the steps show
        return lambda params: paddle.optimizer.Momentum(learning_rate=paddle.optimizer.lr.StepDecay(
            ex.LR, step_size=ex.STEP_SIZE, gamma=ex.GAMMA), momentum=momentum, parameters=params,
            weight_decay=paddle.regularizer.L2Decay(decay))
    return build, {"batch": ex.random_batch(2), "steps": ex.STEPS,
                   "args": dict(loss=(t[0], p[0]), optimizer=(t[1], p[1]), scheduler=(t[2], p[2])),
                   "momentum": dict(optimizer=(t[1], planted(momentum=0.8))),
                   "decay": dict(optimizer=(t[1], planted(decay=3e-4)))}


def kink_lines(data) -> list:
    """The --kinks section of docs/bench/k_backward.md."""
    sweep, plants = data["sweep"], data["plants"]
    red = [r for r in sweep if not r["passed"]]
    lines = ["", "## Kinks in later steps (`--kinks`)", "",
             f"{len(sweep)} small conv/BatchNorm nets (conv_bn_nets: 4 x conv, BatchNorm, ReLU; seeds x widths 4, 8, 16 "
             f"x batches 8, 16 of 32 x 32 noise), train mode, momentum SGD, lr {KINK_LR:g}, {KINK_STEPS} steps, each "
             f"correct port: {len(red)} red" + (": " + ", ".join(f"seed {r['seed']} width {r['width']} batch "
                                                               f"{r['batch']} ({r['used']:.3g} at {r['at']})"
                                                               for r in red) if red else "") + ".", "",
             f"The largest share of its allowance a green one uses: "
             f"{max((r['used'] for r in sweep if r['passed']), default=0.0):.3g} "
             f"({max((r for r in sweep if r['passed']), key=lambda r: r['used'], default={'at': '-'})['at']})." +
             "".join(f" Seed {r['seed']} width {r['width']} batch {r['batch']} is judged with torch's run taking "
                     "Paddle's side of the kink it crossed (" + ", ".join(f"step {s}: {m}, {n} value(s)"
                                                                        for s, m, n in r["crossed"]) +
                     f"), {'green' if r['passed'] else 'red'} at {r['used']:.3g}."
                     for r in sweep if r.get("taken")), "",
             "| seed | width | batch | plant | clean: of the allowance | planted: of the allowance | plant verdict, "
             "first diverging |", "|---|---|---|---|---|---|---|"]
    for r in plants:
        lines.append(f"| {r['seed']} | {r['width']} | {r['batch']} | {r['plant']} | {r['clean']:.3g} ({r['clean_at']}) "
                     f"| {r['planted']:.3g} ({r['planted_at']}) | {'RED' if not r['passed'] else 'green'}, "
                     f"{r['first_diverging']} |")
    clean = max([r["clean"] for r in plants] + [r["used"] for r in sweep])
    least = min(plants, key=lambda r: r["planted"])
    jumped = [r for r in sweep if r["jumps"]]
    taking = [r for r in plants if r.get("planted_taken")]
    lines += ["", f"Clean ports use at most {clean:.3g} of their allowance; the least visible plant ({least['plant']}, "
              f"seed {least['seed']}) uses {least['planted']:.3g}, {least['planted'] / clean:.3g} x the clean maximum.",
              "", f"{len(taking)} planted runs were judged with torch's run taking Paddle's side of a kink crossed (a "
              "red run with values within rounding of 0 of opposite signs), every one red:", ""] + \
        [f"- {r['plant']} seed {r['seed']} ({r['planted']:.3g})" for r in taking] + \
        ["", f"{len(jumped)} of the {len(sweep)} nets have rows over K_BACKWARD x torch's own error that torch's "
              "spread against itself allows, each a kink crossed:", ""] + \
        [f"- seed {r['seed']} width {r['width']} batch {r['batch']}, {r['jumps']} rows, at most "
         f"{r['jump_used']:.3g} of the allowance" for r in jumped]
    if data.get("yardsticks"):
        lines += ["", "Candidate yardsticks of what torch does to itself, on the two nets where Paddle crosses a kink at "
                  "step 5 (KINK_NETS), each clean and with each plant above. Each row: the largest share of its "
                  "allowance a clean port uses and the least a plant uses. A yardstick separates them when the first "
                  "is under 1 and the second over it.", "",
                  "Every run costs one more float32 training of torch (time); a second run is kept as one figure per "
                  "key (no second copy of the weights).", "",
                  "| torch against itself | clean: at most | planted: at least (plant) |", "|---|---|---|"]
        lines += [f"| {r['yardstick']} | {r['clean']:.3g} | {r['planted']:.3g} ({r['least']}) |"
                  for r in data["yardsticks"]]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "k_backward.md",
                    help="the page (Markdown); its figures go beside it as .json and _kinks.json")
    ap.add_argument("--quick", action="store_true", help="the three BERT-like pairs only (no ResNet-18 training)")
    bench_doc.add_page_flag(ap)
    ap.add_argument("--kinks", type=int, metavar="SEEDS", help="only the small conv/BatchNorm nets of seeds 0 .. SEEDS-1 "
                    "and their plants (a ReLU kink crossed in a later step), into <out>_kinks.json; the .md rewritten")
    args = ap.parse_args()
    if args.out.suffix != ".md":
        raise SystemExit("error: --out must name a .md file (its .json is written beside it)")
    if args.kinks is not None and args.kinks < 1:
        raise SystemExit("error: --kinks takes a number of seeds, 1 or more")
    source, kinked = args.out.with_suffix(".json"), args.out.with_name(args.out.stem + "_kinks.json")
    if args.page or args.kinks:
        if args.kinks:
            run = bench_doc.start()
            data = kinks(list(range(args.kinks)))
            data[bench_doc.RUN] = bench_doc.finish(run)
            atomic_write(kinked, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=1) + "\n"))
        require(source, COMMAND)
        text = "\n".join(report_lines(json.loads(source.read_text()), kinked)) + "\n"
        atomic_write(args.out, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        print(text)
        return
    cases = [("transformers DistilBERT / paddlenlp DistilBERT (tiny)", distilbert, EPS_PLANT, None, None),
             ("transformers BertModel / paddlenlp BertModel (tiny)", library_bert, EPS_PLANT, None, None),
             ("twin BERTs (tiny)", twin_bert, EPS_PLANT, None, None)]
    if not args.quick:
        build, train = resnet_training()
        name = "ResNet-18 example, train mode (its Step 4 training)"
        cases += [(name, build, "one BatchNorm epsilon 1e-3 (layer2.0.bn2)", train, None),
                  (name, build, "momentum 0.8 (torch's 0.9)", train, train["momentum"]),
                  (name, build, "weight decay 3e-4 (torch's 1e-4)", train, train["decay"])]
    run, rows = bench_doc.start(), []
    for name, build, plant, train, plant_args in cases:
        for isolate in (False, True):
            rows.append(case(name, build, plant, train, isolate, plant_args))
            print(json.dumps(rows[-1]), flush=True)
    data = {"rows": rows, bench_doc.RUN: bench_doc.finish(run)}
    atomic_write(args.out.with_suffix(".json"), lambda tmp: Path(tmp).write_text(json.dumps(data, indent=1) + "\n"))
    text = "\n".join(report_lines(data, kinked)) + "\n"
    atomic_write(args.out, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    print(text)


def report_lines(data, kinked=None) -> list:
    """The page: the cases' table and figures, then the --kinks section from `kinked` (its .json) where it exists.
    `data`: the cases' JSON, its rows and the run's facts (a bare list of rows: figures measured before the facts were
    recorded)."""
    rows, runs = (data, [{}]) if isinstance(data, list) else (data["rows"], [data.get(bench_doc.RUN) or {}])
    if kinked is not None and Path(kinked).is_file():
        runs.append(json.loads(Path(kinked).read_text()).get(bench_doc.RUN) or {})
    fmt = lambda v: "inf" if v == math.inf else f"{v:.3g}"
    lines = ["# K for gradients and steps, from data", "", bench_doc.header(runs, COMMAND), "",
             "For every row compare_backward judges, the multiple of torch's own fp32 error it needs to pass: "
             "(max diff - the floor) / torch's own fp32 "
             f"error. Momentum SGD, {STEPS} steps (the ResNet-18 example: its own 5), one batch. The constants: "
             f"K_GRAD = {calibrated.K_GRAD:g} (gradients after the first backward), "
             f"K_BACKWARD = {calibrated.K_BACKWARD:g} (the plain run's steps), "
             f"K_STEP = {calibrated.K_STEP:g} (each step of isolate=True).", "",
             f"A plain run's steps are also allowed SPREAD = {calibrated.SPREAD:g} x what torch does to itself there "
             "(its run again with every weight moved one ulp, with other threads). The allowance is the larger of the "
             "two, plus the floor. \"of the allowance\" is max diff / that allowance (over 1: red).", "",
             "| case | isolate | clean: gradients | clean: steps | clean: steps, of the allowance | plant | "
             "plant: gradients | plant: steps | plant: steps, of the allowance | plant verdict, first diverging |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, p = r["clean"], r["plant"]
        lines.append(f"| {r['case']} | {r['isolate']} | {fmt(c['grads']['needed'])} ({c['grads']['at']}) | "
                     f"{fmt(c['steps']['needed'])} ({c['steps']['at']}) | {fmt(c['steps']['used'])} | {r['planted']} | "
                     f"{fmt(p['grads']['needed'])} ({p['grads']['at']}) | {fmt(p['steps']['needed'])} "
                     f"({p['steps']['at']}) | {fmt(p['steps']['used'])} | "
                     f"{'RED' if not p['passed'] else 'green'}, {p['first_diverging']} |")
    # a plant of the steps (an optimizer's): its gradients are the clean port's, only the steps can show it
    late = lambda r: r["plant"]["grads"]["needed"] <= r["clean"]["grads"]["needed"]  # noqa: E731
    # K_GRAD judges the gradients (plain and isolated), K_BACKWARD the plain run's steps, K_STEP the isolated steps
    for constant, parts in (("K_GRAD", [(False, "grads"), (True, "grads")]), ("K_BACKWARD", [(False, "steps")]),
                            ("K_STEP", [(True, "steps")])):
        clean = max(r["clean"][part]["needed"] for r in rows for isolate, part in parts if r["isolate"] == isolate)
        plants = [max(r["plant"][part]["needed"] for isolate, part in parts if r["isolate"] == isolate)
                  for r in rows if any(r["isolate"] == isolate for isolate, _ in parts)
                  and not (constant == "K_GRAD" and late(r))]
        k, least = getattr(calibrated, constant), min(plants)
        lines += ["", f"{constant} = {k:g}{' (plants of a forward)' if constant == 'K_GRAD' else ''}"
                  f"{' (alone)' if constant == 'K_BACKWARD' else ''}: clean ports need at most {fmt(clean)}; the "
                  "least visible plant shows "
                  f"{fmt(least)}" + (f". A K between them separates every case, and {k:g} is {k / max(clean, 1e-9):.3g}"
                                     f" x the clean maximum and {least / k:.3g} x under the least visible plant"
                                     if clean < k < least else
                                     ". A K between them separates every case, but not this one" if clean < least else
                                     ". No single K separates every clean port from every plant here") + "."]
    plain = [r for r in rows if not r["isolate"]]
    clean = max(plain, key=lambda r: r["clean"]["steps"]["used"])["clean"]["steps"]
    # the plants the gradients let through: what the plain run's steps alone must catch
    least = min((r for r in plain if late(r)), key=lambda r: r["plant"]["steps"]["used"], default=None)
    lines += ["", f"The plain run's steps are judged by the larger of K_BACKWARD x torch's own error and SPREAD = "
              f"{calibrated.SPREAD:g} x torch against itself, plus the floor.", "", "Clean ports use at most "
              f"{fmt(clean['used'])} of their allowance (at {clean['used_at']}, where torch's spread against itself "
              f"is {fmt(clean['spread'])} x its own fp32 error)" +
              (f". The least visible plant the gradients let through ({least['case']}: {least['planted']}) uses "
               f"{fmt(least['plant']['steps']['used'])}, {least['plant']['steps']['used'] / max(clean['used'], 1e-9):.3g}"
               " x the clean maximum" if least else "") + "."]
    at_grads = all(r["plant"]["grads"]["needed"] > calibrated.K_GRAD for r in rows if not late(r))
    lines += ["", "Reading: the plants of a forward (a norm's epsilon) are " + ("" if at_grads else "not all ") +
              f"red at their gradients (K_GRAD = {calibrated.K_GRAD:g}); an optimizer's plant (momentum) "
              "is the same at the gradients and shows from the second step on.", "",
              "After a few steps of a plain run a value within rounding of a ReLU's kink takes one branch in one fp32 "
              "run and the other in another. On the ResNet-18 example torch with one thread, with every weight moved "
              "one ulp, and Paddle take the same jump, 176 x torch's own error at one conv weight. There torch's "
              "float64 run took torch's branch (torch with channels_last or ATEN_CPU_CAPABILITY=default lands 1.65e3 "
              "away).", "", "The spread of torch against itself measures that jump; its own fp32 error does not."]
    over = [r for r in plain if r["clean"]["steps"]["used"] > 1]
    lines += [f"Not solved: {r['case']} is red on its clean port ({fmt(r['clean']['steps']['used'])} of its "
              f"allowance at {r['clean']['steps']['used_at']})." for r in over]
    lines += ["", "## Kinks", "",
              "A kink is a value within rounding of 0 with opposite signs on the two sides, where a ReLU or max after "
              "it opens on one side and shuts on the other. The run of torch against itself is made with another "
              "thread count (backward.AGAINST_ITSELF), which crosses one of the two such nets found (below).", "",
              "A second run "
              "with oneDNN off crossed the other but hid a weight decay plant on the ResNet-18 example (0.355 of its "
              "allowance), as did a run sending every ReLU input within rounding of 0 to its other branch.", "",
              "What is done instead is one mechanism for every step. Each side records, in every forward (the first "
              "too), each module's output and first input values near 0 (within kinks.BAND of the tensor's largest). "
              "The input is where a ReLU after a residual sum written inline, `x += shortcut`, sees it: no module "
              "outputs that sum.", "",
              "Where a run is red and the two runs hold such a value with opposite signs, each within rounding of 0 "
              "(torch's own fp32 error there in the first forward, or the floor, calibrated.FLOOR x eps32 x the "
              "tensor's largest, where that is more: backward.crossings), "
              "compare_backward runs torch once more from its start and random draws with exactly those values set "
              "to Paddle's (backward.judged). `python -m portcheck run` runs the torch script once more so, its fifth "
              "run (docs/run.md).", "",
              "At the first forward's kinks (its rows green) that run is torch's run, its float64 and moved runs moved "
              "by as much. At a later step's it is torch against itself, SPREAD x it allowed. Each row says so, and "
              "the report's kink line names the module and the rule. The other net is then green and every plant "
              "beside it red (below).", "",
              "The zoo's ResNet-18 under ATEN_CPU_CAPABILITY=default crosses one at the ReLU after "
              "stages.3.layers.1's residual sum in step 2's forward (torch 7.1e-06, Paddle -4.9e-06, the floor "
              "1.0e-05). Its embedder's max pool routes every window alike on both sides. It is 13.3 x its allowance "
              "without the run, 0.250 with it, its plant red (docs/zoo.md).", "",
              "Both tables (above, and --kinks below) are measured with this one mechanism: a green run makes no such "
              "run; a red one, one torch run more per rule. The steps of isolate=True are judged so too, the taking "
              "run starting each step from the weights torch's own run left (that fp32 run again first), as Paddle's "
              "isolated steps start.", "",
              "The test tests/test_kink_isolated.py holds it. Which small net crosses a kink in an isolated step "
              "depends on the CPU's kernels. So the test takes the first of a few nets whose isolated run crosses "
              "one on the CPU at hand and is red alone. It is green with it, a momentum plant beside it red.", "",
              "A hand-in's bp_align: its check (handin.judge_and_log(..., comparison=) given backward.judged's report, "
              "or `portcheck run`'s) writes what that run judged beside the pair. At a later step's kinks its figures "
              "go to diagnostics/bp_align_taken_torch.npy. At the first forward's, torch's values on Paddle's branch "
              "go to diagnostics/bp_align_branch_torch.npy, judged in place of torch's file, its float64 run moved by "
              "as much.", "",
              "Each is bound to the torch side's run record and to both files, and python -m portcheck check judges "
              "with them as the check did. A file edited since or of other runs is left out in one line, a corrupt "
              "one red. The test is tests/test_hand_in_kink.py, on the first of a few small nets where the CPU at "
              "hand's Paddle alone crosses a later step's kink, as in tests/test_k_backward.py.", "",
              "tests/test_run_first_kink.py: two scripts whose gate unit sums exact fp32 inputs in another order, "
              "-2**-25 in torch, +2**-25 in Paddle, before a ReLU. They are green in scripts mode and from the folder, "
              "red from the folder without the file (bp_align's loss_1 15.1 x its allowance), a momentum plant red in "
              "both. A check without that run (judge_backward alone, or a launched `portcheck run`: no taking run) "
              "stays red there (the report's kink line): take another batch."]
    if kinked is not None and Path(kinked).is_file():
        lines += kink_lines(json.loads(Path(kinked).read_text()))
    return lines


if __name__ == "__main__":
    run_main(main)
