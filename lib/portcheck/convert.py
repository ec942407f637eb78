"""Strict weight conversion for any torch/Paddle model pair: the layout follows the module's type.

Every torch module that holds parameters or buffers of its own is looked up by type in the layout table (or
the caller's `layouts`, keyed by a torch type or a Paddle one); its Paddle counterpart is found by
portcheck.pairing (the name map's entries as given, the rest aligned), must be of the matching Paddle type,
and receives each tensor under its Paddle name in Paddle's layout. Every key, shape and dtype is checked in
both directions first: Paddle keys nothing filled, torch tensors with no Paddle key, and shapes or dtypes that
differ end the run with one line naming every one of them. Only then is each Paddle tensor set, in place, one
at a time. A square Linear weight is transposed because it belongs to a Linear, never because its shape
happens to fit.
"""
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from portcheck import pairing
from portcheck.errors import PipelineError
from portcheck.weights import named


def _linear(name, array):
    return name, (array.T if name == "weight" else array)  # torch [out, in], Paddle [in, out]


def _same(name, array):
    return name, array


RENAMES = {"running_mean": "_mean", "running_var": "_variance"}  # BatchNorm's statistics, torch -> Paddle


def _batch_norm(name, array):
    if name == "num_batches_tracked":  # Paddle keeps no count: its momentum never switches to an average
        return None, None
    return RENAMES.get(name, name), array


def _renamed(names: dict, rule=_same):
    """A rule that gives some tensors another name on the Paddle side."""
    def rename(name, array):
        return rule(names.get(name, name), array)
    return rename


RULES = {"same": _same, "transpose": _linear}  # what a user's `layouts` may name


def _layouts(extra=None):
    """torch module type -> (Paddle layer type names it may become, tensor rule). Built on first use, so
    that importing this module does not load either framework. extra: the caller's own {module type or its
    class name, of either side: "same" or "transpose"} for modules this table does not know (a model's own
    norm, an embeddings module holding a parameter itself, paddlenlp's LlamaLMHead holding a Linear's weight);
    their Paddle type is not checked."""
    import torch.nn as tnn
    table = {tnn.Linear: (("Linear",), _linear), tnn.Embedding: (("Embedding",), _same),
             tnn.LayerNorm: (("LayerNorm",), _same), tnn.GroupNorm: (("GroupNorm",), _same),
             tnn.PReLU: (("PReLU",), _renamed({"weight": "_weight"}))}
    for n in (1, 2, 3):
        table[getattr(tnn, f"Conv{n}d")] = ((f"Conv{n}D",), _same)
        table[getattr(tnn, f"ConvTranspose{n}d")] = ((f"Conv{n}DTranspose",), _same)
        table[getattr(tnn, f"BatchNorm{n}d")] = ((f"BatchNorm{n}D", "BatchNorm"), _batch_norm)
        table[getattr(tnn, f"InstanceNorm{n}d")] = ((f"InstanceNorm{n}D",), _renamed({"weight": "scale"}))
    table[tnn.LSTM] = (("LSTM",), _same)  # gate order i, f, g, o on both sides; names weight_ih_l0, ..._reverse
    table[tnn.GRU] = (("GRU",), _same)
    try:  # transformers' GPT-2-style Conv1D already holds [in, out], as Paddle's Linear does
        from transformers.pytorch_utils import Conv1D
        table[Conv1D] = (("Linear",), _same)
    except ImportError:
        pass
    for key, how in (extra or {}).items():
        if how not in RULES or not isinstance(key, (type, str)):
            raise PipelineError(f"layouts: {key!r}: {how!r} must be one of {', '.join(map(repr, RULES))}, keyed by a "
                                "torch or Paddle module type or its class name")
        table[key] = (None, RULES[how])
    return table


def own_tensors(module) -> dict:
    """The parameters and persistent buffers a module holds itself (not its children's), as numpy arrays. A
    non-persistent buffer (transformers' position_ids) is rebuilt by the model, not saved: nothing to convert."""
    out = {n: p.detach().cpu().numpy() for n, p in module.named_parameters(recurse=False)}
    skip = getattr(module, "_non_persistent_buffers_set", set())
    out.update({n: b.detach().cpu().numpy() for n, b in module.named_buffers(recurse=False)
                if b is not None and n not in skip})
    return out


@dataclass(frozen=True)
class Tensor:
    """One torch parameter or buffer as a port sees it: its module, its own name, the Paddle name it takes,
    the layout rule that turns its array into Paddle's, and the Paddle layer types its module may become."""
    module: str
    name: str
    paddle_name: str
    rule: object
    kinds: tuple
    module_type: str
    array: object  # its value when the layouts were read (numpy, torch's layout)

    def to_paddle(self, array):
        return self.rule(self.name, np.asarray(array))[1]

    @property
    def transposed(self) -> bool:
        """A Linear's weight: torch [out, in], Paddle [in, out]."""
        return self.rule is _linear and self.name == "weight"


def _rule(table, module, paddle_kind=None):
    """(Paddle types, rule) for a torch module: a layout declared for the Paddle type it pairs with first, then
    its own type's; a type no one declared whose tensors are all 1-D (a norm's scale: nothing to transpose)
    keeps its layout. None when unknown."""
    for key in (paddle_kind, *((paddle_kind.__name__,) if isinstance(paddle_kind, type) else ())):
        if key is not None and table.get(key, (0,))[0] is None:
            return table[key]
    rule = table.get(type(module).__name__) or next((table[t] for t in type(module).__mro__ if t in table), None)
    if rule is None and all(len(a.shape) <= 1 for a in own_tensors(module).values()):
        return None, _same
    return rule


def torch_layouts(torch_model, layouts=None, paddle_kinds=None) -> dict:
    """{torch key: Tensor} for every parameter and buffer the Paddle side holds (num_batches_tracked has no
    Paddle counterpart), from the torch model alone: a torch-side script writes its tensors in Paddle's
    layout with it. paddle_kinds: {torch module: the Paddle layer type it pairs with}, for layouts declared by
    a Paddle type. Every module type with no known layout ends the run, all named at once."""
    table = _layouts(layouts)
    out, unknown = {}, {}
    for name, module in torch_model.named_modules():
        tensors = own_tensors(module)
        if not tensors:
            continue
        rule = _rule(table, module, (paddle_kinds or {}).get(name))
        if rule is None:
            unknown.setdefault(type(module).__name__, []).append(name or "(the model)")
            continue
        kinds, rule = rule
        for tname, array in tensors.items():
            pname = rule(tname, array)[0]  # the name only (a transpose is a view)
            if pname is not None:
                out[f"{name}.{tname}" if name else tname] = Tensor(name, tname, pname, rule, kinds,
                                                                   type(module).__name__, array)
    if unknown:
        said = "; ".join(f"{', '.join(names[:3])}{' ...' if len(names) > 3 else ''} ({kind})"
                         for kind, names in unknown.items())
        first = next(iter(unknown))
        raise PipelineError(f"torch module(s) {said}: this converter does not know their Paddle layout: pass "
                            f"layouts={{'{first}': 'same'}} (or 'transpose'; keyed by the torch type or the Paddle "
                            "one it pairs with) if their tensors keep their names, or add the type to "
                            "portcheck/convert.py's table")
    return out


def paddle_key(tensor: Tensor, target: str) -> str:
    """The Paddle state-dict key of a torch tensor whose module pairs with the Paddle module `target`."""
    return f"{target}.{tensor.paddle_name}" if target else tensor.paddle_name


def pair_modules(torch_model, paddle_model, name_map=None, inputs=None) -> tuple:
    """({torch module: Paddle module ("" for the model itself)}, [each torch module holding tensors left without
    a counterpart, said]), by portcheck.pairing: on the models' run over `inputs` when given (run order, output
    shapes; in eval mode, so BatchNorm's statistics stay), else on their definition order."""
    from portcheck.compare import eval_mode, trace  # compare imports this module
    with eval_mode(torch_model), eval_mode(paddle_model):
        paired = pairing.pair(trace(torch_model, inputs), trace(paddle_model, inputs), name_map)
    modules = paired.modules()
    layers = dict(paddle_model.named_sublayers(include_self=True))

    def said(name, module):
        if name in paired.missing:
            return f"{name} ({type(module).__name__}) -> {paired.missing[name]!r}"
        like = layers.get(name)  # the same name on the Paddle side, which the tensors' shapes kept apart
        shapes = lambda pairs: ", ".join(f"{k} {list(v.shape)}" for k, v in pairs)
        return f"{name} ({type(module).__name__}" + (
            f": {shapes(own_tensors(module).items())}; Paddle {name}: "
            f"{shapes(like.named_parameters(include_sublayers=False)) or 'none'}" if like is not None else "") + ")"
    missing = [said(n or pairing.ROOT, m) for n, m in torch_model.named_modules()
               if own_tensors(m) and (n or pairing.ROOT) not in modules]
    if missing:  # all at once: one run names every module left without a counterpart
        named = " (the name map names no Paddle module of that name)" if paired.missing else ""
        missing = (f"{len(missing)} torch module(s) have no counterpart in the Paddle model{named}: "
                   f"{'; '.join(missing[:12])}{'; ...' if len(missing) > 12 else ''}: give a name_map entry for each"
                   + ("" if inputs is not None else ", or inputs= to pair them by a run"))
    return {t: "" if p == pairing.ROOT else p for t, p in modules.items()}, missing


def plan(torch_model, paddle_model, name_map=None, layouts=None, inputs=None, paddle_kinds=None) -> dict:
    """{torch key: (Paddle key, Tensor, numpy array)} for every parameter and buffer the Paddle model takes,
    with every module's counterpart and type checked; compare_backward maps gradients and updated weights
    through the same rules. paddle_kinds, a dict if given, receives {torch module: the Paddle type it pairs
    with} (what a torch-side record needs for layouts declared by a Paddle type)."""
    check_models(torch_model, paddle_model)
    modules, missing = pair_modules(torch_model, paddle_model, name_map, inputs)
    layers = dict(paddle_model.named_sublayers(include_self=True))
    kinds = {"" if t == pairing.ROOT else t: type(layers[p]) for t, p in modules.items() if p in layers}
    if paddle_kinds is not None:
        paddle_kinds.update(kinds)
    tensors = torch_layouts(torch_model, layouts, kinds)  # an unknown layout first: no pairing makes it known
    out, wrong = {}, {}
    for key, tensor in tensors.items():
        if tensor.module not in kinds:
            continue
        target, kind = modules[tensor.module or pairing.ROOT], kinds[tensor.module].__name__
        if tensor.kinds is not None and kind not in tensor.kinds:
            wrong[tensor.module] = f"torch {tensor.module} is a {tensor.module_type} but Paddle {target} is a {kind}"
        out[key] = (paddle_key(tensor, target), tensor, tensor.array)
    if wrong:  # before the modules left over: a wrong pair leaves another one without its counterpart
        first = next(iter(wrong.values())).rsplit(" ", 1)[-1]
        raise PipelineError(f"{'; '.join(list(wrong.values())[:6])}{'; ...' if len(wrong) > 6 else ''}: the pairing "
                            f"joins different layers; give name_map entries for them, or layouts={{'{first}': 'same'}} "
                            "(or 'transpose') if that Paddle type holds the torch layer's tensors")
    if missing:
        raise PipelineError(missing)
    return out


def framework(model):
    """"torch", "paddle" or None (not a model)."""
    if hasattr(model, "named_sublayers"):
        return "paddle"
    return "torch" if hasattr(model, "named_modules") else None


def framework_of(model) -> str:
    """A model's framework, or one line saying the `model` given is not one."""
    side = framework(model)
    if side is None:
        raise PipelineError(f"model is a {type(model).__name__}, not a torch.nn.Module or a paddle.nn.Layer: "
                            "pass the model itself")
    return side


def check_models(torch_model, paddle_model):
    """One line unless the first is a torch module and the second a Paddle layer (the usual slip: swapped)."""
    given = framework(torch_model), framework(paddle_model)
    if given == ("paddle", "torch"):
        raise PipelineError("the models are swapped: pass the torch model first, then the Paddle one")
    for side, model, want in (("torch_model", torch_model, "torch"), ("paddle_model", paddle_model, "paddle")):
        if framework(model) != want:
            raise PipelineError(f"{side} is a {type(model).__name__}, not a "
                                f"{'torch.nn.Module' if want == 'torch' else 'paddle.nn.Layer'}: pass the model itself")


def convert(torch_model, paddle_model, name_map=None, path=None, layouts=None, inputs=None) -> "State":
    """Set paddle_model's weights to torch_model's, in Paddle's names and layout, one tensor at a time, and
    return them as {Paddle state-dict key: numpy array} (a State, read from the torch model on demand).

    name_map: None (every module paired automatically, portcheck.pairing), or how some torch modules' names
    become their Paddle counterparts' (align.names.resolve): a dict of name prefixes, a list of (regex,
    replacement) rules, or a callable; the modules it renames are paired as it says, the rest automatically.
    inputs: a batch both models take (as compare_forward's): pairs modules by their run order and output
    shapes, more surely than the definition order used without it.
    path: also write the converted weights there as a .pdparams (paddle.save), through the project's safe writer.
    layouts: {module type or class name, torch's or Paddle's: "same" or "transpose"} for module types whose
    layout this converter does not know (transformers' ViTEmbeddings holding cls_token; paddlenlp's
    LlamaLMHead, a Linear's weight in [in, out]: "transpose" from torch's Linear). A type no one declared
    whose tensors are all 1-D (an RMSNorm's scale) keeps its layout.
    Raises portcheck.errors.PipelineError, one line, on a module type whose layout is unknown, a module with no
    Paddle counterpart or of another type, a pairing two candidates make ambiguous, and on the keys, shapes and
    dtypes that do not match in either direction, every one of them named in that line; the Paddle model is then
    left as it was. Every check is made before the first tensor is set, and each is set in place: the peak is
    both models and one tensor, never a second copy of the weights (docs/llm.md).
    paddle_model.set_state_dict(convert(...)), the older use, still works.
    """
    params = paddle_model.state_dict()  # the model's own tensors, not copies
    # Paddle's RNN layers list each weight twice (weight_ih_l0 and 0.cell_fw.weight_ih: one tensor); a key is
    # filled when any name of its tensor is
    aliases = {}
    for k, v in params.items():
        aliases.setdefault(getattr(v, "name", k), []).append(k)
    same = {k: group for group in aliases.values() for k in group}
    # every problem is gathered before any is said: one run names them all (a port's first conversion usually
    # has several, and fixing them one run at a time costs a model load each)
    state, origin, problems = {}, {}, []
    for torch_key, (key, tensor, array) in plan(torch_model, paddle_model, name_map, layouts, inputs).items():
        if key in state:  # the pairing is one to one: only a layout's renaming can send two tensors to one key
            problems.append(f"Paddle key {key} is filled twice (from {origin[key]} and {torch_key})")
            continue
        state[key], origin[key] = (tensor, array), torch_key
    state = State(state, origin)
    unfilled = [k for k in params if not any(a in state for a in same[k])]
    unknown = [origin[k] for k in state if k not in params]
    problems += [f"Paddle keys no torch tensor fills: {named(unfilled)}"] if unfilled else []
    problems += [f"torch tensors with no Paddle key: {named(unknown)}"] if unknown else []
    for key in state:
        if key not in params:
            continue
        value, want = state.view(key), params[key]
        if tuple(value.shape) != tuple(want.shape):
            problems.append(f"{origin[key]} -> {key}: shape {tuple(value.shape)} (after the layout rule) vs "
                            f"Paddle {tuple(want.shape)}")
        if value.dtype != _numpy_dtype(want):
            problems.append(f"{origin[key]} -> {key}: dtype {value.dtype} vs Paddle {_numpy_dtype(want)} "
                            "(convert both models to one dtype first)")
    if problems:
        raise PipelineError(f"keys, shapes or dtypes do not match ({len(problems)} problem(s), the Paddle model "
                            "left as it was): " + named(problems, "; "))
    for key in state:
        params[key].set_value(state[key])  # one contiguous array at a time, freed before the next
    if path is not None:
        save_pdparams({k: params[k] for k in state}, path)
    # the tensor's other names too, so that set_state_dict(convert(...)) finds every key it looks for
    state.aliases = {a: k for k in state for a in same[k] if a != k and a not in state}
    return state


class State(Mapping):
    """{Paddle key: numpy array} of a conversion, each array made when it is read, from the torch tensor it comes
    from in Paddle's layout: the weights are never held twice (a 1.1B-parameter pair's would be 4.4 GB more).
    dict(state) is a copy of them all, at that moment."""

    def __init__(self, tensors: dict, origin: dict = None):
        self._tensors = tensors  # {Paddle key: (Tensor, its torch array)}
        self.aliases = {}        # {another Paddle key of the same tensor (an RNN's weight_ih_l0): its key}
        self.origin = origin or {}  # {Paddle key: the torch key it was filled from}

    def carried(self) -> dict:
        """{Paddle key: (its torch key, whether its layout is transposed)}: what record.model_fingerprint(model,
        port=state) reads on either side, so each side fingerprints its own weights under torch's names."""
        return {k: (self.origin[k], tensor.transposed) for k, (tensor, _) in self._tensors.items()}

    def view(self, key) -> np.ndarray:
        """The array in Paddle's layout, as a view of torch's where the layout allows (no copy)."""
        tensor, array = self._tensors[self.aliases.get(key, key)]
        return tensor.to_paddle(array)

    def __getitem__(self, key) -> np.ndarray:
        return np.ascontiguousarray(self.view(key))

    def __iter__(self):
        yield from self._tensors
        yield from self.aliases

    def __len__(self) -> int:
        return len(self._tensors) + len(self.aliases)

    @property
    def transposed(self) -> int:
        """How many of its tensors are Linear weights, turned from torch's [out, in] into Paddle's [in, out]."""
        return sum(tensor.transposed for tensor, _ in self._tensors.values())


_DTYPES = {}


def _numpy_dtype(tensor) -> np.dtype:
    """A Paddle tensor's dtype as numpy's (paddle.float32 -> float32), without copying the tensor."""
    if tensor.dtype not in _DTYPES:
        import paddle
        _DTYPES[tensor.dtype] = paddle.empty([0], dtype=tensor.dtype).numpy().dtype
    return _DTYPES[tensor.dtype]


def save_pdparams(state: dict, path):
    """{key: array or Paddle tensor} as a .pdparams; tensors are saved as they are, not copied first."""
    import paddle
    from portcheck.fileio import atomic_write
    tensors = lambda: {k: v if isinstance(v, paddle.Tensor) else paddle.to_tensor(v) for k, v in state.items()}
    atomic_write(path, lambda tmp: paddle.save(tensors(), str(tmp)))


def load_into(paddle_model, state: dict):
    """Set a state on the Paddle model (convert has already set its own)."""
    paddle_model.set_state_dict(state)
    return paddle_model
