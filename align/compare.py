"""compare_forward: every module's output of a torch model and its Paddle port, held to a tolerance
measured on the torch model itself (checks/calibrated.py), naming the module where they part."""
import copy
from dataclasses import dataclass, field

import numpy as np

from align.names import resolve
from checks import calibrated
from checks.report import format_table


@dataclass
class ForwardReport:
    rows: list = field(default_factory=list)       # [calibrated.Row] in torch's run order
    unpaired: list = field(default_factory=list)   # Paddle records no torch module maps to

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows if not r.problem.startswith("no counterpart"))

    @property
    def first_diverging(self):
        """The module where the outputs part (its input was within tolerance), or None."""
        origin = calibrated.first_origin(self.rows)
        return origin.name if origin else None

    def table(self) -> str:
        """Every paired module output, in run order (torch modules with no Paddle counterpart are counted
        below it: containers and activations one side folds into another)."""
        paired = [r for r in self.rows if not r.problem.startswith("no counterpart")]
        lines = format_table(calibrated.HEADER, calibrated.table_rows(paired))
        return "\n".join(lines + [f"{len(self.rows) - len(paired)} torch module outputs have no Paddle counterpart; "
                                   f"{len(self.unpaired)} Paddle outputs no torch module maps to"])


def _flatten(prefix: str, value, out: dict):
    """Tensors in an output, under prefix, prefix[0], prefix.key: tuples, lists, dicts and ModelOutputs."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        array = value.detach().cpu().numpy() if hasattr(value, "detach") and hasattr(value, "cpu") else value.numpy()
        out[prefix] = np.array(array, copy=True)  # a copy now: a later in-place add (x += residual) must not reach it
    elif isinstance(value, dict) or hasattr(value, "items"):
        for k, v in value.items():
            _flatten(f"{prefix}:{k}", v, out)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, out)


class _Recorder:
    """Outputs (and first inputs) of every module, per call: name, name#2 for a second call, ..."""

    def __init__(self):
        self.outputs, self.inputs, self.calls, self.order = {}, {}, {}, []

    def hook(self, name):
        def record(module, args, output):
            n = self.calls[name] = self.calls.get(name, 0) + 1
            call = name if n == 1 else f"{name}#{n}"
            flat = {}
            _flatten(call, output, flat)
            for key, array in flat.items():
                self.outputs[key] = array
                self.order.append(key)
            first = {}
            _flatten("in", args[0] if isinstance(args, tuple) and args else args, first)
            if first:
                self.inputs[call] = next(iter(first.values()))
        return record


def _recorded(model, inputs, layers, register, no_grad, to_tensor) -> "_Recorder":
    """Run model on inputs with a recording hook on each (name, layer); the hooks are removed afterwards."""
    rec, handles = _Recorder(), []
    for name, layer in layers:
        handles.append(register(layer)(rec.hook(name or "(model)")))
    try:
        with no_grad():
            call(model, inputs, to_tensor)
    finally:
        for h in handles:
            h.remove()
    return rec


def _torch_run(model, inputs):
    import torch
    return _recorded(model, inputs, model.named_modules(), lambda m: m.register_forward_hook, torch.no_grad,
                     torch.from_numpy)


def _paddle_run(model, inputs, mapped_names):
    import paddle
    layers = ((mapped_names.get(n, n), layer) for n, layer in model.named_sublayers(include_self=True))
    return _recorded(model, inputs, layers, lambda layer: layer.register_forward_post_hook, paddle.no_grad,
                     paddle.to_tensor)


def call(model, inputs, to_tensor):
    """model(inputs) with numpy inputs turned into the framework's tensors: an array (one argument), a
    tuple or list (positional arguments) or a dict (keyword arguments)."""
    if isinstance(inputs, dict):
        return model(**{k: to_tensor(np.asarray(v)) for k, v in inputs.items()})
    if isinstance(inputs, (tuple, list)):
        return model(*[to_tensor(np.asarray(v)) for v in inputs])
    return model(to_tensor(np.asarray(inputs)))


def _float64(inputs):
    cast = lambda v: np.asarray(v).astype(np.float64) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
    if isinstance(inputs, dict):
        return {k: cast(v) for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(cast(v) for v in inputs)
    return cast(inputs)


def compare_forward(torch_model, paddle_model, inputs, name_map=None) -> ForwardReport:
    """Run both models (eval mode is the caller's to set) on the same numpy inputs, and torch once more in
    float64 on a copy; hold every module output of the Paddle model to the torch one's own fp32 error.

    Modules are paired by name through name_map (align.names.resolve), in torch's run order; a module
    called several times is recorded per call (name, name#2, ...), an output holding several tensors per
    tensor (name[0], name:logits, ...). Returns a ForwardReport: .rows, .passed, .first_diverging, .table().
    """
    mapped = resolve(name_map)
    # Paddle's records are named by the torch name that maps to them, so the two sides pair by name
    torch_names = [n for n, _ in torch_model.named_modules()]
    to_torch_name = {mapped(n): n for n in torch_names}
    paddle_names = {n: to_torch_name.get(n, f"(paddle only) {n}") for n, _ in paddle_model.named_sublayers(include_self=True)}
    t32 = _torch_run(torch_model, inputs)
    t64 = _torch_run(copy.deepcopy(torch_model).double(), _float64(inputs))
    pd = _paddle_run(paddle_model, inputs, paddle_names)
    report = ForwardReport(unpaired=[k for k in pd.order if k.startswith("(paddle only)")])
    root = [k for k in pd.order if k == "(model)" or k.startswith(("(model)[", "(model):"))]
    for key in t32.order:
        a, ref = t32.outputs[key], t64.outputs.get(key)
        b = pd.outputs.get(key)
        if b is None and len(root) == 1 and key.startswith("(model)") and key == _first_root(t32.order):
            b = pd.outputs[root[0]]  # HF returns a ModelOutput, Paddle a tensor: the first output is the result
        if b is None:
            row = calibrated.Row(key, tuple(a.shape), *[float("nan")] * 4, problem="no counterpart in the Paddle model")
        elif a.dtype != b.dtype:
            row = calibrated.Row(key, tuple(a.shape), *[float("nan")] * 4,
                                 problem=f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}")
        else:
            row = measure(key, a, ref, b)
            if not row.problem:
                call = key.split("[")[0].split(":")[0]
                row.input_ok = _input_ok(t32.inputs.get(call), t64.inputs.get(call), pd.inputs.get(call))
        row.final = key.startswith("(model)")
        report.rows.append(row)
    return report


def _first_root(order):
    return next((k for k in order if k.startswith("(model)")), None)


def measure(name, a, ref, b, final=False) -> calibrated.Row:
    """One compared tensor as a calibrated.Row: torch fp32 `a`, torch fp64 `ref` (None: `a` itself), Paddle `b`.
    compare_forward and compare_backward both judge through it."""
    a, b = np.asarray(a), np.asarray(b)
    row = calibrated.Row(name, tuple(a.shape), *[float("nan")] * 4, final=final)
    if a.shape != b.shape:
        row.problem = f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}"
    elif a.dtype.kind == "f" and not (np.isfinite(a).all() and np.isfinite(b).all()):
        row.problem = "NaN or Inf"
    elif not a.size:
        row.max = row.mean = row.err32 = row.scale = 0.0
    else:
        a64 = a.astype(np.float64)
        exact = np.asarray(ref, dtype=np.float64) if ref is not None else a64
        d = np.abs(a64 - b.astype(np.float64))
        row.max, row.mean = float(d.max()), float(d.mean())
        row.err32, row.scale = float(np.abs(a64 - exact).max()), float(np.abs(exact).max())
    return row


def _input_ok(a, ref, b):
    """Whether a module's first input was within tolerance (None: not recorded on both sides)."""
    if a is None or b is None:
        return None
    if a.dtype.kind != "f" or a.shape != b.shape:
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return measure("in", a, ref if ref is not None and ref.shape == a.shape else None, b).passed
