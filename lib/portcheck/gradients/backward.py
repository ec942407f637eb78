"""compare_backward: gradients after one backward, then losses, learning rates and BatchNorm's running
statistics after each of N steps of the user's own optimizer and scheduler, and every weight after the last,
on both sides.

Each side is recorded on its own (record_backward: what a pt_ or pd_ script saves) and the two records are
judged together (judge_backward: what its check does). Every compared tensor is held to the rule of
portcheck/calibrated.py: a multiple of torch's own fp32 error, measured by the torch model's float64 twin
(twin.float64) taking the same steps with the same optimizer and scheduler.
"""
import contextlib
import copy
import numbers
from dataclasses import dataclass, field

import numpy as np

from portcheck.core.calibrated import measure
from portcheck.forward.compare import checked_args, judge_forward
from portcheck.forward.result import ForwardReport, unjudged_lines
from portcheck.forward.twin import F64, WIDER, cast_wide, float64, float64_inputs, in_turn
from portcheck.mapping.trace import INPUTS, Recorder, call, first_input, framework_of, hook_points, next_call, values
from portcheck.core import calibrated, diff, tolerances
from portcheck.mapping import fused, modules, pairing
from portcheck.mapping.convert import plan, torch_layouts
from portcheck.mapping.layouts import RENAMES
from portcheck.core.diff import NOT_JUDGED, first_diverging
from portcheck.core.errors import PipelineError, raised_by
from portcheck.core.keys import ROOT
from portcheck.core.report import format_table


@dataclass
class BackwardReport:
    forward: ForwardReport = None                 # every module's output in the first step's forward
    grads: list = field(default_factory=list)    # [diff.KeyResult] per parameter, in forward order
    steps: list = field(default_factory=list)    # [[diff.KeyResult] per step: loss, lr, statistics (weights: last)]
    crossed: list = field(default_factory=list)  # [Crossing] in step order: a forward's values on each side of 0
    taken: bool = False                          # torch's run taking Paddle's side of them is in the record
    taking: dict = field(default_factory=dict)   # {record key: max |torch's run - that run|}: a hand-in carries it
    isolated: bool = False                       # each step started both sides from torch's weights
    by_design: list = field(default_factory=list)  # lines: a difference the two optimizers make on purpose
    on_branch: bool = False  # judged against torch's run taking Paddle's branch at the first forward's kinks
    branch: dict = field(default_factory=dict)  # {record key: that run's value}: a hand-in carries it (handin.BRANCH)

    @property
    def kinks(self) -> list:
        """The first forward's crossings: at a ReLU after them the first backward takes another branch."""
        return [c for c in self.crossed if c.step == 0]

    @property
    def passed(self) -> bool:
        return (self.forward is None or self.forward.passed) and all(r.passed for r in self.grads) \
            and all(r.passed or r.beyond(LOSS_MEAN_BOUND) for rows in self.steps for r in rows)

    @property
    def unjudged(self) -> list:
        """The values whose yardstick failed (torch's float64 twin overflowed where its float32 run did not): the
        first forward's, the gradients', each step's, in that order; red, and said as not judged, never as where
        the runs part."""
        return (self.forward.unjudged if self.forward is not None else []) + \
            [r for rows in [self.grads, *self.steps] for r in rows if not r.judged]

    @property
    def first_diverging(self):
        """Where the two runs part, first place first: a module of the first forward, else the first step's loss
        (computed from that forward, before any backward: a loss reduced otherwise on one side is named there, not
        at the gradients it scales), else a gradient in backward order, else the first key over after an optimizer
        step (every weight after step 1: an optimizer's bug is named at the parameters it moves)."""
        if self.forward is not None and self.forward.first_diverging:
            return self.forward.first_diverging
        loss = next((r for r in self.steps[0] if r.name == "loss"), None) if self.steps else None
        if loss is not None and not loss.passed and loss.judged:
            return "loss after step 1"
        step = self.first_diverging_step
        return self.first_diverging_gradient or (f"{step[1].removesuffix(LAST)} after step {step[0] + 1}"
                                                 if step else None)

    @property
    def first_diverging_gradient(self):
        """The first gradient out of tolerance in backward order (the backward pass reaches parameters in
        reverse): a bug corrupts every gradient from its place back to the input, and this one is its place."""
        r = first_diverging(self.grads, reverse=True)
        return r.name if r else None

    @property
    def first_diverging_step(self):
        """(step, the first key over tolerance) after the optimizer's steps, or None. Step i's loss is computed
        from the weights step i - 1 left; a plain run records them after the first step and the last only, so from
        step 3 on a red loss shows weights that differ where the record does not hold them: there a weight (or
        statistic) red in the same step is named first, the parameter the runs part at, and the loss only when no
        weight is red at or before its step (an optimizer's momentum or beta named at the weights it moves, as the
        isolated steps name it). The lr, which makes the step's update, stays first."""
        return next(((i, r.name) for i, r in enumerate(map(self.first_in_step, range(len(self.steps)))) if r),
                    None)

    def first_in_step(self, i):
        """The row of step i where the runs part by first_diverging_step's order (the table and the plot mark it)."""
        rows = self.steps[i]
        if i >= 2 and not self.isolated:
            rows = [r for r in rows if r.name != "loss"] + [r for r in rows if r.name == "loss"]
        return first_diverging(rows)

    def plot(self, path) -> str:
        """A PNG at `path`: the first forward's modules, every gradient and every key after the last step, each
        over its allowance on a log scale, where the runs part marked (portcheck.plot); a line saying what was done."""
        from portcheck.forward import plot
        return plot.draw(plot.backward_panels(self), path)

    def frame(self):
        """The table as a pandas DataFrame (report.COLUMNS): the first forward's rows (ForwardReport.frame), a row
        per gradient after the first backward (part "gradient"), then per step a row per value after it: its
        loss, lr, statistics and, after the last step, every weight (part "step", step 1, 2, ...). Needs pandas."""
        from portcheck.core import report
        rows = self.forward.figures() if self.forward is not None else []
        rows += report.figures(self.grads, "gradient", first=first_diverging(self.grads, reverse=True))
        for i, step in enumerate(self.steps):
            rows += report.figures(step, "step", i + 1, self.first_in_step(i))
        return report.frame(rows)

    def table(self) -> str:
        lines = ["the first forward, every module:", self.forward.table()] if self.forward is not None else []
        if self.on_branch or self.taken or not self.passed:  # a green run's values near 0 decide nothing
            lines += crossing_lines(self.crossed, self.on_branch, self.taken, self.first_diverging or "")
        lines += ["gradients after the first backward (forward order):"]
        lines += format_table(calibrated.HEADER,
                              calibrated.table_rows(self.grads, first_diverging(self.grads, reverse=True)))
        lines += unjudged_lines([r for r in self.grads if not r.judged])
        notes = {r.name: r.by_design for rows in self.steps for r in rows if r.by_design}
        lines += [f"{name}: {note}" for name, note in notes.items()]  # one line per module and rule
        lines += self.by_design
        for i, rows in enumerate(self.steps):
            bad, first = [r for r in rows if not r.passed], self.first_in_step(i)
            start = f" (started from torch's weights after step {i})" if self.isolated and i else ""
            unjudged = [r for r in bad if not r.judged]
            # a plain run holds the weights after step 1 and the last only: a loss red first shows an update between
            unheld = (first is not None and first.name == "loss" and 2 <= i < len(self.steps) - 1
                      and not self.isolated)
            lines.append(f"after step {i + 1}{start}: {len(rows) - len(bad)}/{len(rows)} within" +
                         (f"; first over: {first.name} ({first.why})" if first else "") +
                         (f"; the weights steps 2 to {i} left are not recorded in a plain run: compare_backward("
                          "isolate=True) judges each step's update alone, naming the parameter" if unheld else "") +
                         (f"; {len(unjudged)} not judged (from {unjudged[0].name}): "
                          f"{unjudged[0].why[len(NOT_JUDGED):].strip()}" if unjudged else ""))
        return "\n".join(lines)


def _lr(optimizer):
    if hasattr(optimizer, "param_groups"):
        return optimizer.param_groups[0]["lr"]
    return optimizer.get_lr()


MAX_STEPS = 1000  # the guide's bp_align compares a few steps; every step's state is held in memory


# the loss rows' bound on the mean abs diff unless the caller gives one: the guide's bp_align threshold (losses
# over optimizer steps are its pair)
LOSS_MEAN_BOUND = tolerances.GUIDE["bp_align"].threshold


def compare_backward(torch_model, paddle_model, inputs, targets, loss, optimizer, scheduler=None, steps=1,
                     name_map=None, layouts=None, isolate=False, mean_bound=LOSS_MEAN_BOUND,
                     clip=None) -> BackwardReport:
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
    are before clipping, the weights after it."""
    checked_args(None, mean_bound)  # before any training: a bad bound would only show when .passed is read
    for arg, value in (("loss", loss), ("optimizer", optimizer), ("scheduler", scheduler), ("clip", clip)):
        if not (isinstance(value, (tuple, list)) and len(value) == 2) and (value is not None or arg in ("loss", "optimizer")):
            raise PipelineError(f"compare_backward: {arg}= takes a pair, (torch's, Paddle's), got "
                                f"{type(value).__name__}: pass {arg}=(torch_{arg}, paddle_{arg}) [PC605]")
    kinds = {}
    planned = plan(torch_model, paddle_model, name_map, layouts, inputs, paddle_kinds=kinds)
    import torch
    # where the run starts, for torch's run again taking Paddle's side of a kink (judged)
    start, draws = copy.deepcopy(torch_model.state_dict()), torch.get_rng_state()
    t = record_backward(torch_model, inputs, targets, loss[0], optimizer[0], scheduler and scheduler[0], steps, layouts,
                        paddle_kinds=kinds, isolate=isolate, clip=clip and clip[0])
    starts = None
    if isolate:  # Paddle's start of step i: torch's weights after step i - 1, in Paddle's names (and layout)
        starts = {i: {planned[k.partition("/")[2]][0]: v for k, v in t.items() if k.startswith(f"state{i}/")}
                  for i in range(1, steps)}
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
                                  steps, layouts, paddle_kinds=kinds, isolate=isolate and steps > 1,
                                  clip=clip and clip[0], crossed=crossed)
        torch_model.load_state_dict(after)
        return run
    return judged(t, p, name_map, mean_bound, again)


# A kink: values of a forward within the floor of 0 on both sides and of opposite signs (Crossing), where a ReLU or
# max after them opens on one side and shuts on the other: a jump in the gradients, then the weights, that no multiple
# of torch's own error covers. One record (near<step>/, every forward), one run (torch's again from its start, taking
# Paddle's side of 0 there: _taking), one line per step (crossing_lines); two rules for what the run is:
# - the first forward's (MobileNetV2 under ATEN_CPU_CAPABILITY=default: a conv output 1.5e-15 in torch, -1.7e-16 in
#   Paddle, 1.3e-15 in float64, beside an error of 2.4e-14 there; its BatchNorm's bias gradient 380 x its allowance):
#   torch's run on Paddle's branch is torch's run, its float64 and moved runs (calibrated.SPREAD) moved by as much, so
#   that torch's own error and spread stay the yardsticks (on_paddles_branch);
# - a later step's, which no run of torch against itself above need cross (tools/bench_k_backward.py --kinks, seed 7;
#   the zoo's ResNet-18 under ATEN_CPU_CAPABILITY=default, at a ReLU's input after a residual sum): the run taking
#   Paddle's side is torch against itself there, SPREAD x |torch's run - it| allowed at every key (take).
ON_BRANCH = ("the gradients and the steps are judged against torch's run again with those values set to Paddle's "
             "(its branch at the ReLU after them), torch's own fp32 error and spread moved with it")


def on_paddles_branch(run: dict, torch_record: dict) -> dict:
    """torch's record as its run on Paddle's branch of the first forward's kinks (`run`, record_backward(crossed=)):
    its gradients and every key after its steps (the update digests a hand-in's bp_align carries too), and its
    float64 and moved runs moved by as much."""
    out = {k: v for k, v in run.items() if k.startswith(TAKING_KEYS) and F64 + k in torch_record}
    for prefix in (F64, MOVED):
        twin = {k: torch_record[prefix + k] for k in out if prefix + k in torch_record}
        out.update({prefix + k: v for k, v in moved_with(out, torch_record, twin).items()})
    return out


def moved_with(run: dict, own: dict, twin: dict) -> dict:
    """twin's values (torch's float64 run, its run against itself) at run's keys, moved as far as run's values are
    from own's (torch's): what on_paddles_branch does to them, and the hand-in checker to a pair's (handin.BRANCH)."""
    return {k: twin[k] + (np.asarray(v, np.float64) - np.asarray(own[k], np.float64)) for k, v in run.items()
            if k in twin}


def judged(torch_record, paddle_record, name_map=None, mean_bound=LOSS_MEAN_BOUND, again=None) -> BackwardReport:
    """judge_backward, and where red with kinks crossed (report.crossed), once more against torch's run taking
    Paddle's side of them: again(crossed), record_backward(torch_model, ..., crossed=crossed) from the weights and
    random draws the torch record started from (None: not made). The first forward's kinks (its rows green): torch's
    run on Paddle's branch is torch's run (on_paddles_branch; an isolated record's first step alone, again(crossed,
    1)); a later step's: its run taking Paddle's side there too is torch against itself (take). One torch run more
    per rule, never in a green run."""
    report = judge_backward(torch_record, paddle_record, name_map, mean_bound)
    if report.passed or again is None:
        return report
    first, isolated = report.kinks, ISOLATED in torch_record
    on_branch = bool(first) and report.forward.passed
    branch = {}
    if on_branch:
        branch = on_paddles_branch(again(first, 1) if isolated else again(first), torch_record)
        torch_record = {**torch_record, **branch}
        report = judge_backward(torch_record, paddle_record, name_map, mean_bound)
        report.on_branch = True
    later = [c for c in report.crossed if c.step]
    if later and not report.passed:
        torch_record = dict(torch_record)  # the caller's record keeps what its own run holds
        take(torch_record, again((first if on_branch else []) + later))
        report = judge_backward(torch_record, paddle_record, name_map, mean_bound)
        report.on_branch = on_branch
    report.branch = {k: v for k, v in branch.items() if not k.startswith((F64, MOVED))}
    return report


def record_backward(model, inputs, targets, loss, optimizer, scheduler=None, steps=1, layouts=None,
                    paddle_kinds=None, isolate=False, starts=None, clip=None, crossed=None) -> dict:
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
                            of each module's output within the floor of 0 (calibrated.FLOOR x eps32 x its largest);
                            near<i>/in/<module> of its first input

    crossed=[Crossing] (torch; compare_backward, where Paddle's run crossed a kink): only torch's run again from the
    model's weights, taking Paddle's side of 0 at each of them (its grad/, loss/, state, final/ and weights/ keys;
    judged reads them as on_paddles_branch or take says); with isolate=True each of its steps starts from the
    weights torch's run without them left, as Paddle's isolated steps do (one fp32 run more).

    Isolated steps (compare_backward(isolate=True) makes both): a torch model's run with isolate=True records
    every tensor after every step, and its float64 twin starts each step from the fp32 weights the step before
    left; a Paddle model's run with starts={step: {Paddle key: array}} starts each of those steps from them.

    loss(output, targets) returns a scalar; optimizer(parameters) and scheduler(optimizer) are the user's own
    factories (scheduler stepped after each optimizer step; for Paddle, return the LRScheduler the optimizer
    was given, or HELD: the LRScheduler the optimizer holds); clip(parameters), when given, clips the gradients
    after each backward, before the step. A torch model's tensors are keyed by torch's names in Paddle's layout (paddle_kinds: {torch
    module: the Paddle class it pairs with}, for a layout declared by a Paddle type), and its float64 twin
    (twin.float64, from the weights it started with) takes the same steps (keys prefixed "f64:"); a Paddle
    model's by its own names. Both carry what pairing reads of each module (mod/ keys). Train or eval mode is the
    caller's (BatchNorm's batch statistics and running-stat updates are compared in train mode)."""
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or not 1 <= steps <= MAX_STEPS:
        raise PipelineError(f"steps={steps!r}: give a whole number of optimizer steps from 1 to {MAX_STEPS} "
                            "(each step is recorded in memory, on both sides and in float64) [PC600]")
    empty = [np.shape(v) for v in (inputs.values() if isinstance(inputs, dict) else
                                   inputs if isinstance(inputs, (tuple, list)) else [inputs]) if not np.size(v)]
    if empty:
        raise PipelineError(f"inputs hold an empty batch (shape {list(empty[0])}): a training step on nothing "
                            "compares nothing; pass at least one example [PC601]")
    parts = fused.specs(model, layouts)  # the fused modules, whose parts the record says it holds (fused.mark)
    if framework_of(model) == "torch":
        import torch
        layouts = torch_layouts(model, layouts, paddle_kinds)
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
                             restart, clip)
            model.load_state_dict(start)
            # only what judge_backward reads: the first forward's modules are not held, its gradients only by a run
            # taking Paddle's side of a kink (the first forward's move them) or where batch statistics amplify
            # rounding (batch_statistics) or a max pooling's tie sent the other way moves them (_ties_other_way)
            return {k: v for k, v in run.items() if k.startswith(TAKING_KEYS if not move or routed else against)}
        if crossed is not None:
            if isolate:  # each step from the weights torch's own run left: that fp32 run again first, keeping them
                again(contextlib.nullcontext(), move=False, restart=keep)
            return again(_taking(model, crossed), move=False,
                         restart=(lambda m, i: m.load_state_dict(left[i])) if isolate else None)
        if not isolate:  # the plain run's steps: torch against itself (calibrated.SPREAD), each run of AGAINST_ITSELF
            # each run holds its keys already (again: against, or its gradients too where a tie was sent otherwise)
            moved = against_itself((again(kernels()) for kernels in AGAINST_ITSELF), TAKING_KEYS)
        out = _train("torch", model, inputs, targets, loss, optimizer, scheduler, steps, torch.from_numpy,
                     lambda m: _torch_state(m, layouts), lambda m: _torch_grads(m, layouts), _norm_counter(model), keep,
                     clip, near=True)
        out.update(moved)
        # a tensor Paddle names otherwise (BatchNorm's statistics, InstanceNorm's scale): its name there, as a key
        out.update({f"{RENAMED}{k}/{t.paddle_name}": np.zeros(0, np.float32) for k, t in layouts.items()
                    if t.paddle_name != t.name})
        def twin():
            model.load_state_dict(start)
            with torch.random.fork_rng(devices=[]):  # the float32 run's masks: else its own error is another mask's
                torch.set_rng_state(draws)
                return _train(TWIN, model, float64_inputs(inputs), targets, loss, optimizer, scheduler, steps,
                              torch.from_numpy, lambda m: _torch_state(m, layouts), lambda m: _torch_grads(m, layouts),
                              lambda: {}, (lambda m, i: m.load_state_dict(left[i])) if isolate else None, clip)
        with float64(model):  # the library's one float64 twin, after the float32 run (the same random draws)
            # a twin that raised (finfo(float64).min in a tensor made in the default dtype) or overflowed where the
            # float32 run did not (in a float32 one): run again wider, in turn; the model's casts down kept float64
            wide = in_turn(cast_wide([contextlib.nullcontext, *WIDER]), twin, catch=PipelineError,
                           failed=lambda wide: any(calibrated.overflowed(out[k], v) for k, v in wide.items() if k in out))
            del start
            out.update({F64 + k: v for k, v in wide.items()})
        return fused.mark({**modules.describe(model), **out, **({ISOLATED: np.ones(1)} if isolate else {})}, parts, model)
    import paddle
    return fused.mark({**modules.describe(model), **_train(
        "paddle", model, inputs, targets, loss, optimizer, scheduler, steps, paddle.to_tensor,
        lambda m: {k: v.numpy() for k, v in m.state_dict().items()}, _paddle_grads, lambda: {},
        (lambda m, i: m.set_state_dict(starts[i])) if starts is not None else None, clip, near=True),
        **({ISOLATED: np.ones(1)} if starts is not None else {})}, parts, model)


ISOLATED = "isolated"  # a record's key: its steps were isolated (each started from torch's weights)
MOVED = "moved:"  # a torch record's key prefix: its run again with every weight moved one ulp (calibrated.SPREAD)


SPREAD_KEY = "spread:"  # a torch record's key prefix: max |moved run - a further run against itself|, one figure
RUNNING = "running/"  # a record's key prefix: running/<i>, step i's digest of BatchNorm's running means
# a record's key prefix: kept<i>/<name>/<key>, a module the script keeps beside the model (an EMA copy, a teacher:
# portcheck.recorder's Run.keep) as it is when step i + 1 starts (kept0: as the steps start), in Paddle's layout
KEPT = "kept"
# what judge_backward (and portcheck run's kept modules) read of a run against itself
AGAINST_KEYS = ("loss/", "state", "final/", "weights/", RUNNING, KEPT)
TAKING_KEYS = ("grad/", *AGAINST_KEYS)  # and of a run taking Paddle's side of a kink: the first forward's move grads


def against_itself(runs, keys=AGAINST_KEYS) -> dict:
    """torch's runs against itself, one per AGAINST_ITSELF in its order (record_backward's, or portcheck run's
    further runs of the user's torch script), as a torch record holds them: the first's `keys` as arrays
    (MOVED), each further one as one figure per key (SPREAD_KEY), no second copy of the weights."""
    moved = {}
    for i, run in enumerate(runs):
        run = {k: v for k, v in run.items() if k.startswith(keys)}
        if not i:
            moved = {MOVED + k: v for k, v in run.items()}
            continue
        for k, v in run.items():
            moved[SPREAD_KEY + k] = np.maximum(moved.get(SPREAD_KEY + k, 0.0), _distance(moved[MOVED + k], v))
    return moved


def spread_of(record: dict, key: str):
    """torch against itself at a key of a plain run's steps (calibrated.SPREAD): its run against the moved one, and
    the moved one against the second (SPREAD_KEY); None where the record holds no moved run of it."""
    a, other = record.get(key), record.get(MOVED + key)
    if a is None or other is None or np.shape(other) != np.shape(a):
        return None
    spread = max(float(_distance(a, other)[0]), float(np.max(record.get(SPREAD_KEY + key, 0.0))))
    return spread if np.isfinite(spread) else None


def _distance(a, b) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.array([np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0)])


def _figure(value):
    figure = float(np.max(value)) if value is not None and np.size(value) == 1 else None
    return figure if figure is not None and np.isfinite(figure) else None


# The record of kinks (judged, above): each forward's values within the floor of 0 (a difference every check allows
# another kernel's rounding), on both sides; the run taking Paddle's side is made only for a red run
NEAR = "near"            # a record's key prefix: near<step>/<module>, a forward's values within the floor of 0
TAKEN = "taken"          # a torch record's key: the run taking Paddle's side of them is in it
TAKEN_KEY = "taken:"     # a torch record's key prefix: max |torch's run - that run| at a key, one figure
TAKING = "taking Paddle's side of 0 at the values the runs put on each side of a kink (the report's kink line)"


INPUT = "in/"  # near<step>/in/<module>: a module's first input, where no module's output holds it (the ReLU after
# a residual sum written inline, `x += shortcut`: the zoo's ResNet-18 under ATEN_CPU_CAPABILITY=default crosses there)


@dataclass
class Crossing:
    """Values of one module's output (or first input) in a step's forward within the floor of 0 on both sides and
    of opposite signs: a ReLU (or max) at them takes one branch in torch's run and the other in Paddle's."""
    step: int              # the step whose forward holds them (0: the first)
    module: str            # its record name (module#2: its second call; in/module: its first input)
    index: np.ndarray      # flat indices into the output (or input)
    torch: np.ndarray      # the values on each side
    paddle: np.ndarray


def _near_zero(model, into: dict, step: int) -> list:
    """Hooks recording into `into`, for step `step`'s forward, each module's output values and first input's
    (before its forward: an in-place module changes it) within the floor of 0 (near<step>/<module>,
    near<step>/in/<module>: flat indices, values); their handles."""
    calls, inputs = {}, {}

    def kept(key, tensor):
        if not (hasattr(tensor, "numpy") and hasattr(tensor, "shape")):
            return
        v = np.asarray(values(tensor)).reshape(-1)
        if v.dtype.kind != "f" or not v.size:
            return
        size = np.abs(v)
        with np.errstate(invalid="ignore"):
            i = np.flatnonzero((size <= calibrated.FLOOR * calibrated.EPS32 * size.max()) & (v != 0))
        into[key] = np.stack([i.astype(np.float64), v[i].astype(np.float64)])

    def before(name):
        def record(module, args, kwargs):
            kept(f"{NEAR}{step}/{INPUT}{next_call(inputs, name)}", first_input(args, kwargs)[1])
        return record

    def after(name):
        def record(module, args, kwargs, output):
            kept(f"{NEAR}{step}/{next_call(calls, name)}", output)
        return record
    points = hook_points(model)
    return [pre(before(name)) for name, pre, _ in points] + [post(after(name)) for name, _, post in points]


def crossings(forward: ForwardReport, torch_record: dict, paddle_record: dict) -> list:
    """[Crossing] of every forward, in step order: values both runs hold within the floor of 0 whose
    signs differ, in modules the first forward paired and judged. A module's input holding the values an output
    crossed in the same step (a Sequential's next module) is the same crossing, kept once."""
    judged = {row.name for row in forward.rows if not row.problem}
    out, seen = [], set()
    for key, a in sorted(torch_record.items(), key=lambda item: f"/{INPUT}" in item[0]):  # outputs first
        if not key.startswith(NEAR):
            continue
        head, _, call = key.partition("/")
        name = call.removeprefix(INPUT)
        other = forward.counterparts.get(call if call.startswith(INPUT) else f"out/{call}", "")
        other = other.removeprefix("out/") if other.startswith("out/") else other if other.startswith(INPUT) else ""
        b = paddle_record.get(f"{head}/{other}") if name in judged and other else None
        if b is None or a.ndim != 2 or b.ndim != 2:
            continue
        _, i, j = np.intersect1d(a[0], b[0], assume_unique=True, return_indices=True)
        flip = a[1][i] * b[1][j] < 0
        if not flip.any():
            continue
        c = Crossing(int(head[len(NEAR):]), call, a[0][i][flip].astype(np.int64), a[1][i][flip], b[1][j][flip])
        same = (c.step, c.index.tobytes(), c.torch.tobytes(), c.paddle.tobytes())
        if same not in seen:
            seen.add(same)
            out.append(c)
    return sorted(out, key=lambda c: c.step)


@contextlib.contextmanager
def _taking(model, crossed):
    """torch's model taking Paddle's side of 0 at each value of `crossed`, in its step's forward: the value Paddle's
    (within the floor of torch's), its gradient passing through unchanged (at a module's first input, before its
    forward)."""
    import torch
    at = {(c.step, c.module): c for c in crossed}
    step, calls, inputs = [-1], {}, {}

    def begin(module, args, kwargs):  # the model's own forward: one per step
        step[0] += 1
        calls.clear()
        inputs.clear()

    def turned(c, tensor):
        flat = tensor.detach().reshape(-1).clone()
        flat[torch.from_numpy(c.index)] = torch.from_numpy(c.paddle).to(flat.dtype)
        return tensor + (flat.view_as(tensor) - tensor.detach())  # Paddle's values there, 0 added elsewhere

    def before(name):
        def turn(module, args, kwargs):
            c = at.get((step[0], INPUT + next_call(inputs, name)))
            where, x = first_input(args, kwargs)
            if c is None or not isinstance(x, torch.Tensor):
                return None
            if isinstance(where, int):
                return (*args[:where], turned(c, x), *args[where + 1:]), kwargs
            return args, {**kwargs, where: turned(c, x)}
        return turn

    def after(name):
        def turn(module, args, kwargs, output):
            c = at.get((step[0], next_call(calls, name)))
            return turned(c, output) if c is not None and isinstance(output, torch.Tensor) else None
        return turn
    points = hook_points(model)
    handles = [pre(begin) for name, pre, _ in points if name == ROOT] + \
        [pre(before(name)) for name, pre, _ in points] + [post(after(name)) for name, _, post in points]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def take(record: dict, run: dict):
    """Keep torch's run taking Paddle's side of the kinks crossed (record_backward(crossed=...)) in its record, as one
    figure per key: max |the record's run - it| (TAKEN_KEY), which judge_backward allows SPREAD x."""
    for k, v in run.items():
        if k in record:
            record[TAKEN_KEY + k] = _distance(record[k], v)
    record[TAKEN] = np.ones(1)


def _where(c) -> str:
    return f"{c.module[len(INPUT):]}'s input" if c.module.startswith(INPUT) else c.module


SHOWN = 4  # the modules a kink line names; the rest are counted


def crossing_lines(crossed: list, on_branch: bool, taken: bool, where: str = "") -> list:
    """One line per step whose forward crossed a kink: where, how many values, what judges the rows after (judged);
    first the module where the runs part (where: first_diverging), if it holds one."""
    lines = []
    at = where.removeprefix("grad ")
    for step in sorted({c.step for c in crossed}):
        here = sorted((c for c in crossed if c.step == step),
                      key=lambda c: not at.startswith(c.module.removeprefix(INPUT) + "."))
        c = here[0]
        if step == 0 and on_branch:
            rule = ON_BRANCH
        elif step and taken:
            rule = ("torch's run again taking Paddle's side of 0 there is torch against itself at every row after it "
                    f"(calibrated.SPREAD = {calibrated.SPREAD:g} x it allowed)")
        else:
            rule = ("torch's run taking Paddle's side there is not made (a red first forward, or records judged by "
                    "judge_backward alone: compare_backward makes it for a red run): if the runs part there, take "
                    "another batch")
        lines.append(
            f"kink in step {step + 1}'s forward: {_where(c)} holds {len(c.index)} value(s) within the floor of 0 "
            f"(calibrated.FLOOR x eps32 x its largest) on the other side of it in Paddle's run, where a ReLU or max "
            f"after it branches (torch {c.torch[0]:.3e}, paddle {c.paddle[0]:.3e})" +
            (f", and {', '.join(f'{_where(o)} {len(o.index)}' for o in here[1:SHOWN])}" if len(here) > 1 else "") +
            (f", {len(here) - SHOWN} more module(s)" if len(here) > SHOWN else "") + "; " + rule)
    return lines


@contextlib.contextmanager
def _other_threads():
    """torch's CPU kernels with another thread count (half, or 2 from 1): they split their sums otherwise; and its
    max pooling's ties sent the other way (_ties_other_way). Yields _ties_other_way's list."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(n // 2 if n > 1 else 2)
    try:
        with _ties_other_way() as routed:
            yield routed
    finally:
        torch.set_num_threads(n)


@contextlib.contextmanager
def _ties_other_way():
    """torch's 2-d max pooling with the gradient of each window whose two largest values are within rounding of each
    other (calibrated.FLOOR x eps32 x the input's largest, a Crossing's floor) sent to the later of the two, where
    torch's kernel sends an exact tie to the first. Which of them is the maximum is rounding's choice: another correct
    fp32 run takes either, and the gradient moves whole from one to the other. Measured: vgg11 at 64 x 64 (batch 2),
    one window of features.3's output is tied exactly in torch's fp32 run (0.6376 twice) where Paddle's kernel, 4.8e-7
    from torch there, takes the later one: grad features.3.weight 2.6e-4 from torch's (torch's own fp32 error
    1.5e-8), and 1.7e-8 from torch's with the tie sent there. The window's value is then that later one's (within
    the floor). Yields a list that holds True once a window was sent so (the run's gradients are then kept)."""
    import torch
    import torch.nn.functional as F
    plain, routed = F.max_pool2d, []

    def pool(x, *args, **kwargs):
        if kwargs.get("return_indices") or len(args) > 5 or not isinstance(x, torch.Tensor) or x.dim() < 3 \
                or not x.is_floating_point() or not x.numel():
            return plain(x, *args, **kwargs)
        kwargs.pop("return_indices", None)
        with torch.no_grad():
            top, first = plain(x, *args, return_indices=True, **kwargs)
            flat = x.detach().flatten(-2)
            rest = flat.scatter(-1, first.flatten(-2), float("-inf")).view_as(x)
            second, other = plain(rest, *args, return_indices=True, **kwargs)
            floor = calibrated.FLOOR * torch.finfo(x.dtype).eps * x.detach().abs().max()
            near = (top - second <= floor) & (top != 0)  # ReLU's zeros send nothing back: no gradient moves
        if not near.any():
            return plain(x, *args, **kwargs)
        routed.append(True)
        index = torch.where(near, torch.maximum(first, other), first)
        return x.flatten(-2).gather(-1, index.flatten(-2)).view_as(top)
    F.max_pool2d = pool
    try:
        yield routed
    finally:
        F.max_pool2d = plain


# torch's runs against itself in a plain run (calibrated.SPREAD), each moved one ulp in the context given here: the
# first kept as arrays (moved: keys), any further one as one figure per key (spread:). One run with other threads:
# tools/bench_k_backward.py --kinks measured candidates; a second run with oneDNN off made both kink nets green but
# hid a weight decay plant (3e-4 against 1e-4) on the ResNet-18 example, green at 0.355 of its allowance (red, 5.56,
# with this run alone; 3.64 with judged's taking run too); so did a run sending every ReLU input within rounding of 0
# to its other branch. The kink that net's Paddle crosses is judged by torch's run taking Paddle's side of it
# (judged, below)
AGAINST_ITSELF = (_other_threads,)


def moved_one_ulp(model, seed=0):
    """Every floating parameter moved one ulp up or down, the signs drawn from a seeded generator of its own (the
    same perturbation on any CPU, the global random state untouched): a rounding of the size fp32 makes, from which
    a run takes whatever branches another correct fp32 run may take."""
    import torch
    signs = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                up = torch.randint(0, 2, p.shape, generator=signs, dtype=torch.bool)
                p.copy_(torch.nextafter(p, torch.where(up, torch.tensor(float("inf"), dtype=p.dtype),
                                                       torch.tensor(float("-inf"), dtype=p.dtype))))


TWIN = "torch (float64 copy, the library's yardstick)"  # the side _train names when the library's twin fails
TWIN_FAILED = ("its float32 run took every step: the library's float64 copy failed, not the inputs (a value built "
               "from the model's dtype, such as torch.finfo(dtype).min in a float32 tensor); the gradients and steps "
               "cannot be judged against torch's own error: compare_forward names the module")


LAST = " (after the last step)"  # a weight's row name after the last step, where no earlier step records it
HELD = "the optimizer's own"  # record_backward's scheduler: the LRScheduler a Paddle optimizer was built with


def updates(before: dict, after: dict) -> np.ndarray:
    """A step's digest: every weight's mean |after - before| per element in float64, sorted. It needs no names
    (the frameworks name and order tensors otherwise), and sorting moves no value further than the two sides
    differ; an update that differs (an optimizer's epsilon, a weight decay) shows in its weight's mean, where a loss
    or a weight's norm can hide it. A mean, not a sum: a value of the size of one element's update, on the scale
    the guide's absolute bound on bp_align is set for (a sum over a conv's 2.4M elements is thousands of times
    its rounding). BatchNorm's running statistics are left out: they are not what the optimizer trains
    (running_means digests the means)."""
    return _changes(before, after, lambda name: name not in STATISTICS)


def running_means(before: dict, after: dict) -> np.ndarray:
    """A step's digest of BatchNorm's running means, as updates digests the weights: a momentum that differs
    (Paddle's m is torch's 1 - m) moves them alone, every loss and weight staying the same in train mode, so a
    hand-in without them is green from its folder while judge_backward is red. The running variances are left out:
    Paddle updates them with the biased batch variance, torch with the unbiased one (BIASED_VARIANCE), which a
    digest without names cannot take apart; judge_backward judges them by name."""
    return _changes(before, after, RUNNING_MEANS.__contains__)


def _changes(before: dict, after: dict, kept) -> np.ndarray:
    """Each float tensor's mean |after - before| in float64, sorted, of the tensors whose last name kept() keeps;
    one tensor under two names (Paddle's RNN weight_ih_l0 and 0.cell.weight_ih, a head tied to its embedding: one
    side lists it twice, the other once) counted once: the same values before and after. A tensor holding one value
    before the step is never taken for another's name: distinct BatchNorm weights at 1 (biases at 0) a small first
    step leaves bit-identical in float32 and not in float64 would be counted once in one run and twice in the other,
    and the float64 digest would not be the float32 one's length (the same test in both: their values before agree)."""
    means, seen = [], {}
    for k in after:
        if k not in before or after[k].dtype.kind != "f" or not kept(k.rsplit(".", 1)[-1]):
            continue
        b, a = before[k], after[k]
        mean = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).mean()) if a.size else 0.0
        filled = b.size > 0 and bool((b.reshape(-1) == b.reshape(-1)[0]).all())
        counted = seen.setdefault((a.shape, mean), [])
        if filled or not any(np.array_equal(a, a2) and np.array_equal(b, b2) for b2, a2 in counted):
            counted.append((b, a))
            means.append(mean)
    return np.sort(np.array(means, dtype=np.float64))


def _train(side, model, inputs, targets, loss, make_optimizer, make_scheduler, steps, to_tensor, state, grads, norms,
           start=None, clip=None, near=False):
    """start(model, i), when given, is called before each step i >= 1: an isolated run's start of the step.
    clip(parameters), when given, after each backward (the gradients recorded before it). near: each forward records the values within the floor of 0 of every module's output and input (_near_zero)."""
    with raised_by(f"the {side} optimizer factory raised"):
        opt = make_optimizer(model.parameters())
    if not hasattr(opt, "step"):
        raise PipelineError(f"the {side} optimizer factory gave {type(opt).__name__}, not an optimizer: return the "
                            "optimizer built on the parameters it is given [PC602]")
    settings = _optimizer_settings(opt, side)
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
    recorder = Recorder()
    handles = recorder.attach(model)
    for step in range(steps):
        if start is not None and step:
            start(model, step)
            before = state(model)  # an isolated step's update is from where it started
        if near:
            handles = handles + _near_zero(model, out, step)  # removed after this forward, with the first's
        with raised_by(f"the {side} model's forward raised", TWIN_FAILED if side == TWIN else INPUTS):
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


OPTIMIZER = "optimizer/"  # a record's key: optimizer/<the framework's public class>, the settings its rule reads
# Optimizers whose update no setting of the other framework's counterpart reproduces, each said in one line:
# (torch's class, Paddle's class): (the rule, the settings read on each side, their names on each side)
RMSPROP = ("torch.optim.RMSprop", "paddle.optimizer.RMSProp")
ADAMAX = ("torch.optim.Adamax", "paddle.optimizer.Adamax")
SQUARED = {RMSPROP: "eps"}  # the setting whose closest Paddle value is torch's squared (Paddle's inside the root)
# Where the rule acts only as far as eps reaches the gradients: the line says how far on this run's smallest first
# gradient and how to tell it from a bug, never "by design" (a beta1 planted beside it is a bug of its own)
NEAR_GRADIENTS = {ADAMAX: "eps"}
BY_DESIGN = {
    RMSPROP: (
        "torch.optim.RMSprop adds eps outside the square root (lr * g / (sqrt(v) + eps)), paddle.optimizer.RMSProp "
        "inside it (lr * g / sqrt(v + epsilon)): no Paddle setting is torch's update, which differs by about eps / "
        "sqrt(v) of each step (largest where gradients are small)",
        (("alpha", "rho"), ("eps", "epsilon"), ("momentum", "momentum"), ("centered", "centered"))),
    # measured: a GroupNorm conv net on sklearn's breast cancer data, some first-layer gradients near 1e-5, red at
    # 562 x after step 1 with eps 1e-8 on both sides and green with 1e-12
    ADAMAX: (
        "torch.optim.Adamax adds eps to the gradient inside the max (u = max(beta2 * u, |g| + eps)), "
        "paddle.optimizer.Adamax to the decayed norm (u = max(beta2 * u + epsilon, |g|)): no Paddle setting is "
        "torch's update, which differs by about eps / |g| of each step where |g| is small (an eps far below the "
        "gradients, 1e-12 on both sides, makes them agree)",
        (("eps", "epsilon"),)),
    ("torch.optim.ASGD", "paddle.optimizer.ASGD"): (
        "torch.optim.ASGD is averaged SGD (each step shrinks the weights by lambd * eta and decays eta as lr / (1 + "
        "lambd * lr * t) ** alpha, averaging them after t0 steps), paddle.optimizer.ASGD is stochastic average "
        "gradient (each step moves by the mean of the last batch_num gradients): two algorithms of one name, no "
        "setting of one is the other", ()),
}


def _optimizer_settings(opt, side) -> dict:
    """{optimizer/<class>: the settings BY_DESIGN reads, as float64} for an optimizer of a pair it lists."""
    package = "paddle.optimizer" if side == "paddle" else "torch.optim"
    cls = next((c for c in type(opt).__mro__ if c.__module__.startswith(package + ".")), None)
    if cls is None:  # an optimizer of the user's own: no rule of the frameworks' applies
        return {}
    name = f"{package}.{cls.__name__}"
    names = next((n for pair, (_, n) in BY_DESIGN.items() if name in pair), None)
    if names is None:
        return {f"{OPTIMIZER}{name}": np.zeros(0)}
    paddle = side == "paddle"
    group = {k: getattr(opt, f"_{k}") for _, k in names} if paddle else opt.param_groups[0]
    return {f"{OPTIMIZER}{name}": np.array([float(group[n[paddle]]) for n in names], np.float64)}


CYCLES_MOMENTUM = "cycle_momentum/"  # a torch record's key: its scheduler (the class named) cycles the momentum


def _cycled(torch_record) -> list:
    """The line for a torch scheduler that cycles its optimizer's momentum (cycle_momentum=True, the default of
    OneCycleLR and CyclicLR): Paddle's counterparts change the lr alone, so the updates part from the second step
    with nothing in the lr to show it (a plain SGD given momentum by torch's scheduler)."""
    return [f"torch.optim.lr_scheduler.{k[len(CYCLES_MOMENTUM):]} cycles the optimizer's momentum (cycle_momentum="
            f"True, its default), paddle.optimizer.lr.{k[len(CYCLES_MOMENTUM):]} the lr alone: the updates part from "
            "the second step whatever the lr; give torch's cycle_momentum=False (with momentum fixed in the "
            "optimizer on both sides)" for k in torch_record if k.startswith(CYCLES_MOMENTUM)]


def _by_design(torch_record, paddle_record, steps) -> list:
    """The one line of an optimizer pair BY_DESIGN lists: its rule, the settings that differ beyond it, and how far
    the weights part (the first weight red and its share of the allowance; the verdict stays the rows')."""
    pair = tuple(next((k[len(OPTIMIZER):] for k in rec if k.startswith(OPTIMIZER)), None)
                 for rec in (torch_record, paddle_record))
    if pair not in BY_DESIGN:
        return []
    rule, names = BY_DESIGN[pair]
    t, p = torch_record[OPTIMIZER + pair[0]], paddle_record[OPTIMIZER + pair[1]]
    # the epsilons cannot agree: Paddle's inside the root is closest to torch's as torch's squared
    want = [a if n[0] != SQUARED.get(pair) else a * a for n, a in zip(names, t)]
    other = [f"{tn} {a:g} vs {pn} {b:g}" + (f" (torch's eps squared, {w:g}, is the closest)"
                                            if tn == SQUARED.get(pair) else "")
             for (tn, pn), a, b, w in zip(names, t, p, want) if not np.isclose(b, w, rtol=1e-6, atol=0.0)]
    if pair in NEAR_GRADIENTS:  # how far the rule can reach here, and how to tell it from a bug: never "by design"
        eps = float(t[[n[0] for n in names].index(NEAR_GRADIENTS[pair])])
        grads = [np.abs(np.asarray(v, np.float64)) for k, v in torch_record.items() if k.startswith("grad/")]
        smallest = min((float(g[g > 0].min()) for g in grads if np.any(g > 0)), default=np.inf)
        return [f"{rule}; here the smallest first gradient is {smallest:.2g}, whose update it moves by up to "
                f"{eps / (smallest + eps):.2g} x lr: to tell it from a bug, give eps 1e-12 on both sides (a weight red "
                "then is not this rule)" + (f"; the settings differ beyond it: {', '.join(other)}" if other else "")]
    weights = [(i, r) for i, rows in enumerate(steps) for r in rows if r.judged and r.name not in ("loss", "lr")]
    red = next(((i, r) for i, r in weights if not r.passed), None)
    measured = (f"first {red[1].name.removesuffix(LAST)} after step {red[0] + 1}, the largest "
                f"{max(r.used for _, r in weights):.3g} x its allowance" if red else
                "every weight within its allowance on this run")
    return [f"{rule}; " + (f"the settings differ beyond it: {', '.join(other)} (measured: {measured})" if other else
                           f"the weights part by design (measured: {measured})")]


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


def batch_statistics(model) -> bool:
    """A torch BatchNorm normalizes by its batch's statistics (train mode, or no running statistics kept): dividing
    by a standard deviation over few values per channel amplifies a rounding of the weights into the gradients far
    past torch's own fp32 error, where no plain-run step has compounded it yet. Measured: resnext50_32x4d at 64 x 64
    (8 values per channel in layer4), torch against itself with every weight moved one ulp parts by 1.30e-3 at
    layer4.2.bn3.weight's gradient (both sign seeds), Paddle by 1.30e-3, torch's float32 error there 2.2e-6 (72 x
    K_GRAD's 8 red); with other threads alone 4.2e-7. There the gradients are also allowed calibrated.SPREAD x that
    run's distance, as a plain run's steps are."""
    import torch
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and (m.training or not m.track_running_stats)
               for m in model.modules())


def _norm_counter(model):
    """Counts the values per channel each torch BatchNorm in train mode normalizes (its input's size over its
    channels): what the by-design running-variance rule needs. Returns the function that reads the counts."""
    import torch
    seen, handles = {}, []

    def count(name):
        def hook(module, args, output):  # returns None: a forward hook's return value replaces the output
            seen.setdefault(name, (args[0].numel() // args[0].shape[1], module.momentum))
        return hook
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.training \
                and isinstance(module.momentum, float):
            handles.append(module.register_forward_hook(count(name)))

    def counts():
        for h in handles:
            h.remove()
        return {f"norm/{name}": np.array([n, m], dtype=np.float64) for name, (n, m) in seen.items()}
    return counts


RENAMED = "renamed/"  # a torch record's key: renamed/<torch key>/<its Paddle tensor name>, an empty array


def renames(record: dict) -> dict:
    """{torch key: its Paddle tensor name}, from a torch record's RENAMED keys."""
    return dict(k[len(RENAMED):].rsplit("/", 1) for k in record if k.startswith(RENAMED))

STATISTICS = {*RENAMES, *RENAMES.values()}  # BatchNorm's running statistics, recorded after every step
RUNNING_MEANS = {"running_mean", RENAMES["running_mean"]}  # their means, torch's name and Paddle's


def _counterpart(key: str, modules: dict, renamed: dict) -> str:
    """The Paddle record key of a torch record key (<kind>/<torch key>): the module as paired (modules: {torch
    module: Paddle module}, the models themselves as ROOT), the tensor by the name the torch side recorded for
    it; "" when its module has no counterpart."""
    kind, _, name = key.partition("/")
    module, _, tensor = name.rpartition(".")
    target = modules.get(module or ROOT)
    tensor = renamed.get(name, tensor)
    if target is None:
        return ""
    return f"{kind}/{target}.{tensor}" if target != ROOT else f"{kind}/{tensor}"


def judge_backward(torch_record: dict, paddle_record: dict, name_map=None,
                   mean_bound=LOSS_MEAN_BOUND) -> BackwardReport:
    """Pair a torch record_backward with a Paddle one (modules through name_map) and judge every gradient,
    loss, lr and tensor (portcheck/calibrated.py), each step's loss also held to mean_bound on its mean abs diff
    (None: no bound). BatchNorm's running variance in train mode is judged after the by-design rule
    (_biased_variance)."""
    checked_args(None, mean_bound)
    if not any(k.startswith(F64 + "grad/") for k in torch_record):
        if any(k.startswith(F64 + "grad/") for k in paddle_record):
            raise PipelineError("the records are swapped: pass the torch record first, then the Paddle one [PC406]")
        raise PipelineError("the torch record holds no gradients with their float64 run: write it with "
                            "align.record_backward(torch_model, ...) [PC603]")
    torch_record, paddle_record = fused.cut(torch_record), fused.cut(paddle_record)  # fused modules as their parts
    renamed = renames(torch_record)
    report = BackwardReport()
    if any(k.startswith("out/") for k in torch_record):
        report.forward = judge_forward(torch_record, paddle_record, name_map, mean_bound=None)
        report.crossed = crossings(report.forward, torch_record, paddle_record)
    report.taken = TAKEN in torch_record
    report.taking = {k[len(TAKEN_KEY):]: v for k, v in torch_record.items() if k.startswith(TAKEN_KEY)}
    mapped = (report.forward.pairing if report.forward else pairing.pair(torch_record, paddle_record, name_map)).modules()

    isolated = ISOLATED in torch_record
    if isolated != (ISOLATED in paddle_record):
        raise PipelineError("one record's steps are isolated and the other's are not: record both through "
                            "compare_backward(..., isolate=True) [PC604]")
    report.isolated = isolated

    def row(key, name, mean_bound=None, multiple=calibrated.K_BACKWARD):
        a, ref, b = torch_record[key], torch_record.get(F64 + key), paddle_record.get(
            key if key.startswith(("loss/", "lr/")) else _counterpart(key, mapped, renamed))
        if b is None:
            return calibrated.unjudged(name, np.shape(a), "no counterpart on paddle", 0.0)
        row = measure(name, a, ref, b, mean_bound, multiple)
        moved, taken = spread_of(torch_record, key), _figure(torch_record.get(TAKEN_KEY + key))
        if taken is not None and taken > (moved or 0.0):
            return calibrated.with_spread(row, taken, TAKING)
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
            module = r.name.rpartition(".")[0]
            # over torch's own error alone: the by-design rule first, its rest then judged (torch's spread included)
            own = r.rule._replace(spread=0.0)
            if not r.problem and r.max > own.allowed(r) and r.name.endswith(".running_var") \
                    and f"norm/{module}" in torch_record:
                prev = f"state{i}/{r.name}"  # isolated, both sides started the step from torch's statistics
                _biased_variance(r, torch_record[f"norm/{module}"], torch_record[prev],
                                 torch_record[prev] if isolated else paddle_record[_counterpart(prev, mapped, renamed)],
                                 torch_record[key], paddle_record[_counterpart(key, mapped, renamed)])
            rows.append(r)
        if i == steps - 1:
            rows += [row(k, f"{k[6:]}{LAST}") for k in torch_record
                     if k.startswith("final/") and f"state{i + 1}/{k[6:]}" not in torch_record]
        report.steps.append(rows)
    report.by_design = _by_design(torch_record, paddle_record, report.steps) + _cycled(torch_record)
    return report


BIASED_VARIANCE = ("by design: torch's BatchNorm updates running_var with the unbiased batch variance (n/(n-1)), "
                   "Paddle's with the biased one")


def _biased_variance(row, norm, t_prev, p_prev, t_now, p_now):
    """If the whole running_var difference is the biased-variance rule, the row says so and is judged on
    what the rule leaves; a wrong momentum or epsilon leaves more and stays red."""
    n, m = int(norm[0]), float(norm[1])
    batch_var = (t_now.astype(np.float64) - (1 - m) * t_prev) / m              # unbiased, from torch's update
    expected = (1 - m) * p_prev.astype(np.float64) + m * batch_var * (n - 1) / n  # Paddle's update, biased
    left = np.abs(p_now.astype(np.float64) - expected)
    raw = row.max
    row.max, row.mean = float(left.max()), float(left.mean())
    row.by_design = f"{BIASED_VARIANCE} (n = {n} values per channel): raw diff {raw:.3e}"
