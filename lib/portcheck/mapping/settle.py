"""Groups of modules only the run's order paired (pairing's doubtful groups: siblings of one shape whose names say
nothing), settled by running the models: each order tried on the converted rest, the one giving torch's values kept.

May import portcheck.core, portcheck.mapping (pairing, state) and, inside its function, the tracing of a run."""
import math

from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping import ties
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
    compute the same, or none gives torch's values: a difference of the port there), the run's order stays."""
    from itertools import permutations
    from portcheck.mapping.trace import eval_mode, trace
    keys = {}  # {torch module: its Paddle keys}
    for key, (tensor, _) in state._tensors.items():
        if not isinstance(tensor, Joined) and not tensor.moved_to:  # convert's Tensor, held by its module's pair
            keys.setdefault(tensor.module or ROOT, []).append(key)
    values = {key: state[key] for g in groups for t, _ in g for key in keys.get(t, ())}
    assign, renamed = {t: p or ROOT for t, p in modules.items()}, {}
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

        def distance(p_record, window):
            counterpart = lambda c: assign[module_of(c)] + c[len(module_of(c)):]  # noqa: E731
            return max(ties.distance(ties.outputs_of(t_record, c), ties.outputs_of(p_record, counterpart(c)))
                       for c in window)

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
            distances = {}
            for theirs in permutations(paddle_names):
                _put(group, theirs, keys, values, params)
                assign.update(zip(torch_names, theirs))
                distances[theirs] = distance(trace(paddle_model, inputs), window)
            # no order nearest: orders computing the same (any is right), or none giving torch's values, a difference
            # of the port there, which the comparison then shows red in the run's order (a refusal would hide it)
            best = ties.nearest_of(distances) or tuple(paddle_names)
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


# The run's order of a group is kept without trying the others when its calls are this near torch's (ties.distance): a
# port correct there is ~1e-6 of the scale away, one wrong upstream ~1e-2, another order ~1. Where the run's order
# and the values agree, any other order that matched too would compute the same (q + k): nothing to refuse.
SETTLED = 1e-4


def _put(group: list, theirs: tuple, keys: dict, values: dict, params: dict):
    """Fill each Paddle module of `theirs` with the tensors of its torch module (group's order): one order tried."""
    for (t, p), q in zip(group, theirs):
        for key in keys[t]:
            params[q + key[len(p):]].set_value(values[key])
