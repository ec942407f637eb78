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
add). The torch run is in float64, each module only while it runs (twin.float64_as_called: no second model
in float64, one module's weights at a time), so it gives each such computation's
exact value on the same fp32 values: torch's recorded fp32 output against it is that module's own fp32 error,
the yardstick (calibrated.measure) its Paddle counterpart's kept output is held to. Every module whose own
computation differs is named, however many. Paddle's run comes first: each value it keeps is held against torch's
recorded one at once (calibrated.against), and only those figures stay; torch's float64 values add torch's own
error to them as its run computes them (calibrated.own_error). A value forced and passed on unchanged (a call's
input is mostly the output forced just before it) is torch's recorded one: named, and judged from the record.
"""
import dataclasses

import numpy as np

from portcheck.core import calibrated
from portcheck.mapping import fused
from portcheck.forward.judging import as_torch_holds, in_own_form, judge_against, judge_one
from portcheck.forward.twin import float64_inputs, float64_run
from portcheck.mapping.trace import (activated, call, first_input, hook_points, is_torch, next_call, reader,
                                     remember, tensors, values, version)
from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping import packed, regroup
from portcheck.mapping.loose import axis_orders, in_axis_order
from portcheck.mapping.alignment import _broadcast, reshaped
from portcheck.core.spill import identity, shape

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


def forced_run(model, inputs, torch_record: dict, calls: dict, leaves: dict, keep, free: dict = None,
               wild: list = None, parts: dict = None, through: set = (), applied: dict = None) -> tuple:
    """One run of `model` on `inputs` in which every call in `calls` ({this side's call: torch's call}) computes
    from torch's recorded values. keep(key, tensor, source) is given what this side computed, under this side's
    keys: in/<call>, the input it computed for the call; out/<call>..., each tensor the call returned. source:
    the torch record key of the value the tensor holds when it is one forced from torch's record and passed on
    unchanged (most inputs: the output forced just before; a container's output: its last child's), else None.
    keep(None, None, None): the run starts again (float64_run may make it again), what was kept is void. Returns
    (parents, error): parents {call: the innermost forced call it ran inside, or None}; error: the line the run
    stopped on, or None. leaves: {this side's output key: torch's}, the output tensors replaced by torch's.
    free: the float64 tensors torch's run casts into (twin.float64_as_called). wild: a list keep fills when
    torch's float64 value overflowed where its float32 one did not: that run failed too, float64_run tries on.
    parts: {module: Fused} of this side (portcheck.mapping.fused): each call of such a module is its parts' calls, keys
    and leaves, its output forced as the whole made of torch's values of its parts. through: calls of `calls` that
    compute on what this side computed before them (the last call of a chain one module of the other side computes
    whole: pairing.Pairing.composed, paddle_composed), their input kept, not forced. applied: {torch output key: the
    activation torch's forward applies to it next (pairing.Pairing.applied)}: an output forced as that key's is
    forced as the activation's (Paddle's BatchNorm(act='relu') outputs it)."""
    parts, applied = parts or {}, applied or {}
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
            remember(made, (id(x), version(x)), key, x)
        return x

    def torch_shaped(key, value, tensor):
        """tensor replaced by torch's value, reshaped where this side holds the same values in another shape (a
        Linear fed [batch * seq, hidden] against [batch, seq, hidden]: judging.judge_against); None when it fits
        neither."""
        where = torch_record.get(packed.PACKED + key)
        padded = None if where is None else packed.as_padded(where, value, values(tensor))
        if padded is not None:  # torch's packed sequence, this side's padded batch: its real tokens torch's
            return like(padded, tensor)
        order = in_axis_order(value, values(tensor)) if axis_orders(value.shape, tuple(tensor.shape)) else None
        if order is not None:  # this side holds the same values in another axis order: fed in its own layout
            return like(np.ascontiguousarray(np.transpose(value, order)), tensor)
        if tuple(tensor.shape) == value.shape:
            # a router's probabilities where this side returns logits, or the converse (a router's output is 2-D)
            form = in_own_form(value, values(tensor)) if value.ndim == 2 and value.shape[-1] >= 2 else None
            return forced(key, value, tensor) if form is None else like(form, tensor)
        if reshaped(value.shape, tuple(tensor.shape)):  # not remembered as torch's value: it is not in its shape
            return like(np.reshape(value, tensor.shape), tensor)
        if regroup.regrouped(value.shape, tuple(tensor.shape)):  # heads split on this side: fed in its own layout
            own = regroup.as_other(value, tuple(tensor.shape), near=values(tensor))
            return like(np.ascontiguousarray(own), tensor)
        if _broadcast(value.shape, tuple(tensor.shape)) and \
                np.broadcast_shapes(value.shape, tuple(tensor.shape)) == tuple(tensor.shape):
            return like(np.broadcast_to(value, tensor.shape), tensor)  # torch's [seq, d] table, Paddle's [batch, seq, d]
        return None

    def kept(prefix, value):
        for key, tensor in fused.live(tensors(prefix, value), parts):
            keep(key, tensor, made.get((id(tensor), version(tensor))))

    def own(this) -> list:
        """The calls of `calls` this call is: its parts' for a fused module, else itself."""
        spec = parts.get(module_of(this))
        return [c for c in ([this] if spec is None else [split_key(fused.part_key(f"out/{this}", p))[1]
                                                         for p in spec.parts]) if c in calls]

    def pre_hook(name):
        def hook(module, args, kwargs):
            this = next_call(counts, name)
            running.setdefault(name, []).append(this)
            mine = own(this)
            if not mine:
                return None
            parents.update((c, stack[-1] if stack else None) for c in mine)
            stack.append(mine[0])
            where, x = first_input(args, kwargs)
            key = f"in/{calls[mine[0]]}"  # a fused module's parts read one input
            # a model output handed on whole, no tensor beside it (paddlenlp's OPTLMHead reads its last_hidden_state)
            holder = None if x is not None else next(
                (v for v in [*args, *(kwargs or {}).values()] if hasattr(v, "items")), None)
            if holder is not None:
                where, x = first_input((), dict(holder.items()))
            if x is None or key not in torch_record:
                return None
            kept(f"in/{this}", x)
            if this in through:
                return None
            held = made.get((id(x), version(x)))
            if held is not None and identity(torch_record, held) == identity(torch_record, key):
                return None  # torch's recorded value already (mostly the output forced just before): not copied again
            # an input the port takes an index of before its module (pairing.Pairing.applied's take rule): fed so
            value = activated(applied[key], torch_record[key]) if key in applied else torch_record[key]
            x = torch_shaped(key, value, x)
            if x is None:
                return None
            if key in applied:
                made.pop((id(x), version(x)), None)  # not torch's recorded value of the key: never its source
            if holder is not None:
                holder[where] = x
                return None
            if isinstance(where, int):
                return args[:where] + (x,) + args[where + 1:], kwargs
            return args, {**kwargs, where: x}
        return hook

    def post_hook(name):
        def hook(module, args, kwargs, output):
            this = running[name].pop()
            if not own(this):
                return None
            stack.pop()
            kept(f"out/{this}", output)
            spec = parts.get(module_of(this))

            def torch_value(key, tensor):
                if spec is not None:  # the whole, of torch's values of its parts (not one record key: not remembered)
                    whole = fused.joined(key, tuple(tensor.shape), spec, lambda k: torch_record.get(leaves.get(k, "")))
                    return tensor if whole is None else like(whole, tensor)
                value = torch_record.get(leaves.get(key, ""))
                if value is not None and leaves[key] in applied:
                    value = activated(applied[leaves[key]], value)  # not torch's recorded value
                    return like(value, tensor) if tuple(tensor.shape) == value.shape else tensor
                held = made.get((id(tensor), version(tensor)))
                if value is not None and held is not None and \
                        identity(torch_record, held) == identity(torch_record, leaves[key]):
                    return tensor  # torch's recorded value already (a container's output, its last child's): not copied

                forced_value = None if value is None else torch_shaped(leaves[key], value, tensor)
                return tensor if forced_value is None else forced_value
            return _rebuilt(output, f"out/{this}", torch_value)
        return hook

    wanted = {module_of(c) for c in calls} | set(parts)

    def run():
        """The forced run, from the start (float64_run may make it again): its error's line, or None."""
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
                    call(model, float64_inputs(inputs), torch.from_numpy)
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
    failed = lambda error: error is not None or bool(wild)
    error = float64_run(model, run, failed, free) if torch_side else run()
    return parents, error


def judge(torch_model, paddle_model, inputs, torch_record: dict, report, free: dict = None,
          paddle_parts: dict = None, paddle_kept=None) -> None:
    """Run both models once more, every paired call on torch's recorded values, and set report.isolated (a result
    per paired output and computed input), report.parents and report.isolation_stopped. Paddle's run first: each
    value it computes is held against torch's recorded one as it is computed (judging.judge_against: a few
    figures kept, not the value). Then torch's, in float64: each value it computes adds torch's own error to
    them (calibrated.own_error), and is not kept either: nothing of either run is held or written (at LLM size,
    Paddle's values alone were a record as large as the cumulative run's). free: the float64 tensors the
    cumulative float64 run gave back, cast into again. paddle_parts: the Paddle model's fused modules (torch's
    are in its record): each part computes on torch's values of its counterpart and is judged alone.
    paddle_kept: ([(key, value, source)], error) of a Paddle forced run made elsewhere (paddle_run: each rank of a
    split model, its values gathered), in place of running paddle_model here."""
    keys = isolated_keys(report.counterparts)
    applied = report.pairing.applied_to(keys)  # judged through the activation torch's forward applies to it
    torch_key = {}
    for t, p in keys.items():
        torch_key.setdefault(p, []).append(t)
    passed, halves, resized = {}, {}, set()

    def keep_paddle(key, tensor, source):
        if key is None:  # Paddle's run is made once
            return
        if source is not None:
            passed[key] = source  # torch's own recorded value: judged from there, not held again
            return
        for t in torch_key.get(key, ()):
            a = _judged(t, torch_record, applied)
            if a is None:
                continue
            b = as_torch_holds(torch_record, t, values(tensor))
            if a.dtype.kind in "biu" and t.startswith("in/") and (b.dtype.kind not in "biu" or b.shape != a.shape):
                continue  # the two calls' first arguments are different things (their signatures differ)
            if t.startswith("in/") and a.size != b.size:
                resized.add(t)  # a module one side runs before the boundary, the other after it: outputs judge it
                continue
            halves[t] = (calibrated.integers if a.dtype.kind in "biu" else judge_against)(_name(t), a, b)
    # a chain torch's module computes whole (pairing.Pairing.paddle_composed): Paddle's last call of it keeps its
    # output, computed from its first call's input, torch's (the first call's output is judged nowhere: not forced)
    if paddle_kept is None:
        p_error = paddle_run(paddle_model, inputs, torch_record, report, keep_paddle, paddle_parts)
    else:
        for key, value, source in paddle_kept[0]:
            keep_paddle(key, value, source)
        p_error = paddle_kept[1]
    rows, wild = {}, []

    def judge_torch(key, tensor, source):
        if key is None:
            rows.clear(), wild.clear()
        elif key in keys and source is not None and key.startswith("in/") and keys[key] in passed and \
                identity(torch_record, passed[keys[key]]) == identity(torch_record, source) == identity(torch_record, key):
            rows[key] = None  # one recorded value on all three sides, passed on as it was: nothing computed it
        elif key in resized or key in keys and key.startswith("in/") and keys[key] in passed and \
                np.prod(shape(torch_record, passed[keys[key]])) != np.prod(shape(torch_record, key)):
            # the two inputs of other sizes (Paddle's, or torch's recorded value it hands on as it was): a module
            # one side runs before the boundary, the other after it (ReXNet's pool: inside PaddleClas's features,
            # inside timm's head), judged by the outputs around it
            rows[key] = None
        elif key in keys:
            # a value passed on is torch's recorded one, widened to float64 exactly: measure widens it the same
            ref = torch_record[source] if source is not None else tensor.detach().cpu().numpy()
            rows[key] = _row(key, ref, keys[key], torch_record, passed, halves, applied)
            if rows[key] is not None and calibrated.OVERFLOWED in rows[key].problems:
                wild.append(key)
    # a chain a Paddle module computes whole (pairing.Pairing.composed): torch's last call of it keeps its output
    # computed whole from the first's input, as Paddle's module computes it: no output forced before the last's
    composing = report.pairing.composing()
    ends = {report.pairing.judged_as(t) for t in report.pairing.composed}
    parents, t_error = forced_run(torch_model, inputs, torch_record, {t: t for t in [*report.pairing.pairs, *ends]},
                                  {k: k for k in torch_record if k.startswith("out/") and
                                   (split_key(k)[1] not in composing or split_key(k)[1] in ends)},
                                  judge_torch, free, wild, fused.declared(torch_record), ends)
    report.parents = parents
    report.isolation_stopped = {side: e for side, e in (("torch", t_error), ("paddle", p_error)) if e}
    if t_error:  # what Paddle computed and torch's float64 run never reached: said, never dropped in silence
        for k in keys:
            if k not in rows and k in halves:
                rows[k] = calibrated.unjudged(halves[k].name, halves[k].shape, f"{calibrated.NOT_JUDGED} torch's "
                                              f"float64 run on torch's values (the library's yardstick) stopped "
                                              f"before it: {t_error}")
    report.isolated = [_as_composed(rows[k], composing) for k in keys if rows.get(k) is not None]


def paddle_run(paddle_model, inputs, torch_record: dict, report, keep, paddle_parts: dict = None):
    """The Paddle model's forced run of judge, every paired call on torch's values (torch_record's: a split model's
    rank is given its own part of each), each value it computes handed to keep(key, tensor, source): its error."""
    keys = report.counterparts
    p_ends = {chain[-1]: t for t, chain in report.pairing.paddle_composed.items()}
    # where a torch output meets Paddle's at a module paired with none (pairing._met): that module's input is
    # computed, kept, then forced as torch's reader of it reads it
    calls = forced(report.pairing.pairs, keys)
    met = {q: reader(torch_record, t) for t, q in report.pairing.met.items() if q not in calls}
    return forced_run(paddle_model, inputs, torch_record, {**calls, **p_ends, **{q: r for q, r in met.items() if r}},
                      {p: t for t, p in keys.items() if t.startswith("out/")}, keep, parts=paddle_parts,
                      through=set(p_ends), applied=report.pairing.applied_to(keys))[1]


def forced(pairs: dict, keys: dict) -> dict:
    """{Paddle call: torch call} of the pairs an isolated run computes from torch's values: each with counterpart keys
    (`keys`, outputs.counterparts'), but a pair outputs.apart names (held alike, computing otherwise), also one
    outputs.inline judges."""
    return {p: t for t, p in pairs.items() if f"in/{t}" in keys and not keys.get(f"out/{t}", "").startswith("in/")}


def isolated_keys(keys: dict) -> dict:
    """The counterpart keys (`keys`) an isolated run judges: all but an outputs.inline pair's first inputs (its
    Paddle module is not forced: forced()) and its reader's input, judged once, as that pair's output."""
    inlined = {p for t, p in keys.items() if t.startswith("out/") and p.startswith("in/")}
    return {t: p for t, p in keys.items() if not t.startswith("in/") or p not in inlined and
            not keys.get(f"out/{t[len('in/'):]}", "").startswith("in/")}


def _as_composed(row, composing: dict):
    """A chain's last output's row named by the chain's first module, which Paddle's computes whole."""
    kind, call_, rest = split_key(f"out/{row.name}")
    return dataclasses.replace(row, key=f"{composing[call_]}{rest}") if call_ in composing else row


def _judged(key, torch_record, applied=None):
    """torch's fp32 record of `key` when a module may have computed it, else None: the model's own input (nothing
    computed it), an output the float32 run did not give (nothing to hold it to). An integer or boolean input
    (relative-position buckets, a mask a parent computes) is judged exactly; one passed on from the model's
    input is equal on both sides and drops out (_row)."""
    kind, call_, _ = split_key(key)
    a = torch_record.get(key)
    if a is None or (kind == "in" and call_ == ROOT):
        return None
    return activated(applied[key], a) if key in (applied or {}) else a


def _name(key):
    kind, call_, _ = split_key(key)
    return key[len("out/"):] if kind == "out" else f"{call_} (its input)"


def _row(key, ref, p_key, torch_record, passed, halves, applied=None):
    """The result of one torch key (its float64 value computed on torch's values `ref`) against Paddle's value,
    or None when there is nothing to judge; applied: judged through the activation torch applies next (judge)."""
    a = _judged(key, torch_record, applied)
    if key in (applied or {}):
        ref = activated(applied[key], ref)
    if a is None:
        return None
    if p_key in passed and torch_record.get(passed[p_key]) is not None:
        row = judge_one(_name(key), a, ref, torch_record[passed[p_key]])
    elif key in halves:  # a copy: float64_run may make torch's run again
        row = calibrated.own_error(dataclasses.replace(halves[key], problems=list(halves[key].problems)), a, ref)
    elif key.startswith("in/") and a.dtype.kind in "biu":
        return None  # an integer argument Paddle's call does not take first
    else:
        return calibrated.unjudged(_name(key), a.shape, "the Paddle module did not run on torch's values")
    if key.startswith("in/") and row.max == 0 and row.err32 == 0:
        return None  # a value forced before it, passed on as it was: nothing computed it
    return row


def differing(report) -> list:
    """The modules whose own computation differs, in torch's run order: a module whose output is over on
    torch's input, or the parent that computed a child's input (named with the child)."""
    out = []
    for row in report.isolated or []:
        if row.passed or not row.judged:  # not judged: its yardstick failed, said by report.unjudged
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
