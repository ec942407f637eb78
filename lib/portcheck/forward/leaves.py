"""The outputs of two paired calls paired leaf by leaf (a leaf: what follows the call's name in a record's key, ""
for a lone tensor, "[0]", ":logits"): by key, then by order or shape (pair_leaves); an output handed on from an inner
call as that call's pair (handed_on); one that is the call's own input handed back, left out (passed_through).
May import core, mapping and forward's judging."""
import numpy as np

from portcheck.core import spill
from portcheck.core.keys import split_key
from portcheck.forward.judging import broadcasts
from portcheck.mapping import alignment


def pair_leaves(torch_keys: list, paddle_keys: list, shapes=None, settled: dict = None) -> dict:
    """{torch key: Paddle key} for the tensors of two paired calls' outputs (their keys after the call name,
    "" for a lone tensor, "[0]", ":logits"): by the same key, then the rest in order when both hold as many,
    else torch's first with Paddle's only one. shapes: {key: shape} of both sides, given when an order pair
    must fit in shape (any module's but the model's, whose outputs are compared whole). settled: pairs already
    known (handed_on's), kept and counted as the same key's: one output of several is guessed only where nothing
    of the two calls pairs otherwise (an attention's key states are no guess for the weights the other side returns
    beside the output it hands on, whatever their shapes)."""
    out = dict(settled or {})
    out.update({k: k for k in torch_keys if k not in out and k in paddle_keys and k not in out.values()})
    t = [k for k in torch_keys if k not in out]
    p = [k for k in paddle_keys if k not in out.values()]
    fits = lambda a, b: shapes is None or broadcasts(shapes[0][a], shapes[1][b]) or \
        alignment.reshaped(tuple(shapes[0][a]), tuple(shapes[1][b]))
    if len(t) == len(p):
        order = list(zip(t, p))
    elif t and p and 1 in (len(t), len(p)) and not out:
        # one output against several: the one of its shape (an attention's (weights, output) against its output),
        # else the first
        fit = [k for k in p if fits(t[0], k)] if len(t) == 1 else [k for k in t if fits(k, p[0])]
        pick = fit[0] if len(fit) == 1 else (p if len(t) == 1 else t)[0]
        order = [(t[0], pick)] if len(t) == 1 else [(pick, p[0])]
    else:
        order = []
    out.update((a, b) for a, b in order if fits(a, b))
    return out


def call_leaves(record: dict) -> dict:
    """{call: {key after the call name: shape}} of a record's outputs, in run order."""
    out = {}
    for key in record:
        if key.startswith("out/"):
            _, call, rest = split_key(key)
            out.setdefault(call, {})[rest] = spill.shape(record, key)
    return out


def passed_through(record: dict, call: str, leaves: dict) -> dict:
    """The leaves of a call's output that are its own first input handed back (an encoder returning its
    embeddings beside its hidden states): {leaf: shape}, the same stored array or the same values."""
    given = record.get(f"in/{call}")
    if given is None:
        return {}
    same = lambda k: spill.identity(record, k) == spill.identity(record, f"in/{call}") or (
        tuple(spill.shape(record, k)) == tuple(np.shape(given)) and np.array_equal(record[k], given))
    return {rest: shape for rest, shape in leaves.items() if same(f"out/{call}{rest}")}


def handed_on(torch_record: dict, paddle_record: dict, t_out: str, p_out: str, t: dict, p: dict, paired: dict) -> dict:
    """{torch leaf: Paddle leaf} of two paired calls' outputs that are outputs of inner calls handed on as they are
    (the same stored array: an encoder returning its last layer's output on one side, every layer's in a list on the
    other), each where those inner outputs are paired (`paired`, {torch record key: Paddle record key})."""
    first = {}
    for key in torch_record:
        if key.startswith("out/"):
            first.setdefault(spill.identity(torch_record, key), key)
    theirs = {spill.identity(paddle_record, f"out/{p_out}{b}"): b for b in reversed(list(p))}
    out = {}
    for a in t:
        inner = paired.get(first.get(spill.identity(torch_record, f"out/{t_out}{a}")))
        b = theirs.get(spill.identity(paddle_record, inner)) if inner in paddle_record else None
        if b is not None and b not in out.values():
            out[a] = b
    return out
