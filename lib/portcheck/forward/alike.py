"""Calls of like modules that only their readers tell apart, paired by running each order: a module holding no
tensors called several times in a row, or siblings of one class so called, each output a table the layers after
choose from (Gemma 3's rotary embedding: one per layer type, the global base's for the full-attention layers, the
local base's for the sliding-window ones; transformers computes them in the order of its config's layer types, a port
in its own). Neither the run's order nor the names say which Paddle call is which torch one, and their own values
must not (a port whose two bases are swapped would be paired by them, green there). So each order is tried: the
Paddle model run once per order (forward.isolate's forced run), the group's outputs replaced by torch's in that
order, and the order kept whose model output is torch's (ties.nearest_of, the rule by which the run's values settle
what structure cannot). Each group is then judged at its own calls, as the layers using them pair them.

May import core, mapping and forward's isolate (inside its function: it builds on compare, which imports this)."""
import itertools

import numpy as np

from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.mapping import pairing
from portcheck.mapping.alignment import sequence
from portcheck.mapping.ties import distance, nearest_of, outputs_of, same_values
from portcheck.mapping.trace import values

MAX_ORDERS = 24  # the orders of one group tried in turn (four calls); a larger group keeps the run's order


def kind(call) -> tuple:
    """What like calls share: their class, their parent module, their outputs' shapes."""
    return call.kind, call.module.rpartition(".")[0], call.outputs


def like(call) -> bool:
    """A call of a leaf module holding no tensors, which returned something (not the model itself)."""
    return bool(call is not None and call.outputs and not call.tensors and call.children == 0 and call.name != ROOT)


def groups(paired) -> list:
    """[[(torch call, Paddle call)]] of each run of consecutive paired calls (in torch's run order, each side's
    calls one after another in its own) of leaf modules holding no tensors, one class and parent on each side, one
    output shape: tables computed in a row before the layers read them."""
    p_calls = {c.name: c for c in paired.paddle_calls}
    p_index = {c.name: i for i, c in enumerate(paired.paddle_calls)}
    out, run = [], []
    for t in paired.torch_calls + [None]:
        p = p_calls.get(paired.pairs.get(t.name)) if t is not None else None
        if not (like(t) and like(p)):
            t = p = None
        if run and t is not None and kind(t) == kind(run[0][0]) and kind(p) == kind(run[0][1]) and \
                p_index[p.name] == p_index[run[-1][1].name] + 1:
            run.append((t, p))
            continue
        if len(run) > 1:
            out.append([(a.name, b.name) for a, b in run])
        run = [(t, p)] if t is not None else []
    return out


def settled(paddle_model, inputs, torch_record: dict, paddle_record: dict, name_map=None) -> tuple:
    """({torch call: Paddle call} of each group (groups) whose order the run settles otherwise than the run's
    order, [one line per such group]): each order tried by a forced run of the Paddle model, the group's outputs
    torch's in that order, the model's output held against torch's."""
    from portcheck.forward.isolate import forced_run
    ts = sequence(torch_record)
    if not any(like(a) and like(b) and kind(a) == kind(b) for a, b in zip(ts, ts[1:])):
        return {}, []  # no two like calls in a row on torch's side: nothing to pair (the pairing's own cost spared)
    paired = pairing.pair(torch_record, paddle_record, name_map)
    root = outputs_of(torch_record, ROOT)
    out, said = {}, []
    for group in groups(paired):
        t_names, p_names = [t for t, _ in group], [p for _, p in group]
        if all(same_values(outputs_of(torch_record, t_names[0]), outputs_of(torch_record, t)) for t in t_names[1:]):
            continue  # the same values in every order
        orders = list(itertools.permutations(p_names))
        if len(orders) > MAX_ORDERS or not root:
            continue
        distances = {}
        for order in orders:
            calls = {ROOT: ROOT, **dict(zip(order, t_names))}
            leaves = {f"out/{p}{split_key(k)[2]}": k for p, t in zip(order, t_names) for k in torch_record
                      if k.startswith("out/") and split_key(k)[1] == t}
            kept = {}

            def keep(key, tensor, source, kept=kept):
                if key is None:
                    kept.clear()
                elif key.startswith("out/") and split_key(key)[1] == ROOT:
                    kept[key] = np.array(values(tensor))
            _, error = forced_run(paddle_model, inputs, torch_record, calls, leaves, keep)
            distances[order] = distance(root, list(kept.values())) if error is None else float("inf")
        best = nearest_of(distances)
        if best is not None and list(best) != p_names:
            out.update(zip(t_names, best))
            said.append(f"{', '.join(t_names)}: like calls the layers after them choose from, paired with Paddle's "
                        f"{', '.join(best)} by running each order (the one whose model output is torch's, "
                        f"{distances[best]:.1e} of its scale, the run's order {distances[tuple(p_names)]:.1e})")
    return out, said
