"""Each module judged on its own computation: compare_forward(..., isolate=True).

In the ordinary (cumulative) run a module's input is what the modules before it computed on its own side: a
difference made early reaches every module after it, and only the first module over tolerance is named. Here
both sides compute every paired module from the same values, torch's recorded fp32 ones (PaDiff's single_step
does the same): one more run of each side, with hooks on every paired module call.

* Before the call, the input its own side computed (from the values forced before it) is kept, then replaced
  by the input torch recorded for it.
* After the call, the output it computed is kept, then replaced by the output torch recorded for it.

A module's kept output is its own computation (its paired children's outputs are torch's) on torch's input;
a kept input is what its parent computed between the children before it (a functional activation, a residual
add). The torch run is in float64, each module only while it runs (compare.float64_as_called: no second model
in float64, one module's weights at a time), so it gives each such computation's
exact value on the same fp32 values: torch's recorded fp32 output against it is that module's own fp32 error,
the yardstick (calibrated.measure) its Paddle counterpart's kept output is held to. Every module whose own
computation differs is named, however many.
"""
import numpy as np

from portcheck import calibrated
from portcheck.compare import _flatten, _float64, call, first_input, float64_run, hook_points, is_torch, judge_one
from portcheck.pairing import ROOT, module_of, split_key
from portcheck.spill import Spill, store

ERRORS = (RuntimeError, ValueError, TypeError, IndexError)  # a model that cannot run on forced values


def _rebuilt(value, key, forced):
    """value with each tensor replaced by forced(its record key, tensor): tuples and lists rebuilt, dicts and
    ModelOutputs changed in place (transformers' ModelOutput keeps its attributes in step)."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        return forced(key, value)
    if isinstance(value, dict) or hasattr(value, "items"):
        for k, v in list(value.items()):
            new = _rebuilt(v, f"{key}:{k}", forced)
            if new is not v:
                value[k] = new
        return value
    if isinstance(value, (tuple, list)):
        items = [_rebuilt(v, f"{key}[{i}]", forced) for i, v in enumerate(value)]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def forced_run(model, inputs, torch_record: dict, calls: dict, leaves: dict, kept=None) -> tuple:
    """One run of `model` on `inputs` in which every call in `calls` ({this side's call: torch's call}) computes
    from torch's recorded values. Returns (kept, parents, error): kept {in/<call>: the input this side computed
    for it, out/<call>...: what it computed}, under this side's keys; parents {call: the innermost forced call
    it ran inside, or None}; error: the line the run stopped on, or None. leaves: {this side's output key:
    torch's}, the output tensors replaced by torch's. kept: where to keep them (a dict or a spill.Spill)."""
    torch_side = is_torch(model)
    if torch_side:
        import torch
        lib = torch
        like = lambda array, t: torch.from_numpy(np.array(array)).to(t.dtype)
    else:
        import paddle
        lib = paddle
        like = lambda array, t: paddle.to_tensor(np.array(array), dtype=t.dtype)
    kept = {} if kept is None else kept
    parents, counts, running, stack = {}, {}, {}, []

    def pre_hook(name):
        def hook(module, args, kwargs):
            n = counts[name] = counts.get(name, 0) + 1
            this = name if n == 1 else f"{name}#{n}"
            running.setdefault(name, []).append(this)
            if this not in calls:
                return None
            parents[this] = stack[-1] if stack else None
            stack.append(this)
            where, x = first_input(args, kwargs)
            value = torch_record.get(f"in/{calls[this]}")
            if x is None or value is None:
                return None
            _flatten(f"in/{this}", x, kept)
            if tuple(x.shape) != value.shape:
                return None
            x = like(value, x)
            if isinstance(where, int):
                return args[:where] + (x,) + args[where + 1:], kwargs
            return args, {**kwargs, where: x}
        return hook

    def post_hook(name):
        def hook(module, args, kwargs, output):
            this = running[name].pop()
            if this not in calls:
                return None
            stack.pop()
            _flatten(f"out/{this}", output, kept)

            def forced(key, tensor):
                value = torch_record.get(leaves.get(key, ""))
                return tensor if value is None or tuple(tensor.shape) != value.shape else like(value, tensor)
            return _rebuilt(output, f"out/{this}", forced)
        return hook

    wanted = {module_of(c) for c in calls}

    def run():
        """The forced run, from the start (float64_run may make it twice): its error's line, or None."""
        for state in (kept, parents, counts, running):
            state.clear()
        handles = []
        for name, pre, post in hook_points(model):
            if name in wanted:
                handles += [pre(pre_hook(name)), post(post_hook(name))]
        try:
            with lib.no_grad():
                if torch_side:
                    call(model, _float64(inputs), torch.from_numpy)
                else:
                    call(model, inputs, paddle.to_tensor)
        except ERRORS as e:
            line = next((x.strip() for x in str(e).splitlines() if x.strip()), type(e).__name__)
            return f"{type(e).__name__}: {line[:300]}"
        finally:
            stack.clear()
            for h in handles:
                h.remove()
        return None
    error = float64_run(model, run, lambda error: error is not None) if torch_side else run()
    if isinstance(kept, Spill):
        kept.close()
    return kept, parents, error


def judge(torch_model, paddle_model, inputs, torch_record: dict, report, record_dir=None) -> None:
    """Run both models once more, every paired call on torch's recorded values, and set report.isolated (a result
    per paired output and computed input), report.parents and report.isolation_stopped. record_dir: what each
    run keeps goes to record_dir/isolated-torch and isolated-paddle (portcheck.spill)."""
    keys = report.counterparts
    outs = {k: k for k in torch_record if k.startswith("out/")}
    t_kept, parents, t_error = forced_run(torch_model, inputs, torch_record, {t: t for t in report.pairing.pairs},
                                          outs, store(record_dir, "isolated-torch"))
    p_kept, _, p_error = forced_run(paddle_model, inputs, torch_record,
                                    {p: t for t, p in report.pairing.pairs.items()},
                                    {p: t for t, p in keys.items() if t.startswith("out/")},
                                    store(record_dir, "isolated-paddle"))
    report.parents = parents
    report.isolation_stopped = {side: e for side, e in (("torch", t_error), ("paddle", p_error)) if e}
    rows = []
    for key, p_key in keys.items():
        kind, call_, _ = split_key(key)
        a, ref, b = torch_record.get(key), t_kept.get(key), p_kept.get(p_key)
        if kind == "in" and (call_ == ROOT or a is None or a.dtype.kind != "f" or ref is None):
            continue  # the model's own input, an id or a mask: nothing computed it
        name = key[len("out/"):] if kind == "out" else f"{call_} (its input)"
        if a is None or ref is None:
            continue  # an output the float64 run did not give: nothing to hold it to
        if b is None:
            rows.append(calibrated.unjudged(name, a.shape, "the Paddle module did not run on torch's values"))
            continue
        row = judge_one(name, a, ref, b)
        if kind == "in" and row.max == 0 and row.err32 == 0:
            continue  # a value forced before it, passed on as it was: nothing computed it
        rows.append(row)
    report.isolated = rows


def differing(report) -> list:
    """The modules whose own computation differs, in torch's run order: a module whose output is over on
    torch's input, or the parent that computed a child's input (named with the child)."""
    out = []
    for row in report.isolated or []:
        if row.passed:
            continue
        if row.name.endswith(" (its input)"):
            child = row.name[:-len(" (its input)")]
            parent = report.parents.get(child) or ROOT
            name = f"{parent} (before {child})"
        else:
            name = split_key(f"out/{row.name}")[1]
        if name not in out:
            out.append(name)
    return out
