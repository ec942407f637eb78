"""One index taken along one axis on either side of a module: torch's forward takes it from the module's output,
the port's before its module (timm's ViT norms every token and takes the class token, `norm(x)[:, 0]`; a port
writes `norm(x[:, 0])`). The two outputs meet at the next module's input, where both hand the same value on. A rule
"@<axis>:<index>" (taken_rules) judges torch's output as that index taken, as a scale rule judges it scaled
(trace.activated reads both).

May import core only."""
import numpy as np

from portcheck.core import spill
from portcheck.core.keys import ROOT, input_after, positions

TAKE = "@"  # a rule's name "@<axis>:<index>": torch's output judged as np.take(output, index, axis)


def take(rule: str, x):
    """`x` (an output, fp32 or float64) as the rule takes it: one index along one axis, in its own precision."""
    axis, index = (int(n) for n in rule[len(TAKE):].split(":"))
    return np.take(np.asarray(x), index, axis=axis)


def taken_said(rule: str) -> str:
    """A take rule in words, for the pairing's line."""
    axis, index = rule[len(TAKE):].split(":")
    return (f"torch's forward takes index {index} along axis {axis} of this output next, outside any module, where "
            f"Paddle's takes it before its module: torch's output judged as that index [PC446]")


def _axis(longer: tuple, shorter: tuple):
    """The one axis whose removal makes `longer` `shorter` (None: none, or more than one would)."""
    axes = [k for k in range(len(longer)) if longer[:k] + longer[k + 1:] == shorter]
    return axes[0] if len(axes) == 1 else None


def taken_rules(result, torch_record: dict, paddle_record: dict, done: set) -> dict:
    """{torch call: "@<axis>:<index>"} where torch's output, one axis longer than its Paddle call's, is handed to
    the next module with one index taken along that axis (the index whose values are that input's, bit for bit, in
    torch's run alone), Paddle's module is fed its input with that axis taken (its input is judged so too: applied_to)
    and hands its output to its next module as it is: the only value torch's output can be judged as there (as it is,
    it has another shape). A port taking another index, or a module that does not commute with the taking (one mixing
    the tokens), is red there by its values. done: calls another rule already judges."""
    out, walks = {}, None
    for t, p in result.pairs.items():
        mine, theirs, t_in, p_in = f"out/{t}", f"out/{p}", f"in/{t}", f"in/{p}"
        if t == ROOT or t in done or any(k not in r for r, k in ((torch_record, mine), (paddle_record, theirs),
                                                                  (torch_record, t_in), (paddle_record, p_in))):
            continue
        a_shape, b_shape = tuple(spill.shape(torch_record, mine)), tuple(spill.shape(paddle_record, theirs))
        axis = _axis(a_shape, b_shape) if len(a_shape) == len(b_shape) + 1 else None
        if axis is None:  # the outputs of one shape, as nearly every pair's: no record walked
            continue
        walks = walks or (positions(torch_record), positions(paddle_record))
        (t_keys, t_at), (p_keys, p_at) = walks
        t_next, p_next = input_after(t_keys, t_at[mine]), input_after(p_keys, p_at[theirs])
        if t_next is None or p_next is None or \
                spill.identity(paddle_record, p_next) != spill.identity(paddle_record, theirs) or \
                tuple(spill.shape(torch_record, t_next)) != b_shape or \
                _axis(tuple(spill.shape(torch_record, t_in)), tuple(spill.shape(paddle_record, p_in))) != axis:
            continue  # Paddle's module is fed the input with that axis taken too: it takes it before its module
        whole, handed = np.asarray(torch_record[mine]), np.asarray(torch_record[t_next])
        index = next((i for i in range(a_shape[axis]) if np.array_equal(np.take(whole, i, axis=axis), handed)), None)
        if index is not None:
            out[t] = f"{TAKE}{axis}:{index}"
    return out
