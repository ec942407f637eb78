"""A `portcheck run`'s records judged as one run and handed in (judge): each side's record read as it is judged (the
torch run with its float64 run, merged; without what the other side holds none of, alone; each step's update digests,
with_updates; rank 0's buffers on a rank of torch's DistributedDataParallel, rank0_buffers), the steps as
judge_backward judges them, the first forward on torch's values (isolated), the configuration (configuration, and a
setting whose whole effect the steps show, measured), what the script keeps beside its model (kept), the data each
side fed (portcheck.scripts.fed), the guide's pairs written and handed in, and the run's summary printed.

May import every subpackage below scripts, and scripts' runconfig, folders, fed and side_files; never run, which
calls judge.
"""
import contextlib
import io
import uuid
from pathlib import Path

import numpy as np

from portcheck.core import page
from portcheck.core.fileio import load_npy
from portcheck.core.diff import UNPAIRED
from portcheck.core.keys import ROOT
from portcheck.core.report import DIAGNOSTICS
from portcheck.forward.twin import F64
from portcheck.gradients.against_itself import KEPT, KEPT_RUNNING, MOVED, RUNNING, against_itself, spread_of
from portcheck.gradients.backward import _counterpart, judged, renames
from portcheck.gradients.kinks import crossing_lines
from portcheck.gradients.optimizers import NORM, copied_variance, replayed_lines
from portcheck.mapping import fused, loose, parted
from portcheck.pipeline import bound_page, handin, kink_files
from portcheck.pipeline import data as data_pairs
from portcheck.scripts import runconfig
from portcheck.scripts.fed import common_batches, convention_lines, first_input, in_torchs_convention, order_lines
from portcheck.scripts.folders import MOVED_SIDES, PAIRS, Sealed
from portcheck.scripts.side_files import RECORD


def merged(torch_record: dict, float64: dict) -> dict:
    """The torch record with its float64 run's values under twin.F64, as record_backward keeps them."""
    kinds = ("out/", "in/", "grad/", "loss/", "lr/", "state", KEPT)
    return {**torch_record, **{F64 + k: v for k, v in float64.items() if k.startswith(kinds)}}


def with_updates(rec: dict, steps: int) -> dict:
    """The record with each step's update digests (backward.updates: weights/<i>; backward.running_means: running/<i>
    where BatchNorm's running means are; KEPT/<i> where the script keeps modules beside the model, KEPT_RUNNING<i>
    where they hold running means; and its float64 run's), from the weights and buffers the recorder keeps after every step (state<i>/, state0 the initial ones):
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
        kept_means = {i: running_means(kept_states[i - 1], kept_states[i]) for i in range(1, steps) if kept_states[i]}
        out.update({f"{prefix}{KEPT_RUNNING}{i}": m for i, m in kept_means.items() if m.size})
    return out


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
        theirs_key = _counterpart(f"w/{tensor}", modules, renamed).partition("/")[2]
        b = p.get(f"{head}/{name}/{theirs_key}")
        if b is None:
            rows.append(unjudged(said, t[key].shape, f"{UNPAIRED} on paddle", 0.0))
            continue
        row = with_spread(measure(said, t[key], t.get(F64 + key), b, None, K_BACKWARD), spread_of(t, key))
        if not row.passed and tensor.endswith(".running_var") and f"{NORM}{tensor.rpartition('.')[0]}" in t:
            steps = [(t[f"state{i}/{tensor}"], p[f"state{i}/{theirs_key}"]) for i in range(1, int(head[len(KEPT):]) + 1)
                     if f"state{i}/{tensor}" in t and f"state{i}/{theirs_key}" in p]
            copied_variance(row, t[key], b, steps)
        rows.append(row)
    return rows


def alone(paddle_config: dict, side: str):
    """A side's record without the tensors the other side holds none of (paddle_start.start_from_torch's one_sided:
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
    t = parted.marked(t, p)  # a vector torch's parent holds in parts, joined as the port holds it (mapping.parted)
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
    for line in replayed_lines(report):
        print(f"  ({line})")
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
