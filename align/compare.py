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


def _torch_run(model, inputs):
    import torch
    rec, handles = _Recorder(), []
    for name, module in model.named_modules():
        handles.append(module.register_forward_hook(rec.hook(name or "(model)")))
    try:
        with torch.no_grad():
            call(model, inputs, torch.from_numpy)
    finally:
        for h in handles:
            h.remove()
    return rec


def _paddle_run(model, inputs, mapped_names):
    import paddle
    rec, handles = _Recorder(), []
    for name, layer in model.named_sublayers(include_self=True):
        handles.append(layer.register_forward_post_hook(rec.hook(mapped_names.get(name, name) or "(model)")))
    try:
        with paddle.no_grad():
            call(model, inputs, paddle.to_tensor)
    finally:
        for h in handles:
            h.remove()
    return rec


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
        row = calibrated.Row(key, tuple(a.shape), float("nan"), float("nan"), float("nan"), float("nan"))
        if b is None:
            row.problem = "no counterpart in the Paddle model"
        elif a.shape != b.shape or a.dtype != b.dtype:
            row.problem = f"torch {a.dtype}{list(a.shape)} vs paddle {b.dtype}{list(b.shape)}"
        elif a.dtype.kind == "f" and not (np.isfinite(a).all() and np.isfinite(b).all()):
            row.problem = "NaN or Inf"
        else:
            d = np.abs(a.astype(np.float64) - b.astype(np.float64))
            row.max, row.mean = (float(d.max()), float(d.mean())) if d.size else (0.0, 0.0)
            exact = ref.astype(np.float64) if ref is not None else a.astype(np.float64)
            row.err32 = float(np.abs(a.astype(np.float64) - exact).max()) if a.size else 0.0
            row.scale = float(np.abs(exact).max()) if a.size else 0.0
            call = key.split("[")[0].split(":")[0]
            row.input_ok = _input_ok(t32.inputs.get(call), t64.inputs.get(call), pd.inputs.get(call))
        row.final = key.startswith("(model)")
        report.rows.append(row)
    return report


def _first_root(order):
    return next((k for k in order if k.startswith("(model)")), None)


def _input_ok(a, ref, b):
    if a is None or b is None or a.shape != b.shape or a.dtype.kind != "f":
        return None if a is None or b is None else (a.shape == b.shape and bool(np.array_equal(a, b)))
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    exact = ref.astype(np.float64) if ref is not None and ref.shape == a.shape else a.astype(np.float64)
    row = calibrated.Row("in", a.shape, float(d.max()) if d.size else 0.0, float(d.mean()) if d.size else 0.0,
                         float(np.abs(a.astype(np.float64) - exact).max()) if a.size else 0.0,
                         float(np.abs(exact).max()) if a.size else 0.0)
    return row.passed
