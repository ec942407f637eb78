"""One side's run of a model, as a record: which framework a model is (framework_of, check_models), its
modules' hook points, and the Recorder that keeps every module's output and first input, in run order (trace),
in torch's run which outputs its forward hands to an activation outside any module (watch), and in each side's
which it multiplies by a number there (watch, watch_paddle; scale_rules, and applied_rules: the pairs judged
through that activation);
how numpy inputs are handed to a model (call, Arguments). May import core and mapping's modules and taken only:
convert pairs modules by such a run, forward judges two of them."""
import contextlib
import numbers
import weakref
from typing import NamedTuple

import numpy as np

from portcheck.core import spill
from portcheck.core.errors import PipelineError, first_line, one_line
from portcheck.core.keys import ROOT, split_key, unkeyed
from portcheck.mapping import modules, packed
from portcheck.mapping.taken import TAKE, take

INPUTS = "check the inputs (their dtype and shape, a dict's names) against the model's forward"


def framework(model):
    """"torch", "paddle" or None (not a model)."""
    if hasattr(model, "named_sublayers"):
        return "paddle"
    return "torch" if hasattr(model, "named_modules") else None


def framework_of(model) -> str:
    """A model's framework, or one line saying the `model` given is not one."""
    side = framework(model)
    if side is None:
        raise PipelineError(f"model is a {type(model).__name__}, not a torch.nn.Module or a paddle.nn.Layer: "
                            "pass the model itself [PC300]")
    return side


def check_models(torch_model, paddle_model):
    """One line unless the first is a torch module and the second a Paddle layer (the usual slip: swapped)."""
    given = framework(torch_model), framework(paddle_model)
    if given == ("paddle", "torch"):
        raise PipelineError("the models are swapped: pass the torch model first, then the Paddle one [PC013]")
    for side, model, want in (("torch_model", torch_model, "torch"), ("paddle_model", paddle_model, "paddle")):
        if framework(model) != want:
            raise PipelineError(f"{side} is a {type(model).__name__}, not a "
                                f"{'torch.nn.Module' if want == 'torch' else 'paddle.nn.Layer'}: pass the model itself "
                                "[PC015]")


def is_torch(model) -> bool:
    """True for a torch module, False for a Paddle layer; anything else is one line (framework_of)."""
    return framework_of(model) == "torch"


def version(tensor):
    """A torch or Paddle tensor's in-place version (None: it has none)."""
    v = getattr(tensor, "_version", None)
    return tensor._inplace_version() if v is None and hasattr(tensor, "_inplace_version") else v


def tensors(prefix: str, value):
    """(key, tensor) of every tensor in an output, under prefix, prefix[0], prefix:key: tuples, lists, dicts and
    ModelOutputs."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        yield prefix, value
    elif packed.is_packed(value):  # torch's PackedSequence: its real tokens, as one output (mapping.packed)
        yield prefix, value.data
    elif isinstance(value, dict) or hasattr(value, "items"):
        for k, v in value.items():
            yield from tensors(f"{prefix}:{k}", v)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from tensors(f"{prefix}[{i}]", v)


def packed_leaves(prefix: str, value):
    """(key, PackedSequence) of every packed sequence in an output, under the key tensors() gives its data."""
    if packed.is_packed(value):
        yield prefix, value
    elif is_tensor(value):
        return
    elif isinstance(value, dict) or hasattr(value, "items"):
        for k, v in value.items():
            yield from packed_leaves(f"{prefix}:{k}", v)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from packed_leaves(f"{prefix}[{i}]", v)


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
            remember(seen, held, key, tensor)


def values(tensor) -> np.ndarray:
    """A torch or Paddle tensor's values as numpy, a view where the framework gives one (Paddle's .numpy() copies;
    at LLM size, 0.9 GB a run): read or copy it before the tensor changes or is freed."""
    if hasattr(tensor, "detach") and hasattr(tensor, "cpu"):
        return tensor.detach().cpu().numpy()
    try:
        return np.from_dlpack(tensor)
    except (RuntimeError, TypeError, BufferError, AttributeError):  # bfloat16, a device tensor: a copy
        return tensor.numpy()


def remember(seen: dict, key: tuple, prefix: str, tensor):
    """seen[key] = prefix for as long as the tensor lives: once it is freed its id may be another tensor's.
    The tensor itself is not kept (at LLM size every activation of the run would stay in memory)."""
    seen[key] = prefix
    try:
        weakref.finalize(tensor, seen.pop, key, None)
    except TypeError:  # a tensor type no weak reference reaches: kept alive with its entry instead
        seen.setdefault(ALIVE, []).append(tensor)


ALIVE = object()  # seen's list of the tensors kept alive


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


def output_leaves(prefix: str, value, numbers: bool):
    """(key, value) of every leaf of a model's output that is not a tensor, as tensors() walks it: numbers=True its
    numbers (a 0-d numpy array each), else the rest (None, a string, any other object: utf-8 of "none:",
    "str:<text>", "obj:<type>" as a uint8 array)."""
    if is_tensor(value) or packed.is_packed(value):
        return
    if isinstance(value, dict) or hasattr(value, "items"):
        for k, v in value.items():
            yield from output_leaves(f"{prefix}:{k}", v, numbers)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from output_leaves(f"{prefix}[{i}]", v, numbers)
    elif isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        if numbers:
            yield prefix, np.asarray(value)
    elif not numbers:
        said = "none:" if value is None else f"str:{value}" if isinstance(value, str) else f"obj:{type(value).__name__}"
        yield prefix, np.frombuffer(said.encode("utf-8", "backslashreplace"), dtype=np.uint8).copy()


class Recorder:
    """Outputs (and first inputs) of every module, per call, as one flat dict in run order:
    out/<name>, out/<name>#2 for a second call, out/<name>[0] or out/<name>:logits inside a tuple or dict;
    in/<name> for its first tensor argument. Each is copied as it was then: the input as the call begins, the
    output as it returns (torchvision's ReLU(inplace=True), an `out += identity`, overwrite both in the tensor
    itself right after)."""

    def __init__(self, prefix="", arrays=None):
        self.prefix, self.arrays, self.calls, self.seen = prefix, {} if arrays is None else arrays, {}, {}
        self.running = {}  # {module name: [its calls begun and not returned]}
        # a recorded output's (id, in-place version) once something read it (a module, a framework call: watch())
        self.read, self.busy = {}, False  # busy: in a hook of the library's own, whose calls read nothing
        if not getattr(self.arrays, "keeps_values", True):
            self.seen = None  # a record of shapes only (convert's): nothing to link, and no tensor kept alive for it

    def attach(self, model, names=None) -> list:
        """Hook every module of `model` (hook_points), or those of `names`; the handles, for the caller to remove."""
        return [h for name, pre, post in hook_points(model) if names is None or name in names
                for h in (pre(self.entered(name)), post(self.returned(name)))]

    def entered(self, name):
        def record(module, args, kwargs):
            self.busy = True
            call = next_call(self.calls, name)
            self.running.setdefault(name, []).append(call)
            x = first_input(args, kwargs)[1]
            if x is not None:
                remember(self.read, (id(x), version(x)), call, x)
                _flatten(f"{self.prefix}in/{call}", x, self.arrays, self.seen)
            self.busy = False
        return record

    def returned(self, name):
        def record(module, args, kwargs, output):
            self.busy = True
            call = self.running[name].pop()
            _flatten(f"{self.prefix}out/{call}", output, self.arrays, self.seen)
            for key, sequence in packed_leaves(f"{self.prefix}out/{call}", output):
                self.arrays[packed.PACKED + key] = packed.positions(sequence)
            if call == ROOT:  # the model's own outputs are judged whatever they are: numbers by the rule, the rest
                for numbers, where in ((True, "out/"), (False, LEAF)):
                    for key, value in output_leaves(f"{self.prefix}{where}{call}", output, numbers):
                        self.arrays[key] = value
            self.busy = False
        return record


APPLIED = "fn/"  # fn/<call>: the activation torch's forward hands that module call's output to first (utf-8 name)
# the activations a call's output is judged through (pairing.Pairing.applied), each exactly torch's in numpy
ACTIVATIONS = {"relu": lambda x: np.maximum(x, x.dtype.type(0))}


# scale/<call>: the number a side's forward multiplies that module call's output by first, outside any module
# (paddlenlp's MBartEncoder: self.embed_tokens(input_ids) * self.embed_scale), float64 [1]
SCALED = "scale/"
SCALES = {"*": np.multiply, "/": np.divide}  # a rule's name "*<c>" or "/<c>": torch's output times or over c


def activated(name, array):
    """torch's recorded output (fp32, or its float64 run's) as the activation `name` torch applies to it next,
    scaled by the rule `name` (SCALES, scale_rules) or an index taken (taken.taken_rules), in its own precision."""
    if array is None:
        return None
    x = np.asarray(array)
    if name[:1] == TAKE:
        return take(name, x)
    if name[:1] in SCALES:
        return SCALES[name[0]](x, x.dtype.type(float(name[1:])) if x.dtype.kind == "f" else float(name[1:]))
    return ACTIVATIONS[name](x)


def scale_rules(pairs: dict, torch_record: dict, paddle_record: dict) -> dict:
    """{torch call: "*c" or "/c"} where one side's forward multiplies its call's output by a number c outside any
    module and the other's does not (scale/): the scale sits inside the other side's module (transformers'
    MBartScaledWordEmbedding against paddlenlp's plain Embedding scaled by its parent). torch's output is judged
    times its parent's c, or over Paddle's parent's c: the value each side's next module sees, compared. Taken only
    where the run's values are nearer so than as they are (a scale both sides apply unseen is no rule)."""
    from portcheck.mapping.ties import distance, outputs_of  # ties reads no trace: imported where it is needed
    out = {}
    for t, p in pairs.items():
        mine, theirs = torch_record.get(SCALED + t), paddle_record.get(SCALED + p)
        if (mine is None) == (theirs is None):
            continue
        name = f"*{float(mine[0])!r}" if theirs is None else f"/{float(theirs[0])!r}"
        a, b = outputs_of(torch_record, t), outputs_of(paddle_record, p)
        if a and distance([activated(name, a[0])], b) < distance(a, b):
            out[t] = name
    return out


def scale_said(rule: str) -> str:
    """A scale rule (scale_rules) in words, for the pairing's line."""
    side, how = ("Paddle", "over") if rule[0] == "/" else ("torch", "times")
    return (f"{side}'s forward multiplies this output by {rule[1:]} next, outside any module, where the other side's "
            f"module holds that scale: torch's output judged {how} it [PC445]")


def applied_rules(result, torch_record: dict, paddle_record: dict) -> dict:
    """{torch call: the activation torch's forward hands its output to first, outside any module (trace.watch's fn/
    key: torchvision's DenseNet.forward, F.relu on features' output)} where its Paddle call is judged through it:
    the Paddle module declares an activation of its own (legacy BatchNorm(act='relu'), result.acts), or the next
    module Paddle runs reads its output as it is and is not that activation (Paddle applies none there: a port
    missing it is red at it). A Paddle port applying that activation itself, in its forward or as a module of its
    own (paddle.vision's ConvNormActivation runs a ReLU module where torchvision's inception BasicConv2d calls
    F.relu), is judged on the outputs as they are."""
    kinds = {c.name: c.kind.lower() for c in result.paddle_calls}
    out = {}
    for t, p in result.pairs.items():
        name = modules.text(torch_record, APPLIED + t)
        if name not in ACTIVATIONS or t in result.composed or t in result.paddle_composed:
            continue
        reader_call = reader(paddle_record, p)
        if p in result.acts or (reader_call is not None and kinds.get(reader_call) != name):
            out[t] = name
    return out


def reader(record: dict, call: str):
    """The call whose first input is the first module input a record holds after a call's output, when that input is
    the output unchanged; else None."""
    keys = iter(record)
    if f"out/{call}" not in record or not any(k == f"out/{call}" for k in keys):
        return None
    fed = next((k for k in keys if k.startswith("in/")), None)
    if fed is None or spill.identity(record, fed) != spill.identity(record, f"out/{call}"):
        return None
    return split_key(fed)[1]


def _scaled(rec, x, other, how):
    """Keep scale/<call> when `x` is a recorded module output read first here, multiplied by the number `other`."""
    held = (id(x), version(x)) if is_tensor(x) else None
    key = rec.seen.get(held) if held is not None else None
    if key is None or not key.startswith("out/") or held in rec.read:
        return
    remember(rec.read, held, how, x)
    c = scalar(other)
    if c is not None:
        rec.arrays[f"{rec.prefix}{SCALED}{key[len('out/'):]}"] = np.array([c], dtype=np.float64)


def scalar(value):
    """The number a multiplication's other operand is, or None: a Python or numpy number, or a 0-d or one-element
    tensor of either framework (Gemma's `x * torch.tensor(hidden ** 0.5)`); never a bool."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):  # np.float32(c) too
        return float(value)
    if is_tensor(value) and int(np.prod(value.shape)) == 1:
        number = value.item()  # bfloat16 too, which numpy has no type for
        return float(number) if isinstance(number, (int, float)) and not isinstance(number, bool) else None
    return None


@contextlib.contextmanager
def watch_paddle(rec: Recorder):
    """Paddle's side of watch: a recorded module output multiplied by a number (x * c, c * x) before any module
    reads it is kept as scale/<that output's call>. Paddle has no function mode: its Tensor's two methods are
    wrapped for the run and put back after."""
    import paddle
    kept = {n: getattr(paddle.Tensor, n) for n in ("__mul__", "__rmul__")}

    def wrapped(name):
        def method(self, other):
            if not rec.busy:
                _scaled(rec, self, other, name)
            return kept[name](self, other)
        return method
    try:
        for n in kept:
            setattr(paddle.Tensor, n, wrapped(n))
        yield
    finally:
        for n, m in kept.items():
            setattr(paddle.Tensor, n, m)


LOOKS = {"__get__", "size", "dim", "numel", "stride", "is_contiguous"}  # calls reading a tensor's form, not its values


def watch(rec: Recorder):
    """A torch function mode for the run: the first framework call reading each recorded module output, when it is
    an activation of ACTIVATIONS given the output itself (torchvision's DenseNet.forward: F.relu(self.features(x))
    in the parent's forward, outside any module), is kept as fn/<that output's call>: the value torch's next
    consumer sees is that activation's (Paddle's BatchNorm(act='relu') holds it)."""
    from torch.overrides import TorchFunctionMode

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if not rec.busy and getattr(func, "__name__", "") not in LOOKS:
                read = [(i, x) for i, a in enumerate(args) for x in (a if isinstance(a, (list, tuple)) else [a])]
                for i, x in read:  # torch.cat([features, out]) reads each
                    held = (id(x), version(x)) if is_tensor(x) else None
                    key = rec.seen.get(held) if held is not None else None
                    if key is None or not key.startswith("out/") or held in rec.read:
                        continue
                    name = getattr(func, "__name__", "").rstrip("_")
                    if name.lstrip("_") in ("mul", "rmul") and len(args) == 2 and i < 2 and x is args[i]:
                        _scaled(rec, x, args[1 - i], func)  # x * c, c * x, torch.mul(x, c): scale/
                        continue
                    remember(rec.read, held, func, x)
                    if i == 0 and x is args[0] and name in ACTIVATIONS:
                        rec.arrays[f"{rec.prefix}{APPLIED}{key[len('out/'):]}"] = \
                            np.frombuffer(name.encode("utf-8"), dtype=np.uint8).copy()
            return func(*args, **(kwargs or {}))
    return Watch()


def hook_points(model) -> list:
    """[(module name, pre, post)] for every module of a torch or Paddle model, the model itself as ROOT:
    pre(hook) adds hook(module, args, kwargs) before its forward, post(hook) hook(module, args, kwargs, output)
    after it; each returns the hook's handle."""
    if is_torch(model):
        named = [(n, m, m.register_forward_pre_hook, m.register_forward_hook) for n, m in model.named_modules()]
    else:
        named = [(n, m, m.register_forward_pre_hook, m.register_forward_post_hook)
                 for n, m in model.named_sublayers(include_self=True)]
    odd = next(((n, c) for n, *_ in named for c in [unkeyed(n)] if c), None)
    if odd is not None:  # read back as another module's name (blk:0 as the model's own), or as two lines
        raise PipelineError(f"module {one_line(repr(odd[0]))[:80]} holds {repr(odd[1])}, which portcheck's record keys "
                            "read (out/<module>#<call>[<index>]:<key>) or part lines at: rename it (its ModuleDict's or "
                            "LayerDict's key, or the attribute) [PC972]")
    return [(n or ROOT, lambda hook, r=pre: r(hook, with_kwargs=True), lambda hook, r=post: r(hook, with_kwargs=True))
            for n, _, pre, post in named]


STOPPED = "stopped/"  # a record's key when the model raised: the error's first line follows, its value is empty


def recorded(model, inputs, no_grad, to_tensor, prefix="", into=None) -> dict:
    """Run model on inputs with a recording hook on each of its modules; the hooks are removed afterwards. If
    the model raises (a planted padding breaks a residual's shapes), what ran before is kept with the error.
    into: the record to add to (a dict or a spill.Spill), else a new dict."""
    rec = Recorder(prefix, into)
    handles = rec.attach(model)
    # the run of the record judged (not torch's float64 twin, nor a record of shapes): which outputs torch's
    # forward hands to an activation of its own (watch), and which either side's multiplies by a number (scale/)
    watching = (watch(rec) if is_torch(model) else watch_paddle(rec)) if prefix == "" and rec.seen is not None \
        else contextlib.nullcontext()
    try:
        with no_grad(), watching:
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


def stopped_in(record: dict, prefix: str = ""):
    """The module a recorded run that stopped was inside (the last entered that did not return: the deepest), or
    None: it stopped in the model's own code, or ran to its end."""
    if stopped(record, prefix) is None:
        return None
    calls = lambda kind: [split_key(k[len(prefix):])[1] for k in record if k.startswith(f"{prefix}{kind}/")]
    returned = set(calls("out"))
    inside = [c.split("#")[0] for c in calls("in") if c not in returned and c.split("#")[0] != ROOT]
    return inside[-1] if inside else None


def trace(model, inputs=None, into=None) -> dict:
    """One side's run without the float64 one: every module's output and first input (none when inputs is
    None), and what pairing needs of each module (modules.describe); into: the record to fill (a dict or a
    spill.Spill), else a new dict."""
    torch_side = is_torch(model)  # first: anything but a model is one line, before describe reads it
    out = {} if into is None else into
    out.update(modules.describe(model))
    if inputs is not None:
        if torch_side:
            import torch
            recorded(model, inputs, torch.no_grad, torch.from_numpy, into=out)
        else:
            import paddle
            recorded(model, inputs, paddle.no_grad, paddle.to_tensor, into=out)
    return out


def ran_on(side: str, record: dict, inputs) -> dict:
    """A trace made to pair modules by their run: one that stopped on `inputs` before any module returned (a model
    that cannot take them) is one line, never a silent fallback to pairing by definition order. A run that stopped
    later (a model that needs gradients, run here without) is paired by what ran."""
    if inputs is not None and stopped(record) and not any(k.startswith("out/") for k in record):
        raise PipelineError(f"the {side} model's forward raised: {stopped(record)}; {INPUTS} [PC400]")
    return record


def call(model, inputs, to_tensor):
    """model(inputs) with numpy inputs turned into the framework's tensors: an array (one argument), a
    tuple or list (positional arguments) or a dict (keyword arguments; a flag among them, True, None or a string,
    passed as it is: return_dict=True)."""
    # np.array copies: torch.from_numpy shares memory, and a forward that changes its input in place must
    # change neither the caller's array nor the other side's input
    if isinstance(inputs, Arguments):
        return model(*as_tensors(inputs.args, to_tensor), **as_tensors(inputs.kwargs, to_tensor))
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


def as_tensors(value, to_tensor):
    """An Arguments' value as the model takes it: each array a tensor, in the lists, tuples and dicts it was in."""
    if isinstance(value, np.ndarray):
        return to_tensor(np.array(value))
    if isinstance(value, dict):
        return type(value)({k: as_tensors(v, to_tensor) for k, v in value.items()})
    if isinstance(value, (tuple, list)):
        return type(value)(as_tensors(v, to_tensor) for v in value)
    return value


def is_flag(value) -> bool:
    """A keyword argument that is no tensor's value: a bool, None or a string (return_dict=True)."""
    return value is None or isinstance(value, (bool, str))
