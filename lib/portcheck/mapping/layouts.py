"""The per-type tensor rules: how each torch module type's tensors become its Paddle counterpart's (a Linear's
weight transposed, BatchNorm's statistics renamed), the layouts a caller may declare for types the table does not
know ("same", "transpose", "swapped", a portcheck.Fused), and those declarations read from JSON (`portcheck run
--layouts`).
Imports portcheck.core and portcheck.mapping.fused; torch only inside layouts_table."""
import json
import sys

from portcheck.core.errors import PipelineError
from portcheck.mapping.fused import Fused
# the Paddle layers holding torch's own layout, known by type (portcheck.mapping.held), read here by convert's rules
from portcheck.mapping.held import APART, apart, held_as_torch, part_of, stands_for, torch_held  # noqa: F401


def linear_layout(name, array):
    return name, (array.T if name == "weight" else array)  # torch [out, in], Paddle [in, out]


def same_layout(name, array):
    return name, array


def swapped_layout(name, array):
    """Every tensor of two axes or more with its last two swapped, whatever its name: packed experts [E, 2I, H]
    (transformers 5's, read with F.linear) against [E, H, 2I] (paddleformers' own, read x @ W), or a type of its own
    holding a 2-D matrix the port reads the other way round."""
    return name, (array.swapaxes(-1, -2) if getattr(array, "ndim", 0) >= 2 else array)


TRANSPOSED = "transposed/"  # a record's key: transposed/<torch key>, an empty array: its tensor written [in, out]
RENAMES = {"running_mean": "_mean", "running_var": "_variance"}  # BatchNorm's statistics, torch -> Paddle
# why a torch tensor and the Paddle one of its name differ in shape, which no pairing or layout settles
CONFIGS_DIFFER = ("the two models' configs differ there (a vocabulary, a type_vocab_size, a width); build both from "
                  "one config")


def _batch_norm(name, array):
    if name == "num_batches_tracked":  # Paddle keeps no count: its momentum never switches to an average
        return None, None
    return RENAMES.get(name, name), array


def _renamed(names: dict, rule=same_layout):
    """A rule that gives some tensors another name on the Paddle side."""
    def rename(name, array):
        return rule(names.get(name, name), array)
    return rename


def linear_held(tensors: dict, paddle_kind) -> tuple:
    """(None, linear_layout) for a torch module of a type of its own holding a Linear's tensors, a 2-D weight not
    square and a bias or none, that its forward reads with F.linear (transformers 5's Qwen3MoeTopKRouter), paired
    with a Paddle Linear: the weight [out, in] is Paddle's [in, out] transposed, the only layout its shape allows.
    None otherwise (a square weight fits either way: it is declared)."""
    weight = tensors.get("weight")
    linear = isinstance(paddle_kind, type) and any(k.__name__ == "Linear" for k in paddle_kind.__mro__)
    if not linear or set(tensors) - {"weight", "bias"} or weight is None or len(weight.shape) != 2 or \
            weight.shape[0] == weight.shape[1] or len(getattr(tensors.get("bias"), "shape", (0,))) != 1:
        return None
    return None, linear_layout


RULES = {"same": same_layout, "transpose": linear_layout, "swapped": swapped_layout}  # what `layouts` may name
IN_WORDS = {"same": "as it is", "transpose": "transposed", "swapped": "its last two axes swapped"}  # RULES, said


def lineage(kind: type) -> list:
    """A class and its bases, each as itself, its name and its module-qualified name (paddle.compat.nn.Linear, which
    a JSON file can give), nearest first: a layout declared for a layer applies to its subclasses (paddlenlp's
    GPTLayerNorm is a LayerNorm), and a subclass pairs as its base layer."""
    return [key for k in kind.__mro__ for key in (k, k.__name__, f"{k.__module__}.{k.__qualname__}")]


def declared_table(extra=None) -> dict:
    """{key: (None, rule)} of the layouts declared by type or name, the caller's (extra: {module type or class name, of
    either side: "same", "transpose" or "swapped"}; a Fused is the columns' business, portcheck.mapping.fused) over
    the Paddle layer types that hold torch's own layout (held_as_torch: paddle.compat's, known by type). Imports no
    framework: a Paddle-side script reads it (portcheck.scripts.hooks_paddle)."""
    # keyed as a caller may key one (paddle.compat.nn.Linear), so a caller's own entry for the type replaces it
    table = {f"{kind.__module__}.{kind.__qualname__}": (None, rule) for kind, (_, rule) in held_as_torch().items()}
    for key, how in (extra or {}).items():
        if isinstance(how, Fused) and isinstance(key, (type, str)):
            continue  # which columns are which part (portcheck.mapping.fused); the tensors' own rule is the type's
        if how not in RULES or not isinstance(key, (type, str)):
            raise PipelineError(f"layouts: {key!r}: {how!r} must be one of {', '.join(map(repr, RULES))}, keyed by a "
                                "torch or Paddle module type or its class name [PC301]")
        table[key] = (None, RULES[how])
    return table


def declared(table: dict, paddle_kind):
    """(None, rule) declared for a Paddle layer type (or a base of it) in `table`, or None: convert takes it before
    the torch module's own type's, and so does `portcheck run`'s Paddle side."""
    for key in lineage(paddle_kind) if isinstance(paddle_kind, type) else ():
        if table.get(key, (0,))[0] is None:
            return table[key]
    return None


def flipped(record: dict, layers: dict, counterpart, extra=None) -> dict:
    """{torch key: {its Paddle key}} of the 2-D weights a Paddle layer holds the other way from a torch record's
    layout (`portcheck run`'s: TRANSPOSED marks what it wrote transposed): the layout declared for the layer's type
    (declared: paddle.compat.nn.Linear keeps torch's [out, in]; extra, a --layouts entry keyed by a Paddle type), as
    convert reads it, is not the one the record was written in. layers: {Paddle layer name: its type}; counterpart:
    a torch key's Paddle key."""
    table, out = declared_table(extra), {}
    for key in (k[7:] for k, v in record.items() if k.startswith("state0/") and v.ndim == 2):
        target = counterpart(key)
        layer, _, name = target.rpartition(".")
        rule = declared(table, layers[layer]) if layer in layers else None
        if rule is not None and (rule[1] is linear_layout and name == "weight") != (f"{TRANSPOSED}{key}" in record):
            out[key] = {target}
    return out


def layouts_table(extra=None):
    """torch module type -> (Paddle layer type names it may become, tensor rule). Built on first use, so
    that importing this module does not load either framework. extra: the caller's own {module type or its
    class name, of either side: "same" or "transpose"} for modules this table does not know (a model's own
    norm, an embeddings module holding a parameter itself, paddlenlp's LlamaLMHead holding a Linear's weight);
    their Paddle type is not checked."""
    import torch.nn as tnn
    table = {tnn.Linear: (("Linear",), linear_layout), tnn.Embedding: (("Embedding",), same_layout),
             tnn.LayerNorm: (("LayerNorm",), same_layout), tnn.GroupNorm: (("GroupNorm",), same_layout),
             tnn.PReLU: (("PReLU",), _renamed({"weight": "_weight"}))}
    for n in (1, 2, 3):
        table[getattr(tnn, f"Conv{n}d")] = ((f"Conv{n}D",), same_layout)
        table[getattr(tnn, f"ConvTranspose{n}d")] = ((f"Conv{n}DTranspose",), same_layout)
        table[getattr(tnn, f"BatchNorm{n}d")] = ((f"BatchNorm{n}D", "BatchNorm"), _batch_norm)
        table[getattr(tnn, f"InstanceNorm{n}d")] = ((f"InstanceNorm{n}D",), _renamed({"weight": "scale"}))
    # q, k and v packed along the first axis of in_proj_weight [3E, E] and in_proj_bias, a Linear's layout each:
    # which Paddle Linear each part fills, a Fused(("q_proj", "k_proj", "v_proj"), output=False) entry says
    table[tnn.MultiheadAttention] = (("Linear",), _renamed({"in_proj_weight": "weight", "in_proj_bias": "bias"},
                                                           linear_layout))
    # a list of bare parameters (transformers' Reformer axial position embeddings) against Paddle's: each kept by its
    # index, as it is; a ParameterList does nothing with them itself, its owner's forward reads them
    table[tnn.ParameterList] = (("ParameterList",), same_layout)
    table[tnn.LSTM] = (("LSTM",), same_layout)  # gate order i, f, g, o on both sides; names weight_ih_l0, ..._reverse
    table[tnn.GRU] = (("GRU",), same_layout)
    table[tnn.RNN] = (("SimpleRNN",), same_layout)  # tanh or relu: torch's nonlinearity, Paddle's activation
    # transformers' GPT-2-style Conv1D already holds [in, out], as Paddle's Linear does. Taken from sys.modules,
    # not imported: a model holding one has loaded its module, and a model without one (a user's own script under
    # `portcheck run`) is spared loading transformers (~0.4 s)
    conv1d = sys.modules.get("transformers.pytorch_utils")
    if conv1d is not None:
        table[conv1d.Conv1D] = (("Linear",), same_layout)
    table.update(declared_table(extra))
    return table


def held_rule(module, paddle_kind):
    """The rule of a torch module paired with a Paddle layer type that holds torch's own layout (held_as_torch), by
    the Paddle type or a base of it, where the torch module is of the layer it stands for (or a subclass); else None."""
    held, names = held_as_torch(), {k.__name__ for k in type(module).__mro__}
    for kind in paddle_kind.__mro__ if isinstance(paddle_kind, type) else ():
        if kind in held and held[kind][0] in names:
            return held[kind][1]
    return None


def from_json(data, said: str = "layouts") -> dict:
    """The layouts `portcheck run --layouts FILE` declares, as the API takes them: a JSON object keyed as any layout
    is (a module's class name, its module-qualified name where the API takes the type itself (paddle.compat.nn.Linear),
    its last name part or its whole name), each value "same", "transpose", "swapped" or
    {"fused": [parts], "heads": n, "output": false, "widths": [n, ...]} (Fused's fields). Anything else: PipelineError, one line."""
    if not isinstance(data, dict):
        raise PipelineError(f"{said}: a JSON object is expected ({{\"c_attn\": {{\"fused\": [\"q\", \"k\", \"v\"]}}}}),"
                            f" got a {type(data).__name__} [PC308]")
    out = {}
    for key, how in data.items():
        if isinstance(how, str) and how in RULES:
            out[key] = how
        elif isinstance(how, dict) and isinstance(how.get("fused"), list) and \
                set(how) <= {"fused", "heads", "output", "widths"} and not isinstance(how.get("heads"), bool):
            try:
                out[key] = Fused(tuple(how["fused"]), how.get("heads", 0), how.get("output", True),
                                 tuple(how.get("widths", ())))
            except PipelineError as e:
                raise PipelineError(f"{said}: {key!r}: {e}") from None
        else:
            raise PipelineError(f"{said}: {key!r}: {json.dumps(how)[:80]} is not a layout: give "
                                f"{' or '.join(map(repr, RULES))}, or {{\"fused\": [parts], \"heads\": n, "
                                "\"output\": false} (heads and output optional) [PC312]")
    return out


# the settings that make a layer's tensors and output the shapes they are, by torch's name (Paddle's: _<name>, or
# these); a difference is said by them, not only by the shapes it makes
CONFIG_FIELDS = {"in_channels": (), "out_channels": (), "kernel_size": (), "stride": (), "padding": (),
                 "dilation": (), "groups": (), "in_features": (), "out_features": (), "num_embeddings": (),
                 "embedding_dim": (), "num_features": ("_num_features",), "eps": ("_epsilon",)}


def config_fields(torch_module, paddle_layer) -> list:
    """[(field, torch's, Paddle's)] of CONFIG_FIELDS that both hold and that differ: kernel_size (3, 3) against
    [3, 3] and padding 1 against [1, 1] are one setting."""
    def read(module, names):
        for n in names:
            v = getattr(module, n, None)
            if v is not None and not callable(v):
                v = tuple(int(x) if float(x).is_integer() else x for x in v) if isinstance(v, (tuple, list)) else v
                return v[0] if isinstance(v, tuple) and len(set(v)) == 1 else v
        return None
    out = []
    for field, names in CONFIG_FIELDS.items():
        a, b = read(torch_module, (field,)), read(paddle_layer, names or (f"_{field}", field))
        if a is not None and b is not None and a != b:
            out.append((field, a, b))
    return out
