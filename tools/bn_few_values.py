"""How many values per channel (batch x spatial) a BatchNorm in training must normalise for compare_backward to
judge the gradients through it: the measurement behind portcheck.gradients.optimizers.FEW_VALUES (its page:
docs/bench/bn_few_values.md; its table in docs/tolerances.md).

    python tools/bn_few_values.py --nets small deep   # docs/bench/bn_few_values.md and its figures, .json
    python tools/bn_few_values.py --seeds 8 --plant-seeds 1 --sizes 8 16 32 --nets dense   # the dense net's cells
    python tools/bn_few_values.py --page              # the page again from bn_few_values.json, nothing measured

Three users' nets, a correct Paddle port of each: small, conv(3, 8, 3, pad 1) - BatchNorm2d - ReLU - conv(8, 8, 1) -
BatchNorm2d - ReLU - mean - Linear(8, 4); deep, conv(3, 32, 1) - 8 x (BatchNorm2d - ReLU - conv(32, 32, 1)) - mean -
Linear(32, 4); dense, densenet121's end at a quarter of its width (a stem of two 3x3 conv - BatchNorm2d - ReLU at 4 x
the map size, average pooling to it, a DenseNet block of 16 concatenating layers, 128 channels in, growth 32, then
BatchNorm2d - ReLU - mean - Linear(640, 4)); SGD with momentum 0.9 at lr 0.1, compare_backward over 3 steps, each
judged by the plain rule (no BatchNorm taken as over few values); the input's batch and map size give N values per
channel at the last BatchNorms. Each setting is its own process: torch at 1 and 2 threads
(torch.set_num_threads), ATEN_CPU_CAPABILITY=avx2 and the CPU's default (read once, when torch loads). Planted on
the Paddle side: a BatchNorm epsilon of 1e-3, its momentum as torch's (Paddle's is 1 - torch's), a conv weight off
by 1e-3. The table: per N and setting, the correct ports red out of the seeds (with the worst multiple of its
allowance), and the plants green (each must be 0). A run's cells replace those of the same net and N in the JSON and
keep the others (the dense net's run has fewer seeds), and the page says each run's command.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 - first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from portcheck.core.errors import PipelineError, require, run_main

try:
    from tools import bench_doc
except ModuleNotFoundError:  # the project (which installs tools/) is not: the library alone
    raise SystemExit("error: this project's packages are not importable: run `pip install -r requirements.txt` "
                     "in its venv") from None

COMMAND = "python tools/bn_few_values.py"

SIZES = {2: (2, 1), 4: (4, 1), 8: (2, 2), 16: (4, 2), 32: (2, 4)}  # N: (batch, map side)
PLANTS = ("epsilon", "momentum", "weight")


def small(nn, norm):
    return [nn.Conv2d(3, 8, 3, padding=1), norm(8), nn.ReLU(), nn.Conv2d(8, 8, 1), norm(8), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)]


def deep(nn, norm):  # more BatchNorms in a row: each amplifies what reaches it
    return [nn.Conv2d(3, 32, 1)] + [m for _ in range(8) for m in (norm(32), nn.ReLU(), nn.Conv2d(32, 32, 1))] + [
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4)]


def dense(nn, norm, channels=128, growth=32, depth=16):
    """densenet121's end at a quarter of its width: a stem of two 3x3 convs, each with its BatchNorm and ReLU, at 4 x
    the map size (what the rounding in the block sends back to reaches them), an average pooling to the map size, then
    densenet's last block of 16 layers, each reading every earlier one's output (concatenated)."""
    width = channels + growth * depth
    return [nn.Conv2d(3, 64, 3, padding=1), norm(64), nn.ReLU(), nn.Conv2d(64, channels, 3, padding=1), norm(channels),
            nn.ReLU(), nn.AvgPool2d(4), _block(nn, norm, channels, growth, depth), norm(width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 4)]


def _block(nn, norm, channels, growth, depth):
    """A DenseNet block, as torchvision writes one: layer i is BatchNorm - ReLU - conv 1x1 to 4 x growth - BatchNorm
    - ReLU - conv 3x3 to growth over the concatenation of the block's input and every earlier layer's output."""
    if isinstance(nn, _Paddle):
        import paddle
        base, cat = nn.Layer, paddle.concat
    else:
        import torch
        base, cat = nn.Module, torch.cat

    class Block(base):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Sequential(
                norm(channels + i * growth), nn.ReLU(), nn.Conv2d(channels + i * growth, 4 * growth, 1),
                norm(4 * growth), nn.ReLU(), nn.Conv2d(4 * growth, growth, 3, padding=1)) for i in range(depth)])

        def forward(self, x):
            for layer in self.layers:
                x = cat([x, layer(x)], 1)
            return x
    return Block()


NETS = {"small": small, "deep": deep, "dense": dense}  # (torch.nn or paddle.nn, a BatchNorm2d factory) -> layers


class _Paddle:
    """paddle.nn under torch.nn's names, for one net definition."""
    def __getattr__(self, name):
        import paddle
        return getattr(paddle.nn, {"ModuleList": "LayerList"}.get(name, name.replace("2d", "2D")))


def nets(seed, batch, side, plant=None, net="small"):
    """(torch model, its correct Paddle port or one with `plant`, inputs, targets) of N = batch x side x side values
    per channel."""
    import torch
    from portcheck import convert
    torch.manual_seed(seed)
    pt = torch.nn.Sequential(*NETS[net](torch.nn, torch.nn.BatchNorm2d))
    epsilon, momentum = (1e-3 if plant == "epsilon" else 1e-5), (0.1 if plant == "momentum" else 0.9)
    pd_nn = _Paddle()
    pd = pd_nn.Sequential(*NETS[net](pd_nn, lambda c: pd_nn.BatchNorm2d(c, epsilon=epsilon, momentum=momentum)))
    convert(pt, pd)
    if plant == "weight":  # the second conv
        conv = [m for m in pd.sublayers() if isinstance(m, pd_nn.Conv2d)][1]
        conv.weight.set_value(conv.weight.numpy() + 1e-3)
    side *= 4 if net == "dense" else 1  # its stem's pooling
    x, y = torch.randn(batch, 3, side, side).numpy(), torch.randint(0, 4, (batch,)).numpy()
    return pt, pd, x, y


def run(seed, n, plant=None, net="small"):
    """(passed, worst multiple of an allowance, its row) of compare_backward on one seed's nets."""
    import paddle
    import torch
    from portcheck import compare_backward
    pt, pd, x, y = nets(seed, *SIZES[n], plant, net)
    report = compare_backward(
        pt, pd, x, y, (torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy),
        (lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9),
         lambda ps: paddle.optimizer.Momentum(0.1, 0.9, parameters=ps)),
        steps=3)
    rows = [r for r in report.grads] + [r for rows in report.steps for r in rows]
    worst = max(rows, key=lambda r: r.max / r.allowed if r.allowed else 0.0)
    return report.passed, worst.max / worst.allowed if worst.allowed else float("inf"), worst.name


def setting(args):
    """One process: every N and seed at this process's threads and CPU capability, as JSON lines, each judged by the
    plain rule (no BatchNorm judged as over few values): the bound is the N from which that rule holds."""
    import torch
    from portcheck.gradients import optimizers
    optimizers.FEW_VALUES = 0
    torch.set_num_threads(args.threads)
    for net in args.nets:
        for n in args.sizes:
            for plant, seeds in [(None, args.seeds)] + [(plant, args.plant_seeds) for plant in PLANTS]:
                for seed in range(seeds):
                    passed, worst, name = run(seed, n, plant, net)
                    print(json.dumps({"net": net, "n": n, "seed": seed, "plant": plant, "passed": passed,
                                      "worst": worst, "row": name, "cpu": torch.backends.cpu.get_cpu_capability()}),
                          flush=True)


def measured(args) -> list:
    """Every setting's process, its JSON lines gathered: one cell per N, net, CPU capability and thread count."""
    cells = {}
    for capability in ("default", "avx2"):
        for threads in (1, 2):
            env = dict(os.environ)
            env.pop("ATEN_CPU_CAPABILITY", None)
            if capability != "default":
                env["ATEN_CPU_CAPABILITY"] = capability
            cmd = [sys.executable, __file__, "--threads", str(threads), "--seeds", str(args.seeds),
                   "--plant-seeds", str(args.plant_seeds), "--sizes", *map(str, args.sizes), "--nets", *args.nets]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode:
                raise PipelineError(f"the setting {capability}, {threads} thread(s) failed: "
                                    f"{(out.stderr.strip().splitlines() or [''])[-1]}")
            for line in out.stdout.splitlines():
                if line.startswith("{"):
                    r = json.loads(line)
                    cell = cells.setdefault((r["n"], r["net"], capability, threads), {
                        "n": r["n"], "net": r["net"], "capability": capability, "cpu": r["cpu"], "threads": threads,
                        "seeds": args.seeds, "red": 0, "worst": 0.0, "row": "", "plants green": 0, "plants": 0})
                    if r["plant"] is None:
                        cell["red"] += not r["passed"]
                        if r["worst"] > cell["worst"]:
                            cell["worst"], cell["row"] = r["worst"], f"seed {r['seed']}: {r['row']}"
                    else:
                        cell["plants"] += 1
                        cell["plants green"] += r["passed"]
    return list(cells.values())


CELL = {"n", "net", "capability", "cpu", "threads", "seeds", "red", "worst", "row", "plants green", "plants"}


def recorded(path: Path) -> dict:
    """The JSON a run wrote (bn_few_values.json), its parts and their cells checked: anything else ends in one line."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PipelineError(f"{path} cannot be read as this tool's JSON ({type(e).__name__}): run `{COMMAND}` to "
                            "write it again") from None
    parts = data.get("parts") if isinstance(data, dict) else None
    if not (isinstance(parts, list) and all(isinstance(p, dict) and isinstance(p.get("cells"), list) and all(
            isinstance(c, dict) and CELL <= c.keys() for c in p["cells"]) for p in parts)):
        raise PipelineError(f"{path} is not this tool's JSON (parts, each with its cells): run `{COMMAND}` to write "
                            "it again")
    return data


def merged(data: dict, part: dict) -> dict:
    """The JSON with a run's part added: its cells replace the earlier parts' of the same net and N, a part left
    with none is dropped."""
    ours = {(c["net"], c["n"]) for c in part["cells"]}
    parts = [{**p, "cells": [c for c in p["cells"] if (c["net"], c["n"]) not in ours]} for p in data.get("parts", [])]
    return {"parts": [p for p in parts if p["cells"]] + [part]}


def cells(data: dict) -> list:
    order = list(NETS)
    return sorted((c for p in data["parts"] for c in p["cells"]),
                  key=lambda c: (c["n"], order.index(c["net"]), c["capability"], c["threads"]))


def table(data: dict) -> list:
    """The table's lines (docs/tolerances.md holds them as written here) and the smallest clean N."""
    lines = ["| N | net | ATEN_CPU_CAPABILITY (torch's) | threads | correct ports red | worst (x allowance) "
             "| plants green |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {c['n']} | {c['net']} | {c['capability']} ({c['cpu']}) | {c['threads']} | {c['red']}/{c['seeds']} | "
              f"{c['worst']:.3g} ({c['row']}) | {c['plants green']}/{c['plants']} |" for c in cells(data)]
    return lines


def smallest(data: dict):
    """The smallest N with every correct port green and every plant red in every setting, or None."""
    every = cells(data)
    clean = [n for n in sorted({c["n"] for c in every})
             if all(c["red"] == 0 and c["plants green"] == 0 for c in every if c["n"] == n)]
    return clean[0] if clean else None


def render(data: dict) -> str:
    n = smallest(data)
    lines = ["# Values per channel a BatchNorm in training needs", "",
             bench_doc.header([p.get(bench_doc.RUN) or {} for p in data["parts"]], COMMAND), "",
             "Each cell: the correct Paddle ports red out of the seeds under the plain rule (no BatchNorm judged as "
             "over few values), the worst multiple of its allowance a correct port used (its seed and row), and the "
             "plants green out of those run (each must be 0). The worst is the largest max diff over its allowance: a "
             "seed red within it is red by a bound on a mean (the guide's on the loss). The nets, settings and "
             "plants: `python "
             "tools/bn_few_values.py --help`. A net's rows come from the run whose command names it (or from the "
             "run of every net, where none does).", "", *table(data), "",
             f"Smallest N with every correct port green and every plant red in every setting: {n or 'none'} "
             f"(portcheck.gradients.optimizers.FEW_VALUES is the library's bound)."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--seeds", type=int, default=16, help="correct ports per N and setting")
    parser.add_argument("--plant-seeds", type=int, default=2, help="nets per plant, N and setting")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), choices=list(SIZES),
                        help="values per channel")
    parser.add_argument("--nets", nargs="+", default=list(NETS), choices=list(NETS), help="the nets measured")
    parser.add_argument("--out", type=Path, default=bench_doc.PAGES / "bn_few_values.md",
                        help="the page (Markdown); its figures go beside it as .json, a run's cells replacing "
                             "those of its nets and sizes")
    bench_doc.add_page_flag(parser)
    parser.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)  # one setting's process
    args = parser.parse_args()
    if args.seeds < 1 or args.plant_seeds < 1:
        parser.error("--seeds and --plant-seeds take at least 1")
    if args.threads is not None:
        return setting(args)
    if args.out.suffix != ".md":
        parser.error("--out must name a .md file (its .json is written beside it)")
    source = args.out.with_suffix(".json")
    if args.page:
        text = render(recorded(require(source, COMMAND)))
        bench_doc.write(args.out, text)
        print(text)
        return
    earlier = recorded(source) if source.exists() else {}  # checked before an hour is spent
    run = bench_doc.start()
    part = {"cells": measured(args)}
    part[bench_doc.RUN] = bench_doc.finish(run)
    data = merged(earlier, part)
    text = render(data)
    bench_doc.write(source, json.dumps(data, indent=1) + "\n")
    bench_doc.write(args.out, text)
    print(text)


if __name__ == "__main__":
    run_main(main)
