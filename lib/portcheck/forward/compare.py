"""compare_forward: every module's output of a torch model and its Paddle port, held to a tolerance
measured on the torch model itself (portcheck/calibrated.py), naming the module where they part. Records one
side's run (record_forward, record_value) and judges two (judge_forward); the pieces are below it: mapping's
trace (the run), twin (torch's float64 run), judging (one output against the other), outputs (the pairing of
two runs' outputs), result (ForwardReport); isolate and calls, which import none of this module, imported lazily."""
import contextlib
from pathlib import Path

import numpy as np

from portcheck.core import calibrated, spill
from portcheck.core.errors import PipelineError, first_line, raised_by
from portcheck.forward.judging import as_torch_holds, input_ok, judge_one
from portcheck.forward.chosen import checked_outputs
from portcheck.forward.outputs import judge_records
from portcheck.forward import routing
from portcheck.forward.result import ForwardReport
from portcheck.forward.twin import EAGER, F64, float64_inputs, float64_run
from portcheck.forward.twin import float64  # noqa: F401 (portcheck.compare.float64: the pipeline's scripts of before)
from portcheck.mapping import experts, fused, loose
from portcheck.mapping.pairing import ROOT
from portcheck.mapping.trace import (ALIVE, INPUTS, STOPPED, activated, call, check_models, first_input, framework_of,
                                     hook_points, is_torch, next_call, output_leaves, recorded, remember, stopped,
                                     tensors, trace, version)


def record_forward(model, inputs, record_dir=None) -> dict:
    """Every module's output and first input of one model, torch or Paddle, on numpy inputs, as a flat dict
    of numpy arrays in run order (see Recorder), named by the model's own module names, with each module's
    class and tensor shapes (mod/ keys, what pairing reads): what a pt_ or pd_ script saves for a check to
    judge with judge_forward. A torch model is run a second time in float64, each module in float64 only
    while it runs (float64_as_called; keys prefixed "f64:"): the yardstick of its own fp32 error. Its packed
    experts' choice, in both runs, is kept as compare_forward keeps it (mapping.experts.Routed: route/ keys), for a
    port's router returning its top k. Eval or train mode is the caller's. record_dir: each array is written to
    that folder as it is recorded (a spill.Spill, read back memory-mapped when judged), for runs whose records do not
    fit in memory."""
    checked_args(record_dir, None)
    out, routes = spill.store(record_dir, ""), {}
    # torch's choice of experts each block hands its packed experts, in both runs, kept as compare_forward keeps it:
    # a port's router returning its top k is judged on it where the other side is recorded apart (routing.compare)
    with experts.Routed(model, None, routes) if is_torch(model) else contextlib.nullcontext():
        trace(model, inputs, out)
    out.update(routes)
    if is_torch(model):
        import torch
        mark = len(out)

        def run():
            for key in list(out)[mark:]:  # a run the whole model's float64 replaces
                del out[key]
            routes.clear()
            with experts.Routed(model, None, routes, F64):
                return recorded(model, float64_inputs(inputs), torch.no_grad, torch.from_numpy, F64, out)
        float64_run(model, run, lambda record: stopped(record, F64) is not None or any(
            calibrated.overflowed(record[k[len(F64):]], record[k]) for k in list(record)[mark:]
            if k[len(F64):] in record))
        out.update(routes)
    return _closed(out)


def _closed(record):
    """A record whose run has ended: a Spill's index written (spill.Spill.close), a dict as it is."""
    if isinstance(record, spill.Spill):
        record.close()
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
            out[F64 + "value"] = float64_run(model, lambda: value(float64_inputs(inputs), torch.from_numpy),
                                             lambda wide: calibrated.overflowed(out["value"], wide))
        return out
    import paddle
    with paddle.no_grad():
        return {"value": value(inputs, paddle.to_tensor)}


@fused.taken
def compare_forward(torch_model, paddle_model, inputs, name_map=None, isolate=False,
                    record_dir=None, mean_bound=calibrated.MEAN_BOUND, outputs=None, layouts=None,
                    kept=None) -> ForwardReport:
    """Run both models (eval mode is the caller's to set) on the same numpy inputs, and torch once more in
    float64 (one module at a time); hold every module output of the Paddle model to the torch one's own fp32
    error.
    The same verdict as record_forward on each side then judge_forward (the calls a pt_/pd_ script pair and its
    check make), with torch's float64 run made last and judged as it runs (judged_as_run): nothing of it is
    kept. Returns a ForwardReport: .rows, .passed, .first_diverging, .table(), .pairs().
    isolate=True also judges every paired module on torch's own recorded input (portcheck.forward.isolate): .differing
    names every module whose own computation differs, where .first_diverging names the first in the run.
    record_dir: a folder the records go to as they are made (torch/ and paddle/, each side's float32 run;
    portcheck.core.spill), judged from there: for models whose records do not fit in memory beside them
    (docs/bench/llm.md). The verdict is the same as in memory. No float64 value is kept, nor any of isolate's runs.
    mean_bound: the bound on the model output's mean abs diff (judge_forward's; default the guide's, 1e-6; the
    caller's own threshold for its pair overrides it; None: none).
    outputs: the model outputs compared (default every one: either side returning one the other lacks, None
    included, is red), by field or position (["logits"], or {torch's: Paddle's}); report.left_out names the rest;
    a module's too, by its torch name ({"block": [1], "(model)": ["logits"]}), the rest of its outputs left out.
    layouts: convert's; its portcheck.Fused entries judge each part of a fused module (GPT-2's c_attn) on its own.
    A mixture of experts' routing is compared as data (report.routing: each token's experts on both sides,
    portcheck.forward.routing): tokens sent to other experts are red at the router, a tie is said as one.
    kept: a dict filled with each side's model output as record_forward's record holds it ({"torch": its out/(model)
    keys and their f64: ones, "paddle": its out/(model) keys}): the guide's forward pair from this run, with no run
    of its own (portcheck.Handin.forward). A side is left out where its run is not record_forward's: it stopped, or
    torch's float64 run was made again or cut into a fused module's parts (judged_as_run)."""
    check_models(torch_model, paddle_model)
    checked_args(record_dir, mean_bound)
    if kept is not None and not isinstance(kept, dict):
        raise PipelineError(f"kept={type(kept).__name__}: give a dict, which compare_forward fills with each side's "
                            "model output, or None [PC468]")
    outputs = checked_outputs(outputs)
    if record_dir is not None:
        spill.claim(record_dir)  # its torch/ and paddle/ go in a folder of ours alone
    where = lambda name: None if record_dir is None else Path(record_dir) / name
    routes = {}  # the choice of experts torch's blocks hand their packed experts (forward.routing reads it)
    with experts.Routed(torch_model, paddle_model, routes):
        traced = trace(torch_model, inputs, spill.store(record_dir, "torch"))
    traced.update(routes)
    routes = {}  # its float64 run's, the yardstick of their weights (judged_as_run fills it)
    torch_record = _closed(experts.mark(fused.mark(traced, fused.specs(torch_model, layouts), torch_model),
                                        torch_model, paddle_model))
    paddle_record = fused.mark(record_forward(paddle_model, inputs, where("paddle")),
                               fused.specs(paddle_model, layouts), paddle_model)
    if kept is not None:  # fused.taken's second run fills it again
        kept.clear()
        kept.update({side: model_outputs(r) for side, r in (("torch", torch_record), ("paddle", paddle_record))
                     if not stopped(r)})
    loose.mark(torch_record, paddle_record)
    torch_record, paddle_record = fused.cut(torch_record, False), fused.cut(paddle_record, False)
    _judgeable(torch_record, paddle_record, float64_kept=False)
    free = {}  # the float64 runs' weights: cast into the same memory in both (fresh pages cost more than the cast)
    from portcheck.forward import alike  # it builds on isolate, which builds on this module
    calls, said = alike.settled(paddle_model, inputs, torch_record, paddle_record, name_map)
    report = judge_records(torch_record, paddle_record, name_map, mean_bound,
                    lambda keys, applied: judged_as_run(torch_model, inputs, torch_record, paddle_record, keys, free,
                                                        applied, (kept or {}).get("torch"), routes), outputs,
                           retaken=True, calls=calls, routes=routes)
    report.outputs_said += said
    if kept is not None and not any(k.startswith(F64) for k in kept.get("torch", ())):
        kept.pop("torch", None)
    report.outputs_said += [EAGER.pop(torch_model)] if torch_model in EAGER else []
    if isolate:
        from portcheck.forward import isolate as isolated  # it builds on this module
        isolated.judge(torch_model, paddle_model, inputs, torch_record, report, free, fused.declared(paddle_record))
        report.isolated = routing.unjudged_after_ties(report.routing, torch_record, report.isolated, isolated=True)
    if not report.passed and report.first_diverging is not None:
        from portcheck.forward import calls  # it builds on this module
        report.first_call = calls.first_call(torch_model, paddle_model, inputs, torch_record, report)
    return report


def model_outputs(record) -> dict:
    """The model's own outputs in a record (out/(model) and its leaves'), copied: the guide's forward pair's."""
    root = f"out/{ROOT}"
    return {k: np.array(record[k]) for k in record if k == root or k.startswith((root + "[", root + ":"))}


def judged_as_run(model, inputs, torch_record, paddle_record, keys: dict, free: dict = None, applied=None,
                  kept: dict = None, routes: dict = None) -> dict:
    """torch's float64 run (float64_run) with each value the judgement reads judged as the run computes it:
    {torch record key: judge_one's row (an output) or input_ok's verdict (a first input)}, for every key of
    `keys` (counterparts) with a Paddle value. The rows are judge_forward's on record_forward's records, bit for
    bit (tests/test_size.py), but no float64 value is kept: at LLM size they are twice the float32 record,
    written and read back for nothing (docs/bench/llm.md). applied: {torch output key: the activation torch's forward
    applies to it next} (pairing.Pairing.applied): its fp32 and float64 values are judged through it.
    kept: a dict the model's float64 outputs are put in (f64:out/(model)..., model_outputs' keys), only where this run
    is the one record_forward makes: its first try taken, no value it leaves unjudged NaN or Inf where the float32
    one is finite (record_forward tries again for any), no fused module's parts. routes: a dict given the choice of
    experts each block of this float64 run hands its packed experts (experts.Routed, keys prefixed F64): the yardstick
    of the float32 run's (forward.routing), and its routers' outputs (routing.scored), what their ties are judged by."""
    import torch
    applied = applied or {}
    wanted = {k: p for k, p in keys.items() if p in paddle_record}
    parts = fused.declared(torch_record)  # a fused module's parts are judged, each on its columns
    judged, done, counts, wild = {}, {}, {}, []  # wild: the first key float64 makes NaN or Inf, fp32 finite
    tries, roots, unjudged_wild = [], {}, []  # kept's: the runs made, the model's outputs, wild outside `wanted`
    scores = routing.scored(torch_record) if routes is not None else set()

    def judge(key, tensor):
        if key in scores:  # a router's: its float64 run's, what its ties are judged by where the port's gives its top k
            routes[F64 + key] = np.array(tensor.detach().cpu().numpy())
        p_key = wanted.get(key)
        if p_key is None:
            if kept is not None and not unjudged_wild and key in torch_record and calibrated.overflowed(
                    torch_record[key], tensor if isinstance(tensor, np.ndarray) else tensor.detach().cpu().numpy()):
                unjudged_wild.append(key)
            return
        # one value judged once: what judge_forward's once() does by stored array, here by live tensor
        same = (spill.identity(torch_record, key), spill.identity(paddle_record, p_key), id(tensor), version(tensor))
        held = (key[:3], *same, applied.get(key))
        if held not in done:
            ref = tensor if isinstance(tensor, np.ndarray) else tensor.detach().cpu().numpy()
            a, b = torch_record.get(key), as_torch_holds(torch_record, key, paddle_record[p_key])
            if key in applied:
                a, ref = activated(applied[key], a), activated(applied[key], ref)
            if key.startswith("out/"):
                result = judge_one(key[len("out/"):], a, ref, b)
                # judge_one's own_error tests overflow unless Paddle's value stopped the row before it
                over = calibrated.OVERFLOWED in result.problems or \
                    (bool(result.problems) and a is not None and calibrated.overflowed(a, ref))
            else:  # an input is mostly the output judged just before: its verdict, on the same arrays
                out = done.get(("out", *same, None))
                reused = out is not None and a is not None and a.dtype.kind == "f" and \
                    not out.problems and not out.by_design and a.shape == ref.shape
                result = out.passed if reused else input_ok(a, ref, b)
                # that output's own_error found ref finite where a is (no problem): overflowed's passes not again
                over = not reused and a is not None and calibrated.overflowed(a, ref)
            if over and not wild:
                wild.append(key)
            remember(done, held, result, tensor)
        judged[key] = done[held]

    running = {}  # {module name: [its calls begun and not returned]}

    def before(name):
        def entered(module, args, kwargs):  # as the record holds it (Recorder): before an in-place module runs
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
            for key, number in output_leaves(f"out/{call_}", output, True) if call_ == ROOT else ():
                judge(key, number)
            if kept is not None and call_ == ROOT:  # in record_forward's order: its tensors, then its numbers
                roots.update((F64 + k, np.array(t.detach().cpu().numpy())) for k, t in tensors(f"out/{ROOT}", output))
                roots.update((F64 + k, v) for k, v in output_leaves(f"out/{ROOT}", output, True))
        return after

    def run():
        """One float64 run from the start (float64_run may make it again): its error, or None."""
        judged.clear(), done.clear(), counts.clear(), wild.clear(), running.clear()
        tries.append(None), roots.clear(), unjudged_wild.clear()
        handles = [h for name, pre, post in hook_points(model) for h in (pre(before(name)), post(hook(name)))]
        if routes is not None:
            routes.clear()
        try:
            with torch.no_grad(), experts.Routed(model, None, {} if routes is None else routes, F64):
                call(model, float64_inputs(inputs), torch.from_numpy)
        except Exception as e:  # noqa: BLE001 - the whole model's float64 run follows, as record_forward's
            return first_line(e, 300)
        finally:
            for h in handles:
                h.remove()
        return None
    error = float64_run(model, run, lambda error: error is not None or bool(wild), free)
    done.pop(ALIVE, None)
    if kept is not None and error is None and len(tries) == 1 and not unjudged_wild and not parts:
        kept.update(roots)
    if error is not None:
        judged[STOPPED] = error  # every value it did not reach is said to be unjudged, with this error
    return judged


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

    Module calls are paired by portcheck.mapping.pairing: name_map's entries as given (align.names.resolve's forms),
    the rest by aligning the two runs; a module called several times is paired per call (name, name#2, ...),
    an output holding several tensors per tensor (name[0], name:logits, ...: the same key, else in order).
    If the torch model returns a ModelOutput and the Paddle one a tensor, the first output is the result.
    The model's output is also held to mean_bound, the guide's (None: it is not what a hand-in holds, as the
    first forward of a training run). report.pairing lists every pair and every call left unpaired.
    A projection one side holds as a Linear and the other as a bare parameter of the parent, and a 0-d scalar against
    a [1] one, pair as in compare_forward (portcheck.mapping.loose, read from the records' mod/ and own/ keys);
    records keeping no tensor names say in one line that this rule was not applied (loose.UNNAMED). torch's packed
    experts are said as the port's list of experts from the two records alone (mapping.experts.marked), and each
    mixture's routing read as compare_forward reads it."""
    checked_args(None, mean_bound)
    _judgeable(torch_record, paddle_record)
    # as compare_forward's records: torch's packed experts as the port's lists (read from the records alone)
    torch_record = experts.marked(torch_record, paddle_record)
    torch_record, paddle_record, unnamed = loose.marked(torch_record, paddle_record)
    report = judge_records(torch_record, paddle_record, name_map, mean_bound, outputs=checked_outputs(outputs))
    report.outputs_said += [unnamed] if unnamed else []
    return report


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
