"""compare_backward: gradients after one backward, then losses, learning rates and BatchNorm's running
statistics after each of N steps of the user's own optimizer and scheduler, and every weight after the last,
on both sides.

Each side is recorded on its own (record_backward: what a pt_ or pd_ script saves) and the two records are
judged together (judge_backward: what its check does). Every compared tensor is held to the rule of
portcheck/calibrated.py: a multiple of torch's own fp32 error, measured by the torch model's float64 twin
(twin.float64) taking the same steps with the same optimizer and scheduler.

Its parts, each a module of this package: one side's run recorded (recording), the report (result), torch against
itself (against_itself), the ReLU kinks crossed (kinks), the optimizer pairs that differ by design (optimizers). May import portcheck.core, portcheck.mapping,
portcheck.forward and those modules.
"""
import copy

import numpy as np

from portcheck.core.calibrated import measure
from portcheck.core.keys import ROOT
from portcheck.forward.compare import checked_args, judge_forward
from portcheck.forward import routing
from portcheck.forward.chosen import checked_outputs
from portcheck.forward.twin import EAGER, F64
from portcheck.mapping.trace import check_models
from portcheck.core import calibrated, diff, tolerances
from portcheck.mapping import experts, fused, inferred, loose as loose_tensors, pairing, parted, torch_fused
from portcheck.mapping.convert import plan
from portcheck.core.errors import PipelineError
from portcheck.gradients.against_itself import MOVED, spread_of
from portcheck.gradients.kinks import TAKEN, TAKEN_KEY, TAKING, crossings, on_paddles_branch, take
from portcheck.gradients.optimizers import (NORM, biased_variance, by_design_lines, cycled_momentum, few_values,
                                            replayed_error)
from portcheck.gradients.result import LAST, LOSS_MEAN_BOUND, BackwardReport
from portcheck.gradients import few_values as few, restarts
# one side's run recorded (recording); record_backward and its record keys stay importable from here
from portcheck.gradients.recording import (HELD, HELD_AT, ISOLATED, RENAMED, _figure, checked_steps,  # noqa: F401
                                           outside_draws, record_backward)
# documented here: docs/zoo.md cites them as portcheck.gradients.backward.<name> (docs/run.md, docs/rules.md,
# lib/README.md: AGAINST_ITSELF, against_itself, crossings, moved_one_ulp, batch_statistics, updates, running_means)
from portcheck.gradients.against_itself import AGAINST_ITSELF, _ties_other_way, against_itself, moved_one_ulp  # noqa: F401
from portcheck.gradients.digests import running_means, updates  # noqa: F401 (documented path)
from portcheck.gradients.kinks import ON_BRANCH  # noqa: F401 (documented path)
from portcheck.gradients.optimizers import batch_statistics  # noqa: F401 (documented path)




def compare_backward(torch_model, paddle_model, inputs, targets, loss, optimizer, scheduler=None, steps=1,
                     name_map=None, layouts=None, isolate=False, mean_bound=LOSS_MEAN_BOUND,
                     clip=None, outputs=None) -> BackwardReport:
    """Train both models `steps` steps on the same batch and compare them: record_backward on each side,
    then judge_backward (the pairs of loss, optimizer and scheduler are (torch, Paddle)). Every module is
    first paired as convert pairs it, with the same refusals. The models are changed by the steps: pass
    copies to keep them. isolate=True: every step after the first starts both sides (and torch's float64
    copy) from torch's weights after the step before, so each step's update is judged alone, at
    calibrated.K_STEP, against torch's own error for that one step.
    mean_bound: the bound on each step's loss mean abs diff (judge_backward's; default the guide's bp_align
    threshold; a caller's own threshold for its pair overrides it; None: none).
    scheduler=(torch's factory, None): Paddle's is the LRScheduler its optimizer was built with (its
    learning_rate), stepped after each step as torch's is: no factory reaching into the optimizer.
    clip=(torch's, Paddle's): gradient clipping, each called as clip(parameters) after each backward and before
    the step, e.g. lambda p: torch.nn.utils.clip_grad_norm_(p, 1.0) (or clip_grad_value_); Paddle's None when its
    optimizer clips (grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0) or ClipGradByValue). The gradients recorded
    are before clipping, the weights after it.
    outputs: the model outputs the first forward compares (compare_forward's: a list of fields or positions, or
    {torch's: Paddle's}, or a module's by its torch name; default every one, a structure one side alone returns
    red); the loss reads its own. Each mixture of experts' routing is read as compare_forward reads it (a port's
    router returning its top k against the choice torch's block hands its experts, and its float64 twin's weights)."""
    checked_args(None, mean_bound)  # before any training: a bad bound would only show when .passed is read
    checked_outputs(outputs)
    checked_pairs(loss=loss, optimizer=optimizer, scheduler=scheduler, clip=clip)
    check_models(torch_model, paddle_model)  # before anything reads either as its framework's model
    kinds, loose = {}, {}
    # a fused module no layout declares, in the layout the Paddle model holds already (converted before): each part
    # then judged, as convert's run settled it
    found_held = {**inferred.held(torch_model, paddle_model, layouts),
                  **torch_fused.held(torch_model, paddle_model, layouts)}
    layouts = {**(layouts or {}), **found_held} if found_held else layouts
    try:
        with outside_draws():  # its pairing's runs, in the caller's mode, draw as the steps' do
            planned = plan(torch_model, paddle_model, name_map, layouts, inputs, paddle_kinds=kinds, loose=loose)
        found = {}
    except PipelineError as e:  # before any step: ties a fused module settles, declared as convert declares them
        found = fused.settling(e, layouts)
        if not found:
            raise
        layouts = {**(layouts or {}), **found}
        with outside_draws():
            planned = plan(torch_model, paddle_model, name_map, layouts, inputs, paddle_kinds=kinds, loose=loose)
    import torch
    # where the run starts, for torch's run again taking Paddle's side of a kink (judged)
    start, draws = copy.deepcopy(torch_model.state_dict()), torch.get_rng_state()
    t = record_backward(torch_model, inputs, targets, loss[0], optimizer[0], scheduler and scheduler[0], steps, layouts,
                        paddle_kinds=kinds, isolate=isolate, clip=clip and clip[0], loose=loose)
    # isolated, Paddle's start of step i: torch's weights after step i - 1, in Paddle's names and layout
    starts = restarts.starts(t, planned, paddle_model, layouts, steps) if isolate else None
    p = record_backward(paddle_model, inputs, targets, loss[1], optimizer[1],
                        scheduler and (HELD if scheduler[1] is None else scheduler[1]), steps,
                        layouts, starts=starts,
                        clip=clip and clip[1])

    def again(crossed, steps=steps):
        """torch's run again from its start and random draws (dropout masks), taking Paddle's side of 0 at `crossed`
        (isolated, each step from the weights torch's own run left); the model is left as its own run left it."""
        after = copy.deepcopy(torch_model.state_dict())
        torch_model.load_state_dict(start)
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(draws)
            run = record_backward(torch_model, inputs, targets, loss[0], optimizer[0], scheduler and scheduler[0],
                                  steps, layouts, paddle_kinds=kinds, isolate=isolate and steps > 1, loose=loose,
                                  clip=clip and clip[0], crossed=crossed)
        torch_model.load_state_dict(after)
        return run
    loose_tensors.mark(t, p)  # said in both records: their pairing reads it
    # torch's packed experts as the list of experts the port holds, as compare_forward's record says them: its first
    # forward then reads each mixture's routing, and judges its router's probabilities against Paddle's logits so
    experts.mark(t, torch_model, paddle_model)
    report = judged(t, p, name_map, mean_bound, again, outputs)
    if torch_model in EAGER and report.forward is not None:
        report.forward.outputs_said.append(EAGER.pop(torch_model))
    if found_held and report.forward is not None:
        report.fused_found = {**(getattr(report, "fused_found", None) or {}), **found_held}
        report.forward.outputs_said.append(
            "; ".join(f"{k}: its columns {inferred.said(v)}, as the Paddle model holds them" for k, v in
                      found_held.items()))
    return fused.said_taken(report, found) if found else report


def checked_pairs(**pairs):
    """Each of compare_backward's pairs (torch's, Paddle's), loss and optimizer given, else one line."""
    for arg, value in pairs.items():
        given = value is not None or arg in ("loss", "optimizer")
        if given and not (isinstance(value, (tuple, list)) and len(value) == 2):
            raise PipelineError(f"compare_backward: {arg}= takes a pair, (torch's, Paddle's), got "
                                f"{type(value).__name__}: pass {arg}=(torch_{arg}, paddle_{arg}) [PC605]")


def judged(torch_record, paddle_record, name_map=None, mean_bound=LOSS_MEAN_BOUND, again=None,
           outputs=None, keep=lambda record: None) -> BackwardReport:
    """judge_backward, and where red with kinks crossed (report.crossed), once more against torch's run taking
    Paddle's side of them: again(crossed), record_backward(torch_model, ..., crossed=crossed) from the weights and
    random draws the torch record started from (None: not made). The first forward's kinks (its rows green): torch's
    run on Paddle's branch is torch's run (on_paddles_branch; an isolated record's first step alone, again(crossed,
    1)); a later step's: its run taking Paddle's side there too is torch against itself (take). One torch run more
    per rule, never in a green run. keep(record): the torch record judged last, with those runs' keys (handed in)."""
    report = judge_backward(torch_record, paddle_record, name_map, mean_bound, outputs)
    if report.passed or again is None:
        return keep(torch_record) or report
    first, isolated = report.kinks, ISOLATED in torch_record
    on_branch = bool(first) and report.forward.passed
    branch = {}
    if on_branch:
        branch = on_paddles_branch(again(first, 1) if isolated else again(first), torch_record)
        torch_record = {**torch_record, **branch}
        report = judge_backward(torch_record, paddle_record, name_map, mean_bound, outputs)
        report.on_branch = True
    later = [c for c in report.crossed if c.step]
    if later and not report.passed:
        torch_record = dict(torch_record)  # the caller's record keeps what its own run holds
        take(torch_record, again((first if on_branch else []) + later))
        report = judge_backward(torch_record, paddle_record, name_map, mean_bound, outputs)
        report.on_branch = on_branch
    report.branch = {k: v for k, v in branch.items() if not k.startswith((F64, MOVED, few.NOISE))}
    keep(torch_record)
    return report


def renames(record: dict, other: dict = None) -> dict:
    """{torch key: its Paddle tensor name, or "/" and its whole Paddle key}, from a torch record's RENAMED and
    HELD_AT keys (and with `other`, the Paddle record not yet marked, loose.held_at: two records written apart)."""
    return {**{t: "/" + p for t, p in (loose_tensors.held_at(record, other) if other is not None else {}).items()},
            **dict(k[len(RENAMED):].rsplit("/", 1) for k in record if k.startswith(RENAMED)),
            **{t: "/" + p for t, _, p in (k[len(HELD_AT):].partition("/") for k in record if k.startswith(HELD_AT))}}



def _counterpart(key: str, modules: dict, renamed: dict) -> str:
    """The Paddle record key of a torch record key (<kind>/<torch key>): the module as paired (modules: {torch
    module: Paddle module}, the models themselves as ROOT), the tensor by the name the torch side recorded for
    it; "" when its module has no counterpart."""
    kind, _, name = key.partition("/")
    module, _, tensor = name.rpartition(".")
    target = modules.get(module or ROOT)
    tensor = renamed.get(name, tensor)
    if tensor.startswith("/"):  # a bare parameter of another module on the Paddle side, or a Linear's for it
        return f"{kind}{tensor}"
    if target is None:
        return ""
    return f"{kind}/{target}.{tensor}" if target != ROOT else f"{kind}/{tensor}"


def judge_backward(torch_record: dict, paddle_record: dict, name_map=None,
                   mean_bound=LOSS_MEAN_BOUND, outputs=None) -> BackwardReport:
    """Pair a torch record_backward with a Paddle one (modules through name_map) and judge every gradient,
    loss, lr and tensor (portcheck/calibrated.py), each step's loss also held to mean_bound on its mean abs diff
    (None: no bound). BatchNorm's running variance in train mode is judged after the by-design rule
    (biased_variance). outputs: the model outputs its first forward compares (judge_forward's)."""
    checked_args(None, mean_bound)
    if not any(k.startswith(F64 + "grad/") for k in torch_record):
        if any(k.startswith(F64 + "grad/") for k in paddle_record):
            raise PipelineError("the records are swapped: pass the torch record first, then the Paddle one [PC406]")
        raise PipelineError("the torch record holds no gradients with their float64 run: write it with "
                            "align.record_backward(torch_model, ...) [PC603]")
    torch_record, paddle_record = fused.cut(torch_record), fused.cut(paddle_record)  # fused modules as their parts
    torch_record = parted.marked(torch_record, paddle_record)  # written apart: a vector held in parts, joined
    # torch's packed experts as the port's list of experts, as compare_backward marks them from the models: each
    # forward's routing then read as there, the records saved apart or not
    torch_record = experts.marked(torch_record, paddle_record)
    renamed = renames(torch_record, paddle_record)
    report = BackwardReport()
    if any(k.startswith("out/") for k in torch_record):
        report.forward = judge_forward(torch_record, paddle_record, name_map, mean_bound=None, outputs=outputs)
        for r in report.forward.paired:  # a module after a BatchNorm over few values (few_values.py)
            calibrated.with_spread(r, few.spread(torch_record, f"out/{r.key}"), few.BY)
        report.crossed = crossings(report.forward, torch_record, paddle_record)
    report.taken = TAKEN in torch_record
    report.taking = {k[len(TAKEN_KEY):]: v for k, v in torch_record.items() if k.startswith(TAKEN_KEY)}
    mapped = (report.forward.pairing if report.forward else
              pairing.pair(*loose_tensors.marked(torch_record, paddle_record)[:2], name_map)).modules()
    paddle_record, renamed, why = loose_tensors.in_torchs_shapes(torch_record, paddle_record, mapped, renamed,
                                                                 _counterpart)

    isolated = ISOLATED in torch_record
    if isolated != (ISOLATED in paddle_record):
        raise PipelineError("one record's steps are isolated and the other's are not: record both through "
                            "compare_backward(..., isolate=True) [PC604]")
    report.isolated = isolated

    scales = {}  # {a key's kind (grad/, state1/, final/): module_scales of torch's tensors of that kind}

    def kind_scales(kind):
        if kind not in scales:
            scales[kind] = calibrated.module_scales({k[len(kind):]: float(np.max(np.abs(torch_record.get(F64 + k, v))))
                                                     for k, v in torch_record.items() if k.startswith(kind)
                                                     and np.size(v) and np.asarray(v).dtype.kind == "f"})
        return scales[kind]

    def row(key, name, mean_bound=None, multiple=calibrated.K_BACKWARD):
        a, ref, b = torch_record[key], torch_record.get(F64 + key), paddle_record.get(
            key if key.startswith(("loss/", "lr/")) else _counterpart(key, mapped, renamed))
        if not key.startswith(("grad/", "loss/", "lr/")):  # a part torch holds constant: its gradient judged alone
            a, ref, b = parted.trained(torch_record, key, a, ref, b)
        if b is None:
            return calibrated.unjudged(name, np.shape(a), why.get(key, f"{diff.UNPAIRED} on paddle"), 0.0)
        row = measure(name, a, ref, b, mean_bound, multiple)
        kind, _, tensor = key.partition("/")
        if not key.startswith(("loss/", "lr/")) and np.asarray(a).dtype.kind == "f":  # a counter is exact
            row = calibrated.zero_to_fp32(row, tensor, kind_scales(kind + "/"),
                                          "gradients" if kind == "grad" else "tensors")
        moved, taken = spread_of(torch_record, key), _figure(torch_record.get(TAKEN_KEY + key))
        noise = few.spread(torch_record, key)
        if taken is not None and taken > max(moved or 0.0, noise or 0.0):
            return calibrated.with_spread(row, taken, TAKING)
        if noise is not None and noise > (moved or 0.0):
            return calibrated.with_spread(row, noise, few.BY)
        return calibrated.with_spread(row, moved)

    for key in (k for k in torch_record if k.startswith("grad/")):
        report.grads.append(row(key, f"grad {key[5:]}", multiple=calibrated.K_GRAD))
    steps = len([k for k in torch_record if k.startswith("loss/")])
    # an lr is the lr pair's and Step 5's: within tolerances.ULPS of the schedule's largest, one rule for all three
    largest_lr = max((float(np.max(np.abs(v))) for k, v in torch_record.items() if k.startswith("lr/")), default=0.0)

    def lr_row(i):
        a, b = np.asarray(torch_record[f"lr/{i}"], np.float64), paddle_record.get(f"lr/{i}")
        if b is None:
            return calibrated.unjudged("lr", a.shape, f"{diff.UNPAIRED} on paddle", 0.0)
        return diff.compare_key("lr", a, np.asarray(b, np.float64), tolerances.Ulps(tolerances.ULPS, largest_lr))

    for i in range(steps):
        rows = [row(f"loss/{i}", "loss", mean_bound), lr_row(i)]
        for key in (k for k in torch_record if k.startswith(f"state{i + 1}/")):
            # isolated, a step's tensors come from one step on the same weights: no compounding over steps
            r = row(key, key.partition("/")[2], multiple=calibrated.K_STEP if isolated else calibrated.K_BACKWARD)
            # the two optimizers' own float32 arithmetic (each replayed in float64 on its run's gradients, where the
            # records hold the replays: portcheck run's), which no port can close
            calibrated.with_optimizers(r, replayed_error(torch_record, paddle_record, key,
                                                         _counterpart(key, mapped, renamed)))
            module = r.name.rpartition(".")[0]
            # the by-design rule first where it explains the row, its rest then judged (torch's spread included)
            if not r.problem and r.name.endswith(".running_var") and f"{NORM}{module}" in torch_record:
                prev = f"state{i}/{r.name}"  # isolated, both sides started the step from torch's statistics
                norm = torch_record[f"{NORM}{module}"]
                biased_variance(r, norm, torch_record[prev],
                                 torch_record[prev] if isolated else paddle_record[_counterpart(prev, mapped, renamed)],
                                 torch_record[key], paddle_record[_counterpart(key, mapped, renamed)],
                                 updates=max(1, int(norm[2])) if norm.size > 2 else 1)
            rows.append(r)
        if i == steps - 1:
            rows += [row(k, f"{k[6:]}{LAST}") for k in torch_record
                     if k.startswith("final/") and f"state{i + 1}/{k[6:]}" not in torch_record]
        report.steps.append(rows)
    if report.forward is not None:  # each later step's forward routing, as the first's (forward.routing)
        report.routing = {i: routing.compare(routing.in_step(torch_record, i), routing.in_step(paddle_record, i),
                                             report.forward.pairing) for i in range(1, steps)
                          if any(k.startswith(routing.STEP.format(i)) for k in torch_record)}
        report.judge_routing()
    report.by_design = by_design_lines(torch_record, paddle_record, report.steps) + cycled_momentum(torch_record) + \
        parted.constant_lines(torch_record)
    report.few_values = few_values(torch_record)
    return report
