"""What `python -m portcheck run` costs over the two scripts' own first N steps, on examples/scripts' pairs: the
plain loop (pt_train.py, pd_train.py) and the Trainers (pt_trainer.py, pd_trainer.py).

    python tools/bench_run.py              # writes docs/bench/run.json, {pair: its figures}, and run.md (~8 minutes)
    python tools/bench_run.py --page       # docs/bench/run.md again from run.json, nothing measured
    python tools/bench_run.py --pair trainer --json /tmp/trainer.json
    python tools/bench_run.py --launched --repeats 1   # the launched pairs whole (data and tensor parallel, 2 ranks)

Plain: each script run to its N-th optimizer step and stopped there, nothing recorded (the recorder's "plain" side:
its optimizer step counted, nothing else). Run: `python -m portcheck run` whole: the torch and Paddle runs, torch's
own runs (float64, and against itself: folders.MOVED_SIDES), then the judging. The budget: the run's torch and
Paddle runs and its judging at most 3x the plain runs, plus torch's own runs. Each figure is the best of --repeats,
in wall seconds and in CPU seconds (each process's own and its children's: what a shared machine's load does not
stretch); the budget is judged on the CPU seconds.

Launched (--launched): examples/scripts' pairs run under a launcher on 2 ranks, data parallel (pt_ddp.py under torchrun,
pd_ddp.py under Paddle's launcher) and tensor parallel (pt_tp.py, one process, against pd_tp.py split on 2 ranks),
`python -m portcheck run` whole: its wall and CPU seconds and the largest resident memory of any of its processes.
Measured figures are added to the JSON, the others kept.
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

from portcheck.scripts import folders, launch, run
from portcheck.core.errors import run_main
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


def whole(argv, env=None) -> tuple:
    """(wall seconds, CPU seconds, largest resident MB of any process, exit code) of argv and every process under
    it: os.wait4's usage of the child, which holds its own waited-for children's."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, used = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, used.ru_utime + used.ru_stime, used.ru_maxrss / 1024, child.returncode


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
        yardsticks = sum(best[side] for side in ("torch64", *folders.MOVED_SIDES))  # torch's own runs
        said = "" if i == 0 else " (cpu)"
        result.update({unit: {k: round(v, 2) for k, v in best.items()},
                       f"judging {unit}": round(best["run"] - best["torch"] - best["paddle"] - yardsticks, 2),
                       f"overhead without the yardstick runs{said}": round((best["run"] - yardsticks) / own, 2)})
    # the budget judged on CPU seconds: the wall's, on a machine shared with other work, is its load's as much
    result["within"] = result["overhead without the yardstick runs (cpu)"] <= result["budget"]
    return result


# {launched pair: (torch command, Paddle command)}, {tmp}: a scratch folder, {torchrun}: the one beside this Python
LAUNCHED = {"ddp": ("{torchrun} --nproc_per_node 2 {scripts}/pt_ddp.py",
                    "{python} -m paddle.distributed.launch --log_dir {tmp}/log --nproc_per_node 2 {scripts}/pd_ddp.py"),
            "tp": ("{python} {scripts}/pt_tp.py",
                   "{python} -m paddle.distributed.launch --log_dir {tmp}/log --nproc_per_node 2 {scripts}/pd_tp.py")}
LAUNCHED_LABELS = {"ddp": "data parallel: `pt_ddp.py` under `torchrun`, `pd_ddp.py` under Paddle's launcher, 2 ranks "
                          "each",
                   "tp": "tensor parallel: `pt_tp.py` in one process, `pd_tp.py` split on 2 ranks"}
LAUNCHED_KEY = "launched"  # the JSON's key of the launched pairs' figures, beside the pairs'


def bench_launched(torch_cmd: str, paddle_cmd: str, steps: int, repeats: int, tmp: str) -> dict:
    """`portcheck run` of a launched pair, whole: each figure the best of `repeats`."""
    load = os.getloadavg()[0]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(launch.LIB), os.environ.get("PYTHONPATH", "")]))
    took = [whole([sys.executable, "-m", "portcheck", "run", "--torch", torch_cmd, "--paddle", paddle_cmd,
                   "--steps", str(steps), "--out", str(Path(tmp) / f"out{i}")], env) for i in range(repeats)]
    codes = {t[3] for t in took}
    if codes - {0, 1}:
        raise SystemExit(f"error: portcheck run exited {sorted(codes - {0, 1})}: run it alone to see why")
    return {"steps": steps, "load average": round(load, 1), "exit": max(codes),
            "seconds": round(min(t[0] for t in took), 1),
            "cpu seconds": round(min(t[1] for t in took), 1), "largest process mb": round(min(t[2] for t in took))}


LABELS = {"example": "the plain loop (`pt_train.py`, `pd_train.py`)",
          "trainer": "the Trainers (`pt_trainer.py`, `pd_trainer.py`)", "given": "the pair given"}


def render(result: dict) -> str:
    """The page (docs/bench/run.md), from the JSON beside it alone."""
    launched = result.get(LAUNCHED_KEY, {})
    result = {pair: f for pair, f in result.items() if pair != LAUNCHED_KEY}
    runs = [f.get(bench_doc.RUN) or {"command": COMMAND} for f in (*result.values(), *launched.values())]
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
        own = [round(cpu[side], 2) for side in ("torch64", *folders.MOVED_SIDES)]
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
    if launched:
        lines += ["", "## Launched pairs", "",
                  "`python -m portcheck run` whole on a pair launched on 2 ranks: the torch and Paddle runs, torch's "
                  "float64 run and its run against itself, each started as its side's command starts it, then the "
                  "judging. Its CPU seconds are every "
                  "process's; its memory the largest resident set of any one process. 1-min load as each pair "
                  "started: " + ", ".join(f"{pair} {f['load average']:.1f}" for pair, f in launched.items()) + ".", "",
                  "| pair | steps | exit | wall s | CPU s | largest process |", "|---|---|---|---|---|---|"]
        for pair, f in launched.items():
            lines.append(f"| {LAUNCHED_LABELS[pair]} | {f['steps']} | {f['exit']} "
                         f"({'green' if f['exit'] == 0 else 'red'}) | {f['seconds']:g} | {f['cpu seconds']:g} | "
                         f"{f['largest process mb']} MB |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", choices=(*PAIRS, "all"), default="all", help="examples/scripts' pair(s) measured")
    ap.add_argument("--launched", action="store_true", help="the launched pairs instead (data and tensor parallel, "
                    "2 ranks): portcheck run whole, its time and largest process")
    ap.add_argument("--torch", help="another pair's torch command (with --paddle): measured as 'given'")
    ap.add_argument("--paddle")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", type=Path, default=bench_doc.PAGES / "run.json", help="the figures; the page (.md) "
                    "beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    if args.page:
        bench_doc.rewrite(args.json.with_suffix(".md"), args.json, render, COMMAND)
        return
    if (args.torch is None) != (args.paddle is None):
        raise SystemExit("error: give --torch and --paddle together")
    result = json.loads(args.json.read_text()) if args.json.is_file() else {}  # what is not measured now is kept
    with tempfile.TemporaryDirectory() as tmp:
        if args.launched:
            fill = dict(python=sys.executable, scripts=ROOT / "examples" / "scripts", tmp=tmp,
                        torchrun=Path(sys.executable).parent / "torchrun")
            for pair, commands in LAUNCHED.items():
                facts = bench_doc.start()
                result.setdefault(LAUNCHED_KEY, {})[pair] = {
                    **bench_launched(*(c.format(**fill) for c in commands), args.steps, args.repeats, tmp),
                    bench_doc.RUN: bench_doc.finish(facts)}
                print(pair, json.dumps(result[LAUNCHED_KEY][pair], indent=1), flush=True)
            bench_doc.write(args.json, json.dumps(result, indent=1) + "\n")
            bench_doc.write(args.json.with_suffix(".md"), render(result))
            return
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
