"""`python -m portcheck run --torch "CMD" --paddle "CMD" [--steps N] [--out DIR]`: a user's two training scripts,
unedited, checked as the guide's Steps 1-4 check a port.

    python -m portcheck run --torch "python train.py --lr 3e-3" --paddle "/path/pd-venv/bin/python train_pd.py"

Each CMD's first word is a Python interpreter (one venv per side works; this library is put on its path, numpy is
all it needs there) or a launcher it runs; portcheck.scripts.recorder is injected at its start
(scripts/inject/sitecustomize.py on its PYTHONPATH). Under a launcher (torchrun, python -m
paddle.distributed.launch: ranks) each rank records in DIR/rank<r> and is judged against the other side's rank r;
torch's script in one process against a Paddle script launched split in tensor parallel: split_ranks.
Four runs of the first N optimizer steps (default 3):
  torch     the torch script as it is, Dropout off: its root model, first forward (every module), loss, lr,
            gradients, weights after each step, the batches and targets it fed;
  paddle    the Paddle script, its model started from torch's initial weights (paired with no map), its samplers
            drawing torch's order, fed torch's batches and targets (each forward call's, each loss call's), Dropout
            off; the batches and targets it would have fed are judged apart (data);
  torch64   the torch script again, its model in float64 from the same initial weights and batches: torch's own
            error, the yardstick of the measured rule (portcheck/calibrated.py);
  moved     the torch script again in float32 from those weights moved one ulp, with other threads (one run per
            backward.AGAINST_ITSELF): torch against itself, which the steps are also allowed calibrated.SPREAD x,
            as compare_backward allows it.
A fifth run, only where the steps are red and Paddle's forward (the first or a later step's) put values within torch's
rounding of 0 on the other side of 0 than torch's (a kink crossed: backward.crossings, from the near<i>/ keys both
sides record in every forward):
  taking    the torch script again from its initial weights, fed its batches, taking Paddle's side of 0 at exactly
            those values (kinks.taking_paddles_side; DIR/taking/crossed.json), judged as compare_backward judges it
            (backward.judged): at the first forward's kinks it stands for torch's run (on_paddles_branch; its values
            of bp_align handed in as diagnostics/bp_align_branch_torch.npy), at a later step's it is torch against
            itself, allowed calibrated.SPREAD x (bp_align_taken_torch.npy); a launched run is judged without it.
What the script keeps beside its model (an EMA copy: recorder's Run.keep) starts on every side from torch's and is
judged per step as the weights are (kept), its change digested in bp_align.
The first forward is judged cumulative (each side on its own values) and isolated (every paired module on torch's
recorded values, portcheck.forward.isolate: every module whose own computation differs is named).
Then the configuration is compared (portcheck.scripts.runconfig: every difference one line), the records judged as
judge_backward judges them, and the guide's pairs written to DIR/log_reprod (forward, data, loss, lr,
bp_align) with both sides' configuration records (config: runconfig.hand_in), which `python -m portcheck check
DIR/log_reprod --only config,forward,data,loss,lr,bp_align` re-derives.
Exit 0 when the configuration agrees and every pair is green, 1 otherwise, 2 for bad input or a script that
cannot be recorded (one line naming the side).
Each script runs in a process group of its own (a session), ended with it: what it started (a DataLoader's workers,
a monitor) does not outlive it; Ctrl-C (130), SIGTERM and SIGHUP (128 + the signal) to `portcheck run` end the
scripts' groups too, with one line. A rerun into a DIR of ours first removes the previous run's records and
hand-in (handed_in), so that a check of the folder never judges an earlier run after a failed one. As each side's
group ends its folder is sealed (Sealed: digested, read-only while the run lasts); a record changed after is red,
naming it (docs/guarantees.md: what recording inside the scripts can and cannot prove).
"""
import contextlib
import io
import re
import shlex
import signal
import sys
from pathlib import Path

from portcheck.scripts import launch  # its script called through it: the tests' fork server stands in for it there
from portcheck.scripts import runconfig
from portcheck.gradients.kinks import TAKING_KEYS
from portcheck.core.errors import PipelineError, fail
from portcheck.core.fileio import load_npy, read_json
from portcheck.scripts.folders import PAIRS, SIDES, TAKING, Sealed, prepare, read_status, released
from portcheck.scripts.launch import (STOPPING, Stopped, command, environment, launcher, run_ranks, run_side,
                                      same_ranks, side_settings, stopped)
from portcheck.scripts.side_files import CROSSED, RECORD, STATUS, crossed_file
from portcheck.scripts.judge_run import alone, judge, with_updates


def add_parser(sub):
    p = sub.add_parser("run", help="check two unedited training scripts, torch and Paddle", allow_abbrev=False,
                       description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--torch", required=True, metavar="CMD", help='the torch script\'s command, e.g. "python train.py"')
    p.add_argument("--paddle", required=True, metavar="CMD", help="the Paddle script's command")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps recorded on each side (default 3)")
    p.add_argument("--full", action="store_true", help="then both scripts to their end from torch's initial weights "
                   "(their own batches, Dropout on): Step 5's train_align, judged by portcheck.pipeline.training")
    p.add_argument("--metric", metavar="REGEX", help="--full: a printed line's metric, group 1 its name, group 2 its "
                   "value (default: acc, accuracy, f1 forms such as 'acc 0.97', 'val_accuracy: 0.9')")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="the seconds each script (a launcher's ranks "
                   "together) may take to record its steps, then every process of it is ended (default: no limit)")
    p.add_argument("--out", type=Path, default=Path("portcheck_run"), help="the folder the records and the "
                   "hand-in go to (default ./portcheck_run; a folder of someone else's is refused)")
    p.add_argument("--layouts", type=Path, metavar="FILE", help="a JSON file of the layouts the library's calls take "
                   "(layouts=): a fused module's parts, {\"c_attn\": {\"fused\": [\"q\", \"k\", \"v\"]}}; torch's "
                   "packed attention needs none (docs/run.md)")
    return p


LAYOUTS_MAX = 1 << 15  # bytes of a --layouts file read: a few lines per module type; the sides take it in an
# environment variable (side_files.SETTINGS), which Linux holds to 128 KiB (json.dumps may write a character in 6)


def read_layouts(path: Path) -> dict:
    """The run's settings from --layouts FILE: {"layouts": its declarations} (layouts.from_json checks them; each side's
    recorder reads them as the API's layouts), {} without one. A file that is not one: one line."""
    if path is None:
        return {}
    from portcheck.mapping.layouts import from_json
    try:
        data = read_json(path, LAYOUTS_MAX)
    except (OSError, ValueError, RecursionError) as e:
        raise PipelineError(f"--layouts {path}: cannot be read as JSON ({e}): give a file holding one JSON object, "
                            "{\"c_attn\": {\"fused\": [\"q\", \"k\", \"v\"]}} [PC814]") from None
    from_json(data, f"--layouts {path}")
    return {"layouts": data}


def taking_run(argv: list, out: Path, steps: int, crossed: list, sealed: Sealed = None, **settings) -> dict:
    """backward.judged's again(crossed): the torch script once more from torch's initial weights, fed its batches,
    taking Paddle's side of 0 at each crossed value (recorder's "taking" side; the values handed over as
    DIR/taking/crossed.json); its record's keys judged reads (backward.TAKING_KEYS: the gradients, which the first
    forward's kinks move, and what judge_backward reads of a run against itself), with the update digests bp_align
    carries (with_updates), for on_paddles_branch and take. Its record is read as judge reads the torch run's (alone):
    else its digests count a tensor torch's leave out (a tied head's torch name), one longer, and take fails."""
    (out / TAKING).mkdir(exist_ok=True)
    crossed_file(out / TAKING / CROSSED, crossed)
    run_side(TAKING, argv, out, steps, sealed, **settings)
    paddle = read_status(out / "paddle" / STATUS, "the Paddle script") or {}
    rec = alone(paddle.get("config") or {}, "torch")(load_npy(out / TAKING / RECORD))
    return {k: v for k, v in with_updates(rec, steps).items() if k.startswith(TAKING_KEYS)}


def full(out: Path, argvs: dict, metric: str, **settings) -> int:
    """--full: both scripts to their end (recorder.Full), judged as Step 5 (pipeline.training); 0 green, 1 red."""
    (out / "full").mkdir(exist_ok=True)  # a previous run's files in it removed by prepare (handed_in)
    for fw in ("torch", "paddle"):
        full_side(fw, argvs[fw], out, metric, **settings)
    return judge_full(out)


def full_side(fw: str, argv: list, out: Path, metric: str, **settings):
    """One side of --full: its script to its end, its curves in DIR/full; else one line."""
    folder = out / "full"
    print(f"\n$ {shlex.join(argv)}   # portcheck run --full: the {fw} side to its end", flush=True)
    settings = {**side_settings("full", out, 0), **settings, "framework": fw, "out": str(folder.absolute()),
                "metric": metric}
    code = launch.script(argv, environment(settings))
    status = read_status(folder / f"{STATUS[:-5]}_{fw}.json", f"--full: the {fw} script")
    if code or status is None or status.get("error"):
        why = status.get("error") if status and status.get("error") else f"exit {code}; its traceback above"
        raise PipelineError(f"--full: the {fw} script did not train to its end ({why}) [PC809]")


def judge_full(out: Path) -> int:
    """The two sides' curves in DIR/full judged and handed in (train_align); 0 green, 1 red."""
    from portcheck.pipeline import training
    folder = out / "full"
    print("\nportcheck run --full: the two trainings (Step 5)")
    with contextlib.redirect_stdout(io.StringIO()):  # the diff log's lines: in its file; the rows below
        verdict, result = training.judge_and_log(folder, top=out / "log_reprod", draw=False)
    for line in result.lines():
        print(line)
    red = not (verdict.passed and result.passed)
    print(f"{'RED' if red else 'green'}: train_align {verdict.describe_measured()}; the hand-in: python -m portcheck "
          f"check {out / 'log_reprod'} --only {','.join((runconfig.CONFIG, *PAIRS))},train_align")
    return int(red)


def ranks(argvs: dict, launched: dict, out: Path, steps: int, **settings) -> int:
    """A launcher on either side: every side run once, each rank recording its own; rank r judged against rank r."""
    found, sealed = {}, Sealed(out)
    for side, fw in SIDES:
        found[side] = run_ranks(side, argvs[fw], out, steps, launched[fw], sealed, **settings)
        same_ranks(found)
    sys.stdout.flush()
    codes = {}
    for r in sorted(found["torch"]):
        print(f"\n===== rank {r} of {len(found['torch'])}: torch's rank {r} against Paddle's rank {r}")
        codes[r] = judge(out / f"rank{r}", {side: found[side][r] for side in found}, steps, rank=r, sealed=sealed)
    red = [r for r, code in codes.items() if code]
    print(f"\n{'RED' if red else 'green'}: " + (f"rank(s) {', '.join(map(str, red))} of {len(codes)} red (each "
                                                   "rank's summary above)" if red else
                                                   f"every rank of {len(codes)} the same run for the first steps"))
    return 1 if red else 0


def main(args) -> int:
    """The run, SIGTERM and SIGHUP (STOPPING) ending it as Ctrl-C does: the scripts' groups ended, one line."""
    before = {s: signal.signal(s, stopped) for s in STOPPING}
    try:
        return run_and_judge(args)
    except Stopped as e:
        fail(f"stopped by {signal.Signals(e.signum).name}: the scripts' processes were ended with the run; files "
             "already written are complete, run the command again [PC820]", 128 + e.signum)
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def run_and_judge(args) -> int:
    """python -m portcheck run, its arguments parsed: the scripts run, recorded and judged."""
    if not 1 <= args.steps <= 1000:
        raise PipelineError(f"--steps {args.steps}: give a whole number of optimizer steps from 1 to 1000 [PC810]")
    if args.metric is not None:
        try:
            if re.compile(args.metric).groups < 2:
                raise re.error("it needs two groups")
        except re.error as e:
            raise PipelineError(f"--metric {args.metric!r}: {e}; give a regex whose group 1 is the metric's name and "
                                "group 2 its value, e.g. '(acc)\\s+([0-9.]+)' [PC822]") from None
    if args.timeout is not None and not args.timeout > 0:
        raise PipelineError(f"--timeout {args.timeout}: give the seconds each script may take, above 0 [PC939]")
    settings = {**read_layouts(args.layouts), "timeout": args.timeout}
    argvs = {"torch": command(args.torch, "torch"), "paddle": command(args.paddle, "paddle")}
    launched = {fw: launcher(argv) for fw, argv in argvs.items()}
    if any(launched.values()):
        if args.full:
            raise PipelineError("--full runs one process per side: give the one-process commands (python train.py) "
                                "[PC821]")
        prepare(args.out)
        try:
            if launched["paddle"] and not launched["torch"]:  # a Paddle model split in tensor parallel
                from portcheck.scripts import split_ranks
                return split_ranks.launched(argvs, args.out, args.steps, judge, **settings)
            return ranks(argvs, launched, args.out, args.steps, **settings)
        finally:
            released(args.out)
    prepare(args.out)
    sealed = Sealed(args.out)
    try:
        statuses = {side: run_side(side, argvs[fw], args.out, args.steps, sealed, **settings) for side, fw in SIDES}
        sys.stdout.flush()
        code = judge(args.out, statuses, args.steps, sealed=sealed,
                     again=lambda crossed: taking_run(argvs["torch"], args.out, args.steps, crossed, sealed,
                                                      **settings))
    finally:
        released(args.out)  # read-only while the run lasts: the user's to remove after
    return max(code, full(args.out, argvs, args.metric, **settings)) if args.full else code
