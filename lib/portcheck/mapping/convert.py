"""Strict weight conversion for any torch/Paddle model pair: the layout follows the module's type.

Every torch module that holds parameters or buffers of its own is looked up by type in the layout table (or
the caller's `layouts`, keyed by a torch type or a Paddle one); its Paddle counterpart is found by
portcheck.mapping.pairing (the name map's entries as given, the rest aligned), must be of the matching Paddle type,
and receives each tensor under its Paddle name in Paddle's layout. Every key, shape and dtype is checked in
both directions first: Paddle keys nothing filled, torch tensors with no Paddle key, and shapes or dtypes that
differ end the run with one line naming every one of them. Only then is each Paddle tensor set, in place, one
at a time. A square Linear weight is transposed because it belongs to a Linear, never because its shape
happens to fit; a paddle.compat.nn.Linear, by its type, keeps torch's [out, in]; one that no type places (a Paddle
layer of a class of its own) is settled by that layer's run both ways on torch's recorded input, or refused.

Each torch tensor's Paddle name and layout is portcheck.mapping.tensors' (torch_layouts), each torch module's
counterpart portcheck.mapping.module_pairs' (pair_modules); here they are planned together (plan), checked, and set
(convert).
"""
from dataclasses import replace

import numpy as np

from portcheck.mapping import fused, inferred, loose as loose_tensors, own_layout, parted, pointwise, torch_fused
from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT
from portcheck.mapping.layouts import same_layout
from portcheck.mapping.module_pairs import pair_modules
from portcheck.mapping.names import parent_of_paired
from portcheck.mapping.settle import (SETTLED, settle_by_run, settle_fused, settle_held,  # noqa: F401 (SETTLED:
                                      settle_layouts, settle_parted, without_run)  # documented here, docs/pairing.md)
from portcheck.mapping.state import Joined, State, names_of_one_tensor, numpy_dtype, save_pdparams
from portcheck.mapping.tensors import Tensor, paddle_key, torch_layouts
from portcheck.mapping.trace import check_models
from portcheck.mapping.weights import named


def plan(torch_model, paddle_model, name_map=None, layouts=None, inputs=None, paddle_kinds=None,
         paired=None, copies=None, doubt=None, ran=None, loose=None, either_way=None) -> dict:
    """{torch key: (Paddle key, Tensor, numpy array)} for every parameter and buffer the Paddle model takes,
    with every module's counterpart and type checked; compare_backward maps gradients and updated weights
    through the same rules. paddle_kinds, a dict if given, receives {torch module: the Paddle type it pairs
    with} (what a torch-side record needs for layouts declared by a Paddle type); paired, a dict if given,
    {torch module: its Paddle module} ("" for the model itself); copies, a dict if given, {torch module: the other
    Paddle modules it runs as} (pairing.Pairing.copies); loose, a dict if given, {torch key: mapping.loose.Loose}.
    either_way, a dict if given, receives {torch module: mapping.loose.Either}: square weights a Paddle layer of
    another type holds, planned transposed, for convert to settle by its run; without it (compare_backward, the Paddle
    model converted already) each is taken in the layout the Paddle model holds (settle.settle_held); so too a square
    weight a type of its own holds (own_layout.fitted: a router as many experts as hidden wide)."""
    check_models(torch_model, paddle_model)
    loose = {} if loose is None else loose
    modules, missing = pair_modules(torch_model, paddle_model, name_map, inputs, layouts, copies, doubt, ran, loose)
    if paired is not None:
        paired.update(modules)
    in_parts = {k: v for k, v in loose.items() if isinstance(v, parted.Parted)}
    if in_parts and either_way is None:  # compare_backward: in the order the Paddle model holds, converted before
        loose.update(parted.held(in_parts, torch_model, paddle_model))
    layers = dict(paddle_model.named_sublayers(include_self=True))
    for name, spec in fused.specs(paddle_model, layouts).items():  # a Paddle fused module's parts are its own
        layers.update({f"{name}.{part}": layers[name] for part in spec.parts})
    kinds = {"" if t == ROOT else t: type(layers[p]) for t, p in modules.items() if p in layers}
    if paddle_kinds is not None:
        paddle_kinds.update(kinds)
    ways = {} if either_way is None else either_way
    # a type no layout names holding tensors of its own (a class token, a router's [experts, hidden] weight): placed
    # by its counterpart's shapes, a square weight by the run (convert) or the layout the Paddle model holds
    taken = {*loose, *parted.parts_of(loose)}  # a vector's parts (mapping.parted) are held as that vector
    loose.update(own_layout.fitted(torch_model, paddle_model, modules, layouts, taken, ways))
    misfit = own_layout.misfits(torch_model, paddle_model, modules, layouts, {*loose, *taken})
    if misfit:  # a type of its own whose tensors fit its counterpart's in no layout: their shapes, not a layout, differ
        raise PipelineError(misfit + " [PC315]")
    # an unknown layout first: no pairing makes it known
    tensors = torch_layouts(torch_model, layouts, kinds, loose)
    out, wrong = {}, {}
    for key, tensor in tensors.items():
        if tensor.moved_to:
            out[key] = (tensor.moved_to, tensor, tensor.array)
            continue
        if tensor.module not in kinds:
            continue
        target, kind = modules[tensor.module or ROOT], kinds[tensor.module].__name__
        if tensor.kinds is not None and not set(tensor.kinds) & {k.__name__ for k in kinds[tensor.module].__mro__}:
            wrong[tensor.module] = f"torch {tensor.module} is a {tensor.module_type} but Paddle {target} is a {kind}"
        out[key] = (paddle_key(tensor, target), tensor, tensor.array)
    shapes = {k: tuple(v.shape) for k, v in paddle_model.state_dict().items()}
    for key, (p_key, tensor, array) in out.items():  # 0-d against [1], [n, 1] against [n]: one rule for every use
        if sum(d != 1 for d in np.shape(array)) <= 1 and p_key in shapes and \
                loose_tensors.same_scalar_shapes(np.shape(tensor.to_paddle(array)), shapes[p_key]):
            out[key] = (p_key, replace(tensor, rule=loose_tensors.reshaped(tensor.rule, shapes[p_key])), array)
    pointwise.held_pointwise(out, wrong, modules, layers, torch_model, shapes, loose)  # a 1x1 conv against a Linear
    loose_tensors.held_otherwise(out, wrong, modules, layers, shapes, loose, ways)  # axes merged, another type's layer
    if ways and either_way is None:  # the Paddle model converted already: it holds the layout convert settled
        settle_held(paddle_model, ways, out, loose)
    if wrong:  # before the modules left over: a wrong pair leaves another one without its counterpart
        # a Paddle type holding the torch layer's tensors all the same is taken above (loose.otherwise): these do not
        raise PipelineError(f"{'; '.join(list(wrong.values())[:6])}{'; ...' if len(wrong) > 6 else ''}: the pairing "
                            "joins different layers, whose tensors are not each other's; give name_map entries for "
                            "the right pairs [PC012]")
    if missing:
        raise PipelineError(missing + " [PC315]")
    return out


@fused.taken
def convert(torch_model, paddle_model, name_map=None, path=None, layouts=None, inputs=None, keep=()) -> "State":
    """Set paddle_model's weights to torch_model's, in Paddle's names and layout, one tensor at a time, and
    return them as {Paddle state-dict key: numpy array} (a State, read from the torch model on demand).

    name_map: None (every module paired automatically, portcheck.mapping.pairing), or how some torch modules' names
    become their Paddle counterparts' (align.names.resolve): a dict of name prefixes, a list of (regex,
    replacement) rules, or a callable; the modules it renames are paired as it says, the rest automatically.
    inputs: a batch both models take (as compare_forward's): pairs modules by their run order and output
    shapes, more surely than the definition order used without it; and a square weight a Paddle layer of a type of
    its own holds (either layout fits it) keeps the layout that layer's run on torch's recorded input says (PC455
    without inputs; where neither layout gives torch's output, [in, out] stays, said in state.said).
    path: also write the converted weights there as a .pdparams (paddle.save), through the project's safe writer.
    layouts: {module type or class name, torch's or Paddle's: "same", "transpose" or "swapped"} for module types whose
    layout this converter does not know (transformers' ViTEmbeddings holding cls_token; paddlenlp's
    LlamaLMHead, a Linear's weight in [in, out]: "transpose" from torch's Linear). A type no one declared
    whose tensors each have at most one axis longer than 1 (an RMSNorm's scale) keeps its layout. A
    portcheck.Fused value, keyed by a type, a class name or a module name, declares a fused module whose output
    columns hold parts the other side computes in modules of their own, or orders another way (fused: GPT-2's
    c_attn; recipes.paddlenlp_gpt); with output=False, tensors packing parts its forward reads itself
    (recipes.TORCH_ATTENTION: torch's in_proj_weight).
    Raises portcheck.core.errors.PipelineError, one line, on a module type whose layout is unknown, a module with no
    Paddle counterpart or of another type, a pairing two candidates make ambiguous, and on the keys, shapes and
    dtypes that do not match in either direction, every one of them named in that line; the Paddle model is then
    left as it was. Every check is made before the first tensor is set, and each is set in place: the peak is
    both models and one tensor, never a second copy of the weights (docs/bench/llm.md).
    A buffer the Paddle model saves and the torch one does not (paddlenlp saves embeddings.position_ids,
    transformers keeps it out of its state dict) is filled from the torch module's own buffer of that name
    when it holds the same values, and refused when they differ; one torch does not hold at all (its forward
    computes it) is refused, naming it, unless keep= lists its Paddle key: then Paddle's own value stays, and
    compare_forward judges what reads it (an integer input exactly). A Paddle tensor no torch tensor fills whose
    module the run over `inputs` never calls (paddlenlp's token-classification model's pooler) keeps Paddle's own
    value, as `portcheck run` keeps it: named in state.kept, with its one line in state.said.
    paddle_model.set_state_dict(convert(...)), the older use, still works.
    """
    params = paddle_model.state_dict()  # the model's own tensors, not copies
    same = names_of_one_tensor(params)
    # a Paddle module holding what torch siblings hold together, its layout declared by no one: paired in its first
    # candidate layout, then settled by the run (settle_fused); without inputs nothing can say which, and the pairing's
    # refusal says what to declare
    found = {} if inputs is None else {
        name: inferred.candidates(tuple(p.rpartition(".")[2] for p in parts), shares, _width(paddle_model, name))
        for name, (parts, shares) in inferred.groups(torch_model, paddle_model, layouts).items()}
    found = {name: ways for name, ways in found.items() if ways}
    # and the other way round: a torch module holding what Paddle siblings hold apart (torch_fused)
    apart_found = {} if inputs is None else torch_fused.found(torch_model, paddle_model, layouts)
    if found or apart_found:
        layouts = {**(layouts or {}), **{name: ways[0] for name, ways in {**found, **apart_found}.items()}}
    # every problem is gathered before any is said: one run names them all (a port's first conversion usually
    # has several, and fixing them one run at a time costs a model load each)
    state, origin, problems, modules, copies, doubt, ran, held, ways = {}, {}, [], {}, {}, [], {}, {}, {}
    planned = plan(torch_model, paddle_model, name_map, layouts, inputs, paired=modules, copies=copies, doubt=doubt,
                   ran=ran, loose=held, either_way=ways)
    if ways and inputs is None:  # a square weight either layout fits: the run says which, never its shape
        raise without_run(ways)
    in_parts = {k: v for k, v in held.items() if isinstance(v, parted.Parted)}
    if inputs is None and any(len(v.ways) > 1 for v in in_parts.values()):
        raise PipelineError(f"{'; '.join(v.why for v in in_parts.values())}: the order of the parts is "
                            "settled by a run: pass inputs= (a batch both models take) [PC448]")
    for torch_key, (key, tensor, array) in planned.items():
        # a torch module the name map says runs as several Paddle modules fills each (Pairing.copies)
        for key in [key] + [paddle_key(tensor, other) for other in copies.get(tensor.module or ROOT, ())]:
            if key in state and state[key][0].tie == tensor.tie:
                continue  # one torch tensor tied in two modules, both paired with the Paddle module holding it once
            if key in state:  # the pairing is one to one: only a layout's renaming can send two tensors to one key
                problems.append(f"Paddle key {key} is filled twice (from {origin[key]} and {torch_key})")
                continue
            state[key], origin[key] = (tensor, array), torch_key
    # a Paddle fused module's tensors, each made of its parts' columns
    for whole, (spec, keys) in fused.joining(fused.specs(paddle_model, layouts), state).items():
        state[whole] = (Joined(spec, [state.pop(k) for k in keys]), None)
        origin[whole] = " + ".join(origin.pop(k) for k in keys)
    problems += [f"keep= names no Paddle key: {named(sorted(set(keep) - set(params)))}"] if set(keep) - set(params) else []
    unfilled = [k for k in params if not any(a in state for a in same[k]) and k not in keep]
    unused = [k for k in unfilled if "Paddle" in ran and (k.rpartition(".")[0] or ROOT) not in ran["Paddle"]]
    unfilled = [k for k in unfilled if k not in unused]
    buffers, said = _one_sided_buffers(torch_model, paddle_model, unfilled, modules, params)
    for key, (torch_key, tensor) in buffers.items():
        state[key], origin[key] = (tensor, tensor.array), torch_key
    unfilled = [k for k in unfilled if k not in buffers and k not in said]
    problems += list(said.values())
    state = State(state, origin)
    state.kept = unused
    unknown = [origin[k] for k in state if k not in params]
    problems += [f"Paddle keys no torch tensor fills: {named(unfilled)}"] if unfilled else []
    problems += [f"torch tensors with no Paddle key: {named(unknown)}"] if unknown else []
    for key in state:
        if key not in params:
            continue
        value, want = state.view(key), params[key]
        if loose_tensors.same_scalar_shapes(value.shape, want.shape):  # 0-d against [1], [n, 1] against [n]: reshaped
            tensor, array = state._tensors[key]
            state._tensors[key] = (replace(tensor, rule=loose_tensors.reshaped(tensor.rule, tuple(want.shape))), array)
            continue
        if tuple(value.shape) != tuple(want.shape):
            problems.append(f"{origin[key]} -> {key}: shape {tuple(value.shape)} (after the layout rule) vs "
                            f"Paddle {tuple(want.shape)}")
        if value.dtype != numpy_dtype(want):
            problems.append(f"{origin[key]} -> {key}: dtype {value.dtype} vs Paddle {numpy_dtype(want)} "
                            "(convert both models to one dtype first)")
    problems += one_tensor_twice(state, same)
    if problems:
        raise PipelineError(f"keys, shapes or dtypes do not match ({len(problems)} problem(s), the Paddle model "
                            "left as it was): " + named(problems, "; ") + " [PC014]")
    # a group only the run's order paired is settled by the models' run, each order tried on the converted rest:
    # the Paddle model's own values kept to be put back if values cannot settle it
    # and a square weight no type places (loose.Either) by its module's run both ways on torch's recorded input
    unsettled, chosen, apart = [], {}, []
    if found and not doubt and not ways:
        # a correct port's fused layouts settle on their modules' parents alone, before anything is set: no copy of
        # the Paddle model's weights is kept and each is made once (a billion parameters' copy, 4.5 GB, costs more than
        # a forward). Where a parent alone does not settle one, the whole converted model's run does, below
        alone = settle_fused(torch_model, paddle_model, inputs, state, params, found, alone=True)
        if alone is not None:
            (chosen, unsettled), found = alone, {}
    settling = doubt or ways or found or apart_found or in_parts
    before = {k: params[k].numpy() for k in state if k in params} if settling else {}  # a copy each
    for key in state:
        params[key].set_value(state[key])  # one contiguous array at a time, freed before the next
    if settling:
        try:
            if doubt:
                apart = settle_by_run(torch_model, paddle_model, inputs, state, params, modules, doubt)
            if found:  # first: a square weight judged where its parent computes reads the fused modules there
                chosen, unsettled = settle_fused(torch_model, paddle_model, inputs, state, params, found)
            if apart_found:
                taken, lines = torch_fused.settle(torch_model, paddle_model, inputs, state, params, apart_found)
                chosen, unsettled = {**chosen, **taken}, unsettled + lines
            unsettled += settle_layouts(torch_model, paddle_model, inputs, state, params, ways, held)
            if in_parts:
                unsettled += settle_parted(torch_model, paddle_model, inputs, state, params, in_parts)
                held.update(in_parts)
        except PipelineError:
            for key, value in before.items():
                params[key].set_value(value)
            raise
    state.said = "; ".join(
        ([f"Paddle's {named(unused)}: no torch tensor; unused by its forward on inputs: kept at Paddle's own value"]
         if unused else []) +
        ([f"torch's {named(ran['frozen'])}: never trained, no Paddle counterpart (the port computes it in its "
          "forward): nothing to fill, judged through what reads it"] if ran.get("frozen") else []) +
        ([f"held otherwise, paired tensor to tensor: {named([h.why for h in held.values()], '; ')}"] if held else []) +
        ran.get("stopped", []) + apart + unsettled)
    state.fused_found = chosen
    if path is not None:
        save_pdparams({k: params[k] for k in state}, path)
    # the tensor's other names too, so that set_state_dict(convert(...)) finds every key it looks for
    state.aliases = {a: k for k in state for a in same[k] if a != k and a not in state}
    return state


def _width(paddle_model, name: str) -> int:
    """The output columns of a Paddle module's tensors (their last axis in Paddle's layout: a Linear's weight
    [in, out])."""
    layer = dict(paddle_model.named_sublayers())[name]
    return int(next(iter(layer.parameters(include_sublayers=False))).shape[-1])


def _one_sided_buffers(torch_model, paddle_model, unfilled: list, modules: dict, params: dict) -> tuple:
    """Of the Paddle keys no torch tensor fills, the buffers (not parameters): ({Paddle key: (torch key, Tensor)}
    for each the paired torch module holds as a buffer it does not save, with the same values; {Paddle key:
    the problem}) for each whose values differ, or that torch does not hold (its forward computes it)."""
    # a parameter that does not train (stop_gradient: paddlenlp's CTRL sinusoidal pos_encoding, which transformers
    # computes into a plain tensor) is one more buffer: the model builds it, no optimizer moves it
    buffers = {f"{name}.{b}" if name else b: (name, b) for name, layer in paddle_model.named_sublayers(include_self=True)
               for b in [*getattr(layer, "_buffers", {}),
                         *(n for n, p in layer.named_parameters(include_sublayers=False) if p.stop_gradient)]}
    by_paddle = {p: t for t, p in modules.items()}
    torch_modules = dict(torch_model.named_modules())
    layers = dict(paddle_model.named_sublayers(include_self=True))
    layer_buffers = lambda layer: getattr(layers[layer], "_buffers", {})
    # a layer whose every trained parameter no torch tensor fills either is a layer the torch model does not have (a
    # shortcut conv + BN only the port holds): its statistics are listed with its weights, keep= is no answer there
    left = set(unfilled)

    def absent(layer) -> bool:
        trained = [f"{layer}.{n}" if layer else n for n, p in layers[layer].named_parameters(include_sublayers=False)
                   if not p.stop_gradient]
        return bool(trained) and all(k in left for k in trained)

    filled, said = {}, {}
    for key in (k for k in unfilled if k in buffers):
        layer, name = buffers[key]
        if absent(layer):
            continue
        want = np.asarray(params[key].numpy())
        t_module = by_paddle.get(layer) or parent_of_paired(layer, by_paddle)
        t_module = ROOT if t_module is None and layer == "" else t_module
        module = torch_modules.get("" if t_module == ROOT else t_module)
        value = getattr(module, "_buffers", {}).get(name)
        t_key = ".".join(n for n in ("" if t_module == ROOT else t_module, name) if n)
        if value is None:
            said[key] = (f"Paddle {'buffer' if name in layer_buffers(layer) else 'parameter that does not train'} "
                         f"{key} {list(want.shape)} {want.dtype} has no torch tensor (the torch model computes it in "
                         f"its forward): pass keep=['{key}'] to leave Paddle's own value, which compare_forward "
                         "judges through what reads it")
            continue
        array = value.detach().cpu().numpy()
        if array.shape != want.shape or array.dtype != want.dtype or not np.array_equal(array, want):
            said[key] = (f"Paddle buffer {key} {list(want.shape)} {want.dtype} differs from torch's unsaved buffer "
                         f"{t_key} {list(array.shape)} {array.dtype}: build it as torch does")
            continue
        filled[key] = (t_key, Tensor(t_key.rpartition(".")[0], name, name, same_layout, None, type(module).__name__, array))
    return filled, said


def one_tensor_twice(state, same: dict) -> list:
    """A Paddle tensor held under several keys (a head tied to the embedding, tie_word_embeddings) that the state fills
    from torch tensors of other values (torch's head its own): the last key set would win, the other's values lost."""
    said, seen = [], set()
    for key in state:
        group = [k for k in same.get(key, [key]) if k in state]
        if len(group) < 2 or group[0] in seen:
            continue
        seen.add(group[0])
        views = [np.asarray(state.view(k)) for k in group]
        if any(v.shape != views[0].shape or not np.array_equal(v, views[0]) for v in views[1:]):
            said.append(f"Paddle {' and '.join(group)} are one tensor (tied), filled from torch's "
                        f"{' and '.join(state.origin[k] for k in group)}, which differ: the two configs tie them "
                        "otherwise (tie_word_embeddings)")
    return said

