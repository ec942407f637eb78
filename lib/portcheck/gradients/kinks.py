"""ReLU kinks crossed: values of a forward within rounding of 0 on both sides and of opposite signs (Crossing),
their record (near<step>/; a Paddle BatchNorm's before the activation its own forward applies: before_activation),
torch's run taking Paddle's side of them (taking_paddles_side), the two rules that judge with that run
(on_paddles_branch, take) and the report's kink lines (crossing_lines).

May import portcheck.core, portcheck.forward, portcheck.gradients.against_itself and portcheck.gradients.few_values.
"""
import contextlib
from dataclasses import dataclass

import numpy as np

from portcheck.core import calibrated
from portcheck.core.keys import ROOT
from portcheck.forward.result import ForwardReport
from portcheck.forward.twin import F64
from portcheck.mapping.trace import first_input, hook_points, next_call, values
from portcheck.gradients.against_itself import AGAINST_KEYS, MOVED, distance
from portcheck.gradients.few_values import NOISE

# what judge_backward reads of a run taking Paddle's side of a kink: AGAINST_KEYS, and the gradients (the first
# forward's kinks move them)
TAKING_KEYS = ("grad/", *AGAINST_KEYS)


# A kink: values of a forward within rounding of 0 on both sides and of opposite signs (Crossing), where a ReLU or
# max after them opens on one side and shuts on the other: a jump in the gradients, then the weights, that no multiple
# of torch's own error covers. One record (near<step>/, every forward), one run (torch's again from its start, taking
# Paddle's side of 0 there: taking_paddles_side), one line per step (crossing_lines); two rules for what the run is:
# - the first forward's (MobileNetV2 under ATEN_CPU_CAPABILITY=default: a conv output 1.5e-15 in torch, -1.7e-16 in
#   Paddle, 1.3e-15 in float64, beside an error of 2.4e-14 there; its BatchNorm's bias gradient 380 x its allowance):
#   torch's run on Paddle's branch is torch's run, its float64 and moved runs (calibrated.SPREAD) moved by as much, so
#   that torch's own error and spread stay the yardsticks (on_paddles_branch);
# - a later step's, which no run of AGAINST_ITSELF need cross (tools/bench_k_backward.py --kinks, seed 7;
#   the zoo's ResNet-18 under ATEN_CPU_CAPABILITY=default, at a ReLU's input after a residual sum): the run taking
#   Paddle's side is torch against itself there, SPREAD x |torch's run - it| allowed at every key (take).
ON_BRANCH = ("the gradients and the steps are judged against torch's run again with those values set to Paddle's "
             "(its branch at the ReLU after them), torch's own fp32 error and spread moved with it")


def on_paddles_branch(run: dict, torch_record: dict) -> dict:
    """torch's record as its run on Paddle's branch of the first forward's kinks (`run`, record_backward(crossed=)):
    its gradients and every key after its steps (the update digests a hand-in's bp_align carries too), and its
    float64, moved and few-values runs (few_values.NOISE) moved by as much."""
    out = {k: v for k, v in run.items() if k.startswith(TAKING_KEYS) and F64 + k in torch_record}
    for prefix in (F64, MOVED, NOISE):
        twin = {k: torch_record[prefix + k] for k in out if prefix + k in torch_record}
        out.update({prefix + k: v for k, v in moved_with(out, torch_record, twin).items()})
    return out


def moved_with(run: dict, own: dict, twin: dict) -> dict:
    """twin's values (torch's float64 run, its run against itself) at run's keys, moved as far as run's values are
    from own's (torch's): what on_paddles_branch does to them, and the hand-in checker to a pair's (handin.BRANCH)."""
    return {k: twin[k] + (np.asarray(v, np.float64) - np.asarray(own[k], np.float64)) for k, v in run.items()
            if k in twin}


# The record of kinks (backward.judged): each forward's values within BAND of 0, on both sides, a kink where they are
# within rounding of 0 (a difference every check allows another kernel's rounding); the run taking Paddle's side is
# made only for a red run
NEAR = "near"            # a record's key prefix: near<step>/<module>, a forward's values within BAND of 0
# the record's band, relative to the largest value there: wider than a module's own fp32 error, which a crossing
# is within (crossings). torchvision's densenet121 at 64 x 64, batch 2: a ReLU's input after a BatchNorm over 32
# values errs by 1.96e-05 (5.7e-6 of its largest, 48 x eps32, beyond the floor's 16), and a value there of 7.7e-06 in
# float64 is 6.2e-06 in torch and -2.6e-06 in Paddle, or beyond the floor in torch under ATEN_CPU_CAPABILITY=default
BAND = 2.0 ** -12
TAKEN = "taken"          # a torch record's key: the run taking Paddle's side of them is in it
TAKEN_KEY = "taken:"     # a torch record's key prefix: max |torch's run - that run| at a key, one figure
TAKING = "taking Paddle's side of 0 at the values the runs put on each side of a kink (the report's kink line)"


INPUT = "in/"  # near<step>/in/<module>: a module's first input, where no module's output holds it (the ReLU after
# a residual sum written inline, `x += shortcut`: the zoo's ResNet-18 under ATEN_CPU_CAPABILITY=default crosses there)


@dataclass
class Crossing:
    """Values of one module's output (or first input) in a step's forward within rounding of 0 on both sides and
    of opposite signs: a ReLU (or max) at them takes one branch in torch's run and the other in Paddle's."""
    step: int              # the step whose forward holds them (0: the first)
    module: str            # its record name (module#2: its second call; in/module: its first input)
    index: np.ndarray      # flat indices into the output (or input)
    torch: np.ndarray      # the values on each side
    paddle: np.ndarray


def near_zero(model, into: dict, step: int, recorder=None) -> list:
    """Hooks recording into `into`, for step `step`'s forward, each module's output values and first input's
    (before its forward: an in-place module changes it) within BAND of 0 (near<step>/<module>,
    near<step>/in/<module>: flat indices, values); their handles. recorder: the trace.Recorder of the same forward,
    busy while these hooks read a tensor (trace.watch takes them for no consumer of it)."""
    calls, inputs = {}, {}

    def kept(key, tensor):
        if recorder is None:
            return _kept(key, tensor)
        recorder.busy = True
        try:
            _kept(key, tensor)
        finally:
            recorder.busy = False

    def _kept(key, tensor):
        if not (hasattr(tensor, "numpy") and hasattr(tensor, "shape")):
            return
        v = np.asarray(values(tensor)).reshape(-1)
        if v.dtype.kind != "f" or not v.size:
            return
        size = np.abs(v)
        with np.errstate(invalid="ignore"):
            i = np.flatnonzero((size <= BAND * size.max()) & (v != 0))
        into[key] = np.stack([i.astype(np.float64), v[i].astype(np.float64)])

    def before(name):
        def record(module, args, kwargs):
            kept(f"{NEAR}{step}/{INPUT}{next_call(inputs, name)}", first_input(args, kwargs)[1])
        return record

    held = {}  # a module's values before the activation its own forward applies (before_activation)

    def after(name):
        def record(module, args, kwargs, output):
            kept(f"{NEAR}{step}/{next_call(calls, name)}", held.pop(id(module), output))
        return record
    points = hook_points(model)
    return [pre(before(name)) for name, pre, _ in points] + [post(after(name)) for name, _, post in points] + \
        before_activation(model, held)


class _Put:
    """A handle putting back a module's own forward."""
    def __init__(self, module):
        self.module = module

    def remove(self):
        vars(self.module).pop("forward", None)


def before_activation(model, held: dict) -> list:
    """Paddle's legacy BatchNorm(act=...) applies its activation inside its forward, so its output is past the branch
    a kink is at, where torch's BatchNorm2d hands the values to the ReLU it runs next (pairing._composed): a value on
    the other side of 0 is 0 there, not a crossing. Each such module's forward runs as its own code runs it, the
    activation then applied as that code applies it (the same op: bit for bit), its values in between put in `held`
    for near_zero's record. Handles putting its forward back."""
    if not hasattr(model, "named_sublayers"):
        return []
    import paddle
    from paddle.base import dygraph_utils
    own = paddle.nn.BatchNorm.forward
    handles = []

    def wrapped(module):
        def forward(*args, **kwargs):
            act, module._act = module._act, None
            try:
                out = own(module, *args, **kwargs)
            finally:
                module._act = act
            held[id(module)] = out
            return dygraph_utils._append_activation_in_dygraph(out, act=act)
        return forward
    for _, module in model.named_sublayers(include_self=True):
        if type(module).forward is own and isinstance(module._act, str) and module._act and paddle.in_dynamic_mode():
            module.forward = wrapped(module)
            handles.append(_Put(module))
    return handles


def rounding(row) -> float:
    """How near 0 a value of a module's output is on neither side of it in fp32: torch's own fp32 error there in the
    first forward (its row's), or the floor (calibrated.FLOOR x eps32 x its largest) where that is more."""
    own = row.err32 if np.isfinite(row.err32) else 0.0
    return max(own, calibrated.FLOOR * calibrated.EPS32 * row.scale if np.isfinite(row.scale) else 0.0)


def crossings(forward: ForwardReport, torch_record: dict, paddle_record: dict) -> list:
    """[Crossing] of every forward, in step order: values both runs hold within rounding of 0 whose
    signs differ, in modules the first forward paired and judged. A module's input holding the values an output
    crossed in the same step (a Sequential's next module) is the same crossing, kept once."""
    judged = {row.name: row for row in forward.rows if not row.problem}
    # a torch activation module ending a composed chain, paired with a Paddle module applying it in its own forward,
    # whose record holds its values before it (before_activation): torch's are that activation's input
    pairing = forward.pairing
    acting = {chain[-1]: t for t, chain in (pairing.composed if pairing else {}).items()
              if pairing.pairs.get(t) in pairing.acts}
    out, seen = [], set()
    for key, a in sorted(torch_record.items(), key=lambda item: f"/{INPUT}" in item[0]):  # outputs first
        if not key.startswith(NEAR):
            continue
        head, _, call = key.partition("/")
        name = call.removeprefix(INPUT)
        other = forward.counterparts.get(call if call.startswith(INPUT) else f"out/{call}", "")
        other = other.removeprefix("out/") if other.startswith("out/") else other if other.startswith(INPUT) else ""
        if call in acting:  # judged as the chain's first call
            name, call = acting[call], INPUT + call
            a = torch_record.get(f"{head}/{call}", np.zeros((2, 0)))
        b = paddle_record.get(f"{head}/{other}") if name in judged and other else None
        if b is None or a.ndim != 2 or b.ndim != 2:
            continue
        _, i, j = np.intersect1d(a[0], b[0], assume_unique=True, return_indices=True)
        near = rounding(judged[name])  # within torch's own error of 0 in its first forward, or the floor
        flip = (a[1][i] * b[1][j] < 0) & (np.abs(a[1][i]) <= near) & (np.abs(b[1][j]) <= near)
        if not flip.any():
            continue
        c = Crossing(int(head[len(NEAR):]), call, a[0][i][flip].astype(np.int64), a[1][i][flip], b[1][j][flip])
        same = (c.step, c.index.tobytes(), c.torch.tobytes(), c.paddle.tobytes())
        if same not in seen:
            seen.add(same)
            out.append(c)
    return sorted(out, key=lambda c: c.step)


@contextlib.contextmanager
def taking_paddles_side(model, crossed):
    """torch's model taking Paddle's side of 0 at each value of `crossed`, in its step's forward: the value Paddle's
    (within rounding of torch's), its gradient passing through unchanged (at a module's first input, before its
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
            record[TAKEN_KEY + k] = distance(record[k], v)
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
            f"kink in step {step + 1}'s forward: {_where(c)} holds {len(c.index)} value(s) within rounding of 0 "
            f"(torch's own fp32 error there, or calibrated.FLOOR x eps32 x its largest) on the other side of it in "
            f"Paddle's run, where a ReLU or max after it branches (torch {c.torch[0]:.3e}, paddle {c.paddle[0]:.3e})" +
            (f", and {', '.join(f'{_where(o)} {len(o.index)}' for o in here[1:SHOWN])}" if len(here) > 1 else "") +
            (f", {len(here) - SHOWN} more module(s)" if len(here) > SHOWN else "") + "; " + rule)
    return lines
