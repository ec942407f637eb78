"""record_backward: one side's training on one batch recorded, as a pt_ or pd_ script saves it (every gradient after
the first backward, each step's loss, learning rate, update and running-statistics digests, the weights after the
last), torch's side with its float64 twin and its run again moved one ulp; the record keys judge_backward
(gradients.backward) reads them by.

May import portcheck.core, portcheck.mapping, portcheck.forward and gradients' against_itself, kinks, optimizers,
digests, few_values and restarts; never gradients.backward, which imports it.
"""
import contextlib
import copy
import numbers

import numpy as np

from portcheck.forward import routing
from portcheck.forward.twin import F64, WIDER, cast_wide, experts_eager, float64, float64_inputs, in_turn
from portcheck.mapping.trace import INPUTS, Recorder, call, framework_of, watch, watch_paddle
from portcheck.core import calibrated
from portcheck.mapping import experts, fused, loose as loose_tensors, modules, parted
from portcheck.core.errors import PipelineError, raised_by
from portcheck.mapping.tensors import torch_layouts
from portcheck.gradients.against_itself import AGAINST_ITSELF, AGAINST_KEYS, RUNNING, against_itself, moved_one_ulp
from portcheck.gradients.kinks import TAKING_KEYS, near_zero, taking_paddles_side
from portcheck.gradients.optimizers import (CYCLES_MOMENTUM, batch_statistics, few_values, norm_counter,
                                            optimizer_settings)
from portcheck.gradients import few_values as few, restarts
from portcheck.gradients.digests import STATISTICS, running_means, updates




def _lr(optimizer):
    if hasattr(optimizer, "param_groups"):
        return optimizer.param_groups[0]["lr"]
    return optimizer.get_lr()


MAX_STEPS = 1000  # the guide's bp_align compares a few steps; every step's state is held in memory


def checked_steps(steps):
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or not 1 <= steps <= MAX_STEPS:
        raise PipelineError(f"steps={steps!r}: give a whole number of optimizer steps from 1 to {MAX_STEPS} "
                            "(each step is recorded in memory, on both sides and in float64) [PC600]")


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
        out.update(parted.constants(layouts, parted.reader(model)))  # a joined vector's constant part, said
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
        return fused.mark({**parted.described(modules.describe(model), layouts), **out,
                           **({ISOLATED: np.ones(1)} if isolate else {})}, parts, model)
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
        # torch's (and its twin's) choice of experts each block hands its packed experts, in the forwards whose routing
        # is read, as compare_forward's record keeps it (a port's router returning its top k is judged on it)
        routed = experts.Routed(model, None, out, "" if not step else routing.STEP.format(step)) \
            if (outputs and not step) or (step and watched) else contextlib.nullcontext()
        with raised_by(f"the {side} model's forward raised", TWIN_FAILED if side == TWIN else INPUTS), watching, \
                routed:
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
                watched = routing.watched(experts.mark({**modules.describe(model), **recorder.arrays}, model, None))
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
    state, read = model.state_dict(), parted.reader(model)
    return {k: np.array(parted.value(t, read) if t.joined else t.to_paddle(state[t.source or k].detach().cpu().numpy()))
            for k, t in layouts.items()}


def _torch_grads(model, layouts) -> dict:
    # every name of a tied weight (the one its paired module holds it under is in layouts), each part of a fused one
    params = dict(model.named_parameters(remove_duplicate=False))
    grads = {k: np.array(t.to_paddle(params[t.source or k].grad.detach().cpu().numpy())) for k, t in layouts.items()
             if t.source in params and params[t.source].grad is not None}
    # a vector its parent holds in parts (mapping.parted): each part's gradient, a constant's zeros
    read = lambda k: params[k].grad.detach().cpu().numpy()  # noqa: E731
    grads.update({k: parted.value(t, read, grads=True) for k, t in layouts.items()
                  if t.joined and all(c is not None or params[n].grad is not None for n, c in t.joined)})
    return grads


def _paddle_grads(model) -> dict:
    """Every gradient under each of its state-dict names (Paddle's RNN layers list a weight under two); a trainable
    parameter no loss reached (an expert no token was sent to) as zeros, as torch's packed experts' slices are."""
    by_tensor = {p.name: p.grad.numpy() if p.grad is not None else np.zeros(p.shape, p.numpy().dtype)
                 for p in model.parameters() if p.grad is not None or not p.stop_gradient}
    return {k: by_tensor[v.name] for k, v in model.state_dict().items() if getattr(v, "name", None) in by_tensor}


RENAMED = "renamed/"  # a torch record's key: renamed/<torch key>/<its Paddle tensor name>, an empty array

HELD_AT = "held_at/"  # held_at/<torch key>/<the whole Paddle key>: another module holds it (mapping.loose)
