"""What only a run says, settled by running the models: groups of modules only the run's order paired (pairing's
doubtful groups: siblings of one shape whose names say nothing), each order tried on the converted rest, the one
giving torch's values kept; and a square weight a Paddle layer of another type holds (loose.Either), its module run
both ways on torch's recorded input; and the order of a vector's parts its torch parent holds (mapping.parted).

May import portcheck.core, portcheck.mapping (pairing, state, parted) and, inside its function, the tracing of a run."""
import math

import numpy as np

from portcheck.core import spill
from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT, input_after, module_of, positions, split_key
from portcheck.mapping import fused, inferred, parted, regroup, ties
from portcheck.mapping.layouts import IN_WORDS
from portcheck.mapping.loose import taken_as
from portcheck.mapping.state import Joined, State


MAX_ORDERS = 24  # the orders of one group convert runs in turn (four modules); a larger group is named, not tried


def settle_by_run(torch_model, paddle_model, inputs, state: State, params: dict, modules: dict, groups: list):
    """Each group of modules only the run's order paired (pairing._doubtful), put in the order whose run gives
    torch's values: every group in the run's order first, one run kept where its calls are torch's within SETTLED;
    else the group's Paddle modules filled in each order in turn (the rest already converted), both
    models run on `inputs`, and the order kept whose calls holding tensors, from the group's first to the next
    group's (to the model's output for the last), are torch's by ties.nearest_of (the rule the run's values
    settle a tie by). state and the Paddle model are changed to it. Raises a PipelineError naming the modules and
    the name_map that settles them where the group is too large to try; where no order is nearest (several
    compute the same, or none gives torch's values: a difference of the port there), the run's order stays, but
    where none gives torch's values and one alone is torch's furthest along the window's calls: that one.
    Returns a line for each group no order's run gave torch's values, naming each order and how far it was (for
    convert's state.said)."""
    from itertools import permutations
    from portcheck.mapping.trace import eval_mode, trace
    keys = {}  # {torch module: its Paddle keys}
    for key, (tensor, _) in state._tensors.items():
        if not isinstance(tensor, Joined) and not tensor.moved_to:  # convert's Tensor, held by its module's pair
            keys.setdefault(tensor.module or ROOT, []).append(key)
    values = {key: state[key] for g in groups for t, _ in g for key in keys.get(t, ())}
    said = []
    assign, renamed = {ROOT: ROOT, **{t: p or ROOT for t, p in modules.items()}}, {}  # the models' own outputs
    with eval_mode(torch_model), eval_mode(paddle_model):
        t_record = trace(torch_model, inputs)
        order = list(dict.fromkeys(split_key(k)[1] for k in t_record if k.startswith("out/")))
        at = {c: n for n, c in enumerate(order)}
        groups = sorted((g for g in groups if all(t in at and t in keys for t, _ in g)),
                        key=lambda g: min(at[t] for t, _ in g))
        starts = [min(at[t] for t, _ in g) for g in groups] + [len(order)]
        # each module's first call: a later one may be another Paddle module's (Pairing.copies)
        windows = [[c for c in order[starts[n]:starts[n + 1]]
                    if (module_of(c) in keys and "#" not in c) or c == ROOT] for n in range(len(groups))]

        counterpart = lambda c: assign[module_of(c)] + c[len(module_of(c)):]  # noqa: E731

        t_keys = positions(t_record)

        def distances(p_record, window):
            p_keys = positions(p_record)
            return [_met(t_record, t_keys, c, p_record, p_keys, counterpart(c)) for c in window]

        def fed(p_record, c) -> bool:
            """The call's input torch's (one it has no record of: as good as torch's)."""
            x = t_record.get(f"in/{c}")
            return x is None or ties.distance([x], [p_record.get(f"in/{counterpart(c)}")]) <= SETTLED

        distance = lambda p_record, window: max(distances(p_record, window))  # noqa: E731

        # the run's order first, every group at once: one Paddle run where the port is correct, as most are (a
        # BERT-base tried in every order took 72 runs); a group it leaves farther than SETTLED is tried in turn
        for group in groups:
            _put(group, [p for _, p in group], keys, values, params)
        p_record = trace(paddle_model, inputs)
        settled = [distance(p_record, w) <= SETTLED for w in windows]
        del p_record
        for n, group in enumerate(groups):
            if settled[n] and all(settled[:n]):
                continue
            window = windows[n]
            torch_names, paddle_names = [t for t, _ in group], [p for _, p in group]
            entry = repr(dict(group))
            if math.factorial(len(group)) > MAX_ORDERS:
                raise PipelineError(f"torch {', '.join(torch_names)} fit Paddle {', '.join(paddle_names)} in any "
                                    f"order, more than the {MAX_ORDERS} orders convert tries: give the name_map that "
                                    f"says which (name_map={entry} takes the run's order) [PC303]")
            # each order's farthest call of the window; how many of its calls, in run order, hold, and whether the
            # first that parts is fed torch's values (parts itself, not from what feeds it)
            far, held = {}, {}
            for theirs in permutations(paddle_names):
                _put(group, theirs, keys, values, params)
                assign.update(zip(torch_names, theirs))
                p_record = trace(paddle_model, inputs)
                each = distances(p_record, window)
                far[theirs] = max(each)
                k = next((k for k, d in enumerate(each) if d > SETTLED), len(each))
                held[theirs] = (k, k < len(each) and fed(p_record, window[k]))
                del p_record
            # no order nearest: orders computing the same (any is right), or none giving torch's values, a difference
            # of the port there (a pool counting its padding otherwise, a branch's conv): the one order whose run is
            # torch's furthest along the window is kept, where it parts from torch's after the group's first call
            # (where the group's modules part, the order does; where the port parts, every order does), so that the
            # comparison shows red where the port parts; else the run's order (a refusal would hide the difference).
            # Said, each order with how far its run was
            best = ties.nearest_of(far)
            if best is None and min(far.values()) > SETTLED:
                most = max(held.values())
                furthest = [theirs for theirs, k in held.items() if k == most]
                kept = furthest[0] if most[0] and len(furthest) == 1 else tuple(paddle_names)
                said.append(f"torch {', '.join(torch_names)} against Paddle's modules of their shapes: no order gives "
                            "torch's values on the run over inputs= (" + "; ".join(
                                f"{', '.join(theirs)} {d:.2g}" for theirs, d in far.items()) + " of the scale apart): "
                            + (f"kept {', '.join(kept)}, torch's values to {window[most[0] - 1]}"
                               + (f" and into {window[most[0]]}" if most[1] else "") + " (the farthest along)"
                               if kept != tuple(paddle_names) else "the run's order kept")
                            + ", the comparison judges them")
                best = kept
            best = best or tuple(paddle_names)
            _put(group, best, keys, values, params)
            assign.update(zip(torch_names, best))
            for (t, p), q in zip(group, best):
                renamed.update((key, q + key[len(p):]) for key in keys[t])
                modules[t] = q
    tensors = {key: state._tensors.pop(key) for key in renamed}  # each tensor under its settled module's key
    origin = {key: state.origin.pop(key) for key in renamed if key in state.origin}
    for key, new in renamed.items():
        state._tensors[new] = tensors[key]
        if key in origin:
            state.origin[new] = origin[key]
    return said


def _met(t_record: dict, t_keys: tuple, t_call: str, p_record: dict, p_keys: tuple, p_call: str) -> float:
    """How far two paired calls are (ties.distance), their outputs read where they meet when one side computes
    something between its module and the next one's (timm's BatchNormAct2d holding its SiLU against a BatchNorm and
    the Silu module after it, or a parent applying F.silu): the nearest of each side's output against what the other
    hands on from its call (_onward; pairing's _composed and _met read them so, once pairs are made)."""
    mine, theirs = ties.outputs_of(t_record, t_call), ties.outputs_of(p_record, p_call)
    d = ties.distance(mine, theirs)
    if d <= SETTLED:
        return d
    return min([d, *(ties.distance(mine, [v]) for v in _onward(p_record, p_keys, p_call)),
                *(ties.distance([v], theirs) for v in _onward(t_record, t_keys, t_call))])


def _onward(record: dict, positions: tuple, call: str) -> list:
    """What a run hands on from `call`, nearest first: while the next module it enters reads the value as it is and
    holds no tensors (an activation module), that module's output; then the input of the first module entered that
    reads another value (a parent's F.silu between)."""
    (keys, at_of), out, key = positions, [], f"out/{call}"
    for _ in range(3):
        at = at_of.get(key)
        fed = input_after(keys, at) if at is not None else None
        if fed is None:
            break
        if spill.identity(record, fed) != spill.identity(record, key):
            out.append(record[fed])
            break
        name = split_key(fed)[1]
        key = f"out/{name}"
        if f"own/{name}" in record or key not in record:
            break
        out.append(record[key])
    return out


# The run's order of a group is kept without trying the others when its calls are this near torch's (ties.distance): a
# port correct there is ~1e-6 of the scale away, one wrong upstream ~1e-2, another order ~1. Where the run's order
# and the values agree, any other order that matched too would compute the same (q + k): nothing to refuse.
SETTLED = 1e-4


def _put(group: list, theirs: tuple, keys: dict, values: dict, params: dict):
    """Fill each Paddle module of `theirs` with the tensors of its torch module (group's order): one order tried."""
    for (t, p), q in zip(group, theirs):
        for key in keys[t]:
            params[q + key[len(p):]].set_value(values[key])


def settle_layouts(torch_model, paddle_model, inputs, state: State, params: dict, either_way: dict,
                   loose: dict = None) -> list:
    """Each square weight a Paddle layer of another type holds (loose.Either: either layout fits its shape) in the
    layout whose run gives torch's values: the Paddle layer run on its torch module's recorded input with the weight
    in each layout (the rest converted), the one kept whose output is torch's by ties.nearest_of (the rule the run's
    values settle a tie by; an output the layer returns head-split compared so, mapping.regroup). state, the Paddle
    model and loose ({torch key: loose.Loose}, convert's) are changed to it. Refused, PC455's line, where the run over
    `inputs` never calls the module. Where neither layout is nearest (the module differs there, or computes the same
    either way), Paddle's [in, out] stays, as settle_by_run keeps the run's order: the comparison judges the module (a
    refusal would hide it); a line for each, saying how far each layout's run was and which was taken, returned for
    convert's state.said."""
    if not either_way:
        return []
    import paddle
    from portcheck.mapping.trace import eval_mode, tensors, trace
    with eval_mode(torch_model):
        record = trace(torch_model, inputs)
    layers, said = dict(paddle_model.named_sublayers(include_self=True)), []
    for either in either_way.values():
        x, want = record.get(f"in/{either.module}"), ties.outputs_of(record, either.module)
        if x is None or not want:
            raise PipelineError(either.line(then=f"; the run over inputs= never calls torch {either.module}, so it "
                                                 "cannot say which"))
        far, target = {}, "" if either.target == ROOT else either.target
        with eval_mode(paddle_model), paddle.no_grad():
            for how in either.ways:
                _take(either, how, state, params, loose)
                try:
                    got = [np.asarray(t.numpy()) for _, t in tensors("", layers[target](paddle.to_tensor(x)))]
                except Exception:  # noqa: BLE001 (a layer taking more than its first input: its parent judges it)
                    got = []
                far[how] = ties.distance(_in_shape(want, got), got)
        at = "output"
        if all(np.isinf(d) for d in far.values()) and target and either.module != ROOT:
            at = f"{either.module.rpartition('.')[0]}, its parent"
            # its output in another form than torch's (a router's top k against its logits): judged where its parent
            # computes from torch's recorded input, as a fused module is
            for how in either.ways:
                _take(either, how, state, params, loose)
                far[how] = _parent_run(paddle_model, inputs, record, either.module, target)
        best = ties.nearest_of(far)
        kept = best or next(iter(either.ways))  # Paddle's [in, out] first where a Linear's weight is held otherwise
        _take(either, kept, state, params, loose)
        both = " and ".join(f"{IN_WORDS[how]} {d:.2g}" for how, d in far.items())
        said.append(f"torch {either.module}'s square weight in Paddle {either.target}: run both ways on torch's "
                    + (f"recorded input ({both} of its scale from torch's {at}): taken {IN_WORDS[best]}" if best else
                       f"recorded input, neither layout gives torch's {at} ({both} of its scale apart): kept "
                       f"{IN_WORDS[kept]}, the module judged there"))
    return said



def _in_shape(want: list, got: list) -> list:
    """torch's first output in the layout of Paddle's where the Paddle layer returns it head-split (regroup)."""
    if want and got and np.shape(want[0]) != np.shape(got[0]) and regroup.regrouped(np.shape(want[0]),
                                                                                  np.shape(got[0])):
        other = regroup.as_other(want[0], np.shape(got[0]), near=got[0])
        return [other] if other is not None else want
    return want


def without_run(either_way: dict) -> PipelineError:
    """PC455's line for convert without inputs=: the first square weight either layout fits, the others named."""
    first, *more = either_way.values()
    return PipelineError(first.line(then=", or pass inputs= for convert to run it both ways on them" + (
        f" (so too {', '.join(e.module for e in more)})" if more else "")))


def settle_held(paddle_model, either_way: dict, out: dict, loose: dict):
    """Each loose.Either in the layout the Paddle model holds already (compare_backward's plan, after convert): the
    way whose every tensor is the Paddle one's values; refused, PC455's line, where the model holds neither."""
    values = paddle_model.state_dict()
    for either in either_way.values():
        held = [how for how, way in either.ways.items()
                if all(key in out and h.paddle_key in values and np.array_equal(
                    np.asarray(values[h.paddle_key].numpy()), h.rule(out[key][1].name, out[key][2])[1])
                    for key, h in way.items())]
        if len(held) != 1:
            raise PipelineError(either.line(then="; the Paddle model holds neither layout of torch's weight: convert "
                                                 "it first (convert(..., inputs=) settles it by the run)"))
        taken_as(out, loose, either, held[0])


def _take(either, how: str, state: State, params: dict, loose: dict = None):
    """An Either's tensors set in the Paddle model in layout `how`, and state's rules (and loose) changed to it."""
    from dataclasses import replace
    (loose if loose is not None else {}).update(either.ways[how])
    for held in either.ways[how].values():
        tensor, array = state._tensors[held.paddle_key]
        state._tensors[held.paddle_key] = (replace(tensor, rule=held.rule), array)
        params[held.paddle_key].set_value(np.ascontiguousarray(state[held.paddle_key]))


def settle_fused(torch_model, paddle_model, inputs, state: State, params: dict, found: dict, alone: bool = False):
    """Each fused module no one declared (found: {Paddle module: its candidate layouts, inferred.candidates}, filled
    by convert in the first) in the layout whose run gives torch's values, as settle_by_run settles an order: the
    modules whose parts have one shape settled together, in the run's order, each candidate's tensors set in the
    first of them and the Paddle model run on `inputs`; the call judged is that module's parent against the parent of
    its torch parts (the attention, the MLP whose forward reads its columns), fed torch's recorded input (_fed). Kept:
    the first candidate within SETTLED, those after it not run (distinct columns giving torch's values to 1e-4 of the
    scale are that layout: another would take a symmetry of the weights), else ties.nearest_of's of them all (a port
    differing in that parent, its RoPE, still settles by APART; compare_forward judges the difference). Candidates
    making the same tensor (one key-value group) are one.
    state and the Paddle model are changed to it; where no candidate is kept, a PipelineError naming each and how far
    its run was. Returns ({Paddle module: Fused}, the lines saying each).

    alone: the Paddle model converted nowhere yet (convert sets every tensor once, after): only the parent judged
    holds the state's tensors while its candidates run, Paddle's own put back after, and nothing else is set; the
    state alone is changed. None where a kind has no candidate within SETTLED (its parent not fed torch's input, or a
    port differing there): what only the whole converted model's run settles."""
    from portcheck.mapping.trace import eval_mode
    joined = {}  # {Paddle module: [its Joined keys]}
    for key, (tensor, _) in state._tensors.items():
        if isinstance(tensor, Joined) and key.rpartition(".")[0] in found:
            joined.setdefault(key.rpartition(".")[0], []).append(key)
    kinds = {}  # the modules whose parts have one shape, settled as one: {shapes: [Paddle module]}
    for name, keys in joined.items():
        shapes = tuple((k.rpartition(".")[2], tuple(tuple(np.shape(a)) for _, a in state._tensors[k][0].parts))
                       for k in keys)
        kinds.setdefault((found[name][0].parts, shapes), []).append(name)
    parent = lambda name: name.rpartition(".")[0] or ROOT  # noqa: E731
    first_part = lambda name: state.origin[joined[name][0]].split(" + ")[0].rpartition(".")[0]  # noqa: E731
    with eval_mode(torch_model), eval_mode(paddle_model):
        t_record = _until_judged(torch_model, inputs, [[parent(first_part(n)) for n in ns] for ns in kinds.values()])
    order = {c: n for n, c in enumerate(dict.fromkeys(split_key(k)[1] for k in t_record if k.startswith("out/")))}
    chosen, said = {}, []
    # the modules after the last parent judged never ran (_until_judged): in the Paddle model's order after it
    rank = {n: i for i, (n, _) in enumerate(paddle_model.named_sublayers())}
    at = lambda name: (order.get(first_part(name), len(order)), rank.get(name, 0))  # noqa: E731
    for names in sorted((sorted(ns, key=at) for ns in kinds.values()), key=lambda ns: at(ns[0])):
        judged = names[0]
        # each candidate made for the module judged alone, one candidate's tensors at a time: its run stops once that
        # module's parent returns (_fed), so the other modules of its kind wait for the layout kept (a billion
        # parameters' up_gate_proj in 24 candidates would be 24 copies of every layer's)
        # the module judged's parts in Paddle's layout once, contiguous: each candidate only places their columns,
        # into one array per tensor (a fresh one per candidate costs its pages again)
        parts = {key: [np.ascontiguousarray(t.to_paddle(a)) for t, a in state._tensors[key][0].parts]
                 for key in joined[judged]}
        into = {key: np.empty(tuple(params[key].shape), dtype=parts[key][0].dtype) for key in joined[judged]}
        made = lambda spec, key: fused.join(spec, parts[key] if key in parts else  # noqa: E731
                                            [t.to_paddle(a) for t, a in state._tensors[key][0].parts],
                                            out=into.get(key))
        width = int(params[joined[judged][0]].shape[-1])
        ways, seen = {}, {}  # {the first candidate making each tensor: the others making the same}; their columns
        for spec in found[judged]:
            columns = spec.columns(width)
            if columns is None:
                continue
            placed = tuple(c.tobytes() for c in columns)  # candidates placing every column alike make one tensor
            same = next((w for w, c in seen.items() if c == placed), None)
            if same is not None:
                ways[same].append(spec)
                continue
            ways[spec], seen[spec] = [], placed
        # alone: the parent judged holds the state's tensors (the rest of it converted), Paddle's own kept to go back
        within_parent = "" if parent(judged) == ROOT else parent(judged) + "."  # the model's own: all of it
        held = {k: params[k].numpy() for k in state if alone and k.startswith(within_parent) and k in params}
        far = {}
        try:
            for key in held:
                params[key].set_value(state[key])
            for spec in list(ways):
                arrays = {key: made(spec, key) for key in joined[judged]}
                if any(v is None for v in arrays.values()):
                    del ways[spec]
                    continue
                for key, value in arrays.items():
                    params[key].set_value(value)
                del arrays
                try:
                    far[spec] = _parent_run(paddle_model, inputs, t_record, first_part(judged), judged, then=(
                        f"Paddle {judged} holds what torch's {', '.join(spec.parts)} hold together; its layout is "
                        "settled by a run"), alone=alone)
                except PipelineError:
                    if alone:  # a run stopping before the parent, the modules before it not converted: the whole
                        return None  # converted model's run says whether it stops there too
                    raise
                if far[spec] <= SETTLED:
                    break
        finally:
            for key, value in held.items():
                params[key].set_value(value)
        within = [s for s, d in far.items() if d <= SETTLED]
        if alone and not within:
            return None
        best = within[0] if within else ties.nearest_of(far) if far else None
        also = ", ".join(inferred.said(s) for s in ways.get(best, ()))  # candidates making the same tensor
        if best is None:
            raise PipelineError(
                f"Paddle {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} hold what torch's "
                f"{', '.join(found[judged][0].parts)} hold together, but no layout of their columns gives torch's "
                f"{parent(first_part(judged))} on the run over inputs=: "
                + "; ".join(f"{inferred.said(s)} {d:.2g}" for s, d in far.items())
                + " of its scale apart; declare the layout (layouts={'<module>': portcheck.Fused(...)}) if the port "
                "reads its columns in another way [PC456]")
        parts = into = {}  # freed: the layout kept is made for every module from the state
        for key in (k for n in names for k in joined[n]):
            tensor, array = state._tensors[key]
            state._tensors[key] = (Joined(best, tensor.parts), array)
            if not alone:  # alone, convert sets each once, after
                params[key].set_value(state[key])
        chosen.update((n, best) for n in names)
        said.append(settled_line(names, best, far, len(ways) - len(far), parent(judged),
                                 parent(first_part(judged)), also))
    return chosen, said


def settled_line(names: list, best, far: dict, left: int, where: str, torch_where: str, also: str = "") -> str:
    """The line saying the layout a fused module's run kept (settle_fused's, torch_fused's): the modules, the
    layout `best`, how far its run of `where` was from torch's `torch_where`, the others run (far: {layout: its
    distance}) and the `left` not run after it; `also`, the candidates making the same tensor."""
    others = sorted(d for s, d in far.items() if s is not best)
    span = " to ".join(dict.fromkeys(f"{d:.2g}" for d in others[::max(len(others) - 1, 1)]))
    tried = ([f"the {'other ' * (not left)}{len(others)} layout{'s' * (len(others) > 1)}"
              f"{' run before it' * bool(left)} {span}"] if others else []) + ([f"{left} more not run"] if left else [])
    return (f"{', '.join(names[:2])}{f' and {len(names) - 2} more' if len(names) > 2 else ''}: their columns "
            f"{inferred.said(best)}{f' (so too {also}: the same tensor)' if also else ''}, settled by a run: {where} "
            f"{far[best]:.2g} of its scale from torch's {torch_where}" + (f" ({', '.join(tried)})" if tried else "")
            + ("" if far[best] <= SETTLED else f"; not within {SETTLED:g}: compare_forward judges it"))


def first_settled(candidates, distance) -> tuple:
    """(the first candidate whose run, distance(candidate), is within SETTLED of torch's, else the nearest by
    ties.nearest_of (None where it names none), {each candidate run: its distance}): the candidates run in turn,
    none after the first within."""
    far = {}
    for candidate in candidates:
        far[candidate] = distance(candidate)
        if far[candidate] <= SETTLED:
            return candidate, far
    return (ties.nearest_of(far) if far else None), far


def _until_judged(torch_model, inputs, kinds: list) -> dict:
    """torch's recorded run (trace's, without describe), stopped at the first module called once each kind (a list
    of torch parents) has one parent returned: the parents a kind's first module reads are all settle_fused judges,
    and a deep model's later layers cost nothing."""
    import torch
    from portcheck.mapping.trace import hook_points, recorded
    waiting, handles = [set(k) for k in kinds], []

    def returned(name):
        def hook(*_):
            waiting[:] = [k for k in waiting if name not in k]
        return hook

    def stop(*_):
        if not waiting:
            raise _Reached("every kind's parent judged has returned")

    parents = {p for k in kinds for p in k}
    for name, pre, post in hook_points(torch_model):
        handles.append(pre(stop))
        if name in parents:
            handles.append(post(returned(name)))
    try:
        return recorded(torch_model, inputs, torch.no_grad, torch.from_numpy)
    finally:
        for handle in handles:
            handle.remove()


def _parent_run(paddle_model, inputs, t_record: dict, torch_module: str, paddle_module: str, then: str = "",
                alone: bool = False) -> float:
    """How far the Paddle module's parent computes from torch's (ties.distance), fed the torch parent's recorded
    input (_fed), the Paddle model run on `inputs` as its weights are now. Where the run stops before the parent
    returns, nothing says: PC457's line, `then` first. alone (the modules before it not converted): inf where the
    parent was not fed."""
    import paddle
    from portcheck.mapping.trace import eval_mode, recorded, stopped
    parent = lambda name: name.rpartition(".")[0] or ROOT  # noqa: E731
    t_parent, p_parent = parent(torch_module), parent(paddle_module)
    with eval_mode(paddle_model), _fed(paddle_model, p_parent, t_record.get(f"in/{t_parent}")) as feeding:
        p_record = recorded(paddle_model, inputs, paddle.no_grad, paddle.to_tensor)
    if alone and not feeding.fed:
        return math.inf
    got = ties.outputs_of(p_record, p_parent)
    stop = stopped(p_record)
    if stop and not got:  # the run never reached it: nothing says
        raise PipelineError(f"{then or f'Paddle {paddle_module} is settled by a run'}, and the Paddle model's run "
                            f"over inputs= stops before {p_parent}: {stop} [PC457]")
    return ties.distance(ties.outputs_of(t_record, t_parent), got)


class _fed:
    """While it holds, the Paddle module `name`'s first call computes from torch's recorded input `x` (its first
    tensor argument replaced, where of x's shape): the module judged on its own computation, whatever the modules
    before it compute (a layer before it whose own port differs, as isolate feeds each module). The run stops at the
    next module called after it returns: nothing after it is judged, and a deep model's other layers cost nothing."""

    def __init__(self, model, name: str, x):
        self.model, self.name, self.x, self.handles, self.fed = model, name, x, [], False

    def __enter__(self):
        from portcheck.mapping.trace import first_input, hook_points
        import paddle
        fed, reached = [], []

        def feed(module, args, kwargs):
            where, value = first_input(args, kwargs)
            if self.x is None or fed or value is None or tuple(value.shape) != np.shape(self.x):
                return None
            fed.append(True)
            self.fed = True
            x = paddle.to_tensor(np.asarray(self.x), dtype=value.dtype)
            return (args[:where] + (x,) + args[where + 1:], kwargs) if isinstance(where, int) else \
                (args, {**kwargs, where: x})

        def stop(module, args, kwargs):
            if reached:
                raise _Reached("the module judged has returned")

        points = hook_points(self.model)
        self.handles = [pre(stop) for _, pre, _ in points]
        self.handles += [h for n, pre, post in points if n == self.name
                         for h in (pre(feed), post(lambda *a: reached.append(True)))]
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        return False


class _Reached(RuntimeError):
    """Raised to end a run once the module it judges has returned (the record keeps what ran before)."""


def settle_parted(torch_model, paddle_model, inputs, state, params: dict, found: dict) -> list:
    """Each mapping.parted.Parted of found ({key: Parted}, filled by convert in its first order) in the order whose
    run gives torch's values: every order of the first such module in the run tried on its Paddle parent fed the torch
    parent's recorded input, the first within SETTLED kept for each module of its kind (the same parts'
    names and sizes). state, the Paddle model and found are changed to it. Returns the lines saying each; a kind no
    order brings within SETTLED raises PC447's line with how far each was."""
    from portcheck.mapping.trace import eval_mode
    read, kinds = parted.reader(torch_model), {}
    for key, one in found.items():
        shape = tuple((k.rpartition(".")[2], c is None, np.size(c) if c is not None else None) for k, c in one.parts)
        kinds.setdefault(shape, []).append(key)
    parent = lambda name: name.rpartition(".")[0] or ROOT  # noqa: E731
    with eval_mode(torch_model), eval_mode(paddle_model):
        t_record = _until_judged(torch_model, inputs, [[parent(found[k].child) for k in ks] for ks in kinds.values()])
    order = {m: i for i, m in enumerate(dict.fromkeys(module_of(split_key(k)[1]) for k in t_record
                                                      if k.startswith("out/")))}
    said = []
    for names in kinds.values():
        if len(found[names[0]].ways) < 2:
            continue
        judged = min(names, key=lambda k: order.get(parent(found[k].child), len(order)))
        first = found[judged]
        if not np.isfinite(parted.value(first, read)).all():  # no run can settle NaN: the comparison shows it
            said.append(f"{first.paddle_key}: its parts hold NaN or inf on torch's side, their order not settled "
                        "(compare_forward judges it)")
            continue
        def run(way, first=first):
            _set_parted(parted.ordered(first, way), read, state, params)
            return _parent_run(paddle_model, inputs, t_record, first.child, first.paddle_key.rpartition(".")[0],
                               then=f"torch's {parent(first.child)} holds Paddle's {first.paddle_key} in parts; "
                                    "their order is settled by a run")
        best, far = first_settled(first.ways, run)
        if best is None:
            raise PipelineError(
                f"torch's {parent(first.child)} holds Paddle's {first.paddle_key} in parts "
                f"({', '.join(k.rpartition('.')[2] for k, _ in first.parts)}), but no order of them gives torch's "
                f"{parent(first.child)} on the run over inputs=: "
                + "; ".join(f"[{' | '.join(first.parts[i][0].rpartition('.')[2] for i in w)}] {d:.2g}"
                            for w, d in far.items()) + " of its scale apart: the two differ there [PC447]")
        for key in names:
            found[key] = parted.ordered(found[key], best)
            _set_parted(found[key], read, state, params)
        said.append(f"{', '.join(names[:2])}{f' and {len(names) - 2} more' if len(names) > 2 else ''}: "
                    "the order of its parts settled by a run: "
                    f"{parent(first.child)} {far[best]:.2g} of its scale from torch's ({len(far) - 1} other "
                    f"order{'s' * (len(far) != 2)} run)")
    return said


def _set_parted(one, read, state, params: dict):
    """The Paddle tensor filled with the parts in the Parted's order, and convert's State made to say it."""
    from dataclasses import replace
    tensor, _ = state._tensors[one.paddle_key]
    joined = parted.value(one, read)
    state._tensors[one.paddle_key] = (replace(tensor, joined=one.parts, array=joined), joined)
    params[one.paddle_key].set_value(np.ascontiguousarray(joined.reshape(params[one.paddle_key].shape)))
