"""Each module's settings, read off a model of either framework in torch's conventions (a LayerNorm's eps, GELU's
approximation, a Dropout's p, a BatchNorm's momentum as torch's 1 - Paddle's, a Conv's stride and padding): the one
reader `portcheck run` compares the two scripts' configurations with (hooks_torch.TorchSide.module_config,
hooks_paddle.PaddleSide.module_config), and a record keeps (SETTINGS keys, modules.describe) for the graphs' nodes
(portcheck.forward.graph). Imports numpy and portcheck.core; torch and Paddle only inside the functions handed
their models."""
import json

import numpy as np

from portcheck.core.keys import ROOT

SETTINGS = "cfg/"  # a record's key per module whose class the tables know: cfg/<name>, its settings as utf-8 JSON


def module_settings(named_modules, table) -> dict:
    """{module name: {"type": class, setting: value}} of the modules whose class the table knows ([(classes,
    their settings(module))], first match), for the configuration's comparison (portcheck.scripts.runconfig)."""
    out = {}
    for name, m in named_modules:
        found = next((read for kinds, read in table if isinstance(m, kinds)), None)
        if found is not None:
            out[name] = {"type": type(m).__name__, **found(m)}
    return out


def activation_name(f) -> str:
    """A Transformer layer's activation, a function (torch's F.relu; Paddle's F.gelu, named _gelu) or a module
    (torch's nn.GELU()), by its name in lower case: the settings' comparison of the two layers."""
    return (type(f).__name__ if hasattr(f, "forward") else f.__name__).lstrip("_").lower()


def padding(value, dims: int, channels_first: bool = True):
    """A convolution's padding in torch's form: a string ("same", "valid") in lower case, else one int per spatial
    axis. Paddle keeps what it was given: an int (torch's (p, p)), one per axis, two per axis ([top, bottom, left,
    right]: one where they are equal) or a pair per axis of the input, batch and channel's zero (its data_format's
    order)."""
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, (int, np.integer)):
        return [int(value)] * dims
    flat = [int(x) for x in np.asarray(value).reshape(-1)]
    if len(flat) == 2 * (dims + 2):  # a pair per axis of the input: its spatial axes' alone
        flat = flat[4:] if channels_first else flat[2:-2]
    if len(flat) == 2 * dims and all(flat[i] == flat[i + 1] for i in range(0, len(flat), 2)):
        flat = flat[::2]
    return flat


def of_torch(model) -> dict:
    """module_settings of a torch model (named_modules: "" the model itself)."""
    from torch import nn
    return module_settings(model.named_modules(), [
        (nn.modules.batchnorm._BatchNorm, lambda m: {"momentum": m.momentum, "eps": m.eps,  # runconfig.FROZEN
                                                     "frozen": not (m.training or m.running_mean is None)}),
        (nn.modules.dropout._DropoutNd, lambda m: {"p": m.p}),
        (nn.GELU, lambda m: {"approximate": m.approximate}),
        (nn.LayerNorm, lambda m: {"eps": m.eps, "bias": m.bias is not None}),
        (nn.Linear, lambda m: {"bias": m.bias is not None}),
        (nn.modules.conv._ConvNd, lambda m: {"bias": m.bias is not None, "padding_mode": m.padding_mode,
                                             "stride": list(m.stride), "padding": padding(m.padding, len(m.stride)),
                                             "dilation": list(m.dilation), "groups": m.groups}),
        (nn.Embedding, lambda m: {"padding_idx": m.padding_idx}),
        (nn.LeakyReLU, lambda m: {"negative_slope": m.negative_slope}),
        # mode: LSTM, GRU, RNN_TANH or RNN_RELU, as Paddle spells it; dropout: between layers, no weight shows it
        (nn.RNNBase, lambda m: {"mode": m.mode, "dropout": float(m.dropout)}),
        ((nn.TransformerEncoderLayer, nn.TransformerDecoderLayer),
         lambda m: {"activation": activation_name(m.activation), "norm_first": m.norm_first})])


def of_paddle(model) -> dict:
    """module_settings of a Paddle model in torch's conventions: BatchNorm's momentum m is torch's 1 - m, GELU's
    approximation a string."""
    from paddle import nn
    from paddle.nn.layer.conv import _ConvNd
    from paddle.nn.layer.norm import _BatchNormBase
    from paddle.nn.layer.rnn import RNNBase
    return module_settings(model.named_sublayers(include_self=True), [
        ((_BatchNormBase, nn.BatchNorm), lambda m: {"momentum": round(1 - float(m._momentum), 10),
                                                    "eps": float(m._epsilon), "frozen": bool(
                                                        not m.training if getattr(m, "_use_global_stats", None)
                                                        is None else m._use_global_stats)}),
        ((nn.Dropout, nn.Dropout2D, nn.Dropout3D), lambda m: {"p": float(m.p)}),
        (nn.GELU, lambda m: {"approximate": "tanh" if m._approximate in (True, "tanh") else "none"}),
        (nn.LayerNorm, lambda m: {"eps": float(m._epsilon), "bias": m.bias is not None}),
        (nn.Linear, lambda m: {"bias": m.bias is not None}),
        (_ConvNd, lambda m: {"bias": m.bias is not None, "padding_mode": m._padding_mode,
                             "stride": list(m._stride), "padding": padding(
                                 m._padding, len(m._stride), not str(getattr(m, "_data_format", "NC")).endswith("C")),
                             "dilation": list(m._dilation), "groups": m._groups}),
        (nn.Embedding, lambda m: {"padding_idx": m._padding_idx}),
        (nn.LeakyReLU, lambda m: {"negative_slope": m._negative_slope}),
        (RNNBase, lambda m: {"mode": m.mode, "dropout": float(m.dropout)}),
        ((nn.TransformerEncoderLayer, nn.TransformerDecoderLayer),
         lambda m: {"activation": activation_name(m.activation), "norm_first": bool(m.normalize_before)})])


def keyed(model) -> dict:
    """{cfg/<name>: its settings, without its class (the mod/ key's), as utf-8 JSON} of a model of either
    framework, the model itself as ROOT: what a record keeps of them."""
    try:
        found = of_paddle(model) if hasattr(model, "named_sublayers") else of_torch(model)
    except Exception:  # a subclass holding its settings otherwise: its nodes show none, its run is compared alike
        return {}
    out = {}
    for name, said in found.items():
        text = json.dumps({k: v for k, v in said.items() if k != "type"}, default=str)
        out[f"{SETTINGS}{name or ROOT}"] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()
    return out


def read(record) -> dict:
    """{module: its settings} a record keeps (keyed's); a key that is no JSON object is left out."""
    out = {}
    for key in record:
        if key.startswith(SETTINGS):
            try:
                said = json.loads(bytes(np.asarray(record[key], dtype=np.uint8).reshape(-1)).decode("utf-8"))
            except (ValueError, TypeError):
                continue
            if isinstance(said, dict):
                out[key[len(SETTINGS):]] = said
    return out
