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
import uuid
from pathlib import Path

import numpy as np


from portcheck.pipeline import data as data_pairs
from portcheck.mapping import fused, loose
from portcheck.pipeline import bound_page, handin, kink_files
from portcheck.scripts import launch  # its script called through it: the tests' fork server stands in for it there
from portcheck.scripts import runconfig
from portcheck.gradients.against_itself import KEPT, MOVED, RUNNING, against_itself, spread_of
from portcheck.gradients.backward import _counterpart, judged, renames
from portcheck.gradients.kinks import TAKING_KEYS, crossing_lines
from portcheck.forward.twin import F64
from portcheck.core import page
from portcheck.core.errors import PipelineError, fail
from portcheck.core.fileio import load_npy, read_json
from portcheck.core.keys import ROOT
from portcheck.core.report import DIAGNOSTICS
from portcheck.scripts.folders import MOVED_SIDES, PAIRS, SIDES, TAKING, Sealed, prepare, read_status, released
from portcheck.scripts.launch import (STOPPING, Stopped, command, environment, launcher, run_ranks, run_side,
                                      same_ranks, side_settings, stopped)
from portcheck.scripts.recorder import BATCH, TARGET
from portcheck.scripts.side_files import CROSSED, RECORD, STATUS, crossed_file



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


def merged(torch_record: dict, float64: dict) -> dict:
    """The torch record with its float64 run's values under twin.F64, as record_backward keeps them."""
    kinds = ("out/", "in/", "grad/", "loss/", "lr/", "state", KEPT)
    return {**torch_record, **{F64 + k: v for k, v in float64.items() if k.startswith(kinds)}}


def with_updates(rec: dict, steps: int) -> dict:
    """The record with each step's update digests (backward.updates: weights/<i>; backward.running_means: running/<i>
    where BatchNorm's running means are; KEPT/<i> where the script keeps modules beside the model; and its float64
    run's), from the weights and buffers the recorder keeps after every step (state<i>/, state0 the initial ones):
    what handin.bp_align hands in."""
    from portcheck.gradients.backward import running_means, updates
    out = dict(rec)
    for prefix in ("", F64):
        states = [{k.partition("/")[2]: v for k, v in rec.items() if k.startswith(f"{prefix}state{i}/")}
                  for i in range(steps + 1)]
        if all(states):
            out.update({f"{prefix}weights/{i}": updates(states[i], states[i + 1]) for i in range(steps)})
            means = [running_means(states[i], states[i + 1]) for i in range(steps)]
            out.update({f"{prefix}{RUNNING}{i}": m for i, m in enumerate(means) if m.size})
        # the modules the script keeps beside the model (KEPT<i>: as step i + 1 starts), each step's change digested
        kept_states = [{k.partition("/")[2]: v for k, v in rec.items() if k.startswith(f"{prefix}{KEPT}{i}/")}
                       for i in range(steps)]
        out.update({f"{prefix}{KEPT}/{i}": updates(kept_states[i - 1], kept_states[i]) for i in range(1, steps)
                    if kept_states[i]})
    return out


FED = re.compile(f"^({re.escape(BATCH)}|{re.escape(TARGET)})(\\d+)")  # root call c's batch, loss call j's target


def batches(rec: dict, calls: dict = None) -> dict:
    """The batches and targets a side fed, as the data pair holds them; calls: {BATCH: c, TARGET: j}, those of the
    first c root calls and j loss calls only."""
    return {k: v for k, v in rec.items() if (m := FED.match(k)) and (calls is None or int(m[2]) < calls[m[1]])}


def common_batches(t: dict, p: dict, statuses: dict) -> tuple:
    """The two sides' batches; where one side accumulates gradients and the other does not (or over another count:
    its one configuration line, runconfig.accumulation) the calls both made, not a data difference."""
    if not runconfig.accumulation(statuses["torch"]["config"], statuses["paddle"]["config"]):
        return batches(t), batches(p)
    made = lambda rec: {kind: 1 + max((int(m[2]) for m in map(FED.match, rec) if m and m[1] == kind), default=-1)
                        for kind in (BATCH, TARGET)}
    both = {kind: min(a, b) for (kind, a), b in zip(made(t).items(), made(p).values())}
    return batches(t, both), batches(p, both)


CONVENTION_SAID = {"negated": "a mask True where torch's is False: Paddle's attn_mask True at the tokens to attend, "
                              "torch's key_padding_mask True at the pads",
                   "transposed": "its last two axes swapped"}


def in_torchs_convention(fed: dict, conventions: dict) -> dict:
    """The Paddle script's own batches, each argument it computes in its framework's convention (recorder's
    first_call.conventions: fed as computed) put in torch's, as the data pair compares them."""
    from portcheck.scripts.arguments import as_torchs
    out = {}
    for key, value in fed.items():
        m = FED.match(key)
        kind = conventions.get(key[m.end() + 1:]) if m and m[1] == BATCH else None
        axes = 2 if kind and "transposed" in kind else 1
        out[key] = as_torchs(value, kind) if kind and value.dtype == np.bool_ and value.ndim >= axes else value
    return out


def convention_lines(conventions: dict) -> list:
    """One line per argument the Paddle script computes in its own convention: what it is, and what was done."""
    return [f"{arg}: the Paddle script computes it as torch's {kind}, its framework's convention ("
            f"{'; '.join(CONVENTION_SAID[k] for k in kind.split(', '))}): fed as the script computed it, the data pair "
            f"compares it {kind} back" for arg, kind in conventions.items()]


def order_lines(torch_config: dict, paddle_config: dict, steps: int) -> list:
    """What each framework sampler's order became (recorder.Run.order): one line each, the same said once."""
    t, p = torch_config.get("orders") or [], paddle_config.get("orders") or []
    lines = [f"Paddle's {s['sampler']} given torch's {s['torch']} order for the {steps} step(s)" if s.get("torch")
             else f"Paddle's {s['sampler']} drew its own order: {s.get('kept')}" for s in p]
    lines += [f"torch's {s['sampler']} order given to no Paddle sampler: the Paddle script draws its order without "
              "paddle.io's samplers (its own shuffle is judged as it is)" for s in t[len(p):]]
    return list(dict.fromkeys(lines))


def isolated(forward, t: dict, t64: dict, p: dict, statuses: dict):
    """forward.isolated: every paired module's own computation on torch's recorded values (the recorders'
    isolate.forced_run, iso/ keys), each held to torch's own error for that computation, as isolate.judge holds it."""
    from portcheck.forward.judging import judge_one
    from portcheck.forward.isolate import _judged, _name, isolated_keys
    said = {side: statuses[side]["config"].get("isolated") for side in ("paddle", "torch64")}
    forward.isolation_stopped = {side: why for side, why in said.items() if why != "run"}
    forward.parents = statuses["torch64"]["config"].get("parents") or {}
    forward.isolated = []
    for t_key, p_key in isolated_keys(forward.counterparts).items():
        a, ref, b = _judged(t_key, t), t64.get(f"iso/{t_key}"), p.get(f"iso/{p_key}")
        if a is None or ref is None or b is None:
            continue
        row = judge_one(_name(t_key), a, ref, b)
        if not (t_key.startswith("in/") and row.max == 0 and row.err32 == 0):  # torch's value passed on as it was
            forward.isolated.append(row)


DDP_BUFFERS = ("by design: torch's DistributedDataParallel (broadcast_buffers, its default) gives every rank rank 0's "
               "buffers at each forward, Paddle's DataParallel keeps each rank's own: rank {rank}'s buffers (BatchNorm's "
               "statistics) after step 1 are not judged here, rank 0's are")


def rank0_buffers(t: dict) -> set:
    """The keys of the buffers torch's rank r > 0 holds from rank 0 (DDP_BUFFERS): state<i>/<name>, i >= 2, of
    every tensor without a gradient."""
    out = set()
    for key in t:
        head, _, name = key.removeprefix(F64).removeprefix(MOVED).partition("/")
        if head[:5] == "state" and head[5:].isdigit() and int(head[5:]) >= 2 and f"grad/{name}" not in t:
            out.add(key)
    return out


def configuration(t: dict, p: dict, statuses: dict, steps: int, modules: dict, renamed: dict) -> list:
    """runconfig.differences of the two sides' configurations, with the lr each side's steps recorded: judged from
    the torch and Paddle runs alone."""
    return runconfig.differences(statuses["torch"]["config"], statuses["paddle"]["config"], modules, renamed,
                                 step_lrs(t, p, steps))


def step_lrs(t: dict, p: dict, steps: int) -> tuple:
    """(torch's, Paddle's) lr of each recorded step."""
    return [float(t[f"lr/{i}"][0]) for i in range(steps)], [float(p[f"lr/{i}"][0]) for i in range(steps)]


def kept(t: dict, p: dict, statuses: dict, modules: dict, renamed: dict) -> list:
    """The modules each script keeps beside its model (recorder's Run.keep: an EMA copy, a teacher), judged as the
    weights are, at each step they were read after (KEPT<i>, i >= 1): [calibrated rows, each named <module>: <tensor>
    after step <i>]. One kept on one side only is a configuration line (runconfig.differences)."""
    from portcheck.core.calibrated import K_BACKWARD, measure, unjudged, with_spread
    theirs = statuses["paddle"]["config"].get("kept") or {}
    rows = []
    for key in (k for k in t if k.startswith(KEPT) and k[len(KEPT):].partition("/")[0].isdigit()):
        head, name, tensor = key.split("/", 2)
        if int(head[len(KEPT):]) == 0 or name not in theirs:  # as the steps start: the other runs were set to it
            continue
        said = f"{name}: {tensor} after step {head[len(KEPT):]}"
        b = p.get(f"{head}/{name}/" + _counterpart(f"w/{tensor}", modules, renamed).partition("/")[2])
        rows.append(unjudged(said, t[key].shape, "no counterpart on paddle", 0.0) if b is None else
                    with_spread(measure(said, t[key], t.get(F64 + key), b, None, K_BACKWARD), spread_of(t, key)))
    return rows


def alone(paddle_config: dict, side: str):
    """A side's record without the tensors the other side holds none of (hooks_paddle.start_from_torch's one_sided:
    unused by its forward, filled by the model, a torch name of a tied tensor Paddle holds once, or a torch head Paddle
    computes from its embedding, said red as a configuration difference): not judged as missing, not in the update
    digests; a tied one is judged through the name Paddle holds."""
    one_sided = paddle_config.get("one_sided") or {}
    names = {*one_sided.get("torch", ()), *one_sided.get("tied", ()),
             *(u[0] for u in one_sided.get("untied_torch", ()))} if side == "torch" else {*one_sided.get(side, ())}

    def alone(rec: dict) -> dict:
        return {k: v for k, v in rec.items() if not (k.partition("/")[2] in names and
                                                     k.partition("/")[0].startswith(("grad", "state", "final")))}
    return alone


def measured(t: dict, p: dict, report, modules: dict, renamed: dict, setting) -> tuple:
    """(the line, whether the steps' numbers clear it) for a configuration difference whose whole effect the steps
    show (runconfig.measurable), said from its measurement (runconfig.measured_line)."""
    return runconfig.measured_line(setting, measurement(t, p, report, modules, renamed, setting))


def measurement(t: dict, p: dict, report, modules: dict, renamed: dict, setting) -> dict:
    """What the steps show of a MEASURED setting that differs (runconfig.measurable): an Embedding's padding_idx acts
    only on its pad row's gradient, which the steps judge (the gradient, each step's weights) where the pad token is
    in the batch: {"gap": the pad rows' largest difference, "largest": [torch's, Paddle's], "passed": those rows
    green}, or {"gap": None} where the first batch holds no pad token. Handed in (runconfig.hand_in) as it is."""
    name, _, _, _, tv, pv = setting
    rows = sorted({int(v) for v in (tv, pv) if v is not None})
    ids = t.get(f"in/{name or ROOT}")
    tg, pg = t.get(f"grad/{name}.weight"), p.get(_counterpart(f"grad/{name}.weight", modules, renamed))
    if ids is None or tg is None or pg is None or not np.isin(rows, ids).any():
        return {"module": name, "gap": None}
    judged = [r for r in [*report.grads, *(r for rows_ in report.steps for r in rows_)]
              if r.key in (f"grad {name}.weight", f"{name}.weight")]
    return {"module": name, "gap": float(np.max(np.abs(tg[rows].astype(np.float64) - pg[rows]))),
            "largest": [float(np.max(np.abs(g[rows]))) for g in (tg, pg)],
            "passed": bool(judged) and all(r.passed for r in judged)}


def unplaced_why(report) -> str:
    """Why a red training report names no place where the runs part: what it could not judge."""
    stopped = report.forward.isolation_stopped if report.forward is not None else {}
    if stopped:
        return "the first forward on torch's values was not judged (" + "; ".join(
            f"the {side} run: {why}" for side, why in stopped.items()) + "): a check that compared less than asked"
    if report.unjudged:
        return f"{len(report.unjudged)} value(s) not judged (torch's float64 run overflowed where its float32 did not)"
    return "a row is red: the table in log_reprod/bp_align_diff.log"


def first_input(rec: dict, t: dict) -> list:
    """The first batch a side's model computed on, as its run record binds it, by each argument's name
    (input/batch_0/<args/i or kwargs/name>): torch's own; the Paddle run's torch's value at every name torch's batch
    holds (it was fed them, or computes it as torch's in its own convention: recorder's conventions), its own at any
    other. By name, not by place: two Trainers' collators putting the same arguments in another order (labels first
    from a `label` column) bind the same inputs."""
    prefix = f"{BATCH}0/"
    return [(k, t.get(k, v)) for k, v in rec.items() if k.startswith(prefix)]


def judge(out: Path, statuses: dict, steps: int, rank: int = 0, again=None, sealed: Sealed = None) -> int:
    """The records in `out` judged and handed in; again(crossed): the taking run (taking_run), made by backward.judged
    only where the steps are red and a kink is crossed (None: not made, the report says so). sealed: the records as
    each side ended (Sealed), checked once all are read: one changed since is red, and nothing is handed in."""
    from portcheck.core import record
    from portcheck.pipeline.handin import per_step, save_side
    torch_only = alone(statuses["paddle"]["config"], "torch")
    t = merged(torch_only(load_npy(out / "torch" / RECORD)), torch_only(load_npy(out / "torch64" / RECORD)))
    # torch against itself, as record_backward keeps it (each run's update digests first, for bp_align's spread)
    t.update(against_itself(with_updates(torch_only(load_npy(out / side / RECORD)), steps) for side in MOVED_SIDES))
    from_rank0 = rank0_buffers(t) if rank and (statuses["torch"]["config"].get("wrapper") or {}).get(
        "broadcast_buffers") else set()
    t = {k: v for k, v in t.items() if k not in from_rank0}
    # a Paddle module --layouts fuses seen as its parts (fused.cut): each part's weights and updates torch's module's
    p = fused.cut(alone(statuses["paddle"]["config"], "paddle")(load_npy(out / "paddle" / RECORD)))
    t = with_updates(t, steps)  # the update digests, so that the taking run's figures (take) hold bp_align's too
    report = judged(t, p, again=again)
    isolated(report.forward, t, load_npy(out / "torch64" / RECORD), p, statuses)
    forged = sealed.changed() if sealed is not None else ""
    if forged:
        print(f"RED: {forged} [PC837]")
        return 1
    modules = report.forward.pairing.modules()
    renamed = renames(t, p)
    p, renamed, _ = loose.in_torchs_shapes(t, p, modules, renamed, _counterpart)  # as judge_backward finds each
    config = configuration(t, p, statuses, steps, modules, renamed)
    measurable = runconfig.measurable(statuses["torch"]["config"], statuses["paddle"]["config"], modules)
    measurements = [measurement(t, p, report, modules, renamed, m) for m in measurable]
    settled = [runconfig.measured_line(m, said) for m, said in zip(measurable, measurements)]
    config += [line for line, ok in settled if not ok]
    settled = [line for line, ok in settled if ok]
    kept_rows = kept(t, p, statuses, modules, renamed)
    fed_t, fed_p = common_batches(t, p, statuses)
    conventions = statuses["paddle"]["config"].get("conventions") or {}
    fed_p = in_torchs_convention(fed_p, conventions)
    fed = data_pairs.judge_batches(fed_t, fed_p)

    pairs = out / "pairs"
    top = out / "log_reprod"
    pairs.mkdir(exist_ok=True)
    weights = {k[7:]: v for k, v in t.items() if k.startswith("state0/")}
    paddle_weights = {k: p.get("state0/" + _counterpart("w/" + k, modules, renamed).partition("/")[2]) for k in weights}
    # each record of this run names it (a configuration entry or pair of another run of the same scripts, weights and
    # batches is not this one's)
    this_run = uuid.uuid4().hex
    depends = lambda w, fed_: {"weights": record.state_fingerprint({k: v for k, v in w.items() if v is not None}),
                               "inputs": record.fingerprint(fed_), "flags": {"steps": steps, "run": this_run}}
    sides = {"torch": (t, depends(weights, first_input(t, t))),
             "paddle": ({k: v for k, v in with_updates(p, steps).items() if not k.startswith(RUNNING) or k in t},
                        depends(paddle_weights, first_input(p, t)))}  # running means rank 0's (DDP_BUFFERS): not judged
    script = runconfig.SCRIPT
    for side, (rec, dep) in sides.items():
        exact = side == "torch"
        save_side(pairs, "forward", side, {"logits": handin.model_output(rec)}, dep, script,
                  exact={"logits": handin.model_output(rec, exact=True)} if exact else None)
        save_side(pairs, "loss", side, {"loss": rec["loss/0"]}, dep, script,
                  exact={"loss": rec[F64 + "loss/0"]} if exact else None)
        save_side(pairs, "bp_align", side, handin.bp_align(rec), dep, script,
                  exact=handin.bp_align(rec, exact=True) if exact else None)
        save_side(pairs, "lr", side, per_step(rec, "lr"), dep, script,
                  exact=per_step(rec, "lr", exact=True) if exact else None)
        # a bool argument (a mask) as 0 and 1: reprod_log subtracts the two sides' arrays, which numpy refuses bools
        save_side(pairs, "data", side, {k: v.astype(np.uint8) if v.dtype == np.bool_ else v
                                        for k, v in (fed_t if exact else fed_p).items()}, dep, script)
    # the taking run's figures beside bp_align (kink_files.save_taken: a later step's kinks, and torch's run on Paddle's
    # branch of the first forward's), judged with as the hand-in checker judges them; a previous run's, in our
    # folders, never judged as this one's (the same scripts write the same pair files)
    taken = [where / f"bp_align{suffix}" for where in (pairs, top / DIAGNOSTICS) for suffix in kink_files.BOUND]
    for f in [*taken, *map(record.path_for, taken)]:
        if f.is_file():
            f.unlink()
    diverged = kink_files.save_kinks(pairs, "bp_align", report)
    tables = [*diverged, *(f"configuration: {line}" for line in [*config, *settled]), *report.table().splitlines()]
    handin.check_outputs(pairs, PAIRS, top)
    page.writable_page(top / DIAGNOSTICS / page.NAME)
    with contextlib.redirect_stdout(io.StringIO()):  # the diff logs' lines: in their files, the summary below
        verdicts = {name: handin.judge_and_log(pairs, name, top=top, after_steps=name in ("lr", "bp_align"),
                                               tables=tables if name == "bp_align" else ())
                    for name in PAIRS}

    # the configuration as judged here, handed in beside the pairs: `check` re-derives every line from it
    runconfig.hand_in(top / DIAGNOSTICS, {side: statuses[side]["config"] for side in ("torch", "paddle")}, modules,
                      renamed, step_lrs(t, p, steps), {side: dep for side, (_, dep) in sides.items()}, script,
                      measured=measurements)
    bound_page.write(report.view(), top)  # the run's page beside its hand-in (portcheck view), bound to it

    print("\nportcheck run: the configuration first")
    for line in [*config, *settled]:
        print(f"  DIFFERS {line}")
    unseen = runconfig.not_compared(statuses["torch"]["config"], statuses["paddle"]["config"])
    for line in unseen:
        print(f"  NOT COMPARED {line}")
    for line in runconfig.one_sided(statuses["paddle"]["config"]):
        print(f"  ONE-SIDED {line}")
    if not config and not settled:
        print("  the same: every paired module's settings, the optimizer, clipping, " +
              ("" if unseen else "the loss, ") + "the dropouts and autocast, and the lr schedule")
    for line in runconfig.notes(statuses["torch"]["config"], statuses["paddle"]["config"]):
        print(f"  ({line})")
    print(f"the root models: torch {statuses['torch']['root']}, paddle {statuses['paddle']['root']}; "
          f"{steps} step(s), Dropout off, Paddle started from torch's weights and fed its batches; the steps held to "
          f"torch's own error (its float64 run) or its spread against itself (its run again moved one ulp)")
    if from_rank0:
        print(f"  ({DDP_BUFFERS.format(rank=rank)})")
    print(f"data: {fed.line()[len('data: '):]}" if fed.first is None else
          f"data RED: the batches or targets the Paddle script feeds differ: {fed.first.describe()} [PC833]")
    for line in [*convention_lines(conventions),
                 *order_lines(statuses["torch"]["config"], statuses["paddle"]["config"], steps)]:
        print(f"  (data: {line})")
    where = report.first_diverging
    differ = report.forward.differing
    print("forward, each module on torch's values: " + (f"RED, their own computation differs: "
                                                        f"{', '.join(getattr(d, 'both', d) for d in differ)} [PC834]"
                                                        if differ else "every paired module within its rule"
                                                        if report.forward.isolated else "not judged")
          + "".join(f"; the {side} run stopped: {why}" for side, why in report.forward.isolation_stopped.items()))
    unplaced = "" if report.passed or where else unplaced_why(report)
    cannot = report.cannot_judge  # a BatchNorm over too few values: not RED, never green
    print("training: " + ("every module, gradient, loss, lr and weight within the measured rule" if report.passed
                          else "; ".join(cannot) if cannot
                          else f"RED, the runs part at {getattr(where, 'both', where)} [PC835]" if where
                          else f"RED: {unplaced} [PC836]"))
    if report.crossed and (report.on_branch or report.taken or not report.passed):  # as report.table() says them
        lines = crossing_lines(report.crossed, report.on_branch, report.taken, report.first_diverging or "")
        print("".join(f"  ({line})\n" for line in lines), end="")
    kept_red = [r for r in kept_rows if not r.passed]
    name, _, tensor = kept_red[0].key.partition(": ") if kept_red else ("", "", "")
    configs = (statuses["torch"]["config"], statuses["paddle"]["config"])
    first_kept = f"{runconfig.kept_named(name, *configs)}: {tensor}"
    if kept_rows:
        names = sorted({r.key.partition(":")[0] for r in kept_rows})
        print(f"kept beside the model ({', '.join(names)}), as the weights: " + (
            f"every tensor within the measured rule after each step ({len(kept_rows)} compared)" if not kept_red else
            f"RED, {len(kept_red)} of {len(kept_rows)} tensor(s) over their rule, first {first_kept} (max "
            f"{kept_red[0].max:.3g}, allowed {kept_red[0].allowed:.3g}) [PC838]"))
    for name, v in verdicts.items():
        print(f"{name}: {'green' if v.passed else 'RED'} | {v.describe_measured()}")
    red = bool(config) or not fed.passed or not report.passed or not all(v.passed for v in verdicts.values()) \
        or bool(kept_red)
    # a BatchNorm over too few values and nothing else: not RED, never green
    unjudged = red and cannot and not config and fed.passed and all(v.passed for v in verdicts.values()) \
        and not kept_red
    print(f"{'NOT GREEN' if unjudged else 'RED' if red else 'green'}: " + (
        f"{len(config)} configuration difference(s)" if config else
        f"{'; '.join(cannot)}" if unjudged else
        "the data differ" if not fed.passed else f"the runs part at {where}" if where else unplaced or (
            f"what the script keeps beside the model differs: {first_kept}" if kept_red else
            "a pair is red" if red else "the same run for the first steps"))
          + f"; the hand-in: python -m portcheck check {top} --only {','.join((runconfig.CONFIG, *PAIRS))}")
    return 1 if red else 0


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
