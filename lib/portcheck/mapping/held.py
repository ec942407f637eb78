"""The Paddle layer types that hold torch's own layout (paddle.compat's, paddlenlp's own Linear), known by type: which
torch layer each stands for, and what it holds apart that the torch layer holds as one. Imports nothing of the
project's but the standard library: a model's description (portcheck.mapping.modules) reads it as convert's rules
(portcheck.mapping.layouts) do."""
import sys


def torch_held(name, array):
    """A paddle.compat layer's tensors: torch's own, as they are (held_as_torch), against the torch layer it stands
    for; against another torch type holding that layer's tensors the type's own rule decides (tensors._rule)."""
    return name, array


def held_as_torch() -> dict:
    """{Paddle layer type: (the class name of the torch layer it stands for, tensor rule)} of paddle.compat's layers
    that hold tensors: Paddle 3.3's classes written for torch's code keep torch's names and layout (PaConvert writes
    every torch.nn.Linear as paddle.compat.nn.Linear, its weight [out, in]; paddle.compat.nn.MultiheadAttention holds
    in_proj_weight [3E, E] as torch's). Known by the Paddle type, never by its name: a classic paddle.nn.Linear ([in,
    out]) beside them keeps its own layout. {} where paddle.compat is not loaded (no Paddle model, or a Paddle without
    it); torch is not imported (`portcheck run`'s Paddle side reads it). tests/test_compat_layouts.py builds every
    layer paddle.compat holds and holds this table to their state dicts. paddlenlp's own Linear, which holds torch's
    [out, in] too, likewise where paddlenlp is loaded."""
    compat = sys.modules.get("paddle.compat.nn")
    held = {} if compat is None else {getattr(compat, name): (name, torch_held)
                                      for name in ("Linear", "MultiheadAttention") if hasattr(compat, name)}
    # paddlenlp's own Linear (paddlenlp.layers.Linear: "weight matrix is stored as [out_features, in_features] (same
    # as torch)"), the LM heads of its CTRL and RoBERTa among others
    nlp = sys.modules.get("paddlenlp.layers.linear")
    if nlp is not None and hasattr(nlp, "Linear"):
        held[nlp.Linear] = ("Linear", torch_held)
    return held


# torch's MultiheadAttention with key and value widths of their own (kdim, vdim) holds q, k and v's weights apart (no
# in_proj_weight) and their biases in one in_proj_bias [3E]; paddle.compat's holds the three biases apart as well.
# Keyed by the torch layer a Paddle type stands for (stands_for): the torch tensor, the Paddle ones it is cut into in
# order, and the torch tensor whose absence says the layer is so built
APART = {"MultiheadAttention": ("in_proj_bias", ("q_proj_bias", "k_proj_bias", "v_proj_bias"), "in_proj_weight")}


def apart(paddle_kind, names, side: str) -> tuple:
    """(torch's tensor name, its Paddle parts) where a layer of this Paddle type (side "paddle": holding these
    tensors; "torch": the torch layer it pairs with holding them) holds apart what the torch layer it stands for holds
    as one (APART), else None."""
    cut = APART.get(stands_for(paddle_kind))
    if cut is None:
        return None
    held = set(cut[1]) <= set(names) if side == "paddle" else cut[0] in names and cut[2] not in names
    return cut[:2] if held else None


def part_of(rule, p: int, n: int):
    """rule, then the p-th of n equal parts along the first axis."""
    def part(name, array):
        pname, array = rule(name, array)
        size = array.shape[0] // n
        return pname, array[p * size:(p + 1) * size]
    return part


def stands_for(paddle_kind):
    """The class name of the torch layer a paddle.compat layer type (or a base of it) stands for, or None."""
    held = held_as_torch()
    return next((held[k][0] for k in getattr(paddle_kind, "__mro__", ()) if k in held), None)
