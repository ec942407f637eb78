"""Down to the call: within the module compare_forward names as where the runs part, the first framework call whose
output differs, named on each side with the line of the model's source that made it (report.first_call).

The module is run once more on each side, on torch's recorded input (its first argument forced, as isolate does),
the run stopped as it returns; every framework call made inside it is traced with its first tensor argument as it
was called and its first tensor output as it returned (an in-place ReLU after it changes neither):
* torch: a torch.overrides.TorchFunctionMode, which sees every torch function and Tensor method (the outermost
  call only: torch's own calls inside it are not traced);
* Paddle, which has no such hook: paddle.nn.functional's and paddle.tensor's functions and the Tensor's methods
  replaced by tracing wrappers for the run (a call inside a traced call is not traced), and put back.
torch's module is run a third time in float64 (twin.float64_run), traced the same: each call's own yardstick.
The two lists of calls with a floating output are paired in order where their output shapes agree (the longest
such pairing), and the first pair whose outputs differ by calibrated.measure, the module verdict's own rule, is
named, if its input is within that rule: else the difference was made by a call the pairing skipped, and no call
is named (report.first_call.why says why, in one line), never a false place.
"""
import contextlib
import functools
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from portcheck.core import calibrated
from portcheck.forward.twin import float64_inputs, float64_run
from portcheck.mapping.trace import call, first_input, hook_points, is_torch, next_call, tensors
from portcheck.core.keys import ROOT, module_of, split_key

_HERE = str(Path(__file__).resolve().parent.parent) + os.sep  # the library's frames are never the model's source line


@dataclass
class Site:
    """One framework call: the function, and the line of the model's source that called it."""
    name: str  # torch.nn.functional.relu, paddle.nn.functional.leaky_relu, torch.Tensor.add_
    file: str  # the first file outside the framework (and this library) on the call's stack, "" when none
    line: int

    def __str__(self) -> str:
        return f"{self.name} at {Path(self.file).name}:{self.line}" if self.file else self.name


@dataclass
class FirstCall:
    """report.first_call: the first pair of calls whose outputs differ inside the module traced, or why none is."""
    module: tuple        # (torch's call, Paddle's call) traced: the module named as where the runs part
    torch: Site = None
    paddle: Site = None
    row: object = None   # diff.KeyResult: the two calls' outputs, by the module verdicts' rule (calibrated.measure)
    why: str = ""        # "" when the pair is named; else why no call is named
    index: tuple = ()    # (torch's, Paddle's) position of the pair among each side's calls with a floating output

    @property
    def found(self) -> bool:
        return not self.why

    def line(self) -> str:
        t, p = self.module
        where = t if t == p else f"{t} (Paddle: {p})"
        if self.why:
            return f"{where}: no framework call named inside it: {self.why}"
        return (f"{where}: the first call whose output differs: torch {self.torch} against Paddle {self.paddle} "
                f"(max diff {self.row.max:.3e}, allowed {self.row.allowed:.3e}; their inputs agree)")


@dataclass
class _Traced:
    site: Site
    x: np.ndarray  # the first tensor argument as the call began (None: none)
    y: np.ndarray  # the first tensor output as the call returned


class _Done(Exception):
    """Raised as the traced module returns: nothing after it is needed."""


class _TooLarge(Exception):
    """Raised when a trace's copies pass LIMIT: a module as large as a whole LLM is not traced."""


LIMIT = 256 << 20  # bytes of inputs and outputs one trace copies, at most


def _copy(t) -> np.ndarray:
    if hasattr(t, "detach"):
        t = t.detach().cpu()
        return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy().copy()  # numpy has no bfloat16
    return np.array(t.numpy(), copy=True)


def _first_tensor(value):
    return next((t for _, t in tensors("", value)), None)


def _site(name: str, skip: tuple, keep: tuple):
    """name, at the innermost frame outside the framework's library (`skip`, but for `keep`); None when that frame
    is this library's (float64_as_called casting a module's weights: no call of the model's)."""
    frame = sys._getframe(3)
    while frame is not None:
        file = frame.f_code.co_filename
        if file.startswith(_HERE):
            return None
        if not file.startswith("<") and not (file.startswith(skip) and not file.startswith(keep)):
            return Site(name, file, frame.f_lineno)
        frame = frame.f_back
    return Site(name, "", 0)


def _record(out: list, name: str, skip, keep, args, kwargs, run):
    """run() as a traced call: its first tensor argument before, its first tensor output after."""
    site = _site(name, skip, keep)
    if site is None:
        return run()
    x = first_input(args, kwargs)[1]
    x = None if x is None else _copy(x)
    result = run()
    y = _first_tensor(result)
    if y is not None:
        out.append(_Traced(site, x, _copy(y)))
        out.bytes += out[-1].y.nbytes + (0 if x is None else x.nbytes)
        if out.bytes > LIMIT:
            raise _TooLarge
    return result


class _Calls(list):
    """The calls of one trace, and the bytes their copies hold."""
    bytes = 0


@contextlib.contextmanager
def _torch_traced(out: list):
    import torch
    from torch.overrides import TorchFunctionMode, resolve_name
    skip = (str(Path(torch.__file__).resolve().parent) + os.sep,)  # torchvision's files are the model's source
    # torch's Transformer layers are a model's source as a model's own blocks are: their line calls the layer
    keep = (str(Path(torch.__file__).resolve().parent / "nn" / "modules" / "transformer.py"),)

    class Tracer(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = resolve_name(func) or getattr(func, "__qualname__", repr(func))
            return _record(out, name, skip, keep, args, kwargs, lambda: func(*args, **kwargs))
    with Tracer():
        yield


# Tensor methods Paddle defines apart from its functions (its arithmetic and indexing), traced too
_DUNDERS = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__matmul__", "__rmatmul__", "__pow__", "__rpow__", "__neg__", "__getitem__", "__iadd__", "__isub__",
            "__imul__", "__itruediv__")


def _paddle_targets():
    """[(owner, attribute, function, public name)] of what Paddle's tracing replaces: every function of
    paddle.nn.functional's and paddle.tensor's modules (a Layer calls F.conv._conv_nd, F.leaky_relu), the same
    functions where paddle and paddle.Tensor hold them, and the Tensor's arithmetic."""
    import paddle
    import paddle.nn.functional as F
    mods = [m for n, m in list(sys.modules.items()) if m is not None and
            (n.startswith(("paddle.nn.functional", "paddle.tensor.")) or n in ("paddle.tensor", "paddle"))]
    names = {}  # id(function) -> the name it is said by: paddle.nn.functional's first, then paddle's
    for prefix, mod in (("paddle.nn.functional.", F), ("paddle.", paddle)):
        for attr, fn in vars(mod).items():
            if inspect.isfunction(fn):
                names.setdefault(id(fn), prefix + attr)
    seen = set()
    for mod in mods:
        for attr, fn in list(vars(mod).items()):
            if inspect.isfunction(fn) and (fn.__module__ or "").startswith("paddle.") and not attr.startswith("__"):
                names.setdefault(id(fn), f"{fn.__module__}.{fn.__qualname__}")
                seen.add(id(fn))
    # wherever Paddle's own modules hold them: a Layer's module imports its function by name (BatchNorm's batch_norm)
    out = [(mod, attr, fn, names[id(fn)]) for n, mod in list(sys.modules.items())
           if mod is not None and (n == "paddle" or n.startswith("paddle.")) and hasattr(mod, "__dict__")
           for attr, fn in list(vars(mod).items()) if id(fn) in seen and inspect.isfunction(fn)]
    for attr, fn in list(vars(paddle.Tensor).items()):
        if (inspect.isfunction(fn) and id(fn) in seen) or attr in _DUNDERS:
            out.append((paddle.Tensor, attr, fn, names.get(id(fn), f"paddle.Tensor.{attr}")))
    return out


@contextlib.contextmanager
def _paddle_traced(out: list):
    import paddle
    root = Path(paddle.__file__).resolve().parent
    # paddle.vision's and paddle.text's models are model source, the rest of Paddle its library; so are its
    # Transformer layers (paddlenlp's BERT is paddle.nn.TransformerEncoder): their line calls q_proj, where the line
    # above them is paddlenlp's encoder layer forward (model_outputs.py, which replaces Paddle's), calling the attention
    skip = (str(root) + os.sep,)
    keep = (str(root / "vision") + os.sep, str(root / "text") + os.sep, str(root / "nn" / "layer" / "transformer.py"))
    depth = [0]

    def wrapped(fn, name):
        @functools.wraps(fn)
        def traced(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1  # reading a value (.numpy()) is no call of the model's
            try:
                return _record(out, name, skip, keep, args, kwargs, lambda: fn(*args, **kwargs))
            finally:
                depth[0] -= 1
        return traced
    made, replaced = {}, []
    try:
        for owner, attr, fn, name in _paddle_targets():
            if id(fn) not in made:
                made[id(fn)] = wrapped(fn, name)
            try:
                setattr(owner, attr, made[id(fn)])
            except (AttributeError, TypeError):  # an attribute that cannot be set: that place is not traced
                continue
            replaced.append((owner, attr, fn))
        yield
    finally:
        for owner, attr, fn in reversed(replaced):
            setattr(owner, attr, fn)


def trace(model, inputs, target: str, x, float64=False) -> tuple:
    """([_Traced] of every framework call inside call `target` of `model`, error): its first input replaced by `x`
    (torch's recorded one; None: its own), the run stopped as it returns. float64: torch's model in float64
    (twin.float64_run). error: the line the run stopped on before the call returned, else ""."""
    torch_side = is_torch(model)
    name, out, counts = module_of(target), _Calls(), {}
    state = {"tracing": None, "error": ""}
    if torch_side:
        import torch
        lib, to_tensor, traced = torch, torch.from_numpy, _torch_traced
        like = lambda t: torch.from_numpy(np.array(x, dtype=np.float64 if float64 and x.dtype.kind == "f"
                                                   else None)).to(torch.float64 if float64 and t.is_floating_point()
                                                                   else t.dtype)
    else:
        import paddle
        lib, to_tensor, traced = paddle, paddle.to_tensor, _paddle_traced
        like = lambda t: paddle.to_tensor(np.asarray(x), dtype=t.dtype)

    def pre(module, args, kwargs):
        if next_call(counts, name) != target:
            return None
        state["tracing"] = traced(out)
        where, t = first_input(args, kwargs)
        if x is not None and t is not None and tuple(t.shape) == x.shape:
            t = like(t)
            args, kwargs = (args[:where] + (t,) + args[where + 1:], kwargs) if isinstance(where, int) else \
                (args, {**kwargs, where: t})
        state["tracing"].__enter__()
        return args, kwargs

    def post(module, args, kwargs, output):
        if state["tracing"] is not None:
            state["tracing"].__exit__(None, None, None)
            state["tracing"] = None
            raise _Done

    def run():
        out.clear(), counts.clear()
        out.bytes = 0
        handles = [h for n, p, q in hook_points(model) if n == name for h in (p(pre), q(post))]
        try:
            with lib.no_grad():
                call(model, float64_inputs(inputs) if float64 else inputs, to_tensor)
            return "the run ended before the module returned"
        except _Done:
            return ""
        except _TooLarge:
            return f"its calls' inputs and outputs pass {LIMIT >> 20} MB: too large to trace"
        except Exception as e:  # noqa: BLE001 - a module that cannot run on torch's values: said, not raised
            return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
        finally:
            if state["tracing"] is not None:
                state["tracing"].__exit__(None, None, None)
                state["tracing"] = None
            for h in handles:
                h.remove()
    error = float64_run(model, run, lambda e: bool(e)) if float64 else run()
    return [c for c in out if c.y.dtype.kind == "f"], error


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1].strip("_")  # torch.Tensor.add_ and paddle.Tensor.__add__: add


def _aligned(ts: list, ps: list) -> list:
    """[(i, j)]: the pairing in order of torch's and Paddle's calls whose outputs agree in shape, the one scoring
    most, a pair of functions of the same name scoring twice (a call one side lacks is left out, not paired with
    the next call of its shape)."""
    score = lambda a, b: 0 if a.y.shape != b.y.shape else 2 if _short(a.site.name) == _short(b.site.name) else 1
    n, m = len(ts), len(ps)
    best = np.zeros((n + 1, m + 1), dtype=np.int64)
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            s = score(ts[i], ps[j])
            best[i, j] = max(best[i + 1, j], best[i, j + 1], best[i + 1, j + 1] + s if s else 0)
    out, i, j = [], 0, 0
    while i < n and j < m:
        s = score(ts[i], ps[j])
        if s and best[i, j] == best[i + 1, j + 1] + s:
            out.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1, j] >= best[i, j + 1]:
            i += 1
        else:
            j += 1
    return out


def locate(torch_model, paddle_model, inputs, torch_record: dict, t_call: str, p_call: str) -> FirstCall:
    """The first pair of framework calls whose outputs differ inside torch's call `t_call` and Paddle's `p_call`,
    each run on torch's recorded first input of `t_call`."""
    found = FirstCall((t_call, p_call))
    if p_call is None:
        found.why = "it has no Paddle call of its own to trace (a chain one side computes whole)"
        return found
    x = torch_record.get(f"in/{t_call}")
    x = None if x is None else np.asarray(x)
    ts, t_error = trace(torch_model, inputs, t_call, x)
    ps, p_error = trace(paddle_model, inputs, p_call, x)
    refs, r_error = trace(torch_model, inputs, t_call, x, float64=True) if not t_error else ([], "")
    error = next((f"the {side} run stopped: {e}" for side, e in (("torch", t_error or r_error), ("Paddle", p_error))
                  if e), "")
    if error or not ts or not ps:
        side = "torch" if not ts else "Paddle"
        found.why = error or f"the {side} module made no framework call with a floating output"
        return found
    if [c.y.shape for c in ts] != [c.y.shape for c in refs]:
        found.why = "torch's float64 run made other calls than its float32 run (the yardstick of each call)"
        return found
    aligned, last = _aligned(ts, ps), (-1, -1)
    for i, j in aligned:
        t, ref, p = ts[i], refs[i], ps[j]
        row = calibrated.measure(t.site.name, t.y, ref.y, p.y)
        if row.passed:
            last = i, j
            continue
        if not row.judged:
            found.why = f"the outputs of torch's {t.site} and Paddle's {p.site} could not be judged: {row.problem}"
            return found
        x_ok = t.x is not None and p.x is not None and t.x.shape == p.x.shape and t.x.dtype == p.x.dtype and (
            calibrated.measure("in", t.x, ref.x, p.x).passed if t.x.dtype.kind == "f" else np.array_equal(t.x, p.x))
        if not x_ok:
            between = [f"torch's {c.site}" for c in ts[last[0] + 1:i]] + \
                [f"Paddle's {c.site}" for c in ps[last[1] + 1:j]]
            found.why = (f"torch's {t.site} and Paddle's {p.site} (paired by their place and output shape) differ, "
                         "but so do their inputs: " + (f"made by a call paired with none: {', '.join(between[:4])}"
                                                       if between else "made by a call the tracer does not see"))
            return found
        found.torch, found.paddle, found.row, found.index = t.site, p.site, row, (i, j)
        return found
    paired_t, paired_p = {i for i, _ in aligned}, {j for _, j in aligned}
    left = [f"torch's {c.site}" for i, c in enumerate(ts) if i not in paired_t] + \
        [f"Paddle's {c.site}" for j, c in enumerate(ps) if j not in paired_p]
    found.why = (f"every pair of calls within its rule ({len(aligned)} paired by place and shape of {len(ts)} torch "
                 f"and {len(ps)} Paddle calls): the difference is in a call paired with none"
                 + (f" ({', '.join(left[:4])}{', ...' if len(left) > 4 else ''})" if left else ""))
    return found


def first_call(torch_model, paddle_model, inputs, torch_record: dict, report) -> FirstCall:
    """locate() inside the call report.first_diverging names, or, where its input differs and came from no module,
    inside the module whose forward computed that input (its caller: a functional GELU in a block's forward)."""
    name = report.first_diverging
    row = next((r for r in report.paired if r.name == name), None)
    parent, before, _ = str(name).partition(" (before ")  # a parent's own computation before its child: the parent
    t_call = parent if before else row.input_unsourced if row is not None and row.input_unsourced else \
        split_key(f"out/{name}")[1]
    p_call = ROOT if t_call == ROOT else report.pairing.pairs.get(t_call)
    return locate(torch_model, paddle_model, inputs, torch_record, t_call, p_call)
