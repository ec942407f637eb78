"""compare_forward: every module's output of a torch model and its Paddle port, held to a tolerance
measured on the torch model itself (portcheck/calibrated.py), naming the module where they part."""
import contextlib
import dataclasses
import functools
import re
import types
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from portcheck.core import calibrated, spill, tolerances
from portcheck.mapping import fused, modules, pairing
from portcheck.core.calibrated import measure
from portcheck.mapping.convert import check_models, framework_of
from portcheck.core.diff import NOT_JUDGED, KeyResult, first_diverging
from portcheck.core.errors import PipelineError, first_line, raised_by
from portcheck.core.keys import ROOT, split_key
from portcheck.core.report import format_table


class Named(str):
    """A torch module call's name, as report.first_diverging and report.differing give it (it equals torch's name,
    as it always did), with its Paddle counterpart's beside it: .paddle, and .both, the two said."""
    paddle: str

    def __new__(cls, torch_name: str, paddle_name: str = None):
        named = super().__new__(cls, torch_name)
        named.paddle = paddle_name or torch_name
        return named

    @property
    def both(self) -> str:
        return str(self) if self.paddle == self else f"{self} (Paddle: {self.paddle})"


@dataclass
class ForwardReport:
    rows: list = field(default_factory=list)       # [diff.KeyResult] in torch's run order
    unpaired: list = field(default_factory=list)   # Paddle records no torch module maps to
    stopped: dict = field(default_factory=dict)    # {"torch" or "paddle": the error its run stopped on}
    pairing: object = None                         # a pairing.Pairing: which module call is which
    counterparts: dict = field(default_factory=dict)  # torch record key -> the Paddle key it was judged against
    isolated: list = None          # isolate=True: [diff.KeyResult], every paired module on torch's own values
    parents: dict = field(default_factory=dict)    # isolate=True: torch call -> the paired call it ran inside
    isolation_stopped: dict = field(default_factory=dict)  # isolate=True: {side: the error its run stopped on}
    left_out: list = field(default_factory=list)   # the model outputs outputs= left out, each "<side> <name>"
    first_call: object = None      # red: calls.FirstCall, the first framework call that differs in first_diverging

    @property
    def passed(self) -> bool:
        """Every paired module within its rule, and something paired: a report that compared nothing is red.
        With isolate=True, every module's own computation within its rule too."""
        isolated = self.isolated is None or (not self.isolation_stopped and all(r.passed for r in self.isolated))
        return not self.stopped and bool(self.paired) and isolated and \
            all(r.passed or r.beyond(calibrated.MEAN_BOUND) for r in self.rows if not r.problem.startswith("no counterpart"))

    @property
    def guide_passed(self) -> bool:
        """passed, with the guide's bound on the model output's mean deciding even where torch's own fp32 misses
        it (diff.KeyResult.beyond): the guide's verdict, said beside the measured one."""
        return self.passed and not any(r.beyond(calibrated.MEAN_BOUND) for r in self.rows)

    @property
    def differing(self) -> list:
        """isolate=True: every module whose own computation differs, on torch's own values (isolate.differing), each
        a Named: torch's name, Paddle's beside it."""
        from portcheck.forward.isolate import differing
        return [Named(d, self._paddle_differing(d)) for d in differing(self)]

    def _paddle_differing(self, name: str) -> str:
        parent, before, child = name.partition(" (before ")  # isolate.differing's "parent (before child)"
        return f"{self.paddle_name(parent)} (before {self.paddle_name(child[:-1])})" if before else \
            self.paddle_name(name)

    def paddle_name(self, name: str) -> str:
        """The Paddle name of torch's row or call `name` ("layer1.0.relu", "encoder#2[0]"): its call's counterpart
        in report.pairing, what follows the call kept; `name` itself where no call pairs with it."""
        try:
            _, call_, rest = split_key(f"out/{name}")
        except AttributeError:  # no record key's form: not a module call's name
            return name
        paddle = ROOT if call_ == ROOT else self.pairing.pairs.get(call_) if self.pairing else None
        return f"{paddle}{rest}" if paddle else name

    def both(self, name: str) -> str:
        """`name`, and Paddle's beside it where it differs: every printed line names both."""
        return Named(name, self.paddle_name(name)).both

    @property
    def unjudged(self) -> list:
        """The rows whose yardstick failed (torch's float64 run stopped, or overflowed where fp32 did not), in
        run order, the cumulative run's then isolate's: red, and said as not judged, never as differing."""
        return [r for r in self.paired + (self.isolated or []) if not r.judged]

    def pairs(self) -> str:
        """Every pair of module calls chosen (or named by the map), then each side's calls left unpaired."""
        return "\n".join(self.pairing.lines()) if self.pairing else ""

    @property
    def first_diverging(self):
        """The module where the outputs part (its input was within tolerance), or None. Where every output of the
        cumulative run is within its rule and isolate=True finds a module whose own computation differs (an
        integer it computes, a difference too small to show downstream), that module: it names one whenever
        differing does."""
        origin = first_diverging([r for r in self.paired if not r.beyond(calibrated.MEAN_BOUND)])
        if origin:
            return Named(origin.name, self.paddle_name(origin.name))
        differ = self.differing if self.isolated is not None else []
        return Named(differ[0].split(" (before ")[0], differ[0].paddle.split(" (before ")[0]) if differ else None

    @property
    def paired(self) -> list:
        """The rows with a Paddle counterpart."""
        return [r for r in self.rows if not r.problem.startswith("no counterpart")]

    def plot(self, path) -> str:
        """A PNG at `path`: each module's max diff over its allowance along the network, log scale, the first
        diverging module marked; with isolate=True each module on torch's own values beside it (portcheck.plot).
        A line saying what was done (without matplotlib: that it is missing)."""
        from portcheck.forward import plot
        return plot.draw(plot.forward_panels(self), path)

    def frame(self):
        """The table as a pandas DataFrame (report.COLUMNS): a row per paired module output, then with
        isolate=True a row per module on torch's own values (part "forward, isolated"). Needs pandas."""
        from portcheck.core import report
        return report.frame(self.figures())

    def figures(self) -> list:
        """frame()'s rows, as dicts (report.figures)."""
        from portcheck.core import report
        paired = self.paired
        first = first_diverging([r for r in paired if not r.beyond(calibrated.MEAN_BOUND)])
        return report.figures(paired, "forward", first=first) + report.figures(self.isolated or [], "forward, isolated")

    def table(self) -> str:
        """Every paired module output, in run order (torch modules with no Paddle counterpart are counted
        below it: containers and activations one side folds into another)."""
        paired = self.paired
        lines = format_table(calibrated.HEADER, self._named_rows(
            paired, first_diverging([r for r in paired if not r.beyond(calibrated.MEAN_BOUND)])))
        lines += [f"the {side} model stopped: {error}" for side, error in self.stopped.items()]
        lines += [f"{self.both(r.name)}: {r.why}" + ("; the measured verdict decides passed (green), the guide's is red"
                                          if r.beyond(calibrated.MEAN_BOUND) else "")
                  for r in paired if r.mean_bound is not None and not r.passed and r.judged]
        lines += _unjudged_lines([r for r in paired if not r.judged])
        origin = first_diverging([r for r in paired if not r.beyond(calibrated.MEAN_BOUND)])
        lines += [unsourced_line(dataclasses.replace(origin, key=self.both(origin.name)))] \
            if origin is not None and origin.input_unsourced else []
        lines += [self.first_call.line()] if self.first_call is not None else []
        lines += [f"{len(self.rows) - len(paired)} torch module outputs have no Paddle counterpart; "
                  f"{len(self.unpaired)} Paddle outputs no torch module maps to"]
        lines += [f"model outputs left out (outputs=), not judged: {', '.join(self.left_out)}"] if self.left_out else []
        if self.isolated is not None:
            differ = self.differing
            lines += ["each module on torch's own values (isolate=True):"]
            lines += format_table(calibrated.HEADER, self._named_rows(self.isolated))  # every one differing
            lines += [f"the {side} model stopped on torch's values: {e}" for side, e in self.isolation_stopped.items()]
            unjudged = [r for r in self.isolated if not r.judged]
            lines += _unjudged_lines(unjudged)
            lines.append(f"modules whose own computation differs: {', '.join(d.both for d in differ)}" if differ else
                         f"every module's own computation within its rule ({len(self.isolated) - len(unjudged)}"
                         f" compared{f', {len(unjudged)} not judged' if unjudged else ''})")
        return "\n".join(lines)


    def _named_rows(self, rows: list, origin=None) -> list:
        """calibrated.table_rows, each red row's name with Paddle's beside it where they differ."""
        out = calibrated.table_rows(rows, origin)
        return [(self.both(r.name) if not r.passed else row[0], *row[1:]) for r, row in zip(rows, out)]


def _unjudged_lines(rows: list) -> list:
    """One line per reason some rows were not judged, naming the first row and counting the rest."""
    by_why = {}
    for r in rows:
        by_why.setdefault(r.problem, []).append(r.name)
    return [f"not judged ({len(names)} value(s), from {names[0]}): {why[len(NOT_JUDGED):].strip()}"
            for why, names in by_why.items()]


def version(tensor):
    """A torch or Paddle tensor's in-place version (None: it has none)."""
    v = getattr(tensor, "_version", None)
    return tensor._inplace_version() if v is None and hasattr(tensor, "_inplace_version") else v


def tensors(prefix: str, value):
    """(key, tensor) of every tensor in an output, under prefix, prefix[0], prefix:key: tuples, lists, dicts and
    ModelOutputs."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        yield prefix, value
    elif isinstance(value, dict) or hasattr(value, "items"):
        for k, v in value.items():
            yield from tensors(f"{prefix}:{k}", v)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from tensors(f"{prefix}[{i}]", v)


def _flatten(prefix: str, value, out, seen: dict = None):
    """The tensors of an output (tensors) into `out` (a dict, or a spill.Spill). seen: {(id, in-place version):
    the key it was recorded under}: a tensor already recorded and not changed in place since (a container
    returns its last child's output) is linked to that key, not copied again."""
    for key, tensor in tensors(prefix, value):
        held = (id(tensor), version(tensor))
        if seen is not None and held[1] is not None and held in seen:
            spill.link(out, key, seen[held])
            continue
        array = values(tensor)
        # a copy now, a later in-place add (x += residual) must not reach it: a Spill writes it at once, a dict copies
        out[key] = array if isinstance(out, spill.Spill) else np.array(array, copy=True)
        if seen is not None and held[1] is not None:
            _remember(seen, held, key, tensor)


def values(tensor) -> np.ndarray:
    """A torch or Paddle tensor's values as numpy, a view where the framework gives one (Paddle's .numpy() copies;
    at LLM size, 0.9 GB a run): read or copy it before the tensor changes or is freed."""
    if hasattr(tensor, "detach") and hasattr(tensor, "cpu"):
        return tensor.detach().cpu().numpy()
    try:
        return np.from_dlpack(tensor)
    except (RuntimeError, TypeError, BufferError, AttributeError):  # bfloat16, a device tensor: a copy
        return tensor.numpy()


def _remember(seen: dict, key: tuple, prefix: str, tensor):
    """seen[key] = prefix for as long as the tensor lives: once it is freed its id may be another tensor's.
    The tensor itself is not kept (at LLM size every activation of the run would stay in memory)."""
    seen[key] = prefix
    try:
        weakref.finalize(tensor, seen.pop, key, None)
    except TypeError:  # a tensor type no weak reference reaches: kept alive with its entry instead
        seen.setdefault(_ALIVE, []).append(tensor)


_ALIVE = object()  # seen's list of the tensors kept alive


F64 = "f64:"       # the prefix of the torch model's float64 run in a record


def is_tensor(value) -> bool:
    return hasattr(value, "numpy") and hasattr(value, "shape")


def first_input(args, kwargs):
    """(position or keyword, tensor) of a call's first tensor argument: the positional ones first, then the
    keywords (transformers calls some modules with hidden_states=...); (None, None) when it has none."""
    for where, value in [*enumerate(args), *(kwargs or {}).items()]:
        if is_tensor(value):
            return where, value
    return None, None


def next_call(counts: dict, name: str) -> str:
    """The record name of module `name`'s call now made (counts: {name: its calls so far}, counted here): name for
    the first, name#2, name#3, ... for the next, in every run the library hooks."""
    n = counts[name] = counts.get(name, 0) + 1
    return name if n == 1 else f"{name}#{n}"


LEAF = "leaf/"  # a record's key for a model output that is no tensor nor number: None, a string, another object


def _output_leaves(prefix: str, value, numbers: bool):
    """(key, value) of every leaf of a model's output that is not a tensor, as tensors() walks it: numbers=True its
    numbers (a 0-d numpy array each), else the rest (None, a string, any other object: utf-8 of "none:",
    "str:<text>", "obj:<type>" as a uint8 array)."""
    if is_tensor(value):
        return
    if isinstance(value, dict) or hasattr(value, "items"):
        for k, v in value.items():
            yield from _output_leaves(f"{prefix}:{k}", v, numbers)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from _output_leaves(f"{prefix}[{i}]", v, numbers)
    elif isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        if numbers:
            yield prefix, np.asarray(value)
    elif not numbers:
        said = "none:" if value is None else f"str:{value}" if isinstance(value, str) else f"obj:{type(value).__name__}"
        yield prefix, np.frombuffer(said.encode("utf-8", "backslashreplace"), dtype=np.uint8).copy()


class _Recorder:
    """Outputs (and first inputs) of every module, per call, as one flat dict in run order:
    out/<name>, out/<name>#2 for a second call, out/<name>[0] or out/<name>:logits inside a tuple or dict;
    in/<name> for its first tensor argument. Each is copied as it was then: the input as the call begins, the
    output as it returns (torchvision's ReLU(inplace=True), an `out += identity`, overwrite both in the tensor
    itself right after)."""

    def __init__(self, prefix="", arrays=None):
        self.prefix, self.arrays, self.calls, self.seen = prefix, {} if arrays is None else arrays, {}, {}
        self.running = {}  # {module name: [its calls begun and not returned]}
        if not getattr(self.arrays, "keeps_values", True):
            self.seen = None  # a record of shapes only (convert's): nothing to link, and no tensor kept alive for it

    def attach(self, model) -> list:
        """Hook every module of `model` (hook_points); the handles, for the caller to remove."""
        return [h for name, pre, post in hook_points(model) for h in (pre(self.entered(name)), post(self.returned(name)))]

    def entered(self, name):
        def record(module, args, kwargs):
            call = next_call(self.calls, name)
            self.running.setdefault(name, []).append(call)
            x = first_input(args, kwargs)[1]
            if x is not None:
                _flatten(f"{self.prefix}in/{call}", x, self.arrays, self.seen)
        return record

    def returned(self, name):
        def record(module, args, kwargs, output):
            call = self.running[name].pop()
            _flatten(f"{self.prefix}out/{call}", output, self.arrays, self.seen)
            if call == ROOT:  # the model's own outputs are judged whatever they are: numbers by the rule, the rest
                for numbers, where in ((True, "out/"), (False, LEAF)):
                    for key, value in _output_leaves(f"{self.prefix}{where}{call}", output, numbers):
                        self.arrays[key] = value
        return record


def hook_points(model) -> list:
    """[(module name, pre, post)] for every module of a torch or Paddle model, the model itself as ROOT:
    pre(hook) adds hook(module, args, kwargs) before its forward, post(hook) hook(module, args, kwargs, output)
    after it; each returns the hook's handle."""
    if is_torch(model):
        named = [(n, m, m.register_forward_pre_hook, m.register_forward_hook) for n, m in model.named_modules()]
    else:
        named = [(n, m, m.register_forward_pre_hook, m.register_forward_post_hook)
                 for n, m in model.named_sublayers(include_self=True)]
    return [(n or ROOT, lambda hook, r=pre: r(hook, with_kwargs=True), lambda hook, r=post: r(hook, with_kwargs=True))
            for n, _, pre, post in named]


STOPPED = "stopped/"  # a record's key when the model raised: the error's first line follows, its value is empty


def _recorded(model, inputs, no_grad, to_tensor, prefix="", into=None) -> dict:
    """Run model on inputs with a recording hook on each of its modules; the hooks are removed afterwards. If
    the model raises (a planted padding breaks a residual's shapes), what ran before is kept with the error.
    into: the record to add to (a dict or a spill.Spill), else a new dict."""
    rec = _Recorder(prefix, into)
    handles = rec.attach(model)
    try:
        with no_grad():
            call(model, inputs, to_tensor)
    except Exception as e:  # noqa: BLE001 - the model's own error (a planted bug, a KeyError of the user's): kept
        rec.arrays[f"{prefix}{STOPPED}{first_line(e, 300)}"] = np.zeros(0, dtype=np.float32)
    finally:
        for h in handles:
            h.remove()
    return rec.arrays


@contextlib.contextmanager
def eval_mode(model):
    """The model in eval mode for the block, each module's own mode put back afterwards: a run made only to
    pair modules must not move BatchNorm's running statistics."""
    modules = list(model.modules() if is_torch(model) else model.sublayers(include_self=True))
    modes = [m.training for m in modules]
    model.eval()
    try:
        yield model
    finally:
        for m, mode in zip(modules, modes):
            m.training = mode


def stopped(record: dict, prefix: str = ""):
    """The error a recorded run stopped on, or None."""
    return next((k[len(prefix + STOPPED):] for k in record if k.startswith(prefix + STOPPED)), None)


@contextlib.contextmanager
def float64(model):
    """The torch model in float64 for the time of the block, its own tensors put back afterwards (a deep copy
    costs a fifth of the comparison, and a second full model at LLM size): float32 -> float64 -> float32 is
    exact, and nothing is rounded back. The library's one float64 twin; clients use it too, and
    compare_backward trains it (its gradients and integer buffers are the twin's own, see _twin_buffers)."""
    params = [(p, p.data, p.grad) for p in model.parameters()]
    buffers = [(m, dict(m._buffers)) for m in model.modules()]
    _twin_buffers(model.modules())
    for p, _, _ in params:
        p.grad = None  # the twin's gradients are its own (double() would turn these into float64 in place)
    model.double()
    try:
        yield model
    finally:
        for p, data, grad in params:
            p.grad = None  # first: a float64 gradient does not fit the float32 tensor put back
            p.data, p.grad = data, grad
        for m, saved in buffers:
            m._buffers.update(saved)


def _twin_buffers(modules):
    """Each integer buffer (BatchNorm's num_batches_tracked) replaced by a copy: double() keeps it integer, so
    it is shared with the float32 model, and the twin's own steps or train-mode calls must not count there."""
    for m in modules:
        for name, b in m._buffers.items():
            if b is not None and not b.is_floating_point():
                m._buffers[name] = b.clone()


@contextlib.contextmanager
def float64_as_called(model, free: dict = None):
    """The torch model in float64 one module at a time: a module's own floating tensors become float64 when it
    is called and go back when it returns, so the twin costs the weights of the modules running (at most an
    embedding), not a second model in float64: for a 1.1B-parameter model, 8.8 GB less than float64(model).
    The values are float64's exactly (float32 -> float64 is exact); a module that reads another's tensor
    without calling it (a head tied to the embedding's weight) meets it in float32 and raises: float64_run
    then runs the whole model in float64. free: {size: [float64 tensors]} to cast into, and that the run's
    float64 tensors go back to (the caller's, to keep them from one run to the next), else the run's own.
    Two modules are not cast whole: an nn.Embedding (a lookup: its float32 rows widened after it are float64's
    rows, bit for bit) and an nn.Linear larger than CAST_BLOCK (its weight cast a block of rows at a time,
    _linear_by_rows: the same products, summed by BLAS in another order, so a float64 rounding apart: 6.2e-15 at
    most on outputs of size ~1 for a head of the 1.1B pair's shape, eight decades below the float32 error they
    measure). At 1.1B each weight is 0.5 GB in float64, and its pages new in every comparison (docs/llm.md)."""
    saved, depth, handles, free = [], {}, [], {} if free is None else free
    by_rows = set()  # the nn.Linear modules whose forward is _linear_by_rows for the block
    lookups = set()  # the nn.Embedding modules left in float32, their output widened (_lookup)

    def enter(module, *_):
        depth[module] = depth.get(module, 0) + 1
        if depth[module] == 1:  # a module entered again inside its own call is in float64 already
            lookup, blocked = module in lookups, module in by_rows
            for p in module.parameters(recurse=False):
                if p.is_floating_point() and not lookup and not (blocked and p is module.weight):
                    saved.append((module, p, p.data))
                    p.data = _widened(p.data, free)
            for name, b in module._buffers.items():
                if b is not None:  # an integer buffer gets a copy (_twin_buffers), a floating one its float64
                    saved.append((module, name, b))
                    module._buffers[name] = b.double() if b.is_floating_point() else b.clone()

    def leave(module, *_):
        depth[module] -= 1
        if depth[module] == 0:
            while saved and saved[-1][0] is module:
                _, tensor, data = entry = saved.pop()
                wide = None if isinstance(tensor, str) else tensor.data
                _put_back(*entry)
                # a float64 weight's double() is the weight itself: never one to cast into
                if wide is not None and wide.dtype != data.dtype and _unshared(wide):
                    free.setdefault(wide.numel(), []).append(wide)

    for module in model.modules():
        if any(True for _ in module.parameters(recurse=False)) or any(b is not None for b in module._buffers.values()):
            handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave, always_call=True)]
        if _lookup(module):
            handles.append(module.register_forward_hook(_widened_output))
            lookups.add(module)
        rows = _row_block(module)
        if rows:  # for the whole block: a pre-hook is too late, torch reads module.forward before it runs them
            module.forward = functools.partial(_linear_by_rows, module, rows, free)
            by_rows.add(module)
    try:
        yield model
    finally:
        for h in handles:
            h.remove()
        for module in by_rows:
            del module.forward  # the class's own again
        while saved:
            _put_back(*saved.pop())


CAST_BLOCK = 8 << 20  # float64 values cast at a time for a larger nn.Linear's weight (64 MB)


def _lookup(module) -> bool:
    """An nn.Embedding itself (no subclass's own forward) without max_norm (which rescales rows in place): its
    output is float32 rows of its weight, exactly float64's rows once widened."""
    import torch
    return type(module) is torch.nn.Embedding and module.max_norm is None


def _widened_output(module, args, output):
    return output.double() if is_tensor(output) and output.is_floating_point() else None


def _row_block(module) -> int:
    """Rows of the weight cast at a time by _linear_by_rows, for an nn.Linear itself whose weight holds more than
    CAST_BLOCK values; else 0 (cast whole)."""
    import torch
    if type(module) is not torch.nn.Linear or "forward" in vars(module) or not module.weight.is_floating_point():
        return 0
    rows, width = module.weight.shape
    return max(1, CAST_BLOCK // width) if rows * width > CAST_BLOCK else 0


def _linear_by_rows(module, rows: int, free: dict, x):
    """nn.Linear's forward in float64, its float32 weight cast `rows` rows at a time into one float64 block taken
    from `free` and given back: F.linear's values on the whole float64 weight, a float64 rounding apart
    (tests/test_size.py)."""
    import torch
    weight, bias = module.weight, module.bias
    size = rows * weight.shape[1]
    block = _spare(free, size)
    block = torch.empty(size, dtype=torch.float64) if block is None else block
    try:
        out = None
        for start in range(0, weight.shape[0], rows):
            part = weight[start:start + rows]
            y = torch.nn.functional.linear(x, block[:part.numel()].view(part.shape).copy_(part),
                                           None if bias is None else bias[start:start + rows])
            if out is None:
                out = y.new_empty((*y.shape[:-1], weight.shape[0]))
            out[..., start:start + rows] = y
    finally:
        free.setdefault(size, []).append(block)
    return out


def _widened(t, free: dict):
    """t in float64, in a float64 tensor of its size that an earlier call gave back (free: {size: [tensors]}) when
    there is one: at LLM size a fresh block per call pays its pages again (the 1.1B pair's float64 run spent 2.4 s
    in casts inside a comparison, 0.6 s alone, docs/llm.md)."""
    spare = _spare(free, t.numel()) if t.is_contiguous() else None
    return t.double() if spare is None else spare.view(t.shape).copy_(t)


def _spare(free: dict, size: int):
    """A float64 tensor of `size` values an earlier call gave back to `free` (taken out of it), or None."""
    spare = free.get(size)
    return spare.pop() if spare else None


def _unshared(t) -> bool:
    """Nothing but `t` holds its memory (no view of a weight returned by the module, as `cls_token.expand(...)`):
    only then may a later cast overwrite it. False where torch cannot tell (a private call, absent from some
    version)."""
    import torch
    count = getattr(torch._C, "_storage_Use_Count", None)
    return count is not None and t.is_contiguous() and count(t.untyped_storage()._cdata) == 2  # t's + the call's


def _put_back(module, tensor, data):
    if isinstance(tensor, str):
        module._buffers[tensor] = data
    else:
        tensor.data = data


def float64_run(model, run, failed=lambda result: False, free: dict = None):
    """run() with the torch model in float64, module by module as it is called (float64_as_called, casting into
    `free`'s tensors); if that raises or its result is failed(result), once more with the whole model in float64
    (float64): a model reading one module's tensor in another, which only the whole model's float64 serves; if
    that fails too, once more with each of WIDER in turn: torch's default dtype float64 (a tensor the model makes
    in the default dtype, filled with its input's torch.finfo(dtype).min, which float32 cannot hold), then
    float64's finfo bounds float32's (a float32 mask scaled by finfo(float64).min: -inf, and NaN where 0 x -inf).
    Each run under wide_casts, the last once more without (cast_wide). The last one's error, if any, is raised; its
    result returned, failed or not."""
    return in_turn(cast_wide([lambda: float64_as_called(model, free), lambda: float64(model),
                              *(functools.partial(_whole, model, wider) for wider in WIDER)]), run, failed)


def cast_wide(attempts: list) -> list:
    """attempts (the contexts in_turn tries a float64 twin in), each under wide_casts, then the last once more
    without: a twin that meets a float32 tensor the caller made (a loss's class weights, its targets) beside a value
    the model cast to float32 raises under wide_casts, and runs as it did before them."""
    return [*(functools.partial(_casting, attempt) for attempt in attempts), attempts[-1]]


@contextlib.contextmanager
def _casting(attempt):
    with attempt(), wide_casts():
        yield


def in_turn(attempts, run, failed=lambda result: False, catch=Exception):
    """run() under each context of `attempts` in turn, until one neither raises `catch` nor gives a result
    failed(result) calls failed: the last one's error is raised, its result returned, failed or not."""
    for i, attempt in enumerate(attempts):
        last = i == len(attempts) - 1
        try:
            with attempt():
                result = run()
        except catch:  # noqa: BLE001 - the next try follows; the last one's own error is raised
            if last:
                raise
            continue
        if last or not failed(result):
            return result


@contextlib.contextmanager
def _whole(model, wider):
    with float64(model), wider():
        yield model


@contextlib.contextmanager
def wide_defaults():
    """torch's default floating dtype float64 for the block (a tensor the model makes with torch.zeros or
    torch.tensor(1.5) is then float64, as its float64 run needs), the caller's put back afterwards."""
    import torch
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@contextlib.contextmanager
def float32_bounds():
    """wide_defaults, and torch.finfo(torch.float64)'s min and max float32's for the block (its eps, tiny and
    resolution float64's own), torch.finfo put back afterwards. A model scaling a mask it makes in float32 by its
    dtype's bound, (1 - mask) * torch.finfo(self.dtype).min (mask.float() stays float64 there: wide_casts), gets
    -inf, and NaN where 0 x -inf, in its float64 twin, where its float32 run is finite: with float32's bounds the
    twin computes the float32 run's own mask (a value below any score, 0 after softmax) in float64, the yardstick of
    what the float32 run computes. Tried only when the twin failed without it (float64_run,
    backward.record_backward)."""
    import torch
    real, bounds = torch.finfo, torch.finfo(torch.float32)

    def finfo(type=None):
        info = real() if type is None else real(type)
        if info.dtype != "float64":
            return info
        said = {k: getattr(info, k) for k in ("bits", "dtype", "eps", "resolution", "smallest_normal", "tiny")}
        return types.SimpleNamespace(**said, min=bounds.min, max=bounds.max)
    with wide_defaults():
        torch.finfo = finfo
        try:
            yield
        finally:
            torch.finfo = real


WIDER = (wide_defaults, float32_bounds)  # how a failed float64 twin is run again, in turn


@contextlib.contextmanager
def wide_casts():
    """Every cast down to float32, float16 or bfloat16 of a float64 tensor, or of an integer or boolean one,
    float64 for the block (a torch function mode, left as the block ends): the model's own casts keep its twin in
    float64. transformers' LlamaRMSNorm computes in hidden_states.to(torch.float32), its rotary embedding in
    .float(), its attention's softmax with dtype=torch.float32: in the twin those would be float32 roundings, and
    torch's own error there (the yardstick of the Paddle port's) measured near 0. The casts: .to(dtype),
    .to(tensor), .to(device, dtype), .float(), .half(), .bfloat16(), .type(dtype), .type_as(tensor), and any dtype=
    of a function on such a tensor (softmax, log_softmax, mean, sum, ...). A float32 tensor the twin made in the
    default dtype is cast as asked, and .view(dtype) reinterprets bits, so is left alone. Entered only around
    the twin's own run (cast_wide: float64_run, backward.record_backward's twin), never the float32 one."""
    with _WideCasts()():
        yield


@functools.lru_cache(maxsize=None)
def _WideCasts():
    """wide_casts' mode class, made at first use (the library imports torch only when it is used)."""
    import torch
    from torch.overrides import TorchFunctionMode
    lower = {torch.float32, torch.float16, torch.bfloat16}
    named = {f"torch.{n}Tensor" for n in ("Float", "Half", "BFloat16")}  # .type("torch.FloatTensor")
    down = {torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16}
    casts = {torch.Tensor.to, torch.Tensor.type}

    def wide(x):
        if isinstance(x, torch.dtype):
            return torch.float64 if x in lower else x
        return "torch.DoubleTensor" if isinstance(x, str) and x in named else x

    class WideCasts(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            this = args[0] if args else None
            held = isinstance(this, torch.Tensor) and (this.dtype == torch.float64 or not (
                this.is_floating_point() or this.is_complex()))  # float64, or integer / boolean
            if held and func is not torch.Tensor.view:
                if func in down:
                    func = torch.Tensor.double
                elif func is torch.Tensor.type_as and args[1].dtype in lower:
                    func, args = torch.Tensor.to, (this, torch.float64)
                elif func in casts:
                    rest = list(args[1:])
                    if rest and isinstance(rest[0], torch.Tensor):  # .to(other): its device, its dtype widened
                        rest[:1] = [rest[0].device, wide(rest[0].dtype)]
                    args = (this, *map(wide, rest))
                elif any(isinstance(a, torch.dtype) for a in args[1:]):
                    args = (this, *map(wide, args[1:]))  # torch.softmax(x, dim, torch.float32)
                if "dtype" in kwargs:
                    kwargs["dtype"] = wide(kwargs["dtype"])
            return func(*args, **kwargs)
    return WideCasts


INPUTS = "check the inputs (their dtype and shape, a dict's names) against the model's forward"


def is_torch(model) -> bool:
    """True for a torch module, False for a Paddle layer; anything else is one line (convert.framework_of)."""
    return framework_of(model) == "torch"


def record_forward(model, inputs, record_dir=None) -> dict:
    """Every module's output and first input of one model, torch or Paddle, on numpy inputs, as a flat dict
    of numpy arrays in run order (see _Recorder), named by the model's own module names, with each module's
    class and tensor shapes (mod/ keys, what pairing reads): what a pt_ or pd_ script saves for a check to
    judge with judge_forward. A torch model is run a second time in float64, each module in float64 only
    while it runs (float64_as_called; keys prefixed "f64:"): the yardstick of its own fp32 error. Eval or train
    mode is the caller's. record_dir: each array is written to that folder as it is recorded (a spill.Spill,
    read back memory-mapped when judged), for runs whose records do not fit in memory."""
    checked_args(record_dir, None)
    out = trace(model, inputs, spill.store(record_dir, ""))
    if is_torch(model):
        import torch
        mark = len(out)

        def run():
            for key in list(out)[mark:]:  # a run the whole model's float64 replaces
                del out[key]
            return _recorded(model, _float64(inputs), torch.no_grad, torch.from_numpy, F64, out)
        float64_run(model, run, lambda record: stopped(record, F64) is not None or any(
            calibrated.overflowed(record[k[len(F64):]], record[k]) for k in list(record)[mark:]
            if k[len(F64):] in record))
    return _closed(out)


def _closed(record):
    """A record whose run has ended: a Spill's index written (spill.Spill.close), a dict as it is."""
    if isinstance(record, spill.Spill):
        record.close()
    return record


def trace(model, inputs=None, into=None) -> dict:
    """One side's run without the float64 one: every module's output and first input (none when inputs is
    None), and what pairing needs of each module (pairing.describe); into: the record to fill (a dict or a
    spill.Spill), else a new dict."""
    torch_side = is_torch(model)  # first: anything but a model is one line, before describe reads it
    out = {} if into is None else into
    out.update(modules.describe(model))
    if inputs is not None:
        if torch_side:
            import torch
            _recorded(model, inputs, torch.no_grad, torch.from_numpy, into=out)
        else:
            import paddle
            _recorded(model, inputs, paddle.no_grad, paddle.to_tensor, into=out)
    return out


def ran_on(side: str, record: dict, inputs) -> dict:
    """A trace made to pair modules by their run: one that stopped on `inputs` before any module returned (a model
    that cannot take them) is one line, never a silent fallback to pairing by definition order. A run that stopped
    later (a model that needs gradients, run here without) is paired by what ran."""
    if inputs is not None and stopped(record) and not any(k.startswith("out/") for k in record):
        raise PipelineError(f"the {side} model's forward raised: {stopped(record)}; {INPUTS} [PC400]")
    return record


def record_value(model, inputs, fn) -> dict:
    """{"value": fn(model(inputs))} as a numpy array, without gradients: a loss, a metric. A torch model is run
    a second time in float64, one module at a time ("f64:value"), the yardstick of the value's own fp32 error."""
    side = framework_of(model)

    def value(inputs, to_tensor):
        with raised_by(f"the {side} model's forward raised", INPUTS):
            output = call(model, inputs, to_tensor)
        with raised_by(f"fn (the {side} side) raised"):
            return np.asarray(fn(output).numpy()).reshape(-1)
    if side == "torch":
        import torch
        with torch.no_grad():
            out = {"value": value(inputs, torch.from_numpy)}
            out[F64 + "value"] = float64_run(model, lambda: value(_float64(inputs), torch.from_numpy),
                                             lambda wide: calibrated.overflowed(out["value"], wide))
        return out
    import paddle
    with paddle.no_grad():
        return {"value": value(inputs, paddle.to_tensor)}


def call(model, inputs, to_tensor):
    """model(inputs) with numpy inputs turned into the framework's tensors: an array (one argument), a
    tuple or list (positional arguments) or a dict (keyword arguments; a flag among them, True, None or a string,
    passed as it is: return_dict=True)."""
    # np.array copies: torch.from_numpy shares memory, and a forward that changes its input in place must
    # change neither the caller's array nor the other side's input
    if isinstance(inputs, Arguments):
        return model(*_tensors(inputs.args, to_tensor), **_tensors(inputs.kwargs, to_tensor))
    if isinstance(inputs, dict):
        return model(**{k: v if is_flag(v) else to_tensor(np.array(v)) for k, v in inputs.items()})
    if isinstance(inputs, (tuple, list)):
        return model(*[to_tensor(np.array(v)) for v in inputs])
    return model(to_tensor(np.array(inputs)))


class Arguments(NamedTuple):
    """Positional and keyword arguments together, as a script calls its model (model(ids, attention_mask=m,
    return_dict=True), model(x, 0.5), model([x]), model({"x": x})): inputs call() takes beside an array, a tuple and a
    dict; each array a tensor, lists, tuples and dicts of them as they were, anything else (a flag, a number) as it is."""
    args: tuple
    kwargs: dict


def _tensors(value, to_tensor):
    """An Arguments' value as the model takes it: each array a tensor, in the lists, tuples and dicts it was in."""
    if isinstance(value, np.ndarray):
        return to_tensor(np.array(value))
    if isinstance(value, dict):
        return type(value)({k: _tensors(v, to_tensor) for k, v in value.items()})
    if isinstance(value, (tuple, list)):
        return type(value)(_tensors(v, to_tensor) for v in value)
    return value


def is_flag(value) -> bool:
    """A keyword argument that is no tensor's value: a bool, None or a string (return_dict=True)."""
    return value is None or isinstance(value, (bool, str))


def _float64(inputs):
    cast = lambda v: np.asarray(v).astype(np.float64) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
    if isinstance(inputs, Arguments):  # its arrays widened, wherever they are (_tensors)
        return Arguments(_tensors(inputs.args, cast), _tensors(inputs.kwargs, cast))
    if isinstance(inputs, dict):
        return {k: v if is_flag(v) else cast(v) for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(cast(v) for v in inputs)
    return cast(inputs)


def compare_forward(torch_model, paddle_model, inputs, name_map=None, isolate=False,
                    record_dir=None, mean_bound=calibrated.MEAN_BOUND, outputs=None, layouts=None) -> ForwardReport:
    """Run both models (eval mode is the caller's to set) on the same numpy inputs, and torch once more in
    float64 (one module at a time); hold every module output of the Paddle model to the torch one's own fp32
    error.
    The same verdict as record_forward on each side then judge_forward (the calls a pt_/pd_ script pair and its
    check make), with torch's float64 run made last and judged as it runs (judged_as_run): nothing of it is
    kept. Returns a ForwardReport: .rows, .passed, .first_diverging, .table(), .pairs().
    isolate=True also judges every paired module on torch's own recorded input (portcheck.isolate): .differing
    names every module whose own computation differs, where .first_diverging names the first in the run.
    record_dir: a folder the records go to as they are made (torch/ and paddle/, each side's float32 run;
    portcheck.spill), judged from there: for models whose records do not fit in memory beside them
    (docs/llm.md). The verdict is the same as in memory. No float64 value is kept, nor any of isolate's runs.
    mean_bound: the bound on the model output's mean abs diff (judge_forward's; default the guide's, 1e-6; the
    caller's own threshold for its pair overrides it; None: none).
    outputs: the model outputs compared (default every one: either side returning one the other lacks, None
    included, is red), by field or position (["logits"], or {torch's: Paddle's}); report.left_out names the rest.
    layouts: convert's; its portcheck.Fused entries judge each part of a fused module (GPT-2's c_attn) on its own."""
    check_models(torch_model, paddle_model)
    checked_args(record_dir, mean_bound)
    outputs = checked_outputs(outputs)
    where = lambda name: None if record_dir is None else Path(record_dir) / name
    torch_record = _closed(fused.mark(trace(torch_model, inputs, spill.store(record_dir, "torch")),
                                      fused.specs(torch_model, layouts), torch_model))
    paddle_record = fused.mark(record_forward(paddle_model, inputs, where("paddle")),
                               fused.specs(paddle_model, layouts), paddle_model)
    torch_record, paddle_record = fused.cut(torch_record, False), fused.cut(paddle_record, False)
    _judgeable(torch_record, paddle_record, float64_kept=False)
    free = {}  # the float64 runs' weights: cast into the same memory in both (fresh pages cost more than the cast)
    report = _judge(torch_record, paddle_record, name_map, mean_bound,
                    lambda keys: judged_as_run(torch_model, inputs, torch_record, paddle_record, keys, free), outputs)
    if isolate:
        from portcheck.forward import isolate as isolated  # it builds on this module
        isolated.judge(torch_model, paddle_model, inputs, torch_record, report, free, fused.declared(paddle_record))
    if not report.passed and report.first_diverging is not None:
        from portcheck.forward import calls  # it builds on this module
        report.first_call = calls.first_call(torch_model, paddle_model, inputs, torch_record, report)
    return report


def judged_as_run(model, inputs, torch_record, paddle_record, keys: dict, free: dict = None) -> dict:
    """torch's float64 run (float64_run) with each value the judgement reads judged as the run computes it:
    {torch record key: judge_one's row (an output) or _input_ok's verdict (a first input)}, for every key of
    `keys` (counterparts) with a Paddle value. The rows are judge_forward's on record_forward's records, bit for
    bit (tests/test_size.py), but no float64 value is kept: at LLM size they are twice the float32 record,
    written and read back for nothing (docs/llm.md)."""
    import torch
    wanted = {k: p for k, p in keys.items() if p in paddle_record}
    parts = fused.declared(torch_record)  # a fused module's parts are judged, each on its columns
    judged, done, counts, wild = {}, {}, {}, []  # wild: the first key float64 makes NaN or Inf, fp32 finite

    def judge(key, tensor):
        p_key = wanted.get(key)
        if p_key is None:
            return
        # one value judged once: what judge_forward's once() does by stored array, here by live tensor
        same = (spill.identity(torch_record, key), spill.identity(paddle_record, p_key), id(tensor), version(tensor))
        held = (key[:3], *same)
        if held not in done:
            ref = tensor if isinstance(tensor, np.ndarray) else tensor.detach().cpu().numpy()
            a, b = torch_record.get(key), paddle_record[p_key]
            if key.startswith("out/"):
                result = judge_one(key[len("out/"):], a, ref, b)
                # judge_one's own_error tests overflow unless Paddle's value stopped the row before it
                over = calibrated.OVERFLOWED in result.problems or \
                    (bool(result.problems) and a is not None and calibrated.overflowed(a, ref))
            else:  # an input is mostly the output judged just before: its verdict, on the same arrays
                out = done.get(("out", *same))
                result = out.passed if out is not None and a is not None and a.dtype.kind == "f" and \
                    not out.problems and not out.by_design and a.shape == ref.shape else _input_ok(a, ref, b)
                over = a is not None and calibrated.overflowed(a, ref)
            if over and not wild:
                wild.append(key)
            _remember(done, held, result, tensor)
        judged[key] = done[held]

    running = {}  # {module name: [its calls begun and not returned]}

    def before(name):
        def entered(module, args, kwargs):  # as the record holds it (_Recorder): before an in-place module runs
            call_ = next_call(counts, name)
            running.setdefault(name, []).append(call_)
            for key, tensor in fused.live(tensors(f"in/{call_}", first_input(args, kwargs)[1]), parts):
                judge(key, tensor)
        return entered

    def hook(name):
        def after(module, args, kwargs, output):
            call_ = running[name].pop()
            for key, tensor in fused.live(tensors(f"out/{call_}", output), parts):
                judge(key, tensor)
            for key, number in _output_leaves(f"out/{call_}", output, True) if call_ == ROOT else ():
                judge(key, number)
        return after

    def run():
        """One float64 run from the start (float64_run may make it again): its error, or None."""
        judged.clear(), done.clear(), counts.clear(), wild.clear(), running.clear()
        handles = [h for name, pre, post in hook_points(model) for h in (pre(before(name)), post(hook(name)))]
        try:
            with torch.no_grad():
                call(model, _float64(inputs), torch.from_numpy)
        except Exception as e:  # noqa: BLE001 - the whole model's float64 run follows, as record_forward's
            return first_line(e, 300)
        finally:
            for h in handles:
                h.remove()
        return None
    error = float64_run(model, run, lambda error: error is not None or bool(wild), free)
    done.pop(_ALIVE, None)
    if error is not None:
        judged[STOPPED] = error  # every value it did not reach is said to be unjudged, with this error
    return judged


def pair_leaves(torch_keys: list, paddle_keys: list, shapes=None) -> dict:
    """{torch key: Paddle key} for the tensors of two paired calls' outputs (their keys after the call name,
    "" for a lone tensor, "[0]", ":logits"): by the same key, then the rest in order when both hold as many,
    else torch's first with Paddle's only one. shapes: {key: shape} of both sides, given when an order pair
    must fit in shape (any module's but the model's, whose outputs are compared whole)."""
    out = {k: k for k in torch_keys if k in paddle_keys}
    t = [k for k in torch_keys if k not in out]
    p = [k for k in paddle_keys if k not in out.values()]
    if len(t) == len(p):
        order = list(zip(t, p))
    else:
        order = [(t[0], p[0])] if t and len(p) == 1 and not out else []
    fits = lambda a, b: shapes is None or _broadcasts(shapes[0][a], shapes[1][b]) or \
        pairing.reshaped(tuple(shapes[0][a]), tuple(shapes[1][b]))
    out.update((a, b) for a, b in order if fits(a, b))
    return out


def _leaves(record: dict) -> dict:
    """{call: {key after the call name: shape}} of a record's outputs, in run order."""
    out = {}
    for key in record:
        if key.startswith("out/"):
            _, call, rest = split_key(key)
            out.setdefault(call, {})[rest] = spill.shape(record, key)
    return out


def counterparts(torch_record: dict, paddle_record: dict, paired: pairing.Pairing) -> dict:
    """{torch record key: Paddle record key} of every output tensor and first input of the paired calls."""
    t_leaves, p_leaves = _leaves(torch_record), _leaves(paddle_record)
    out = {}
    for t_call, p_call in paired.pairs.items():
        # Paddle's module computing torch's and the activation after it: judged against the activation's output
        # and torch's computing Paddle's and the activation after it: judged against that activation's output
        t_out, p_out = paired.judged_as(t_call), paired.paddle_judged_as(t_call)
        t, p = t_leaves.get(t_out, {}), p_leaves.get(p_out, {})
        shapes = None if t_call == ROOT else (t, p)
        out.update({f"out/{t_out}{a}": f"out/{p_out}{b}" for a, b in pair_leaves(list(t), list(p), shapes).items()})
        out[f"in/{t_call}"] = f"in/{p_call}"
    return out


def checked_args(record_dir, mean_bound):
    """compare_forward's and judge_forward's arguments a caller can get wrong, each one line: a record_dir that is
    no folder path (an empty one would write into the current folder), a mean_bound that is no number >= 0."""
    if record_dir is not None and (not isinstance(record_dir, (str, Path)) or not str(record_dir).strip()):
        raise PipelineError(f"record_dir={record_dir!r}: give a folder path (a new or empty folder), or None to "
                            "keep the records in memory [PC401]")
    if mean_bound is not None and (isinstance(mean_bound, bool) or not isinstance(mean_bound, (int, float))
                                   or not mean_bound >= 0 or mean_bound == float("inf")):
        raise PipelineError(f"mean_bound={mean_bound!r}: give a finite number >= 0 (the guide's is 1e-6), or None "
                            "[PC402]")


def judge_forward(torch_record: dict, paddle_record: dict, name_map=None,
                  mean_bound=calibrated.MEAN_BOUND, outputs=None) -> ForwardReport:
    """Pair a torch record_forward with a Paddle one and judge every module output (portcheck/calibrated.py).

    Module calls are paired by portcheck.pairing: name_map's entries as given (align.names.resolve's forms),
    the rest by aligning the two runs; a module called several times is paired per call (name, name#2, ...),
    an output holding several tensors per tensor (name[0], name:logits, ...: the same key, else in order).
    If the torch model returns a ModelOutput and the Paddle one a tensor, the first output is the result.
    The model's output is also held to mean_bound, the guide's (None: it is not what a hand-in holds, as the
    first forward of a training run). report.pairing lists every pair and every call left unpaired."""
    checked_args(None, mean_bound)
    _judgeable(torch_record, paddle_record)
    return _judge(torch_record, paddle_record, name_map, mean_bound, outputs=checked_outputs(outputs))


def _judgeable(torch_record: dict, paddle_record: dict, float64_kept=True):
    """Refuse, in one line, records nothing can be judged on: swapped, a torch run that stopped before any
    module returned, a torch record without its float64 run (float64_kept: it must hold one)."""
    if not any(k.startswith("out/") for k in torch_record) or \
            (float64_kept and not any(k.startswith(F64) for k in torch_record)):
        if any(k.startswith(F64) for k in paddle_record):
            raise PipelineError("the records are swapped: pass the torch record first, then the Paddle one [PC406]")
        if stopped(torch_record):
            raise PipelineError(f"the torch model stopped before any module returned: {stopped(torch_record)}; "
                                f"{INPUTS} [PC407]")
        raise PipelineError("the torch record holds no module outputs with their float64 run: write it with "
                            "portcheck.record_forward(torch_model, inputs) [PC403]")


def _root_leaves(record: dict) -> dict:
    """{the part of its key after the call ("", "[0]", ":logits"): record key} of every leaf of the model's own
    output: its tensors and numbers (out/), and what is neither (LEAF: None, a string, another object)."""
    out = {}
    for key in record:
        for where in ("out/", LEAF):
            if key.startswith(where + ROOT) and split_key("out/" + key[len(where):])[1] == ROOT:
                out[split_key("out/" + key[len(where):])[2]] = key
    return out


def output_name(rest: str) -> str:
    """The model output a leaf belongs to, as its user names it: a ModelOutput's or a dict's field (logits,
    past_key_values), a tuple's position ([1]), or "the output" for a lone one."""
    top = re.match(r"^(:[^:\[]*|\[\d+\])", rest)
    return "the output" if not rest else top.group(1).lstrip(":") if top else rest


def _selected(leaves: dict, names, side: str) -> tuple:
    """(the leaves outputs= names, [left out]): names are a field's name (str) or a position (int); a lone output is
    the one output. A name the side's output lacks is one line."""
    if names is None or list(leaves) == [""]:
        return leaves, []
    tops = {output_name(rest) for rest in leaves}
    wanted = {n if isinstance(n, str) else f"[{n}]" for n in names}
    lacking = sorted(wanted - tops)
    if lacking:
        raise PipelineError(f"outputs={list(names)!r}: the {side} model's output has no {lacking[0]} (its outputs: "
                            f"{', '.join(sorted(tops))}); name its outputs by field or position [PC404]")
    keep = {rest: key for rest, key in leaves.items() if output_name(rest) in wanted}
    return keep, sorted({f"{side} {output_name(rest)}" for rest in leaves if rest not in keep})


def checked_outputs(outputs):
    """outputs= as (torch names, Paddle names): None (every output), a list of names or positions for both
    sides, or a dict {torch name or position: Paddle name or position}; else one line."""
    if outputs is None:
        return None, None
    ok = lambda n: (isinstance(n, str) and n) or (isinstance(n, int) and not isinstance(n, bool) and n >= 0)
    pairs = list(outputs.items()) if isinstance(outputs, dict) else \
        [(n, n) for n in outputs] if isinstance(outputs, (list, tuple)) else None
    if not pairs or not all(ok(a) and ok(b) for a, b in pairs):
        raise PipelineError(f"outputs={outputs!r}: name the model outputs to compare, a list of fields or positions "
                            "(['logits'], [0]) or a dict {torch's: Paddle's} [PC405]")
    return [a for a, _ in pairs], [b for _, b in pairs]


def _leaf(record: dict, key: str) -> str:
    """What a model output holds, said: 'None', a string's repr, 'a <type>', or a tensor or number's shape."""
    if key.startswith(LEAF):
        text = bytes(np.asarray(record[key], dtype=np.uint8)).decode("utf-8", "replace")
        kind, _, rest = text.partition(":")
        return {"none": "None", "str": f"the string {rest[:40]!r}"}.get(kind, f"a {rest} (not comparable)")
    shape = list(spill.shape(record, key))
    return f"a tensor {shape}" if shape else "a number"


def _leaf_row(name, t_key, p_key, torch_record, paddle_record):
    """The row of a model output that is no tensor or number on at least one side: equal (None against None, one
    string against the same), else red saying what each side returns; an object neither is said, and red."""
    t, p = _leaf(torch_record, t_key), _leaf(paddle_record, p_key)
    if t == p and t_key.startswith(LEAF) and p_key.startswith(LEAF) and "(not comparable)" not in t:
        return KeyResult(name, tolerances.EXACT, (), 0.0, 0.0, 0.0, 0.0, notes=[f"{t} on both sides"])
    why = (f"cannot be compared: torch returns {t}, Paddle {p}; leave it out with outputs=" if "(not comparable)" in t + p
           else f"torch returns {t}, Paddle {p}")
    return calibrated.unjudged(name, (), why)


def _judge(torch_record: dict, paddle_record: dict, name_map, mean_bound, as_run=None, outputs=None) -> ForwardReport:
    """judge_forward's pairing and rows. as_run(counterparts): {torch key: its row or input verdict}, judged
    as torch's float64 run computes them (judged_as_run); None: the float64 values are the record's F64 keys.
    outputs: (torch's, Paddle's) names of the model outputs compared (checked_outputs), the rest left out."""
    unsourced = _sources(torch_record), _sources(paddle_record)
    torch_record, paddle_record = fused.cut(torch_record, False), fused.cut(paddle_record, False)
    outs = [k for k in torch_record if k.startswith("out/")]
    pairing.named_exist(name_map, torch_record, paddle_record)  # an entry naming no module would go unjudged
    paired = pairing.pair(torch_record, paddle_record, name_map)
    keys = counterparts(torch_record, paddle_record, paired)
    # the model's own outputs, every leaf of both (None, numbers and strings too), paired by name, else in order
    t_all, left = _selected(_root_leaves(torch_record), (outputs or (None, None))[0], "torch")
    p_all, p_left = _selected(_root_leaves(paddle_record), (outputs or (None, None))[1], "Paddle")
    root = pair_leaves(list(t_all), list(p_all))
    if not root and t_all and p_all and (len(t_all) == 1 or len(p_all) == 1):  # one output against several: the
        root = {next(iter(t_all)): next(iter(p_all))}  # first of each, the others red below, named
    root = {t_all[a]: p_all[b] for a, b in root.items()}
    keys = {k: v for k, v in keys.items() if not (k.startswith("out/") and split_key(k)[1] == ROOT)}
    keys.update({a: b for a, b in root.items() if a.startswith("out/") and b.startswith("out/")})
    judged = as_run(keys) if as_run else {}
    within = {paired.pairs[t] for t in paired.paddle_composed}  # judged as the chain torch's module computes
    report = ForwardReport(unpaired=[k for k in paddle_record if k.startswith("out/") and k not in set(keys.values())
                                     and split_key(k)[1] not in within],
                           stopped={side: stopped(r) for side, r in (("torch", torch_record), ("paddle", paddle_record))
                                    if stopped(r)},
                           pairing=paired, counterparts=keys, left_out=left + p_left)
    measured = {}  # a container's output is its last child's: measured once (spill.identity: by what is stored)
    f64_error = judged.get(STOPPED) if as_run else stopped(torch_record, F64)

    def unreached(key) -> str:
        """Why a value has no float64 run to hold it to ("" when it has one): torch's float64 copy, the library's
        own yardstick, stopped before computing it (its float32 run did not)."""
        if f64_error is None or (key in judged if as_run else F64 + key in torch_record):
            return ""
        return f"{calibrated.NOT_JUDGED} torch's float64 run (the library's yardstick) stopped before it: {f64_error}"

    def once(keys, compute):
        if keys[0] in judged:
            return judged[keys[0]]
        held = keys[0][:3], *(spill.identity(r, k) for r, k in zip((torch_record, torch_record, paddle_record), keys))
        if held not in measured:
            measured[held] = compute()
        return measured[held]
    t_root, origin = set(_root_leaves(torch_record).values()), None
    called = {pairing.module_of(split_key(k)[1]) for k in outs}
    composing = paired.composing()
    for key in outs + [k for k in t_all.values() if k.startswith(LEAF)]:
        _, call_, rest = split_key("out/" + key.split("/", 1)[1])
        name, p_key = key.split("/", 1)[1], keys.get(key, root.get(key, ""))
        if call_ in composing:  # a chain Paddle's module computes whole: its last output, as its first module's
            if paired.judged_as(composing[call_]) != call_:
                continue
            call_ = composing[call_]
            name = f"{call_}{rest}"
        if key in t_root and key not in t_all.values():
            continue  # a model output outputs= leaves out: said in report.left_out
        if key in t_root and p_key not in paddle_record:
            # the model's own outputs are compared whole: one torch has and Paddle lacks is red, named
            row = calibrated.unjudged(name, tuple(spill.shape(torch_record, key)), (
                f"the models' outputs differ in structure: torch returns {output_name(rest)} ({_leaf(torch_record, key)})"
                f", which Paddle does not; compare the rest with outputs= (torch's: {', '.join(_names(t_all))}), or "
                "return the same outputs on both sides"))
        elif key.startswith(LEAF) or p_key.startswith(LEAF):
            row = _leaf_row(name, key, p_key, torch_record, paddle_record)
        elif p_key not in paddle_record:
            row = calibrated.unjudged(name, tuple(spill.shape(torch_record, key)), "no counterpart in the Paddle model")
        elif unreached(key):
            row = calibrated.unjudged(name, tuple(spill.shape(torch_record, key)), unreached(key))
        else:  # the arrays are read only when measured (a container's output is its last child's, measured once)
            row = once((key, F64 + key, p_key), lambda: judge_one(
                name, torch_record[key], torch_record.get(F64 + key), paddle_record[p_key]))
            row = dataclasses.replace(row, key=name, problems=list(row.problems))
            if not row.problem:
                ins = (f"in/{call_}", f"{F64}in/{call_}", keys.get(f"in/{call_}", ""))
                row.input_ok = once(ins, lambda: _input_ok(torch_record.get(ins[0]), torch_record.get(ins[1]),
                                                           paddle_record.get(ins[2])))
        row.rule = row.rule._replace(mean=mean_bound if call_.split("#")[0] == ROOT and not key.startswith(LEAF)
                                     else None)
        if origin is None and not row.passed and row.judged and not row.beyond(calibrated.MEAN_BOUND):
            # asked up to the first red input within its rule only; no module on either side output the input:
            # else the module that did, or how the caller wires them, is to blame
            in_key = f"in/{call_}"
            if row.input_ok is False and unsourced[0](in_key) and unsourced[1](keys.get(in_key, "")):
                row.input_unsourced = _caller(pairing.module_of(call_), called)
            origin = row if row.input_ok is not False else None
        report.rows.append(row)
    for rest, p_key in p_all.items():  # an output Paddle returns and torch lacks is red too, None included
        if p_key not in root.values():
            report.rows.append(calibrated.unjudged(f"{ROOT}{rest}", (), (
                f"the models' outputs differ in structure: Paddle returns {output_name(rest)} "
                f"({_leaf(paddle_record, p_key)}), which torch does not; compare the rest with outputs= (Paddle's: "
                f"{', '.join(_names(p_all))}), or return the same outputs on both sides")))
    return report


def _sources(record: dict):
    """unsourced(in_key): whether the first input recorded under in_key is no module's output: recorded as
    itself, not linked to an output recorded before it (compare._flatten links a tensor a module returned), so a
    buffer or a value its caller's forward computed. False where the record cannot tell (a fused module's cut)."""
    order, first = {}, {}
    for i, key in enumerate(record):
        order[key] = i
        if key.startswith("out/"):
            first.setdefault(spill.identity(record, key), i)

    def unsourced(key) -> bool:
        return key in order and first.get(spill.identity(record, key), order[key] + 1) > order[key]
    return unsourced


def _caller(module: str, called: set) -> str:
    """The module whose forward called `module`: its nearest ancestor that ran (a ModuleList's is its owner's)."""
    parts = module.split(".")
    return next((a for a in (".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)) if a in called), ROOT)


def unsourced_line(row) -> str:
    """The one line for a module named where the runs part because its input differs and came from no module."""
    return (f"{row.name}: its input differs and no module output it: a buffer, or a value {row.input_unsourced}'s "
            "forward computes (check what it reads there); the runs part here")


def _names(leaves: dict) -> str:
    return sorted({output_name(rest) for rest in leaves})


def judge_one(name, a, ref, b) -> KeyResult:
    """One torch output `a` (its float64 run `ref`) against Paddle's `b`: dtypes must agree; shapes that differ
    only where one side keeps a size-1 axis the other repeats are compared broadcast, and said so."""
    return calibrated.own_error(judge_against(name, a, b), a, ref)


def judge_against(name, a, b) -> KeyResult:
    """judge_one's half that reads Paddle's value; calibrated.own_error adds torch's own error (isolate.judge
    judges Paddle's values as its run computes them, before torch's float64 run)."""
    note = ""
    if a.dtype != b.dtype and _held_otherwise(a, b):
        # transformers' OPT hands its position embedding a float32 mask, paddlenlp's a bool one: compared as values
        note, b = f"by design: dtypes {a.dtype} and {b.dtype}, compared as {a.dtype}", b.astype(a.dtype)
    if a.dtype != b.dtype:
        return calibrated.unjudged(name, a.shape, f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}")
    if pairing.reshaped(a.shape, b.shape):
        # one side feeds its Linear [batch * seq, hidden], the other [batch, seq, hidden]: the same rows
        note = f"by design: shapes {list(a.shape)} and {list(b.shape)}, the same values in another shape"
        b = b.reshape(a.shape)
    elif a.shape != b.shape and _broadcasts(a.shape, b.shape):
        # transformers' position embeddings [1, L, H], paddlenlp's [B, L, H]: the same values
        note = f"by design: shapes {list(a.shape)} and {list(b.shape)}, one side broadcast over the other"
        shape = np.broadcast_shapes(a.shape, b.shape)
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    row = calibrated.against(name, a, b)
    row.by_design = note
    return row


def _held_otherwise(a, b) -> bool:
    """A mask or an index held as another dtype: one side boolean, or both integer, and Paddle's values all held
    by torch's dtype. Two float dtypes never are (float64 against float32 is a port's own slip)."""
    if "b" not in a.dtype.kind + b.dtype.kind and not (a.dtype.kind in "iu" and b.dtype.kind in "iu"):
        return False
    with np.errstate(all="ignore"):
        return bool(np.array_equal(b.astype(a.dtype).astype(b.dtype), b))


def _broadcasts(x: tuple, y: tuple) -> bool:
    """The two shapes differ only where one of them is 1, or by leading axes (pairing._broadcast's rule)."""
    return pairing._broadcast(x, y)


def _input_ok(a, ref, b):
    """Whether a module's first input was within tolerance (None: not recorded on both sides)."""
    if a is None or b is None:
        return None
    if pairing.reshaped(a.shape, b.shape):
        b = b.reshape(a.shape)  # the same values in another shape (judge_against)
    elif a.shape != b.shape and _broadcasts(a.shape, b.shape):  # one side's [seq, d] broadcast over [batch, seq, d]
        shape = np.broadcast_shapes(a.shape, b.shape)
        ref = None if ref is None or ref.shape != a.shape else np.broadcast_to(ref, shape)
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    if a.dtype.kind != "f" or a.shape != b.shape:
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return measure("in", a, ref if ref is not None and ref.shape == a.shape else None, b).passed
