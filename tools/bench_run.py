"""What `python -m portcheck run` costs over the two scripts' own first N steps, on examples/scripts' pairs: the
plain loop (pt_train.py, pd_train.py) and the Trainers (pt_trainer.py, pd_trainer.py).

    python tools/bench_run.py              # writes docs/bench/run.json, {pair: its figures}, and run.md (~8 minutes)
    python tools/bench_run.py --page       # docs/bench/run.md again from run.json, nothing measured
    python tools/bench_run.py --pair trainer --json /tmp/trainer.json

Plain: each script run to its N-th optimizer step and stopped there, nothing recorded (the recorder's "plain" side:
its optimizer step counted, nothing else). Run: `python -m portcheck run` whole: the torch and Paddle runs, torch's
own runs (float64, and against itself: run.MOVED_SIDES), then the judging. The budget (issue 50): the run's torch and
Paddle runs and its judging at most 3x the plain runs, plus torch's own runs. Each figure is the best of --repeats,
in wall seconds and in CPU seconds (each process's own and its children's: what a shared machine's load does not
stretch); the budget is judged on the CPU seconds.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from portcheck.scripts import launch, run
from portcheck.core.errors import require, run_main
from tools import bench_doc

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "python tools/bench_run.py"


def cpu() -> float:
    """The CPU seconds (user + system) of the processes waited for so far: the scripts `portcheck run` waits for
    count in its own. On a shared machine wall seconds measure the load, these the work."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv, env=None, check=True) -> tuple:
    """(wall seconds, CPU seconds, exit code) of argv."""
    started, used = time.perf_counter(), cpu()
    code = subprocess.run(argv, env=env, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.perf_counter() - started, cpu() - used, code


def plain(argv, framework: str, steps: int, folder: str) -> tuple:
    env = run.environment({"side": "plain", "framework": framework, "steps": steps, "out": folder})
    return timed(argv, env)


# {pair: (torch script, Paddle script, their arguments)}: the Trainers write to an output folder, given in DIR
PAIRS = {"example": ("pt_train.py", "pd_train.py", ""),
         "trainer": ("pt_trainer.py", "pd_trainer.py", "--output-dir {tmp}/{fw}_trainer_out")}


def bench(torch_cmd: str, paddle_cmd: str, steps: int, repeats: int, tmp: str) -> dict:
    """One pair's figures: each best of `repeats`, wall seconds and CPU seconds."""
    load = os.getloadavg()[0]  # the machine's as the pair starts
    argvs = {"torch": run.command(torch_cmd, "torch"), "paddle": run.command(paddle_cmd, "paddle")}
    figures = {"plain torch": [], "plain paddle": [], "run": [], **{side: [] for side, _ in run.SIDES}}
    for _ in range(repeats):
        for fw in ("torch", "paddle"):
            figures[f"plain {fw}"].append(plain(argvs[fw], fw, steps, tmp)[:2])
        out = Path(tmp) / "out"
        *took, code = timed([sys.executable, "-m", "portcheck", "run", "--torch", torch_cmd, "--paddle", paddle_cmd,
                             "--steps", str(steps), "--out", str(out)], check=False,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(launch.LIB),
                                                                             os.environ.get("PYTHONPATH", "")])))
        figures["run"].append(took)
        if code not in (0, 1):
            raise SystemExit(f"error: portcheck run exited {code}: run it alone to see why")
        for side, fw in run.SIDES:  # each side alone, as run runs it
            env = run.environment(run.side_settings(side, out, steps))
            figures[side].append(timed(argvs[fw], env)[:2])
    result = {"steps": steps, "budget": 3.0, "cores": len(os.sched_getaffinity(0)), "load average": round(load, 1)}
    for i, unit in enumerate(("seconds", "cpu seconds")):
        best = {k: min(v[i] for v in vs) for k, vs in figures.items()}
        own = best["plain torch"] + best["plain paddle"]
        yardsticks = sum(best[side] for side in ("torch64", *run.MOVED_SIDES))  # torch's own runs
        said = "" if i == 0 else " (cpu)"
        result.update({unit: {k: round(v, 2) for k, v in best.items()},
                       f"judging {unit}": round(best["run"] - best["torch"] - best["paddle"] - yardsticks, 2),
                       f"overhead without the yardstick runs{said}": round((best["run"] - yardsticks) / own, 2)})
    # the budget judged on CPU seconds: the wall's, on a machine shared with other work, is its load's as much
    result["within"] = result["overhead without the yardstick runs (cpu)"] <= result["budget"]
    return result


LABELS = {"example": "the plain loop (`pt_train.py`, `pd_train.py`)",
          "trainer": "the Trainers (`pt_trainer.py`, `pd_trainer.py`)", "given": "the pair given"}


def render(result: dict) -> str:
    """The page (docs/bench/run.md), from the JSON beside it alone."""
    runs = [f.get(bench_doc.RUN) or {"command": COMMAND} for f in result.values()]
    steps = {f["steps"] for f in result.values()}
    lines = ["# `portcheck run`: its cost over the scripts' own steps", "", bench_doc.header(runs, COMMAND), "",
             f"{'/'.join(map(str, sorted(steps)))} steps of each pair; 1-min load as each pair started: "
             + ", ".join(f"{pair} {f['load average']:.1f}" for pair, f in result.items())
             + ". The budget: the run's torch and Paddle runs and its judging at most "
             f"{next(iter(result.values()))['budget']:g}x the scripts' own steps, plus torch's own runs (float64, "
             "against itself). A shared machine's load stretches wall seconds, so the budget is judged on CPU "
             "seconds (each process's and its children's), the wall seconds shown beside.", "",
             "| pair | the scripts' own first steps (torch + Paddle) | `portcheck run` | of which torch's own runs "
             "(float64, against itself) | without them |", "|---|---|---|---|---|"]
    for pair, f in result.items():
        cpu, wall = f["cpu seconds"], f["seconds"]
        own = [round(cpu[side], 2) for side in ("torch64", *run.MOVED_SIDES)]
        lines.append(f"| {LABELS[pair]} | {cpu['plain torch']:g} + {cpu['plain paddle']:g} CPU s "
                     f"({wall['plain torch']:g} + {wall['plain paddle']:g} wall) | {cpu['run']:g} CPU s "
                     f"({wall['run']:g} wall) | {' + '.join(f'{x:g}' for x in own)} CPU s | "
                     f"**{f['overhead without the yardstick runs (cpu)']:g}x** "
                     f"({f['overhead without the yardstick runs']:g}x wall) |")
    within = [pair for pair, f in result.items() if f["within"]]
    lines += ["", f"Within the budget: {len(within)} of {len(result)} pairs ({', '.join(within) or 'none'}). The wall "
              "figures, taken "
              "one after another on a shared machine, need not add up (a negative \"judging seconds\" in the JSON): "
              "read the CPU seconds."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", choices=(*PAIRS, "all"), default="all", help="examples/scripts' pair(s) measured")
    ap.add_argument("--torch", help="another pair's torch command (with --paddle): measured as 'given'")
    ap.add_argument("--paddle")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", type=Path, default=bench_doc.PAGES / "run.json", help="the figures; the page (.md) "
                    "beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    if args.page:
        require(args.json, COMMAND)
        bench_doc.write(args.json.with_suffix(".md"), render(json.loads(args.json.read_text())))
        return
    if (args.torch is None) != (args.paddle is None):
        raise SystemExit("error: give --torch and --paddle together")
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = lambda name, given, fw: f"{sys.executable} {ROOT / 'examples/scripts' / name} " + \
            given.format(tmp=tmp, fw=fw)
        pairs = {"given": (args.torch, args.paddle)} if args.torch else {
            pair: (script(pt, given, "pt"), script(pd, given, "pd")) for pair, (pt, pd, given) in PAIRS.items()
            if args.pair in (pair, "all")}
        for pair, (torch_cmd, paddle_cmd) in pairs.items():
            facts = bench_doc.start()
            result[pair] = {**bench(torch_cmd, paddle_cmd, args.steps, args.repeats, tmp),
                            bench_doc.RUN: bench_doc.finish(facts)}
            print(pair, json.dumps(result[pair], indent=1), flush=True)
    bench_doc.write(args.json, json.dumps(result, indent=1) + "\n")
    bench_doc.write(args.json.with_suffix(".md"), render(result))


if __name__ == "__main__":
    run_main(main)
