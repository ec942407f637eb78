"""compare_forward: every module's output of a torch model and its Paddle port, held to a tolerance
measured on the torch model itself (portcheck/calibrated.py), naming the module where they part."""
import contextlib
import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np

from portcheck import calibrated
from portcheck.calibrated import measure
from portcheck.convert import check_models, framework_of
from portcheck.errors import PipelineError, first_line, raised_by
from portcheck.names import resolve
from portcheck.report import format_table


@dataclass
class ForwardReport:
    rows: list = field(default_factory=list)       # [calibrated.Row] in torch's run order
    unpaired: list = field(default_factory=list)   # Paddle records no torch module maps to
    stopped: dict = field(default_factory=dict)    # {"torch" or "paddle": the error its run stopped on}

    @property
    def passed(self) -> bool:
        """Every paired module within its rule, and something paired: a report that compared nothing is red."""
        return not self.stopped and bool(self.paired) and \
            all(r.passed for r in self.rows if not r.problem.startswith("no counterpart"))

    @property
    def first_diverging(self):
        """The module where the outputs part (its input was within tolerance), or None."""
        origin = calibrated.first_origin(self.rows)
        return origin.name if origin else None

    @property
    def paired(self) -> list:
        """The rows with a Paddle counterpart."""
        return [r for r in self.rows if not r.problem.startswith("no counterpart")]

    def table(self) -> str:
        """Every paired module output, in run order (torch modules with no Paddle counterpart are counted
        below it: containers and activations one side folds into another)."""
        paired = self.paired
        lines = format_table(calibrated.HEADER, calibrated.table_rows(paired))
        lines += [f"the {side} model stopped: {error}" for side, error in self.stopped.items()]
        return "\n".join(lines + [f"{len(self.rows) - len(paired)} torch module outputs have no Paddle counterpart; "
                                   f"{len(self.unpaired)} Paddle outputs no torch module maps to"])


def _flatten(prefix: str, value, out: dict, seen: dict = None):
    """Tensors in an output, under prefix, prefix[0], prefix.key: tuples, lists, dicts and ModelOutputs.
    seen: {(id, in-place version): (tensor, array)}: a tensor already recorded and not changed in place since
    (a container returns its last child's output) is the same array, not a second copy."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        version = getattr(value, "_version", None)
        if version is None and hasattr(value, "_inplace_version"):
            version = value._inplace_version()
        key = (id(value), version)
        if seen is not None and version is not None and key in seen:
            out[prefix] = seen[key][1]
            return
        array = value.detach().cpu().numpy() if hasattr(value, "detach") and hasattr(value, "cpu") else value.numpy()
        out[prefix] = np.array(array, copy=True)  # a copy now: a later in-place add (x += residual) must not reach it
        if seen is not None and version is not None:
            seen[key] = (value, out[prefix])  # the tensor kept alive: its id cannot be another tensor's
    elif isinstance(value, dict) or hasattr(value, "items"):
        for k, v in value.items():
            _flatten(f"{prefix}:{k}", v, out, seen)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, out, seen)


ROOT = "(model)"   # the model itself among its modules
F64 = "f64:"       # the prefix of the torch model's float64 run in a record


class _Recorder:
    """Outputs (and first inputs) of every module, per call, as one flat dict in run order:
    out/<name>, out/<name>#2 for a second call, out/<name>[0] or out/<name>:logits inside a tuple or dict;
    in/<name> for its first input."""

    def __init__(self, prefix=""):
        self.prefix, self.arrays, self.calls, self.seen = prefix, {}, {}, {}

    def hook(self, name):
        def record(module, args, output):
            n = self.calls[name] = self.calls.get(name, 0) + 1
            call = name if n == 1 else f"{name}#{n}"
            flat = {}
            _flatten(f"{self.prefix}out/{call}", output, flat, self.seen)
            self.arrays.update(flat)
            first = {}
            _flatten("in", args[0] if isinstance(args, tuple) and args else args, first, self.seen)
            if first:
                self.arrays[f"{self.prefix}in/{call}"] = next(iter(first.values()))
        return record


STOPPED = "stopped/"  # a record's key when the model raised: the error's first line follows, its value is empty


def _recorded(model, inputs, layers, register, no_grad, to_tensor, prefix="") -> dict:
    """Run model on inputs with a recording hook on each (name, layer); the hooks are removed afterwards. If
    the model raises (a planted padding breaks a residual's shapes), what ran before is kept with the error."""
    rec, handles = _Recorder(prefix), []
    for name, layer in layers:
        handles.append(register(layer)(rec.hook(name or ROOT)))
    try:
        with no_grad():
            call(model, inputs, to_tensor)
    except Exception as e:  # noqa: BLE001 - the model's own error (a planted bug, a KeyError of the user's): kept
        rec.arrays[f"{prefix}{STOPPED}{first_line(e, 300)}"] = np.zeros(0, dtype=np.float32)
    finally:
        for h in handles:
            h.remove()
    return rec.arrays


def stopped(record: dict, prefix: str = ""):
    """The error a recorded run stopped on, or None."""
    return next((k[len(prefix + STOPPED):] for k in record if k.startswith(prefix + STOPPED)), None)


@contextlib.contextmanager
def float64(model):
    """The torch model in float64 for the time of the block, its own tensors put back afterwards (a deep copy
    costs a fifth of the comparison, and a second full model at LLM size): float32 -> float64 -> float32 is
    exact, and nothing is rounded back. The library's one float64 twin; clients use it too."""
    params = [(p, p.data) for p in model.parameters()]
    buffers = [(m, dict(m._buffers)) for m in model.modules()]
    model.double()
    try:
        yield model
    finally:
        for p, data in params:
            p.data = data
        for m, saved in buffers:
            m._buffers.update(saved)


INPUTS = "check the inputs (their dtype and shape, a dict's names) against the model's forward"


def record_forward(model, inputs) -> dict:
    """Every module's output and first input of one model, torch or Paddle, on numpy inputs, as a flat dict
    of numpy arrays in run order (see _Recorder), named by the model's own module names: what a pt_ or pd_
    script saves for a check to judge with judge_forward. A torch model is run a second time in float64 on
    a copy (keys prefixed "f64:"): the yardstick of its own fp32 error. Eval or train mode is the caller's."""
    if framework_of(model) == "torch":
        import torch
        out = _recorded(model, inputs, model.named_modules(), lambda m: m.register_forward_hook, torch.no_grad,
                        torch.from_numpy)
        with float64(model):
            out.update(_recorded(model, _float64(inputs), model.named_modules(), lambda m: m.register_forward_hook,
                                 torch.no_grad, torch.from_numpy, F64))
        return out
    import paddle
    return _recorded(model, inputs, model.named_sublayers(include_self=True),
                     lambda layer: layer.register_forward_post_hook, paddle.no_grad, paddle.to_tensor)


def record_value(model, inputs, fn) -> dict:
    """{"value": fn(model(inputs))} as a numpy array, without gradients: a loss, a metric. A torch model is run
    a second time in float64 on a copy ("f64:value"), the yardstick of the value's own fp32 error."""
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
            with float64(model):
                out[F64 + "value"] = value(_float64(inputs), torch.from_numpy)
        return out
    import paddle
    with paddle.no_grad():
        return {"value": value(inputs, paddle.to_tensor)}


def call(model, inputs, to_tensor):
    """model(inputs) with numpy inputs turned into the framework's tensors: an array (one argument), a
    tuple or list (positional arguments) or a dict (keyword arguments)."""
    # np.array copies: torch.from_numpy shares memory, and a forward that changes its input in place must
    # change neither the caller's array nor the other side's input
    if isinstance(inputs, dict):
        return model(**{k: to_tensor(np.array(v)) for k, v in inputs.items()})
    if isinstance(inputs, (tuple, list)):
        return model(*[to_tensor(np.array(v)) for v in inputs])
    return model(to_tensor(np.array(inputs)))


def _float64(inputs):
    cast = lambda v: np.asarray(v).astype(np.float64) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
    if isinstance(inputs, dict):
        return {k: cast(v) for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(cast(v) for v in inputs)
    return cast(inputs)


_KEY = re.compile(r"^(out|in)/([^#\[:]*)(.*)$")  # kind, module name, then #call, [index] or :key


def _paddle_name(key: str, mapped) -> tuple:
    """(torch record key's module name, the Paddle record key it pairs with)."""
    kind, module, rest = _KEY.match(key).groups()
    target = mapped(module) if module != ROOT else ""
    return module, f"{kind}/{target or ROOT}{rest}"


def compare_forward(torch_model, paddle_model, inputs, name_map=None) -> ForwardReport:
    """Run both models (eval mode is the caller's to set) on the same numpy inputs, and torch once more in
    float64 on a copy; hold every module output of the Paddle model to the torch one's own fp32 error.
    record_forward on each side, then judge_forward: the same two calls a pt_/pd_ script pair and its
    check make. Returns a ForwardReport: .rows, .passed, .first_diverging, .table()."""
    check_models(torch_model, paddle_model)
    return judge_forward(record_forward(torch_model, inputs), record_forward(paddle_model, inputs), name_map)


def judge_forward(torch_record: dict, paddle_record: dict, name_map=None,
                  mean_bound=calibrated.MEAN_BOUND) -> ForwardReport:
    """Pair a torch record_forward with a Paddle one and judge every module output (portcheck/calibrated.py).

    Modules are paired by name through name_map (align.names.resolve), in torch's run order; a module
    called several times is paired per call (name, name#2, ...), an output holding several tensors per
    tensor (name[0], name:logits, ...). If the torch model returns a ModelOutput and the Paddle one a
    tensor, the first output is the result. The model's output is also held to mean_bound, the guide's
    (None: it is not what a hand-in holds, as the first forward of a training run)."""
    mapped = resolve(name_map)
    outs = [k for k in torch_record if k.startswith("out/")]
    if not outs or not any(k.startswith(F64) for k in torch_record):
        if any(k.startswith(F64) for k in paddle_record):
            raise PipelineError("the records are swapped: pass the torch record first, then the Paddle one")
        if stopped(torch_record):
            raise PipelineError(f"the torch model stopped before any module returned: {stopped(torch_record)}; {INPUTS}")
        raise PipelineError("the torch record holds no module outputs with their float64 run: write it with "
                            "portcheck.record_forward(torch_model, inputs)")
    pairs = {k: _paddle_name(k, mapped) for k in outs}
    report = ForwardReport(unpaired=[k for k in paddle_record if k.startswith("out/")
                                     and k not in {p for _, p in pairs.values()}],
                           stopped={side: stopped(r) for side, r in (("torch", torch_record), ("paddle", paddle_record))
                                    if stopped(r)})
    p_root = [k for k in paddle_record if k == f"out/{ROOT}" or k.startswith((f"out/{ROOT}[", f"out/{ROOT}:"))]
    measured = {}  # (id a, id ref, id b) -> Row: a container's output is its last child's, measured once

    def measure_once(name, a, ref, b):
        key = (id(a), id(ref), id(b))
        if key not in measured:  # the arrays kept with the row: their ids cannot be reused by others
            measured[key] = (measure(name, a, ref, b), a, ref, b)
        return dataclasses.replace(measured[key][0], name=name)
    # the model's own output, flattened to its tensors on each side: paired by name, else in order when both
    # return as many (a ModelOutput against a tuple), else the first with Paddle's one tensor; any other is a
    # difference in structure, red: the output a user hands in must be compared whole
    t_root = [k for k in outs if pairs[k][0] == ROOT]
    by_order = dict(zip(t_root, p_root)) if len(t_root) == len(p_root) else \
        ({t_root[0]: p_root[0]} if t_root and len(p_root) == 1 else {})
    for key in outs:
        module, pkey = pairs[key]
        a, ref, b = torch_record[key], torch_record.get(F64 + key), paddle_record.get(pkey)
        if b is None and key in by_order:
            b = paddle_record[by_order[key]]
        name = key[len("out/"):]
        if b is None and module == ROOT:
            row = calibrated.Row(name, tuple(a.shape), *[float("nan")] * 4,
                                 problem=f"the models' outputs differ in structure: torch returns {len(t_root)} "
                                         f"tensor(s), Paddle {len(p_root)}; return the same outputs on both sides")
        elif b is None:
            row = calibrated.Row(name, tuple(a.shape), *[float("nan")] * 4, problem="no counterpart in the Paddle model")
        elif a.dtype != b.dtype:
            row = calibrated.Row(name, tuple(a.shape), *[float("nan")] * 4,
                                 problem=f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}")
        else:
            note = ""
            if a.shape != b.shape and _broadcasts(a.shape, b.shape):
                # one side keeps a size-1 axis the other repeats (transformers' position embeddings [1, L, H],
                # paddlenlp's [B, L, H]): the same values, compared once broadcast, and said so
                note = f"by design: shapes {list(a.shape)} and {list(b.shape)}, one side broadcast over the other"
                shape = np.broadcast_shapes(a.shape, b.shape)
                a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
                ref = None if ref is None else np.broadcast_to(ref, shape)
            row = measure_once(name, a, ref, b)
            row.by_design = note
            if not row.problem:
                call_ = "in/" + name.split("[")[0].split(":")[0]
                p_call = _paddle_name(call_, mapped)[1]
                row.input_ok = _input_ok(torch_record.get(call_), torch_record.get(F64 + call_),
                                         paddle_record.get(p_call), measure_once)
        row.mean_bound = mean_bound if module == ROOT else None
        report.rows.append(row)
    return report


def _broadcasts(x: tuple, y: tuple) -> bool:
    """The two shapes differ only where one of them is 1."""
    return len(x) == len(y) and all(i == j or 1 in (i, j) for i, j in zip(x, y))


def _input_ok(a, ref, b, measure_once=measure):
    """Whether a module's first input was within tolerance (None: not recorded on both sides)."""
    if a is None or b is None:
        return None
    if a.dtype.kind != "f" or a.shape != b.shape:
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return measure_once("in", a, ref if ref is not None and ref.shape == a.shape else None, b).passed
