"""A pipeline as data: its steps, each step's scripts and the pairs its check judges; and the one runner.

A pipeline declares its table once (a client's own, e.g. the BERT example's); its run_all.py turns the table into
commands with its own flags and hands them to `run()`, and its checks read
the pairs and the scripts that write them from the same table. A second pipeline reuses the runner with
a table of its own:

    table = [Step("Step1 forward", 1, [["examples/x/Step1/pt_forward.py"], ["examples/x/Step1/pd_forward.py"],
                                       ["examples/x/Step1/check_step1.py"]], checks=("forward",))]
    results, failed = run(table, root, on_result=lambda results: write_my_summary(results))

Script paths are relative to `root`, the folder the pipeline lives in (its repository). Each script runs in its own process, in order; a
SideBySide group runs at once, each on its own share of the cores. The first script that fails stops the
run: the steps after it are "not run". Ctrl-C ends the running scripts with their own lines, marks the
step "interrupted" and raises portcheck.core.errors.Interrupted.

Given a hand-in folder, run() keeps its record of the run there (diagnostics/steps.json: each step's status,
its pairs and, where the table says, the script that writes each side), rewritten before and after every
step: the hand-in checker reads it, so a hand-in whose later steps were not run by its last run (Ctrl-C, a
failure, a kill) is red, and a record naming another script than the table's is red.
"""
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from portcheck.core.errors import Interrupted
from portcheck.core.fileio import atomic_write, open_regular

MANIFEST = "steps.json"  # in a hand-in's diagnostics/: the last run's steps (see run)


@dataclass(frozen=True)
class Pair:
    """One of the guide's pairs: <name>_torch.npy and <name>_paddle.npy, and the scripts that write them."""
    name: str
    torch: str
    paddle: str

    def how(self) -> dict:
        """The command that makes each side's file: the remedy when one is missing."""
        return {"torch": f"python {self.torch}", "paddle": f"python {self.paddle}"}


@dataclass(frozen=True)
class StepSpec:
    """A step of a pipeline's table: its pairs (in the order its scripts run) and its check."""
    number: int
    name: str
    pairs: tuple
    check: str

    def pair(self, name: str) -> Pair:
        return next(p for p in self.pairs if p.name == name)


@dataclass
class Step:
    """A step as the runner executes it: commands ([script, args...] or a SideBySide), the last one of a
    checked step being its check, and the pairs that check writes verdicts for."""
    name: str
    number: int                  # 0 for a setup step
    scripts: list
    checks: tuple = ()
    writers: tuple = ()          # a Pair for each pair whose sides' scripts the table names (checked in a hand-in)

    @classmethod
    def of(cls, spec: StepSpec, args: dict = None, name: str = None, scripts: list = None):
        """The runner's step for a table's StepSpec: each pair's torch then Paddle script (with args[pair name],
        the flags it is given), then the check; `scripts` replaces the sides' commands (a SideBySide group)."""
        args = args or {}
        sides = []
        for cmd in ([script, *args.get(p.name, [])] for p in spec.pairs for script in (p.torch, p.paddle)):
            if cmd not in sides:  # one script writing two pairs (lr and bp_align) runs once
                sides.append(cmd)
        return cls(name or spec.name, spec.number, (sides if scripts is None else scripts) + [[spec.check]],
                   tuple(p.name for p in spec.pairs), tuple(spec.pairs))


@dataclass
class SideBySide:
    """Scripts that run at the same time, each on its own share of the cores (Step 5's two trainings).
    Small GEMMs and one-thread kernels use two cores poorly: two one-core runs at once finish sooner
    than one two-core run after the other (docs/bench/speed.md)."""
    cmds: list


@dataclass
class Result:
    step: Step
    status: str        # "passed", "FAILED", "done" (no check), "not run" or "interrupted"
    seconds: float
    checked: bool      # its check ran to a verdict (exit 0 or 1), so its verdict files are this run's


def argv(cmd, root) -> list:
    return [sys.executable, str(Path(root) / cmd[0]), *cmd[1:]]


def core_shares(n: int) -> list:
    """This process's cores cut into n contiguous shares, one per script run side by side."""
    cores = sorted(os.sched_getaffinity(0))
    return [cores[i * len(cores) // n:(i + 1) * len(cores) // n] for i in range(n)]


def run_script(cmd, root):
    """(exit code, seconds, the command) of one script."""
    print(f"\n$ python {' '.join(cmd)}", flush=True)
    started = time.time()
    proc = subprocess.Popen(argv(cmd, root))
    try:
        return proc.wait(), time.time() - started, cmd
    except KeyboardInterrupt:  # a Ctrl-C reached the script too: let it end with its own line
        stop(proc)
        raise


def run_side_by_side(group: SideBySide, root):
    """(exit code, seconds, the command) for scripts run at once, each on its core_shares() share;
    OMP_NUM_THREADS follows each share (portcheck.core.runtime would otherwise give each process every core).
    The first script to fail stops the others: its error is the one reported."""
    started, procs = time.time(), []
    try:
        for cmd, share in zip(group.cmds, core_shares(len(group.cmds))):
            print(f"\n$ python {' '.join(cmd)}   # cores {','.join(map(str, share))}, side by side", flush=True)
            procs.append((subprocess.Popen(argv(cmd, root),
                                           env=dict(os.environ, OMP_NUM_THREADS=str(len(share))),
                                           preexec_fn=lambda share=share: os.sched_setaffinity(0, share)), cmd))
        while True:
            codes = [(proc.poll(), cmd) for proc, cmd in procs]
            failed = [(code, cmd) for code, cmd in codes if code]
            if failed or all(code == 0 for code, _ in codes):
                code, cmd = failed[0] if failed else (0, None)
                return code, time.time() - started, cmd
            time.sleep(0.5)
    except KeyboardInterrupt:  # each training ends with its own line
        for proc, _ in procs:
            stop(proc)
        raise
    finally:
        for proc, _ in procs:  # a failure ends the other trainings too
            if proc.poll() is None:
                proc.terminate()
            proc.wait()


def stop(proc, grace: float = 5.0):
    """A script after Ctrl-C: a terminal sends SIGINT to it as well, a `kill -INT` of the runner does not."""
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        proc.wait()


def manifest(table: list, results: list) -> dict:
    """What a hand-in keeps of its last run (diagnostics/steps.json): each checked step's status ("running" for
    the one under way, "not run" for the ones after) and its pairs, with their writers where the table names
    them. Nothing of time or place: a reproduced run writes the same bytes."""
    status = [r.status for r in results] + ["running"] + ["not run"] * len(table)
    return {"steps": [{"number": step.number, "name": step.name, "status": status[i],
                       "pairs": {name: next(({"torch": w.torch, "paddle": w.paddle} for w in step.writers
                                             if w.name == name), None) for name in step.checks}}
                      for i, step in enumerate(table) if step.checks]}


def write_manifest(table: list, results: list, folder):
    path = Path(folder) / "diagnostics" / MANIFEST
    text = json.dumps(manifest(table, results), indent=1) + "\n"
    try:
        with open_regular(path, follow=False) as f:
            same = f.read(len(text) + 1) == text.encode()
    except OSError:  # none yet, or not a file of ours: atomic_write says which
        same = False
    if not same:  # a rerun leaves it as it was
        atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def run(table: list, root, on_result=lambda results: None, summary: str = "the summary", hand_in=None):
    """Execute a table of Steps in order: ([Result per step], the first failure's message or None).
    on_result(results) is called after each step (and on Ctrl-C), so a summary always shows how far the
    run got; `summary` names it in the Ctrl-C message. hand_in: the hand-in folder the steps' checks write,
    where the run's record is kept (manifest) before each step and after it."""
    results, failed = [], None
    noted = (lambda: write_manifest(table, results, hand_in)) if hand_in is not None else (lambda: None)
    for step in table:
        if failed:
            results.append(Result(step, "not run", 0.0, False))
            continue
        noted()
        total, checked = 0.0, False
        for item in step.scripts:
            try:
                code, secs, cmd = run_side_by_side(item, root) if isinstance(item, SideBySide) else run_script(item, root)
            except KeyboardInterrupt:  # the scripts have ended (run_script, run_side_by_side wait for them)
                results.append(Result(step, "interrupted", total, False))
                results += [Result(later, "not run", 0.0, False) for later in table[len(results):]]
                noted()
                on_result(results)
                raise Interrupted(f"interrupted in {step.name}; results of the steps before it are in place, "
                                  f"{summary} says so [PC227]") from None
            total += secs
            checked = item is step.scripts[-1] and bool(step.checks) and code in (0, 1)  # 1: red, verdict written
            if code:
                failed = f"{step.name}: `python {' '.join(cmd)}` exited {code}"
                break
        results.append(Result(step, "FAILED" if failed else ("passed" if checked else "done"), total, checked))
        noted()
        on_result(results)
    noted()  # the steps after a failure: "not run"
    return results, failed
