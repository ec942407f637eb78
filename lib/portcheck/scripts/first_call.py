"""The recorder's Run at the model's first call and first step, as functions of the Run: the side started at the
model's first call (start: from torch's weights, or its own saved), the call's arguments as compare.Arguments (the
isolated run's call, the Paddle side's first), the dropouts its first forward calls, the isolated run on torch's
recorded values, and the modules the script keeps beside the model (found as the first step starts, recorded each
step). Imports the recorder's arguments, its side's files (side_files) and the library below, never the recorder
(which calls these).
"""
import json

import numpy as np

from portcheck.scripts.arguments import (Tensors, Unbuilt, arrays, convention, decay_of, flat, held_as, holder,
                                         on_stack, probabilities)
from portcheck.scripts.side_files import CROSSED, INIT, STATUS, crossed_file


def call_arguments(run, args, kwargs):
    """The root's first call as compare.Arguments: the script's own arguments (a number, a flag, a list or dict
    around tensors: model(x, 0.5), model([x]), model({"x": x})), each tensor torch's batch 0 at its place (the
    torch side's: its own); None where an argument is none of these."""
    from portcheck.mapping.trace import Arguments
    batch = run.given_batch(0) if run.given is not None else {}
    try:
        return Arguments(arrays(tuple(args), "args", batch), arrays(dict(kwargs), "kwargs", batch))
    except Unbuilt:
        return None


def keyable(run, model):
    """Every module's name as a record key holds it (trace.hook_points refuses one the key notation would read as
    another's), checked before any hook keys a record by it: the side's one line, not a record left empty."""
    from portcheck.core.errors import PipelineError
    from portcheck.mapping.trace import hook_points
    try:
        hook_points(model)
    except PipelineError as e:
        raise run.refuse(str(e)) from None


def conventions(run, args, kwargs) -> dict:
    """{argument: how the script's own value is torch's batch 0 there in its framework's convention}: arguments.
    convention, a padding mask the Paddle script computes True at the tokens where torch's is True at the pads. They
    are fed as the script computed them (run.given_batch leaves them out), the data pair compares them in torch's
    convention (fed.in_torchs_convention) and the run says so in one line each."""
    own = {}
    flat(args, "args", own), flat(kwargs, "kwargs", own)
    return {k: kind for k, v in run.given_batch(0).items() if k in own and (kind := convention(own[k], v))}


def by_keys(run):
    """Torch's batch 0 as compare.Arguments by its keys alone (args/<i>, kwargs/<name>): the call the Paddle model
    starts on where the script's own arguments cannot be taken apart (call_arguments)."""
    from portcheck.mapping.trace import Arguments
    first = run.given_batch(0)
    positional = sorted((k for k in first if k.startswith("args/") and k.count("/") == 1),
                        key=lambda k: int(k[5:]))
    return Arguments(tuple(first[k] for k in positional),
                     {k[7:]: v for k, v in first.items() if k.startswith("kwargs/") and k.count("/") == 1})


def dropout_site(run, p, x=None, attention=False):
    """A dropout call in the first forward (x: what it drops; attention: an attention's own dropout_p): a number
    (functional dropout's p, an attention's dropout_p) recorded under the module calling it, for the configuration;
    a Dropout module's own call is its module_config's p, except that one dropping an attention's probabilities (x's
    rows sum to 1: BERT's attention_probs_dropout_prob as torch's nn.Dropout) is recorded as an attention dropout,
    which runconfig compares with the other side's given as a number (Paddle's nn.MultiHeadAttention(dropout=))."""
    site = run.stack[-1] if run.stack else None
    if site is None:
        return
    module = run.fw.is_dropout(site)
    if not module and not float(p) and not attention:  # an attention's dropout_p of 0 is kept: said as 0, not none
        return
    attention = attention or (x is not None and probabilities(x))
    if module and not attention:
        return
    if run.names is None:
        run.names = {id(m): n for n, m in run.fw.named_modules(run.root)}
    name = run.names.get(id(site))
    if name is None:
        return
    if module:
        run.config.setdefault("attention_dropouts", {})[name] = {"type": type(site).__name__, "p": round(float(p), 7)}
        return
    said = run.config.setdefault("dropouts", {}).setdefault(name, {"type": type(site).__name__, "p": []})
    said["p"][:] = sorted({*said["p"], round(float(p), 7)})
    if attention:
        said["attention"] = True


def isolated(run, module, calls: dict, leaves: dict):
    """Every paired module call on torch's recorded first-forward values (portcheck.forward.isolate.forced_run): the
    value each computes, under iso/<its key> (torch's float64 side: torch's own error per module; Paddle's:
    its counterpart's computation on the same values)."""
    from portcheck.mapping.trace import values
    from portcheck.forward.isolate import forced_run
    inputs = run.first  # tensors, numbers and flags, in the lists and dicts the script passed them in
    if inputs is None or not calls:
        run.config["isolated"] = "not run: the model's batch holds an object other than tensors, numbers, " \
            "flags (True, None, a string) and lists, tuples or dicts of them" if calls else \
            "not run: no module paired"
        return
    kept = {}

    def keep(key, tensor, source):
        if key is None:
            kept.clear()
        else:
            kept[f"iso/{key}"] = np.array(values(tensor), copy=True)
    from portcheck.mapping.fused import specs
    # the Paddle modules --layouts fuses: each call its parts' (their torch modules' values forced)
    parts = {n: s for n, s in specs(module, run.layouts).items() if s.output and run.fw.framework == "paddle"}
    # a split model's rank: fed its part of torch's values (a split layer's columns), its own joined after
    given = run.fw.split.torch_part(run.given, run.counterparts) if "split" in run.config else run.given
    parents, error = forced_run(module, inputs, given, calls, leaves, keep, parts=parts)
    run.record.update(kept)
    run.config["isolated"] = error or "run"
    run.config["parents"] = parents


def keep(run):
    """The modules the script keeps beside the model, of its structure, that no optimizer holds (an EMA copy, a
    teacher: kept_modules), found and started as the first step starts (started); each step's state recorded as it
    is when the next starts (after the script's own update of it), KEPT<i>/<name>/<key> in Paddle's layout as the
    weights are."""
    from portcheck.gradients.against_itself import KEPT
    if run.step == 0:
        said = {}
        run.kept = started(run, said)
        run.config["kept"] = {name: getattr(m, "kind", type(m).__name__) for name, m in run.kept.items()}
        run.config["kept_as"] = said  # what holds each, and the decay given it (runconfig.kept_named says them)
    for name, m in run.kept.items():
        run.record.update({f"{KEPT}{run.step}/{name}/{k}": v
                            for k, v in run.fw.paddle_layout_state(m).items()})


def started(run, said: dict) -> dict:
    """{name: module} of the modules kept beside the model (kept_modules; said filled as it fills it), the torch
    side's initial state recorded (its torch layout, KEPT + "init/"), every other run's (--full's too) started from
    torch's, paired by name, or one with one: a torch run from that state (the float64 run's widened), a Paddle run
    from its Paddle layout (KEPT + "0/"), each tensor placed as the model's."""
    from portcheck.gradients.against_itself import KEPT
    kept = kept_modules(run.fw, run.root, run.called, run.optimizers, said)
    if run.side == "torch":
        for name, m in kept.items():
            run.record.update({f"{KEPT}init/{name}/{k}": v for k, v in run.fw.state(m).items()})
    elif run.given is not None:
        theirs = sorted({k.split("/")[1] for k in run.given if k.startswith(f"{KEPT}init/")})
        if len(theirs) == len(kept) == 1 and theirs != list(kept):
            kept = {theirs[0]: next(iter(kept.values()))}  # one with one, whatever its name
            mine = next(iter(said.values()), None)
            said.clear()
            said.update({theirs[0]: mine} if mine is not None else {})  # as this script holds it (its own name)
        for name, m in kept.items():
            prefix = f"{KEPT}init/{name}/" if run.fw.framework != "paddle" else f"{KEPT}0/{name}/"
            init = {k[len(prefix):]: v for k, v in run.given.items() if k.startswith(prefix)}
            if init:
                run.fw.start_kept(m, init, run.side == "torch64")
    return kept


def kept_modules(fw, root, called, optimizers, said: dict = None) -> dict:
    """{name: module} of the modules alive beside the root whose state holds the root's keys (a copy of the model:
    an EMA, a teacher; torch's AveragedModel by the model it holds) and whose parameters no optimizer holds, and of
    the dicts of tensors keyed as its state, every parameter there, none of them the model's own (Tensors), each
    named as the script holds it (a variable, an attribute: model_ema.module). said: filled with {name: {"as": that
    name, "by": the class of the object holding it (AveragedModel, an EMA class), "decay": the decay it was given}}."""
    import gc
    import warnings
    own = {id(m) for m in fw.submodules(root)} | {id(called)}
    keys, held, out = set(fw.state_keys(root)), fw.held_parameters(optimizers), {}
    gc.collect()  # a copy the recorder's own runs made (pairing, isolation) and dropped is not the script's
    with warnings.catch_warnings():  # a lazy module's deprecated attributes, asked by isinstance
        warnings.simplefilter("ignore")
        found = [obj for obj in gc.get_objects() if isinstance(obj, fw.module_class) and id(obj) not in own]
        # a dict of tensors keyed as the model's state (an EMA's shadow weights), none of them the model's own
        names, marks = set(fw.parameter_names(root)), {fw.mark(t) for t in fw.state_tensors(root)}
        dicts = {id(d): d for d in [*gc.get_objects(), *on_stack()] if isinstance(d, dict)}
        found += [Tensors(obj) for obj in dicts.values() if len(obj) >= len(names) and names <= set(obj) <= keys
                  and all(fw.is_tensor(v) and fw.mark(v) not in marks for v in obj.values())]
    # an AveragedModel before the copy it holds, which gc finds too: one module, named as the script holds the first
    found.sort(key=lambda obj: isinstance(obj, Tensors) or fw.averaged(obj) is obj)
    taken = set()
    for obj in found:
        m = fw.averaged(obj) if not isinstance(obj, Tensors) else obj
        if not isinstance(obj, Tensors) and (set(fw.state_keys(m)) != keys or id(m) in taken or
                                             {id(p) for p in fw.parameters(m)} & held or id(m) in own):
            continue
        taken.add(id(m))
        theirs = obj.held if isinstance(obj, Tensors) else obj
        name = held_as(theirs)
        while name in out:
            name += "#2"
        out[name] = m
        if said is not None:
            by = obj if m is not obj and not isinstance(obj, Tensors) else holder(theirs)[0]  # an AveragedModel: itself
            said[name] = {"as": name} if by is None else {"as": name, "by": type(by).__name__, "decay": decay_of(by)}
    return out


def start(run, module, args, kwargs):
    """The root's first call, before it runs: the side started as it starts (torch: its initial weights saved;
    torch64: from them, its isolated run on torch's values, then in float64; taking: from them, with the values
    it takes Paddle's side of 0 at; moved: from them moved one ulp, under other kernels; paddle: from torch's
    weights, paired with no map, and its isolated run on torch's values), and what the record keeps of the model
    (its modules, their layouts and settings, its state as the steps start)."""
    from portcheck.mapping.modules import describe
    from portcheck.core.fileio import load_npy, save_npy
    run.fw.check_not_compiled(module)
    keyable(run, module)
    if run.side == "paddle":  # a mask computed in Paddle's convention is fed as computed: torch's is not it
        run.conventions = run.config["conventions"] = conventions(run, args, kwargs)
    run.first = call_arguments(run, args, kwargs)  # the isolated run's call, the Paddle side's first
    run.depth += 1  # the runs made here (pairing, isolation) are not training calls
    run.making = True
    try:
        if run.side == "torch":
            save_npy(run.out / INIT, run.fw.state(module))
        elif run.side == "torch64":
            init = load_npy(run.torch_dir / INIT)
            run.fw.load(module, init)
            pairs = json.loads((run.out.parent / "paddle" / STATUS).read_text())["config"].get("pairs") or {}
            isolated(run, module, {t: t for t in pairs}, {k: k for k in run.given if k.startswith("out/")})
            # BatchNorm's statistics as they were before the isolated run: a model in float64 already (under
            # DDP: hooks_torch) has them updated in place by it, no float32 copy taken
            run.fw.load(module, init)
            module.double()  # in place: the optimizer's Parameters are the same objects, now float64
        elif run.side == "taking":  # as record_backward(crossed=): from torch's start (_root_call takes them)
            run.fw.load(module, load_npy(run.torch_dir / INIT))
            run.crossed = crossed_file(run.out / CROSSED)
        elif run.against is not None:  # as record_backward's runs against itself, to the process's end
            from portcheck.gradients.against_itself import AGAINST_ITSELF, moved_one_ulp
            run.fw.load(module, load_npy(run.torch_dir / INIT))
            moved_one_ulp(module)
            run.kernels = AGAINST_ITSELF[run.against]()
            run.kernels.__enter__()  # never left: the recorder ends the process after step N
        else:
            pairs, keys, _ = run.fw.start_from_torch(module, run.given, run.first or by_keys(run))
            run.config["pairs"], run.counterparts = pairs, keys
            state = run.fw.paddle_layout_state(module)
            from portcheck.forward.isolate import forced
            isolated(run, module, forced(pairs, keys), {p: t for t, p in keys.items() if t.startswith("out/")})
            run.fw.set_state(module, state)  # BatchNorm's statistics as they were before the isolated run
    finally:
        run.depth -= 1
        run.making = False
    run.record.update(describe(module))
    run.record.update(run.fw.layout_keys(module))
    run.config["modules"] = run.fw.module_config(module)
    run.config["autocast"] = run.fw.autocast()
    run.record.update({f"state0/{k}": v for k, v in run.fw.paddle_layout_state(module).items()})
