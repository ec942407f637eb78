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
computation differs is named, however many. Paddle's run comes first and keeps what it computes; torch's values
are judged as its run computes them. A value forced and passed on unchanged (a call's input is mostly the output
forced just before it) is torch's recorded one: named, not kept again.
"""
import numpy as np

from portcheck import calibrated
from portcheck.compare import (_flatten, _float64, _remember, call, first_input, float64_run, hook_points, is_torch,
                               judge_one, tensors, version)
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


def forced_run(model, inputs, torch_record: dict, calls: dict, leaves: dict, keep) -> tuple:
    """One run of `model` on `inputs` in which every call in `calls` ({this side's call: torch's call}) computes
    from torch's recorded values. keep(key, tensor, source) is given what this side computed, under this side's
    keys: in/<call>, the input it computed for the call; out/<call>..., each tensor the call returned. source:
    the torch record key of the value the tensor holds when it is one forced from torch's record and passed on
    unchanged (most inputs: the output forced just before; a container's output: its last child's), else None.
    keep(None, None, None): the run starts again (float64_run makes it twice), what was kept is void. Returns
    (parents, error): parents {call: the innermost forced call it ran inside, or None}; error: the line the run
    stopped on, or None. leaves: {this side's output key: torch's}, the output tensors replaced by torch's."""
    torch_side = is_torch(model)
    if torch_side:
        import torch
        lib = torch
        # a copy (the record may be a read-only map), widened to float64 as it is made in torch's float64 run
        like = lambda array, t: torch.from_numpy(np.array(array, dtype=np.float64 if t.dtype == torch.float64
                                                          else None)).to(t.dtype)
    else:
        import paddle
        lib = paddle
        like = lambda array, t: paddle.to_tensor(np.asarray(array), dtype=t.dtype)  # to_tensor copies
    parents, counts, running, stack = {}, {}, {}, []
    made = {}  # {(id, in-place version): torch record key} of the tensors forced, while they live

    def forced(key, value, tensor):
        """tensor replaced by torch's value (record key `key`); remembered when it holds that value exactly (the
        same dtype, or a float widened to float64: torch's float64 run)."""
        x = like(value, tensor)
        if str(x.dtype).rsplit(".", 1)[-1] in (value.dtype.name, "float64" if value.dtype.kind == "f" else ""):
            _remember(made, (id(x), version(x)), key, x)
        return x

    def kept(prefix, value):
        for key, tensor in tensors(prefix, value):
            keep(key, tensor, made.get((id(tensor), version(tensor))))

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
            kept(f"in/{this}", x)
            if tuple(x.shape) != value.shape:
                return None
            x = forced(f"in/{calls[this]}", value, x)
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
            kept(f"out/{this}", output)

            def torch_value(key, tensor):
                value = torch_record.get(leaves.get(key, ""))
                return tensor if value is None or tuple(tensor.shape) != value.shape else forced(leaves[key], value, tensor)
            return _rebuilt(output, f"out/{this}", torch_value)
        return hook

    wanted = {module_of(c) for c in calls}

    def run():
        """The forced run, from the start (float64_run may make it twice): its error's line, or None."""
        for state in (made, parents, counts, running):
            state.clear()
        keep(None, None, None)
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
    return parents, error


def judge(torch_model, paddle_model, inputs, torch_record: dict, report, record_dir=None) -> None:
    """Run both models once more, every paired call on torch's recorded values, and set report.isolated (a result
    per paired output and computed input), report.parents and report.isolation_stopped. Paddle's run first: what
    it computes is kept (in record_dir/isolated-paddle with record_dir, portcheck.spill). Then torch's, in
    float64: each value it computes is judged as it is computed, against the kept one, and not kept (at LLM size
    the largest record of the run, written and read back for nothing)."""
    keys = report.counterparts
    p_kept, passed, seen = store(record_dir, "isolated-paddle"), {}, {}

    def keep_paddle(key, tensor, source):
        if key is None:  # Paddle's run is made once
            return
        if source is not None:
            passed[key] = source  # torch's own recorded value: read from there, not written again
        else:
            _flatten(key, tensor, p_kept, seen)
    _, p_error = forced_run(paddle_model, inputs, torch_record, {p: t for t, p in report.pairing.pairs.items()},
                            {p: t for t, p in keys.items() if t.startswith("out/")}, keep_paddle)
    if isinstance(p_kept, Spill):
        p_kept.close()
    rows = {}

    def judge_torch(key, tensor, source):
        if key is None:
            rows.clear()
        elif key in keys:
            # a value passed on is torch's recorded one, widened to float64 exactly: measure widens it the same
            ref = torch_record[source] if source is not None else tensor.detach().cpu().numpy()
            rows[key] = _row(key, torch_record.get(key), ref, passed, p_kept, keys[key], torch_record)
    parents, t_error = forced_run(torch_model, inputs, torch_record, {t: t for t in report.pairing.pairs},
                                  {k: k for k in torch_record if k.startswith("out/")}, judge_torch)
    report.parents = parents
    report.isolation_stopped = {side: e for side, e in (("torch", t_error), ("paddle", p_error)) if e}
    report.isolated = [rows[k] for k in keys if rows.get(k) is not None]


def _row(key, a, ref, passed, p_kept, p_key, torch_record):
    """The result of one torch key (its fp32 record `a`, its float64 value computed on torch's values `ref`) against
    Paddle's kept value, or None when there is nothing to judge."""
    kind, call_, _ = split_key(key)
    if kind == "in" and (call_ == ROOT or a is None or a.dtype.kind != "f"):
        return None  # the model's own input, an id or a mask: nothing computed it
    if a is None:
        return None  # an output the float32 run did not give: nothing to hold it to
    name = key[len("out/"):] if kind == "out" else f"{call_} (its input)"
    b = torch_record.get(passed[p_key]) if p_key in passed else p_kept.get(p_key)
    if b is None:
        return calibrated.unjudged(name, a.shape, "the Paddle module did not run on torch's values")
    row = judge_one(name, a, ref, b)
    if kind == "in" and row.max == 0 and row.err32 == 0:
        return None  # a value forced before it, passed on as it was: nothing computed it
    return row


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
