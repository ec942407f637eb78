"""What `python -m portcheck run` costs over the two scripts' own first N steps (examples/scripts by default).

    python tools/bench_run.py              # writes docs/run_bench.json (~3 minutes on 2 cores)

Plain: each script run to its N-th optimizer step and stopped there, nothing recorded (the recorder's "plain" side:
its optimizer step counted, nothing else). Run: `python -m portcheck run` whole: the torch and Paddle runs, torch's
own runs (float64, and against itself: run.MOVED_SIDES), then the judging. The budget (issue 50): the run's torch and
Paddle runs and its judging at most 3x the plain runs, plus torch's own runs. Each figure is the best of --repeats,
wall seconds.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from portcheck import run
from portcheck.errors import run_main
from portcheck.fileio import atomic_write
from portcheck.recorder import SETTINGS

ROOT = Path(__file__).resolve().parent.parent


def timed(argv, env=None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def plain(argv, framework: str, steps: int, folder: str) -> float:
    env = run.environment({"side": "plain", "framework": framework, "steps": steps, "out": folder})
    return timed(argv, env)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch", default=f"{sys.executable} {ROOT / 'examples/scripts/pt_train.py'}")
    ap.add_argument("--paddle", default=f"{sys.executable} {ROOT / 'examples/scripts/pd_train.py'}")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", type=Path, default=ROOT / "docs" / "run_bench.json")
    args = ap.parse_args()
    argvs = {"torch": run.command(args.torch, "torch"), "paddle": run.command(args.paddle, "paddle")}
    figures = {"plain torch": [], "plain paddle": [], "run": [], **{side: [] for side, _ in run.SIDES}}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for fw in ("torch", "paddle"):
                figures[f"plain {fw}"].append(plain(argvs[fw], fw, args.steps, tmp))
            out = Path(tmp) / "out"
            started = time.perf_counter()
            code = subprocess.run([sys.executable, "-m", "portcheck", "run", "--torch", args.torch, "--paddle",
                                   args.paddle, "--steps", str(args.steps), "--out", str(out)],
                                  env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                      [str(run.LIB), os.environ.get("PYTHONPATH", "")])),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
            figures["run"].append(time.perf_counter() - started)
            if code not in (0, 1):
                raise SystemExit(f"error: portcheck run exited {code}: run it alone to see why")
            for side, fw in run.SIDES:  # each side alone, as run runs it
                env = run.environment(run.side_settings(side, out, args.steps))
                figures[side].append(timed(argvs[fw], env))
    best = {k: min(v) for k, v in figures.items()}
    own = best["plain torch"] + best["plain paddle"]
    yardsticks = sum(best[side] for side in ("torch64", *run.MOVED_SIDES))  # torch's own runs
    judged = best["run"] - best["torch"] - best["paddle"] - yardsticks
    ratio = (best["run"] - yardsticks) / own
    result = {"steps": args.steps, "seconds": {k: round(v, 2) for k, v in best.items()},
              "judging seconds": round(judged, 2), "overhead without the yardstick runs": round(ratio, 2),
              "budget": 3.0, "within": ratio <= 3.0, "cores": len(os.sched_getaffinity(0))}
    atomic_write(args.json, lambda tmp: Path(tmp).write_text(json.dumps(result, indent=1) + "\n"))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    run_main(main)
