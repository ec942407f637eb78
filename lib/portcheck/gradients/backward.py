"""compare_backward: gradients after one backward, then losses, learning rates and BatchNorm's running
statistics after each of N steps of the user's own optimizer and scheduler, and every weight after the last,
on both sides.

Each side is recorded on its own (record_backward: what a pt_ or pd_ script saves) and the two records are
judged together (judge_backward: what its check does). Every compared tensor is held to the rule of
portcheck/calibrated.py: a multiple of torch's own fp32 error, measured by the torch model's float64 twin
(twin.float64) taking the same steps with the same optimizer and scheduler.

Its parts, each a module of this package: the report (result), torch against itself (against_itself), the ReLU kinks
crossed (kinks), the optimizer pairs that differ by design (optimizers). May import portcheck.core, portcheck.mapping,
portcheck.forward and those modules.
"""
import contextlib
import copy
import numbers

import numpy as np

from portcheck.core.calibrated import measure
from portcheck.core.keys import ROOT
from portcheck.forward.compare import checked_args, judge_forward
from portcheck.forward import routing
from portcheck.forward.chosen import checked_outputs
from portcheck.forward.twin import EAGER, F64, WIDER, cast_wide, experts_eager, float64, float64_inputs, in_turn
from portcheck.mapping.trace import INPUTS, Recorder, call, check_models, framework_of, watch, watch_paddle
from portcheck.core import calibrated, diff, tolerances
from portcheck.mapping import experts, fused, inferred, loose as loose_tensors, modules, pairing
from portcheck.mapping.convert import plan
from portcheck.core.errors import PipelineError, raised_by
from portcheck.mapping.tensors import torch_layouts
from portcheck.gradients.against_itself import (AGAINST_ITSELF, AGAINST_KEYS, MOVED, RUNNING, against_itself,
                                                moved_one_ulp, spread_of)
from portcheck.gradients.kinks import (TAKEN, TAKEN_KEY, TAKING, TAKING_KEYS, crossings, near_zero, on_paddles_branch,
                                       take, taking_paddles_side)
from portcheck.gradients.optimizers import (CYCLES_MOMENTUM, NORM, batch_statistics, biased_variance, by_design_lines,
                                            cycled_momentum, few_values, norm_counter, optimizer_settings,
                                            replayed_error)
from portcheck.gradients.result import LAST, LOSS_MEAN_BOUND, BackwardReport
from portcheck.gradients import few_values as few, restarts
# each step's digests (documented as backward.updates, backward.running_means)
from portcheck.gradients.digests import RUNNING_MEANS, STATISTICS, running_means, updates  # noqa: F401
# documented here: docs/zoo.md cites them as portcheck.gradients.backward.<name> (and its other names above,
# docs/run.md, docs/rules.md, lib/README.md: AGAINST_ITSELF, against_itself, crossings, moved_one_ulp, batch_statistics)
from portcheck.gradients.against_itself import _ties_other_way  # noqa: F401 (documented path)
from portcheck.gradients.kinks import ON_BRANCH  # noqa: F401 (documented path)


def _lr(optimizer):
    if hasattr(optimizer, "param_groups"):
        return optimizer.param_groups[0]["lr"]
    return optimizer.get_lr()


MAX_STEPS = 1000  # the guide's bp_align compares a few steps; every step's state is held in memory


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
    red); the loss reads its own."""
    checked_args(None, mean_bound)  # before any training: a bad bound would only show when .passed is read
    checked_outputs(outputs)
    checked_pairs(loss=loss, optimizer=optimizer, scheduler=scheduler, clip=clip)
    check_models(torch_model, paddle_model)  # before anything reads either as its framework's model
    kinds, loose = {}, {}
    # a fused module no layout declares, in the layout the Paddle model holds already (converted before): each part
    # then judged, as convert's run settled it
    found_held = inferred.held(torch_model, paddle_model, layouts)
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


def checked_steps(steps):
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or not 1 <= steps <= MAX_STEPS:
        raise PipelineError(f"steps={steps!r}: give a whole number of optimizer steps from 1 to {MAX_STEPS} "
                            "(each step is recorded in memory, on both sides and in float64) [PC600]")


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


def record_backward(model, inputs, targets, loss, optimizer, scheduler=None, steps=1, layouts=None,
                    paddle_kinds=None, isolate=False, starts=None, clip=None, crossed=None, loose=None) -> dict:
    """One side's training on one batch, as a flat dict of numpy arrays (what a pt_ or pd_ script saves):

        grad/<key>          every parameter's gradient after the first backward
        loss/<i>, lr/<i>    before step i's update (i = 0 .. steps-1)
        weights/<i>         step i's update of every float tensor, its mean |after - before|, sorted (updates): a digest
        running/<i>         (BatchNorm) step i's change of every running mean, the same digest (running_means)
        state<i>/<key>      BatchNorm's running statistics before any step (i = 0) and after step i
                            (isolated: every weight and buffer)
        final/<key>         every weight and buffer after the last step
        moved:<key>         (torch, not isolated) the loss/, state and final/ keys of its run again from every weight
                            moved one ulp, with another thread count: what torch does to itself, which judge_backward
                            allows calibrated.SPREAD times at each (a value within rounding of a ReLU's kink in a
                            later step); its grad/ keys too where a BatchNorm uses batch statistics (batch_statistics)
        spread:<key>        (torch, not isolated) max |that run - a further run of AGAINST_ITSELF|, one figure
        near<i>/<module>    step i's forward (0: the first): the flat indices (row 0) and values (row 1)
                            of each module's output within kinks.BAND x its largest of 0;
                            near<i>/in/<module> of its first input

    crossed=[Crossing] (torch; compare_backward, where Paddle's run crossed a kink): only torch's run again from the
    model's weights, taking Paddle's side of 0 at each of them (its grad/, loss/, state, final/ and weights/ keys;
    judged reads them as on_paddles_branch or take says); with isolate=True each of its steps starts from the
    weights torch's run without them left, as Paddle's isolated steps do (one fp32 run more).

    Isolated steps (compare_backward(isolate=True) makes both): a torch model's run with isolate=True records
    every tensor after every step, and its float64 twin starts each step from the fp32 weights the step before
    left; a Paddle model's run with starts={step: {Paddle key: array}} starts each of those steps from them
    (restarts.restart: a tensor the steps move and no start sets is refused).

    loss(output, targets) returns a scalar; optimizer(parameters) and scheduler(optimizer) are the user's own
    factories (scheduler stepped after each optimizer step; for Paddle, return the LRScheduler the optimizer
    was given, or HELD: the LRScheduler the optimizer holds); clip(parameters), when given, clips the gradients
    after each backward, before the step. A torch model's tensors are keyed by torch's names in Paddle's layout (paddle_kinds: {torch
    module: the Paddle class it pairs with}, for a layout declared by a Paddle type), and its float64 twin
    (twin.float64, from the weights it started with) takes the same steps (keys prefixed "f64:"); a Paddle
    model's by its own names. Both carry what pairing reads of each module (mod/ keys). Train or eval mode is the
    caller's (BatchNorm's batch statistics and running-stat updates are compared in train mode)."""
    checked_steps(steps)
    empty = [np.shape(v) for v in (inputs.values() if isinstance(inputs, dict) else
                                   inputs if isinstance(inputs, (tuple, list)) else [inputs]) if not np.size(v)]
    if empty:
        raise PipelineError(f"inputs hold an empty batch (shape {list(empty[0])}): a training step on nothing "
                            "compares nothing; pass at least one example [PC601]")
    parts = fused.specs(model, layouts)  # the fused modules, whose parts the record says it holds (fused.mark)
    if framework_of(model) == "torch":
        import torch
        declared, layouts = loose_tensors.keeping(layouts), torch_layouts(model, layouts, paddle_kinds, loose)
        start = copy.deepcopy(model.state_dict())  # before any step: where the float64 twin starts from
        left = {}  # isolate: the fp32 weights each step left, which the float64 twin starts the next one from
        keep = (lambda m, i: left.__setitem__(i, copy.deepcopy(m.state_dict()))) if isolate else None
        moved, against = {}, TAKING_KEYS if batch_statistics(model) else AGAINST_KEYS
        draws = torch.get_rng_state()  # the float32 run's random draws (dropout masks), its float64 twin's too

        def again(kernels, move=True, restart=None):
            with torch.random.fork_rng(devices=[]), kernels as routed:  # the same draws (dropout) as the run below
                if move:
                    moved_one_ulp(model)
                run = _train("torch", model, inputs, targets, loss, optimizer, scheduler, steps, torch.from_numpy,
                             lambda m: _torch_state(m, layouts), lambda m: _torch_grads(m, layouts), lambda: {},
                             restart, clip, outputs=False)
            model.load_state_dict(start)
            # only what judge_backward reads: the first forward's modules are not held, its gradients only by a run
            # taking Paddle's side of a kink (the first forward's move them) or where batch statistics amplify
            # rounding (batch_statistics) or a max pooling's tie sent the other way moves them (_ties_other_way)
            return {k: v for k, v in run.items() if k.startswith(TAKING_KEYS if not move or routed else against)}
        if crossed is not None:
            if isolate:  # each step from the weights torch's own run left: that fp32 run again first, keeping them
                again(contextlib.nullcontext(), move=False, restart=keep)
            return again(taking_paddles_side(model, crossed), move=False,
                         restart=(lambda m, i: m.load_state_dict(left[i])) if isolate else None)
        if not isolate:  # the plain run's steps: torch against itself (calibrated.SPREAD), each run of AGAINST_ITSELF
            # each run holds its keys already (again: against, or its gradients too where a tie was sent otherwise)
            moved = against_itself((again(kernels()) for kernels in AGAINST_ITSELF), TAKING_KEYS)
        out = _train("torch", model, inputs, targets, loss, optimizer, scheduler, steps, torch.from_numpy,
                     lambda m: _torch_state(m, layouts), lambda m: _torch_grads(m, layouts), norm_counter(model), keep,
                     clip, near=True)
        out.update({**moved, **declared})  # the layouts declared by type: what two saved records read (loose.kept)
        # a tensor Paddle names otherwise (BatchNorm's statistics, InstanceNorm's scale): its name there, as a key
        out.update({f"{RENAMED}{k}/{t.paddle_name}": np.zeros(0, np.float32) for k, t in layouts.items()
                    if t.paddle_name != t.name and not t.moved_to})
        out.update({f"{HELD_AT}{k}/{t.moved_to}": np.zeros(0, np.float32) for k, t in layouts.items() if t.moved_to})
        def twin():
            model.load_state_dict(start)
            with torch.random.fork_rng(devices=[]):  # the float32 run's masks: else its own error is another mask's
                torch.set_rng_state(draws)
                return _train(TWIN, model, float64_inputs(inputs), targets, loss, optimizer, scheduler, steps,
                              torch.from_numpy, lambda m: _torch_state(m, layouts), lambda m: _torch_grads(m, layouts),
                              lambda: {}, (lambda m, i: m.load_state_dict(left[i])) if isolate else None, clip)
        with experts_eager(model), float64(model):  # the library's one float64 twin, after the float32 run
            # a twin that raised (finfo(float64).min in a tensor made in the default dtype) or overflowed where the
            # float32 run did not (in a float32 one): run again wider, in turn; the model's casts down kept float64
            wide = in_turn(cast_wide([contextlib.nullcontext, *WIDER]), twin, catch=PipelineError,
                           failed=lambda wide: any(calibrated.overflowed(out[k], v) for k, v in wide.items() if k in out))
            out.update({F64 + k: v for k, v in wide.items()})
        errors = few.measured(out, [m for m, *_ in few_values(out)])
        if any(e for e, _ in errors.values()):  # torch against itself at its own error there (few_values.py)
            after = copy.deepcopy(model.state_dict())
            model.load_state_dict(start)
            with torch.random.fork_rng(devices=[]), few.moved_by(model, errors):
                torch.set_rng_state(draws)
                run = _train("torch", model, inputs, targets, loss, optimizer, scheduler, steps, torch.from_numpy,
                             lambda m: _torch_state(m, layouts), lambda m: _torch_grads(m, layouts), lambda: {},
                             (lambda m, i: m.load_state_dict(left[i])) if isolate else None, clip)
            model.load_state_dict(after)
            out.update({few.NOISE + k: v for k, v in run.items() if k.startswith((*TAKING_KEYS, "out/"))})
        del start
        return fused.mark({**modules.describe(model), **out, **({ISOLATED: np.ones(1)} if isolate else {})}, parts, model)
    import paddle
    return fused.mark({**modules.describe(model), **_train(
        "paddle", model, inputs, targets, loss, optimizer, scheduler, steps, paddle.to_tensor,
        lambda m: {k: v.numpy() for k, v in m.state_dict().items()}, _paddle_grads, lambda: {},
        restarts.restart(model, starts) if starts is not None else None, clip, near=True),
        **({ISOLATED: np.ones(1)} if starts is not None else {})}, parts, model)


ISOLATED = "isolated"  # a record's key: its steps were isolated (each started from torch's weights)


def _figure(value):
    figure = float(np.max(value)) if value is not None and np.size(value) == 1 else None
    return figure if figure is not None and np.isfinite(figure) else None


TWIN = "torch (float64 copy, the library's yardstick)"  # the side _train names when the library's twin fails
TWIN_FAILED = ("its float32 run took every step: the library's float64 copy failed, not the inputs (a value built "
               "from the model's dtype, such as torch.finfo(dtype).min in a float32 tensor); the gradients and steps "
               "cannot be judged against torch's own error: compare_forward names the module")


HELD = "the optimizer's own"  # record_backward's scheduler: the LRScheduler a Paddle optimizer was built with


@contextlib.contextmanager
def outside_draws(seed=0):
    """Python's and numpy's global generators seeded at `seed`, the caller's states put back after: what a model draws
    from them in train mode (paddlenlp's LayerDrop, both libraries' SpecAugment masks) is drawn alike in every run of
    either side, the same in each compare_backward, and the same on both sides where they draw in one order. torch's
    and Paddle's own draws (dropout) stay each framework's."""
    import random
    states = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed)
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])


def _train(*args, **kwargs) -> dict:
    with outside_draws():  # each run, torch's again, its float64 twin and Paddle's, from the same draws
        return _steps(*args, **kwargs)


def _steps(side, model, inputs, targets, loss, make_optimizer, make_scheduler, steps, to_tensor, state, grads, norms,
           start=None, clip=None, near=False, outputs=True):
    """start(model, i), when given, is called before each step i >= 1: an isolated run's start of the step.
    clip(parameters), when given, after each backward (the gradients recorded before it). near: each forward records the values near 0 of every module's output and input (near_zero).
    outputs=False: the first forward's modules are not recorded (a run again keeps none of them)."""
    with raised_by(f"the {side} optimizer factory raised"):
        opt = make_optimizer(model.parameters())
    if not hasattr(opt, "step"):
        raise PipelineError(f"the {side} optimizer factory gave {type(opt).__name__}, not an optimizer: return the "
                            "optimizer built on the parameters it is given [PC602]")
    settings = optimizer_settings(opt, side)
    sched = None
    if make_scheduler is HELD:
        sched = getattr(opt, "_learning_rate", None)  # Paddle's optimizer keeps it there; the user need not reach it
        if not callable(getattr(sched, "step", None)):
            raise PipelineError(f"scheduler=(..., None): the {side} optimizer holds no LRScheduler (its learning rate "
                                f"is {sched!r:.40}): build it with learning_rate=<the scheduler>, or give a factory "
                                "[PC606]")
    elif make_scheduler:
        with raised_by(f"the {side} scheduler factory raised"):
            sched = make_scheduler(opt)
        if not callable(getattr(sched, "step", None)):
            raise PipelineError(f"the {side} scheduler factory gave {type(sched).__name__} {sched!r:.40}, not a "
                                "scheduler: return the one the optimizer was given (torch: an LRScheduler on it; "
                                "Paddle: the LRScheduler passed as its learning_rate) [PC608]")
    before = state(model)
    out = {f"state0/{k}": v for k, v in before.items() if start is not None or k.rsplit(".", 1)[-1] in STATISTICS}
    out.update(settings)
    if side == "torch" and getattr(sched, "cycle_momentum", False):  # OneCycleLR's, CyclicLR's: Paddle's never do
        out[CYCLES_MOMENTUM + type(sched).__name__] = np.ones(1)
    # the first forward, every module, in the mode the caller set (train: batch statistics)
    recorder, watched = Recorder(), set()
    handles = recorder.attach(model) if outputs else []
    for step in range(steps):
        if start is not None and step:
            start(model, step)
            before = state(model)  # an isolated step's update is from where it started
        if step and watched:  # each later forward's routing, read as the first's (routing.in_step)
            handles = handles + Recorder(routing.STEP.format(step), out).attach(model, watched)
        if near:
            handles = handles + near_zero(model, out, step, recorder)  # removed after this forward, with the first's
        # torch's first forward, when recorded: which outputs its forward hands to an activation outside any module
        # (trace.watch), and on each side which it multiplies by a number (scale/), as compare_forward's record says,
        # so that it pairs and is judged as compare_forward's
        watching = contextlib.nullcontext() if step or not outputs or side not in ("torch", "paddle") else \
            watch(recorder) if side == "torch" else watch_paddle(recorder)
        with raised_by(f"the {side} model's forward raised", TWIN_FAILED if side == TWIN else INPUTS), watching:
            output = call(model, inputs, to_tensor)
        for h in handles:
            h.remove()
        handles = []
        with raised_by(f"the {side} loss raised", f"check targets ({_described(targets)}) against the model's output "
                       f"({_described(output)})"):
            value = loss(output, to_tensor(np.array(targets)))
        if getattr(value, "shape", None) is None or int(np.prod(value.shape)) != 1:
            raise PipelineError(f"the {side} loss gave {_described(value)}, not a scalar tensor: reduce it (mean or "
                                "sum) so that one backward can run [PC607]")
        with raised_by(f"the {side} backward raised"):
            value.backward()
        if step == 0:
            out.update(recorder.arrays)
            if outputs and steps > 1 and side in ("torch", "paddle"):  # a mixture of experts' router and experts
                watched = routing.watched({**modules.describe(model), **recorder.arrays})
            out.update({f"grad/{k}": g for k, g in grads(model).items()})
        if clip is not None:
            with raised_by(f"the {side} clip raised"):
                clip(list(model.parameters()))
        out[f"loss/{step}"] = np.asarray(value.detach().numpy() if hasattr(value, "detach") else value.numpy()).reshape(-1)
        out[f"lr/{step}"] = np.array([_lr(opt)], dtype=np.float64)
        with raised_by(f"the {side} optimizer or scheduler step raised"):
            opt.step()
            (opt.zero_grad if hasattr(opt, "zero_grad") else opt.clear_grad)()
            if sched:
                sched.step()
        now = state(model)
        # the digests a hand-in's bp_align carries per step: the weights', and BatchNorm's running means' if any
        out[f"weights/{step}"], means = updates(before, now), running_means(before, now)
        if means.size:
            out[f"{RUNNING}{step}"] = means
        before = now
        # every weight after the first step (an optimizer's bug named at the parameters it moves), then BatchNorm's
        # statistics (isolated: every tensor) after each
        out.update({f"state{step + 1}/{k}": v for k, v in now.items() if f"state0/{k}" in out or step == 0})
        if step == steps - 1:
            out.update({f"final/{k}": v for k, v in now.items()})
    for h in handles:  # no step taken
        h.remove()
    out.update(norms())
    return out


def _described(value) -> str:
    """A tensor, array or anything else as the one line an error shows: float32[2, 3]."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None:
        return type(value).__name__
    return f"{str(dtype).replace('torch.', '').replace('paddle.', '')}{list(shape)}"


def _torch_state(model, layouts) -> dict:
    """{torch key: array in Paddle's layout} of every tensor the Paddle side holds; copies (torch's numpy()
    shares the tensor's memory, which the next step updates in place)."""
    state = model.state_dict()
    return {k: np.array(t.to_paddle(state[t.source or k].detach().cpu().numpy())) for k, t in layouts.items()}


def _torch_grads(model, layouts) -> dict:
    # every name of a tied weight (the one its paired module holds it under is in layouts), each part of a fused one
    params = dict(model.named_parameters(remove_duplicate=False))
    return {k: np.array(t.to_paddle(params[t.source or k].grad.detach().cpu().numpy())) for k, t in layouts.items()
            if t.source in params and params[t.source].grad is not None}


def _paddle_grads(model) -> dict:
    """Every gradient under each of its state-dict names (Paddle's RNN layers list a weight under two)."""
    by_tensor = {p.name: p.grad.numpy() for p in model.parameters() if p.grad is not None}
    return {k: by_tensor[v.name] for k, v in model.state_dict().items() if getattr(v, "name", None) in by_tensor}


RENAMED = "renamed/"  # a torch record's key: renamed/<torch key>/<its Paddle tensor name>, an empty array

HELD_AT = "held_at/"  # held_at/<torch key>/<the whole Paddle key>: another module holds it (mapping.loose)


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
        if b is None:
            return calibrated.unjudged(name, np.shape(a), why.get(key, "no counterpart on paddle"), 0.0)
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
            return calibrated.unjudged("lr", a.shape, "no counterpart on paddle", 0.0)
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
    report.by_design = by_design_lines(torch_record, paddle_record, report.steps) + cycled_momentum(torch_record)
    report.few_values = few_values(torch_record)
    return report
