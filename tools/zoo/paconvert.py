"""Ports made with PaConvert in the zoo: torch models of this project's own, each written in its upstream's style
(examples/paconvert/pt_*.py), converted by PaConvert 3.3.1 as a user runs it (`paconvert --in_dir FILE --out_dir
OUT`; what it wrote: examples/paconvert/as_converted/), and the leftovers fixed by hand, each fix marked `# hand fix`
(examples/paconvert/pd_*.py). Each port is judged as the families are: convert with no map, compare_forward
cumulative and isolated, compare_backward over 3 steps; then each plant, a one-line bug in the port's own code,
expected red at its module.

    python -m tools.zoo.paconvert                # every model; writes docs/bench/zoo_paconvert.json and docs/zoo.md
    python -m tools.zoo.paconvert --only lstm    # some models; writes nothing
    python -m tools.zoo.paconvert --fast         # forward cumulative and the plants (the suite's part)

Where PaConvert is installed (requirements-paconvert.txt), each torch file is converted again and the row says its
convert rate and the lines it marked `>>>>>>`; a whole run needs it.
"""
import argparse
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch and Paddle)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from portcheck.core.errors import PipelineError, first_line, run_main
from tools.zoo import recorded, tables

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "examples" / "paconvert"     # the torch files, the ports, and PaConvert's output as it wrote it
AS_CONVERTED = FOLDER / "as_converted"
PACKAGE = "examples.paconvert"
MARK = "# hand fix"                           # every change to PaConvert's output carries it
REQUIREMENTS = "requirements-paconvert.txt"
LEFT = ">>>>>>"                               # PaConvert's mark before a line it could not convert
STEPS = 3


def gpt(module, **settings):
    return module.GPT(module.GPTConfig(**settings))


def padded_ids(rs):
    """A padded batch as the collate function makes it (ids, lengths): the longest as long as the batch is wide."""
    import numpy as np
    lengths = np.array([6, 3, 5, 2], "int64")
    ids = rs.randint(1, 50, (len(lengths), lengths.max())).astype("int64")
    for row, n in zip(ids, lengths):
        row[n:] = 0
    return ids, lengths


# Each model: its style, how each side builds it (the same arguments on both), the settings its 3 steps of training
# take (random layers off: each framework draws its own), its inputs, and its plants: (what, the module it is planted
# in, the line of the port as it stands, the line planted), a bug a user makes while fixing PaConvert's leftovers.
MODELS = {
    "mlp": dict(
        style="timm's Mlp", build=lambda m, **kw: m.MlpClassifier(**kw), train=dict(drop=0.0),
        inputs=lambda rs: rs.randn(4, 20).astype("float32"),
        plants=[("its LayerNorm's eps left to Paddle's default (1e-5)", "mlp.norm",
                 "partial(paddle.nn.LayerNorm, eps=1e-06)", "partial(paddle.nn.LayerNorm)"),
                ("tanh's GELU for the exact one", "mlp.act", "act_layer=paddle.nn.GELU,",
                 "act_layer=partial(paddle.nn.GELU, approximate=True),")]),
    "cnn": dict(
        style="an early CIFAR ResNet's", build=lambda m, **kw: m.SmallCNN(**kw), train={},
        inputs=lambda rs: rs.randn(2, 3, 16, 16).astype("float32"),
        plants=[("BatchNorm2D's epsilon 1e-3", "features.0.bn", "paddle.nn.BatchNorm2D(num_features=planes)",
                 "paddle.nn.BatchNorm2D(num_features=planes, epsilon=1e-3)"),
                ("MaxPool2D's stride 1", "features.0.pool", "paddle.nn.MaxPool2D(kernel_size=2, stride=2)",
                 "paddle.nn.MaxPool2D(kernel_size=2, stride=1)")]),
    "gpt": dict(
        style="nanoGPT's", build=gpt, train=dict(drop_path=0.0),
        inputs=lambda rs: rs.randint(0, 96, (2, 8)).astype("int64"),
        plants=[("attention not causal", "transformer.h.0.attn", "is_causal=True", "is_causal=False"),
                ("tanh's GELU for the exact one", "transformer.h.0.mlp.gelu", "self.gelu = paddle.nn.GELU()",
                 "self.gelu = paddle.nn.GELU(approximate=True)"),
                ("positions counted from 1", "transformer.wpe", "paddle.arange(0, t, ", "paddle.arange(1, t + 1, ")]),
    "lstm": dict(
        style="a sentiment repository's packed LSTM", build=lambda m, **kw: m.RNNClassifier(**kw), train={},
        inputs=padded_ids,
        plants=[("the lengths not given to the RNN", "rnn", "self.rnn(embedded, sequence_length=lengths)",
                 "self.rnn(embedded)"),
                ("mean over the padded width", "fc", "/ lengths[:, None].astype(out.dtype)", "/ out.shape[1]")]),
}


def source(name: str, side: str) -> Path:
    return FOLDER / f"{side}_{name}.py"


def hand_fixes(name: str) -> list:
    """Each change from PaConvert's output to the port: (the lines PaConvert wrote, the lines of the port), in
    order; a change whose port lines carry no MARK is unmarked (unmarked() lists them)."""
    wrote = (AS_CONVERTED / f"pd_{name}.txt").read_text(encoding="utf-8").splitlines()
    port = source(name, "pd").read_text(encoding="utf-8").splitlines()
    matcher = difflib.SequenceMatcher(None, wrote, port, autojunk=False)
    return [(wrote[i1:i2], port[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def unmarked(fixes: list) -> list:
    """The changes whose lines of the port say nothing of being a hand fix."""
    return [fix for fix in fixes if not any(MARK in line for line in fix[1])]


def installed() -> str:
    """PaConvert's command, or "" where it is not installed (it has no `python -m`: its script beside Python's)."""
    beside = Path(sys.executable).parent / "paconvert"
    return str(beside) if beside.exists() else shutil.which("paconvert") or ""


def convert_again(name: str) -> dict:
    """PaConvert run on the torch file as a user runs it: {"text": what it wrote, "log": its log, "rate": its
    convert rate, "left": the lines it marked}."""
    command = installed()
    if not command:
        raise PipelineError(f"paconvert is not installed: pip install --no-deps -r {REQUIREMENTS}")
    with tempfile.TemporaryDirectory() as out:
        written = Path(out) / f"pd_{name}.py"
        proc = subprocess.run([command, "--in_dir", str(source(name, "pt")), "--out_dir", str(written)],
                              capture_output=True, text=True, cwd=out, timeout=120)
        if proc.returncode or not written.exists():
            raise PipelineError(f"paconvert on {source(name, 'pt').name} exited {proc.returncode}: "
                                f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
        text = written.read_text(encoding="utf-8")
    log = proc.stdout + proc.stderr
    rate = next((line.split(":")[1].strip() for line in log.splitlines() if "Convert Rate is:" in line), "")
    return {"text": text, "log": log, "rate": rate, "left": sum(line.startswith(LEFT) for line in text.splitlines())}


def port_module(name: str, plant: tuple = None) -> types.ModuleType:
    """The Paddle port's module, its plant's line replaced where one is given (the line must stand once)."""
    import importlib
    if plant is None:
        return importlib.import_module(f"{PACKAGE}.pd_{name}")
    _, _, line, planted = plant
    path = source(name, "pd")
    text = path.read_text(encoding="utf-8")
    if text.count(line) != 1:
        raise PipelineError(f"plant {plant[0]!r}: {line!r} stands {text.count(line)} times in {path.name}, not once")
    module = types.ModuleType(f"{PACKAGE}.pd_{name}_planted", f"{path.name} with {plant[0]}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # a dataclass looks its module up
    try:
        exec(compile(text.replace(line, planted), str(path), "exec"), module.__dict__)  # noqa: S102 (our own file)
    finally:
        sys.modules.pop(module.__name__, None)
    return module


def build(name: str, module=None, **settings):
    """(torch model, Paddle model, inputs): both built from the same arguments and seeds, in eval mode."""
    import importlib
    import numpy as np
    import paddle
    import torch
    spec = MODELS[name]
    torch.manual_seed(0)
    paddle.seed(0)
    pt = spec["build"](importlib.import_module(f"{PACKAGE}.pt_{name}"), **settings).eval()
    pd = spec["build"](module or port_module(name), **settings)
    pd.eval()
    return pt, pd, spec["inputs"](np.random.RandomState(0))


def red(report) -> str:
    """Where a comparison is red, in one line: a side that stopped, the first module out of tolerance, or the
    isolated run's."""
    if report.stopped:
        return "; ".join(f"the {side} model stopped: {e}" for side, e in report.stopped.items())[:300]
    rows = [r for r in report.paired if not r.passed]
    if rows:
        r = rows[0]
        return f"{r.name}: {r.problem or (f'{r.max:.3g} against {r.allowed:.3g}' if not r.max_ok else r.why)}"[:300]
    return "isolated: " + ", ".join(d.both for d in report.differing)[:300]


def backward(name: str, result: dict):
    """compare_backward, STEPS steps of SGD on the mean squared error of the output against a fixed target, on
    models built with the model's training settings (both converted as the forward's were)."""
    import numpy as np
    import paddle
    import torch
    from portcheck import compare_backward, convert
    pt, pd, x = build(name, **MODELS[name]["train"])
    try:
        pd.set_state_dict(convert(pt, pd, inputs=x))
        with torch.no_grad():
            shape = tuple(pt(*[torch.from_numpy(a) for a in (x if isinstance(x, tuple) else (x,))]).shape)
        target = np.random.RandomState(1).randn(*shape).astype("float32")
        loss = (lambda out, y: ((out - y) ** 2).mean(),) * 2
        sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01), lambda ps: paddle.optimizer.SGD(0.01, parameters=ps))
        report = compare_backward(pt.train(), pd.train(), x, target, loss=loss, optimizer=sgd, steps=STEPS)
        result["backward"] = report.passed
        result["backward_said"] = "" if report.passed else report.table().splitlines()[-1][:300]
    except Exception as e:  # noqa: BLE001 (a port that cannot train is its row's result)
        result["backward"], result["backward_said"] = None, first_line(e)[:300]


def judge_one(name: str, fast: bool = False) -> dict:
    """The model's row: convert with no map, compare_forward (isolated unless fast), compare_backward (unless
    fast), each plant; the outcome in the families' words (tables.READING)."""
    from portcheck import compare_forward, convert
    from portcheck.core.keys import ROOT
    spec = MODELS[name]
    result = {"model": name, "style": spec["style"], "hand_fixes": len(hand_fixes(name))}
    try:
        pt, pd, x = build(name)
        result["classes"] = f"{type(pd).__name__} / {type(pt).__name__}"
        state = convert(pt, pd, inputs=x)
    except PipelineError as e:
        return {**result, "outcome": "refused", "said": f"portcheck: {e}"[:300]}
    except Exception as e:  # noqa: BLE001 (a port that cannot be built or run is its row's result)
        return {**result, "outcome": "raises", "said": first_line(e)[:300]}
    pd.set_state_dict(state)
    try:
        forward = compare_forward(pt, pd, x, isolate=not fast)
    except Exception as e:  # noqa: BLE001
        return {**result, "outcome": "raises", "said": f"compare_forward: {first_line(e)}"[:300]}
    result["forward"], result["forward_said"] = forward.passed, "" if forward.passed else red(forward)
    if not fast:
        backward(name, result)
    pinned = {t: p for t, p in forward.pairing.modules().items() if ROOT not in (t, p)}
    result["plants"] = []
    for plant in spec["plants"]:
        what, module = plant[:2]
        try:
            planted = build(name, port_module(name, plant))[1]
            planted.set_state_dict(state)
            report = compare_forward(pt, planted, x, pinned)
            rows = [report.both(r.name) for r in report.paired if not r.passed]
            at = rows[0] if rows else report.first_diverging or ""
            result["plants"].append({"plant": what, "module": module, "red": not report.passed, "at": at,
                                     "named": not report.passed and module in at})
        except PipelineError as e:
            result["plants"].append({"plant": what, "module": module, "red": True, "at": f"refused: {e}"[:200]})
    clean = result["forward"] and (fast or result["backward"])
    caught = all(p["red"] for p in result["plants"])
    named = all(p.get("named") for p in result["plants"])
    result["outcome"] = ("green, every plant red at its module" if named else "green, every plant red") \
        if clean and caught else "green, a plant green" if clean else "red on the correct port"
    return result


def paconverted(name: str, result: dict) -> dict:
    """The row with what PaConvert makes of the torch file now: its convert rate, the lines it marked, whether it
    wrote what as_converted/ holds; where it is not installed, that said."""
    try:
        again = convert_again(name)
    except PipelineError as e:
        return {**result, "paconvert": {"said": str(e)}}
    wrote = (AS_CONVERTED / f"pd_{name}.txt").read_text(encoding="utf-8")
    return {**result, "paconvert": {"rate": again["rate"], "left": again["left"], "as_committed": again["text"] == wrote}}


def said(paconvert: dict) -> str:
    """What PaConvert made of a torch file, in one line."""
    if "said" in paconvert:
        return paconvert["said"]
    return f"{paconvert['rate']}, {paconvert['left']} lines marked `{LEFT}`" + \
        ("" if paconvert["as_committed"] else f"; not what {AS_CONVERTED.name}/ holds")


def load(folder: Path) -> dict:
    """The recorded run ({"seconds": 0, "results": []} where none is)."""
    held = Path(folder) / recorded.PACONVERT_JSON
    return json.loads(held.read_text(encoding="utf-8")) if held.exists() else {"seconds": 0, "results": []}


def why(r: dict) -> str:
    if r["outcome"].startswith("green"):
        plants = "; ".join(f"{p['plant']}: {'red at ' + p['at'] if p['red'] else 'GREEN'}" for p in r["plants"])
        return f"plants: {plants}"
    return r.get("said") or (r.get("forward_said") and f"compare_forward: {r['forward_said']}") \
        or f"compare_backward: {r.get('backward_said')}"


def section(run: dict) -> list:
    """docs/zoo.md's section, from the recorded run."""
    results = run["results"]
    rows = [[f"`{r['model']}`", r["style"], said(r["paconvert"]), r["hand_fixes"], tables.kind(r["outcome"]),
             why(r)] for r in results]
    return [TITLE, "",
            "Torch models of this project's own, each in its upstream's style, converted by PaConvert 3.3.1 as a "
            "user converts a file, its leftovers fixed by hand: [the PaConvert page](paconvert.md) says how. "
            f"`{recorded.PACONVERT_COMMAND}` judges them ({run['seconds']} s, one model after another):", "",
            "- the torch file `examples/paconvert/pt_<model>.py`; PaConvert's output as it wrote it, "
            "`examples/paconvert/as_converted/pd_<model>.txt`; the port, that output with each hand fix marked "
            f"`{MARK}`, `examples/paconvert/pd_<model>.py`;",
            "- converted with no map, judged by compare_forward cumulative and isolated and compare_backward over "
            f"{STEPS} steps of SGD (Dropout and DropPath off: each framework draws its own);",
            "- planted with bugs a user makes while fixing the leftovers, one line of the port each, each "
            "expected red at its module.", "",
            "A verdict reads as in How to read a row. PaConvert: the convert rate its log gives and the lines it "
            f"marked `{LEFT}`.", "",
            *tables.table(["model", "style", "PaConvert", "hand fixes", "verdict", "why"], rows), ""]


TITLE = "## Ports made with PaConvert"


def write(results: list, seconds: float, run: dict):
    """docs/bench/zoo_paconvert.json (every row judged by this run, its facts kept), then the zoo's pages again by
    their own command (families.pages)."""
    from tools.zoo import families
    recorded.write(recorded.BENCH.parent / recorded.PACONVERT_JSON, [{**r, "measured": run} for r in results], seconds)
    families.pages()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--only", nargs="+", metavar="MODEL", help=f"some of {', '.join(MODELS)}; writes nothing")
    ap.add_argument("--fast", action="store_true", help="forward cumulative and the plants; writes nothing")
    args = ap.parse_args()
    unknown = sorted(set(args.only or ()) - set(MODELS))
    if unknown:
        raise PipelineError(f"--only {' '.join(unknown)}: not a model of this zoo; its models: {' '.join(MODELS)}")
    whole = not args.only and not args.fast
    if whole and not installed():
        raise PipelineError(f"paconvert is not installed (a whole run converts each torch file again): "
                            f"pip install --no-deps -r {REQUIREMENTS}")
    run = recorded.facts("tools.zoo.paconvert", sys.argv)
    start, results = time.time(), []
    for name in args.only or MODELS:
        began = time.time()
        r = paconverted(name, judge_one(name, args.fast))
        r["seconds"] = round(time.time() - began, 1)
        results.append(r)
        print(f"{name} ({r['seconds']} s): {r['outcome']}; {why(r)}; PaConvert: {said(r['paconvert'])}", flush=True)
    print(f"{len(results)} models, {time.time() - start:.0f} s")
    if whole:
        from tools import bench_doc
        write(results, time.time() - start, bench_doc.finish(run))
        print(f"wrote docs/bench/{recorded.PACONVERT_JSON} and docs/zoo.md")


if __name__ == "__main__":
    run_main(main)
