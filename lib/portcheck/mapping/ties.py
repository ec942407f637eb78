"""Ties the alignment cannot settle by shape: two candidates fitting one call equally well, settled by the run's
values (the candidate whose output is torch's, by APART times over every other), by the same module name, by the
counterpart of its parent, or refused in one line naming the modules and the name_map that settles each (ambiguity); and the containers the
run's order cannot pair, paired by what they hold (containers). Imports numpy and portcheck.core."""
import re

import numpy as np

from portcheck.core.keys import ROOT, split_key


def one_module_each(tie, ts, ps) -> bool:
    """A tie among the calls of one module on each side (a shared embedding called by both halves)."""
    i, j = tie
    t, p = ([ts[k] for k in i], [ps[j]]) if isinstance(i, list) else ([ts[i]], [ps[k] for k in j])
    return len({c.module for c in t}) == 1 and len({c.module for c in p}) == 1


def tied_calls(tie, ts, ps) -> list:
    """Every call of a tie: the one and its candidates."""
    i, j = tie
    return [ts[k] for k in i] + [ps[j]] if isinstance(i, list) else [ts[i]] + [ps[k] for k in j]


APART = 10  # a tie is settled by the candidate nearest torch's output when every other one is this many times
# farther: a port correct there is ~1e-6 of the scale away and one with an error upstream (a BatchNorm's epsilon)
# ~1e-2, while candidates that differ by a residual add, a norm or a scale are ~1 away


def distance(a: list, b: list) -> float:
    """The largest difference of two calls' first outputs over the largest value of torch's (inf: not the same
    values, in any shape)."""
    if not a or not b:
        return np.inf
    x, y = np.asarray(a[0]), np.asarray(b[0])
    if x.shape != y.shape:
        if x.size != y.size or x.dtype.kind != "f" or not x.size:
            return np.inf
        y = y.reshape(x.shape)
    if x.dtype.kind != "f" or y.dtype.kind != "f":
        return 0.0 if np.array_equal(x, y) else np.inf
    x, y = x.astype(np.float64), y.astype(np.float64)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return np.inf
    return float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-30))


def nearest_of(distances: dict):
    """The candidate whose distance (distance()) is under 1 and APART times under every other's, else None: the one
    rule by which the run's values settle what structure cannot (a tie here, an order convert tries in turn)."""
    ranked = sorted(distances.items(), key=lambda kv: kv[1])
    best, d = ranked[0]
    return best if d < 1 and all(d * APART <= other for _, other in ranked[1:]) else None


def settled_by_name(ties, ts, ps) -> dict:
    """{torch call: Paddle call} for each tie that exactly one candidate settles by being the same module name as the
    one it ties for: the same place in structures that cannot otherwise be told apart, such as the out_proj of torch's
    MultiheadAttention, whose forward reads its weights without calling it, so no run's value can settle it. A wrong
    settlement is still judged on its values: it is red, never green."""
    out = {}
    for i, j in ties:
        one, candidates = (ps[j], [ts[k] for k in i]) if isinstance(i, list) else (ts[i], [ps[k] for k in j])
        same = [c for c in candidates if c.module == one.module]
        if len(same) == 1:
            t, p = (same[0], one) if isinstance(i, list) else (one, same[0])
            if t.name not in out and p.name not in out.values():
                out[t.name] = p.name
    return out


def settled_by_parent(ties, ts, ps, paired: dict) -> dict:
    """{torch call: Paddle call} for each tie exactly one candidate settles by sitting in the counterpart of the one's
    parent (paired: {torch module: Paddle module} the alignment holds): sibling branches of equal shapes whose values
    cannot say (a difference of the port before them moves every one), each in its own branch. A wrong settlement is
    still judged on its values: red, never green."""
    parent = lambda c: c.module.rpartition(".")[0] or ROOT  # noqa: E731
    out = {}
    for i, j in ties:
        if isinstance(i, list):  # one Paddle call, several torch ones
            same = [ts[k] for k in i if paired.get(parent(ts[k])) == parent(ps[j])]
            t, p = (same[0].name, ps[j].name) if len(same) == 1 else (None, None)
        else:
            same = [ps[k] for k in j if paired.get(parent(ts[i])) == parent(ps[k])]
            t, p = (ts[i].name, same[0].name) if len(same) == 1 else (None, None)
        if t is not None and t not in out and p not in out.values():
            out[t] = p
    return out


def settled_by_value(ties, ts, ps, torch_record, paddle_record) -> dict:
    """{torch call: Paddle call} for each tie the run's values settle: one candidate's output near the one's, by
    APART times over every other candidate's."""
    out = {}

    def nearest(distances: dict, record):
        # candidates returning the same values (a container and its last block) are one: the first stands for them
        kept = {}
        for name in distances:
            if not any(same_values(outputs_of(record, name), outputs_of(record, other)) for other in kept):
                kept[name] = distances[name]
        return nearest_of(kept)
    for i, j in ties:
        if isinstance(i, list):  # one Paddle call, several torch ones
            one = outputs_of(paddle_record, ps[j].name)
            best = nearest({ts[k].name: distance(outputs_of(torch_record, ts[k].name), one) for k in i}, torch_record)
            if best is not None and best not in out:
                out[best] = ps[j].name
        else:
            one = outputs_of(torch_record, ts[i].name)
            best = nearest({ps[k].name: distance(one, outputs_of(paddle_record, ps[k].name)) for k in j}, paddle_record)
            if best is not None and best not in out.values():
                out[ts[i].name] = best
    return out


def outputs_of(record: dict, call: str) -> list:
    # by key, then the call's values only: a spill.Spill maps each value it hands out from its file
    return [record[k] for k in record if k.startswith("out/") and split_key(k)[1] == call]


def same_values(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


def entry(torch_module: str, paddle_module: str, children: int) -> str:
    """A name_map that sends one torch module, and only it, to a Paddle module, as it is written: a dict entry for
    a module with no children (a dict renames a prefix: every child too), else a regex rule for its name alone."""
    if children == 0:
        return repr({torch_module: paddle_module})
    return repr([("^" + re.escape(torch_module) + "$", paddle_module)])


def fusions_of(ties, left_t, left_p, ts, ps, ran=False) -> dict:
    """{module: its parts} where a tie's candidates are the parts of a module of the other side that nothing can
    pair with (GPT-2's c_attn holding q, k and v, against paddlenlp's q_proj, k_proj, v_proj and out_proj, which
    its c_proj fits each): the Fused layouts entry that declares it. ran: only a module whose output is its parts'
    outputs side by side (a packed one, torch's MultiheadAttention, returns the attention's: no such entry)."""
    out = {}
    for i, j in ties:
        candidates = [left_t[k] for k in i] if isinstance(i, list) else [left_p[k] for k in j]
        pool = ps if isinstance(i, list) else ts  # the one's side: where the fused module is
        shapes = {c.tensors for c in (ts if pool is ps else ps)}
        for c in pool:
            if not c.tensors or c.tensors in shapes or len(c.tensors) != len(candidates[0].tensors):
                continue  # a fused module pairs with nothing: its shapes are no other's
            sizes = lambda call: sorted(int(np.prod(t)) for t in call.tensors)
            ratios = {a / b for a, b in zip(sizes(c), sizes(candidates[0]))}
            r = ratios.pop() if len(ratios) == 1 else 0
            # its parts: siblings of distinct names (two layers' or two experts' gate_proj of one shape tie too, and
            # are no parts of one module)
            parent = candidates[0].module.rpartition(".")[0]
            parts = tuple(dict.fromkeys(x.module.rpartition(".")[2] for x in candidates
                                        if x.module.rpartition(".")[0] == parent))
            if r == int(r) and 2 <= r <= len(parts) and (not ran or _side_by_side(c, candidates[0], r)):
                out[c.module.rpartition(".")[2]] = parts[:int(r)]
                break
    return out


def _side_by_side(fused, part, n) -> bool:
    """A call's first output as wide as n of another's first output, all else the same."""
    a, b = (fused.outputs or ((),))[0], (part.outputs or ((),))[0]
    return bool(a and b) and tuple(a[:-1]) == tuple(b[:-1]) and a[-1] == b[-1] * n


def ties_said(ties, ts, ps) -> list:
    """[(the one call, its candidates, whether the one is torch's)] of _align's ties (indices into ts and ps)."""
    return [(ts[i], [ps[k] for k in j], True) if isinstance(j, list) else (ps[j], [ts[k] for k in i], False)
            for i, j in ties]


def ambiguity(ties, ran=False, fusions=None, whole=None, guessed=False) -> str:
    """One line: the first few ties (ties_said's), each with the name_map that settles it, then one map settling them
    all (each with its first candidate), each pasted as printed; with no run, inputs= in that map's place (no
    order says which candidate is right, the run does); guessed (a conversion's run, its weights not torch's yet:
    no value was looked at), each tie's own maps alone. whole: (every torch call, every Paddle call):
    where the Paddle model holds more modules of a tied module's shapes than the torch model, with no run (one
    torch module run as several, one Paddle module per call), no map alone fills them all: the run's calls pair
    each, so the map is said with inputs=."""
    said, rules, several = [], [], False
    count = lambda calls, shapes: len({c.module for c in calls if c.tensors == shapes})
    for one, others, torch_one in ties:
        if torch_one:
            maps = [entry(one.module, m, one.children) for m in dict.fromkeys(c.module for c in others)]
            text = f"torch {one.name} fits Paddle {' and '.join(c.name for c in others)} equally"
            rules.append((one.module, others[0].module))
            held = (count(whole[0], one.tensors), count(whole[1], one.tensors)) if whole and one.tensors else (0, 0)
            if not ran and held[1] > held[0]:
                several = True
                said.append(f"{text} (the Paddle model holds {held[1]} modules of its shapes, the torch model "
                            f"{held[0]}: a torch module run as several, one Paddle module per call, which only a run "
                            f"shows: inputs= with name_map={maps[0]})")
                continue
        else:
            maps = [entry(c.module, one.module, c.children) for c in {c.module: c for c in others}.values()]
            text = f"Paddle {one.name} fits torch {' and '.join(c.name for c in others)} equally"
            rules.append((others[0].module, one.module))
        said.append(f"{text} (name_map={' or name_map='.join(maps)})")
    rules = list(dict.fromkeys(rules))
    every = repr([("^" + re.escape(t) + "$", p) for t, p in rules])  # every one: pasted, it pairs them all
    more = f"; {len(ties) - 3} more" if len(ties) > 3 else ""
    # without a run each one's first candidate is a guess (BERT's output.LayerNorm against norm1 and norm2: norm1,
    # pasted, made the zoo's correct ports red): the run settles them, so that is what is said
    remedy = (f"give {'inputs= and ' if several else ''}the name_map that says which (name_map={every} takes each "
              "one's first candidate)" if (ran and not guessed) or several else
              "give the name_map that says which" if ran else
              "give inputs= to pair them by the models' run (convert settles them by it), or the name_map that says "
              "which")
    return ("modules cannot be paired automatically, by their structure nor by the run's values: " + "; ".join(said[:3])
            + more + ": " + remedy
            + ("; or, if one module holds what several of the other side hold together, its columns one after the "
               "other: layouts={" + ", ".join(f"{k!r}: portcheck.Fused({v!r})" for k, v in fusions.items())
               + "} (heads=n if they go per head)" if fusions else "") + " [PC317]")


def containers(pairs: dict, ts: list, ps: list, fits) -> dict:
    """{torch call: Paddle call} of containers (children, no tensors of their own) the alignment left unpaired whose
    modules holding tensors are the same, each paired with its counterpart inside the other: one such container on
    each side, their first outputs fitting (fits). The run's order cannot pair them where a leaf holding nothing
    crosses one's end (transformers' GPT2Attention runs its resid_dropout inside, paddlenlp's MultiHeadAttention's
    dropout1 is its layer's, run after it): left unpaired, what the attention computes inline would be named at the
    block around it."""
    found = [{}, {}]
    for side, calls, torch_of in ((0, ts, {t: t for t in pairs}), (1, ps, {p: t for t, p in pairs.items()})):
        for c in calls:
            if c.children <= 0 or c.tensors or not c.outputs or "#" in c.name or c.module == ROOT or \
                    c.name in torch_of:
                continue
            # its modules holding tensors, each named by its torch call: every one paired, or it is no candidate
            held = [x.name for x in calls if x.tensors and x.module.startswith(c.module + ".")]
            if held and all(x in torch_of for x in held):
                found[side].setdefault(frozenset(torch_of[x] for x in held), []).append(c)
    return {t[0].name: p[0].name for key, t in found[0].items() if len(t) == 1
            and len(p := found[1].get(key, [])) == 1 and fits(t[0].outputs[0], p[0].outputs[0])}
