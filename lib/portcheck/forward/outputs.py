"""Two runs' outputs paired and judged: every output and first input of the paired calls given its counterpart
(counterparts: leaf by leaf as leaves pairs them, as outputs= names them, a pair that holds the same weights but
computes otherwise judged where the other side computes it: apart, inline), the model's own outputs, and every row of
judge_forward's report (judge_records).
May import core, mapping, and forward's twin, judging, result, leaves and chosen; never compare, which builds on it."""
import dataclasses

import numpy as np

from portcheck.core import calibrated, spill, tolerances
from portcheck.core.diff import UNPAIRED, KeyResult
from portcheck.forward import graph, routing
from portcheck.forward.chosen import (as_named, checked_outputs, checked_outputs_of, mended, named_line,
                                      output_name, output_names, selected, shared, suggested)
from portcheck.forward.judging import as_torch_holds, input_ok, judge_one, routers_only
from portcheck.forward.leaves import call_leaves, handed_on, pair_leaves, passed_through
from portcheck.forward.result import ForwardReport
from portcheck.forward.twin import F64
from portcheck.mapping import fused, pairing, settings
from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping.names import named_exist
from portcheck.mapping.trace import LEAF, STOPPED, activated, reader as trace_reader, stopped, stopped_in


def apart(paired: pairing.Pairing) -> dict:
    """{torch call: where their insides part, said} of the pairs that stand for their weights and not for their
    outputs: a module
    holding tensors inside one of the two whose counterpart is outside the other (paddlenlp's CLIP vision_model
    holds transformers' embeddings' class_embedding itself and computes the embeddings inline, then its ln_pre,
    torch's pre_layrnorm, outside torch's embeddings: the two outputs are not one computation). What it computed is
    judged where the other side holds it (inline), else by the modules each side computes after it. A name map's
    pair too: a map pasted from report.pairing.modules() names this pair beside the ones inside it."""
    calls = {c.name: c for c in paired.torch_calls}
    many = {module_of(c) for c in [*paired.pairs, *paired.pairs.values()] if "#" in c}  # read by several callers
    holders = [(module_of(t), module_of(p)) for t, p in paired.pairs.items() if t in calls and calls[t].tensors
               and t != ROOT and module_of(t) not in many and module_of(p) not in many]
    inside = lambda name, outer: name.startswith(outer + ".")
    out = {}
    for t, p in paired.pairs.items():
        if t == ROOT:
            continue
        a, b = module_of(t), module_of(p)
        crossing = next(((x, y) for x, y in holders if inside(x, a) != inside(y, b)), None)
        if crossing:
            x, y = crossing
            where = (f"Paddle's {y} (torch's {x}) is inside Paddle's {b}, torch's {x} outside torch's {a}"
                     if inside(y, b) else
                     f"torch's {x} (Paddle's {y}) is inside torch's {a}, Paddle's {y} outside Paddle's {b}")
            out[t] = where
    return out


def inline(torch_record: dict, paddle_record: dict, paired: pairing.Pairing, t_call: str, p_call: str) -> dict:
    """{torch key: Paddle key} of a pair apart() names whose lone output the next torch module reads whole, that
    reader's counterpart inside the Paddle module: the output judged against the input the Paddle module computed
    for it inline (transformers' CLIP vision embeddings' output, paddlenlp's vision_model's ln_pre input), the
    first inputs paired too. A value the port computes inline is then named at the module computing it on torch's
    side, not at its reader. Else {}."""
    reader = trace_reader(torch_record, t_call)
    theirs = paired.pairs.get(reader) if reader else None
    if theirs is None or not module_of(theirs).startswith(module_of(p_call) + ".") or f"in/{theirs}" not in \
            paddle_record:
        return {}
    return {f"in/{t_call}": f"in/{p_call}", f"out/{t_call}": f"in/{theirs}"}


def counterparts(torch_record: dict, paddle_record: dict, paired: pairing.Pairing, said: list = None,
                 chosen: dict = None, kept: dict = None, given=None) -> dict:
    """{torch record key: Paddle record key} of every output tensor and first input of the paired calls. Where a
    call returns more outputs on one side, an output that is the call's own input handed back is left out (its
    value is judged as that input), and the rest paired by pair_leaves' rule; said, a list if given, receives one
    line for each such call. A pair apart() names is judged as inline() pairs it, else has no counterpart keys (said
    too). chosen: {torch module: (torch names, Paddle names)} of outputs= (Chosen.modules): that module's outputs
    paired as named, the rest left out. kept, a dict if given, receives "left": the record keys left out so, and
    "guessed": {torch call: the calls' outputs} where one output was paired with one of the other side's several by a
    guess (pair_leaves'). given: outputs= as the user gave it, printed back mended where it names an output a
    module does not return (mended)."""
    t_leaves, p_leaves = call_leaves(torch_record), call_leaves(paddle_record)
    out, uneven, skipped = {}, [], apart(paired)
    kept = {} if kept is None else kept
    left, guessed = kept.setdefault("left", set()), kept.setdefault("guessed", {})
    for t_call, p_call in paired.pairs.items():
        if t_call in skipped:
            inlined = inline(torch_record, paddle_record, paired, t_call, p_call)
            out.update(inlined)
            judged = (f"its output is judged against the input Paddle's {p_call} computes for its "
                      f"{split_key(inlined[f'out/{t_call}'])[1]}" if inlined else
                      "its outputs are not compared, the modules after it judge them")
            if said is not None:
                said.append(f"{t_call}: paired with Paddle's {p_call} by the weights they hold, but they compute "
                            f"different things ({skipped[t_call]}): {judged}")
            continue
        if t_call in paired.met:  # where the two meet: the input of the module reading it, which Paddle computed
            out.update({f"in/{t_call}": f"in/{p_call}", f"out/{t_call}": f"in/{paired.met[t_call]}"})
            continue
        # Paddle's module computing torch's and the activation after it: judged against the activation's output
        # and torch's computing Paddle's and the activation after it: judged against that activation's output
        t_out, p_out = paired.judged_as(t_call), paired.paddle_judged_as(t_call)
        t, p = t_leaves.get(t_out, {}), p_leaves.get(p_out, {})
        names = (chosen or {}).get(module_of(t_call)) if t_call != ROOT else None
        if names is not None:  # the user's outputs=: as named, the rest left out, said
            pairs = as_named(t_call, t, p, names, lambda: mended(
                torch_record, paddle_record, (t_call, t_out, p_out, t, p), names, given))
            left |= {f"out/{t_out}{a}" for a in t if a not in pairs} | \
                {f"out/{p_out}{b}" for b in p if b not in pairs.values()}
            out[f"in/{t_call}"] = f"in/{p_call}"
            out.update({f"out/{t_out}{a}": f"out/{p_out}{b}" for a, b in pairs.items()})
            if said is not None:
                said.append(named_line(t_call, t_out, p_out, t, p, pairs))
            continue
        if len(t) != len(p) and t_call != ROOT:
            t_in, p_in = passed_through(torch_record, t_out, t), passed_through(paddle_record, p_out, p)
            t, p = {k: v for k, v in t.items() if k not in t_in}, {k: v for k, v in p.items() if k not in p_in}
            if said is not None and (t_in or p_in):
                said.append(f"{t_call}: " + "; ".join(f"{side}'s {name}{', '.join(keys)} is its input handed back"
                                                     for side, name, keys in (("torch", t_out, t_in),
                                                                              ("Paddle", p_out, p_in)) if keys)
                            + ", which the other side does not return: left out (judged as its input)")
        out[f"in/{t_call}"] = f"in/{p_call}"
        if len(t) != len(p) and t_call != ROOT:
            uneven.append((t_call, t_out, p_out, t, p))  # after its inner calls' outputs are paired
        else:
            out.update({f"out/{t_out}{a}": f"out/{p_out}{b}"
                        for a, b in pair_leaves(list(t), list(p), None if t_call == ROOT else (t, p)).items()})
    for t_call, t_out, p_out, t, p in reversed(uneven):  # the innermost first: an outer one hands on its outputs
        handed = handed_on(torch_record, paddle_record, t_out, p_out, t, p, out)
        pairs = pair_leaves(list(t), list(p), (t, p), handed)
        if not handed and 1 in (len(t), len(p)) and len(pairs) == 1:  # one of several: the run's values may say
            guessed[t_call] = (t_out, p_out, t, p, pairs)  # another is the one (suggested)
        if said is not None and pairs:
            more, name = ("torch", t_out) if len(t) > len(p) else ("Paddle", p_out)
            rest = [k for k in (t if more == "torch" else p) if k not in (pairs if more == "torch" else pairs.values())]
            if handed:
                how = "each as the inner call's output it hands on"
            elif len(pairs) == 1 and next(iter(pairs.items())) != (next(iter(t)), next(iter(p))):
                (a, b), = pairs.items()
                how = f"by shape, {more}'s {name}{a if more == 'torch' else b} with the other's"
            else:
                how = "first with first"
            said.append(f"{t_call}: {more}'s returns {max(len(t), len(p))} outputs, the other side's "
                        f"{min(len(t), len(p))}: paired {how}, {more}'s {name}{', '.join(rest)} left out")
        out.update({f"out/{t_out}{a}": f"out/{p_out}{b}" for a, b in pairs.items()})
    return out


def _root_leaves(record: dict) -> dict:
    """{the part of its key after the call ("", "[0]", ":logits"): record key} of every leaf of the model's own
    output: its tensors and numbers (out/), and what is neither (LEAF: None, a string, another object)."""
    out = {}
    for key in record:
        for where in ("out/", LEAF):
            if key.startswith(where + ROOT) and split_key("out/" + key[len(where):])[1] == ROOT:
                out[split_key("out/" + key[len(where):])[2]] = key
    return out


def _leaf(record: dict, key: str) -> str:
    """What a model output holds, said: 'None', a string's repr, 'a <type>', or a tensor or number's shape."""
    if key.startswith(LEAF):
        text = bytes(np.asarray(record[key], dtype=np.uint8)).decode("utf-8", "replace")
        kind, _, rest = text.partition(":")
        return {"none": "None", "str": f"the string {rest[:40]!r}"}.get(kind, f"a {rest} (not comparable)")
    shape = list(spill.shape(record, key))
    return f"a tensor {shape}" if shape else "a number"


def _leaf_row(name, t_key, p_key, torch_record, paddle_record, rest=None):
    """The row of a model output that is no tensor or number on at least one side: equal (None against None, one
    string against the same), else red saying what each side returns; an object neither is said, and red, with
    the outputs= comparing the rest (`rest`, shared()'s) where there is one."""
    t, p = _leaf(torch_record, t_key), _leaf(paddle_record, p_key)
    if t == p and t_key.startswith(LEAF) and p_key.startswith(LEAF) and "(not comparable)" not in t:
        return KeyResult(name, tolerances.EXACT, (), 0.0, 0.0, 0.0, 0.0, notes=[f"{t} on both sides"])
    why = (f"cannot be compared: torch returns {t}, Paddle {p}; leave it out with "
           + (f"outputs={rest!r}" if rest else "outputs=") if "(not comparable)" in t + p
           else f"torch returns {t}, Paddle {p}")
    return calibrated.unjudged(name, (), why)


def judge_records(torch_record: dict, paddle_record: dict, name_map, mean_bound, as_run=None, outputs=None,
                  retaken=False, calls=None, routes=None) -> ForwardReport:
    """judge_forward's pairing and rows. as_run(counterparts): {torch key: its row or input verdict}, judged
    as torch's float64 run computes them (judged_as_run); None: the float64 values are the record's F64 keys.
    outputs: (torch's, Paddle's) names of the model outputs compared (checked_outputs), the rest left out.
    retaken: a fused module the pairing's ties show (Pairing.fusions) is refused before anything is judged, for
    fused.taken to run the comparison again with it declared (compare_forward's models are at hand); otherwise (two
    saved records) said in one line (fused.unjudged). calls: {torch call: Paddle call} the run paired
    (forward.alike), kept as given. routes: torch's float64 run's choice of experts (judged_as_run's), where the
    record holds none (routing.compare)."""
    unsourced = _sources(torch_record), _sources(paddle_record)
    flows = {"torch": graph.flow(torch_record), "paddle": graph.flow(paddle_record)}  # before cut's new keys
    configured = {"torch": settings.read(torch_record), "paddle": settings.read(paddle_record)}
    torch_record, paddle_record = fused.cut(torch_record, False), fused.cut(paddle_record, False)
    outs = [k for k in torch_record if k.startswith("out/")]
    named_exist(name_map, torch_record, paddle_record)  # an entry naming no module would go unjudged
    paired = pairing.pair(torch_record, paddle_record, name_map, calls=calls)
    if retaken and paired.fusions:
        raise fused.shown(paired.fusions)
    chosen = checked_outputs(outputs)
    checked_outputs_of(chosen, torch_record)
    through, kept = [fused.unjudged(paired.fusions)] if paired.fusions else [], {}
    keys = counterparts(torch_record, paddle_record, paired, through, chosen.modules, kept, chosen.given)
    # the model's own outputs, every leaf of both (None, numbers and strings too), paired by name, else in order
    t_all, left = selected(_root_leaves(torch_record), chosen.torch, "torch")
    p_all, p_left = selected(_root_leaves(paddle_record), chosen.paddle, "Paddle")
    root = pair_leaves(list(t_all), list(p_all))
    if not root and t_all and p_all and (len(t_all) == 1 or len(p_all) == 1):  # one output against several: the
        root = {next(iter(t_all)): next(iter(p_all))}  # first of each, the others red below, named
    root = {t_all[a]: p_all[b] for a, b in root.items()}
    keys = {k: v for k, v in keys.items() if not (k.startswith("out/") and split_key(k)[1] == ROOT)}
    keys.update({a: b for a, b in root.items() if a.startswith("out/") and b.startswith("out/")})
    applied = paired.applied_to(keys)  # judged through the activation torch's forward applies after its module
    judged = as_run(keys, applied=applied) if as_run else {}
    within = {paired.pairs[t] for t in paired.paddle_composed}  # judged as the chain torch's module computes
    report = ForwardReport(unpaired=[k for k in paddle_record if k.startswith("out/") and k not in set(keys.values())
                                     and split_key(k)[1] not in within and k not in kept["left"]],
                           stopped={side: stopped(r) for side, r in (("torch", torch_record), ("paddle", paddle_record))
                                    if stopped(r)},
                           stopped_in={side: stopped_in(r) for side, r in (("torch", torch_record),
                                                                            ("paddle", paddle_record)) if stopped_in(r)},
                           pairing=paired, counterparts=keys, left_out=left + p_left, flow=flows,
                           outputs_said=through, settings=configured)
    measured = {}  # a container's output is its last child's: measured once (spill.identity: by what is stored)
    f64_error = judged.get(STOPPED) if as_run else stopped(torch_record, F64)

    def unreached(key) -> str:
        """Why a value has no float64 run to hold it to ("" when it has one): torch's float64 copy, the library's
        own yardstick, stopped before computing it (its float32 run did not)."""
        if f64_error is None or (key in judged if as_run else F64 + key in torch_record):
            return ""
        return f"{calibrated.NOT_JUDGED} torch's float64 run (the library's yardstick) stopped before it: {f64_error}"

    def once(keys, compute):
        if keys[0] in judged:
            return judged[keys[0]]
        held = keys[0][:3], *(spill.identity(r, k) for r, k in zip((torch_record, torch_record, paddle_record), keys))
        if held not in measured:
            measured[held] = compute()
        return measured[held]
    t_root, origin, alone = set(_root_leaves(torch_record).values()), None, set()  # alone: outputs with no counterpart
    modules_paired = {module_of(t) for t in paired.pairs}
    called = {module_of(split_key(k)[1]) for k in outs}
    composing = paired.composing()
    for key in outs + [k for k in t_all.values() if k.startswith(LEAF)]:
        _, call_, rest = split_key("out/" + key.split("/", 1)[1])
        name, p_key = key.split("/", 1)[1], keys.get(key, root.get(key, ""))
        if call_ in composing:  # a chain Paddle's module computes whole: its last output, as its first module's
            if paired.judged_as(composing[call_]) != call_:
                continue
            call_ = composing[call_]
            name = f"{call_}{rest}"
        if (key in t_root and key not in t_all.values()) or key in kept["left"]:
            continue  # an output outputs= leaves out: said in report.left_out, or in its module's line
        if key in t_root and p_key not in paddle_record and report.stopped.get("paddle"):
            # a run that stopped returned nothing: the stop is said (report.stopped), not a structure to change
            row = calibrated.unjudged(name, tuple(spill.shape(torch_record, key)),
                                      "the Paddle run stopped before returning it")
        elif key in t_root and p_key not in paddle_record:
            # the model's own outputs are compared whole: one torch has and Paddle lacks is red, named
            row = calibrated.unjudged(name, tuple(spill.shape(torch_record, key)), (
                f"the models' outputs differ in structure: torch returns {output_name(rest)} ({_leaf(torch_record, key)})"
                f", which Paddle does not; compare the rest with outputs={shared(t_all, p_all, root)!r} (torch's: "
                f"{', '.join(output_names(t_all))}), or return the same outputs on both sides"))
        elif key.startswith(LEAF) or p_key.startswith(LEAF):
            row = _leaf_row(name, key, p_key, torch_record, paddle_record,
                            shared(t_all, p_all, {a: b for a, b in root.items() if a != key}))
        elif p_key not in paddle_record:
            row = calibrated.unjudged(name, tuple(spill.shape(torch_record, key)), f"{UNPAIRED} in the Paddle model")
            alone.add(key)
        elif unreached(key):
            row = calibrated.unjudged(name, tuple(spill.shape(torch_record, key)), unreached(key))
        elif key in applied and key not in judged:  # torch's output as the activation its forward applies to it
            row = judge_one(name, activated(applied[key], torch_record[key]),
                            activated(applied[key], torch_record.get(F64 + key)),
                            as_torch_holds(torch_record, key, paddle_record[p_key]))
        else:  # the arrays are read only when measured (a container's output is its last child's, measured once)
            row = once((key, F64 + key, p_key), lambda: judge_one(
                name, torch_record[key], torch_record.get(F64 + key),
                as_torch_holds(torch_record, key, paddle_record[p_key])))
            row = dataclasses.replace(row, key=name, problems=list(row.problems))
            if not row.problem:
                ins = (f"in/{call_}", f"{F64}in/{call_}", keys.get(f"in/{call_}", ""))
                through = (lambda x: activated(applied[ins[0]], x)) if ins[0] in applied else (lambda x: x)
                row.input_ok = once(ins, lambda: input_ok(*(through(torch_record.get(k)) for k in ins[:2]),
                                                           paddle_record.get(ins[2])))
        row.rule = row.rule._replace(mean=mean_bound if call_.split("#")[0] == ROOT and not key.startswith(LEAF)
                                     else None)
        # an output with no counterpart of a call that pairs (its outputs not comparable) is no place: the port
        # computes it otherwise; a module with no call paired (a chain the port computes inline) still bounds it
        if origin is None and not row.passed and row.judged and not row.beyond(calibrated.MEAN_BOUND) and \
                not (key in alone and module_of(call_) in modules_paired):
            # asked up to the first red input within its rule only; no module on either side output the input:
            # else the module that did, or how the caller wires them, is to blame
            in_key = f"in/{call_}"
            # a torch module the port computes inline (no counterpart: its output judged by none) is no source either
            source = unsourced[0].source(in_key)
            if row.input_ok is False and (unsourced[0](in_key) or source in alone) and \
                    unsourced[1](keys.get(in_key, "")):
                row.input_unsourced = module_of(split_key(source)[1]) if source else _caller(module_of(call_), called)
            origin = row if row.input_ok is not False else None
        report.rows.append(row)
    for rest, p_key in p_all.items():  # an output Paddle returns and torch lacks is red too, None included
        if p_key not in root.values():
            row = calibrated.unjudged(f"{ROOT}{rest}", (), (
                f"the models' outputs differ in structure: Paddle returns {output_name(rest)} "
                f"({_leaf(paddle_record, p_key)}), which torch does not; compare the rest with "
                f"outputs={shared(t_all, p_all, root)!r} (Paddle's: {', '.join(output_names(p_all))}), or return the "
                "same outputs on both sides"))
            row.rule = row.rule._replace(mean=mean_bound)  # a model output's row, said as torch's extra one is
            report.rows.append(row)
    red = {r.name for r in report.rows if not r.passed and r.judged}
    for t_call, guess in kept["guessed"].items():
        t_out, p_out, _, _, pairs = guess
        said = suggested(torch_record, paddle_record, guess, module_of(t_call), chosen.given) \
            if f"{t_out}{next(iter(pairs))}" in red else None
        if said:
            report.outputs_said.append(
                f"{t_call}: RED where one output was paired with one of the other side's several by their place; "
                f"the values pair {said[1]}: compare those with outputs={said[0]!r} [PC462]")
    report.routing = routing.compare(torch_record, paddle_record, paired, routes)
    report.rows = routers_only(report.rows, {r.router for r in report.routing}, torch_record, paddle_record,
                               report.counterparts)
    report.rows = routing.unjudged_after_ties(report.routing, torch_record, report.rows)
    return report


def _sources(record: dict):
    """unsourced(in_key): whether the first input recorded under in_key is no module's output: recorded as
    itself, not linked to an output recorded before it (trace._flatten links a tensor a module returned), so a
    buffer or a value its caller's forward computed. False where the record cannot tell (a fused module's cut)."""
    order, first = {}, {}
    for i, key in enumerate(record):
        order[key] = i
        if key.startswith("out/"):
            first.setdefault(spill.identity(record, key), (i, key))

    def unsourced(key) -> bool:
        return key in order and first.get(spill.identity(record, key), (order[key] + 1,))[0] > order[key]

    def source(key):
        """The out/ key that recorded the input first, or None where no module output it (or the record cannot
        tell: a key it does not hold)."""
        if key not in order:
            return None
        i, out = first.get(spill.identity(record, key), (order[key] + 1, None))
        return out if i <= order[key] else None
    unsourced.source = source
    return unsourced


def _caller(module: str, called: set) -> str:
    """The module whose forward called `module`: its nearest ancestor that ran (a ModuleList's is its owner's)."""
    parts = module.split(".")
    return next((a for a in (".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)) if a in called), ROOT)


