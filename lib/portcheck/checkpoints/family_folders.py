"""A model of any family whole from its checkpoint folder, on either side, for `python -m portcheck generate`: the
class its config.json names (`architectures`; transformers' on the torch side, paddlenlp's on the Paddle side), built
from that config with its cache on, in float32, and filled from the folder's safetensors shards by name (Shards: nothing
unpickled). Before anything is built for real, a skeleton with no weights (torch's meta device, Paddle's LazyGuard)
is matched against the shards: every tensor of its state dict by name and shape, the names of one tied tensor
satisfied by any of them, a tensor missing or left over one line; the model is then no larger than its checkpoint
(paddlenlp's rotary caches, which its skeleton builds for real, held to the memory free first).
A PaddleFormers folder is loaded by paddleformers (formers_folders), in its venv.

    from portcheck.checkpoints import family_folders
    torch_model, paddle_model = family_folders.loaded("gpt2-hf/", "gpt-pd/")

May import portcheck.core and this package's checkpoint, fleet and formers_folders; torch, transformers, Paddle and
paddlenlp inside its functions.
"""
import importlib
from pathlib import Path

import numpy as np

from portcheck.checkpoints import checkpoint, formers_folders
from portcheck.checkpoints.checkpoint import CONFIG, INV_FREQ, Shards
from portcheck.core.errors import PipelineError, first_line

LIBRARY = {"torch": "transformers", "paddle": "paddlenlp"}
SEQ2SEQ = "ForConditionalGeneration"  # an encoder-decoder's head, by its class name in both libraries


def loaded(torch_dir, paddle_dir) -> tuple:
    """(torch's model, Paddle's), each its folder's architecture, float32, eval mode, its cache on; one line where the
    two folders are not of one family."""
    if formers_folders.is_formers(paddle_dir):
        folder = checkpoint.a_folder(paddle_dir, "paddle")
        raw = checkpoint.read_config(folder, split=(formers_folders.TP,))
        model_type, name = formers_folders.architecture(raw, folder / CONFIG)
        causal = name.endswith(formers_folders.CAUSAL)
        from portcheck.checkpoints import fleet
        fleet.install()
        # a base model: no head to generate with
        if not causal or not formers_folders.built(model_type, name, fleet.needed(), folder / CONFIG):
            why = f"paddleformers' {name} builds paddlefleet's own model (paddlefleet is not on PyPI)" if causal else \
                f"its {name} is a base model"
            raise PipelineError(f"{paddle_dir}: {why}: a model with no LM head cannot generate [PC670]")
        t_model, p_model, _, _ = formers_folders.load(torch_dir, paddle_dir, use_cache=True)
        return t_model, p_model
    raws = {side: checkpoint.read_config(checkpoint.a_folder(d, side)) for side, d in (("torch", torch_dir),
                                                                                     ("paddle", paddle_dir))}
    paths = {"torch": Path(torch_dir) / CONFIG, "paddle": Path(paddle_dir) / CONFIG}
    names = {side: formers_folders.architecture(raws[side], paths[side]) for side in raws}
    # one family is named otherwise in each library (transformers' gpt2 and GPT2LMHeadModel, paddlenlp's gpt and
    # GPTForCausalLM): what decides is the weights; an encoder-decoder against a decoder alone is refused here
    kinds = {side: names[side][1].endswith(SEQ2SEQ) for side in names}
    if kinds["torch"] != kinds["paddle"]:
        raise PipelineError(f"the torch folder is a {names['torch'][1]}, the Paddle one a {names['paddle'][1]}: "
                            "give two folders of one family [PC666]")
    return (model_of(torch_dir, "torch", raws["torch"], *names["torch"]),
            model_of(paddle_dir, "paddle", raws["paddle"], *names["paddle"]))


def model_class(side: str, model_type: str, name: str, path):
    """The library's class of that name: transformers' top level; paddlenlp's top level or its model_type's
    modeling module."""
    try:
        if side == "torch":
            return getattr(importlib.import_module("transformers"), name)
        library = importlib.import_module("paddlenlp.transformers")
        found = getattr(library, name, None)
        return found if found is not None else getattr(
            importlib.import_module(f"paddlenlp.transformers.{model_type}.modeling"), name)
    except (ImportError, AttributeError) as e:
        raise PipelineError(f"{path}: {LIBRARY[side]} has no {name} of model_type {model_type!r} "
                            f"({first_line(e, 120)}): give a folder its save_pretrained wrote [PC667]") from None


def model_of(folder, side: str, raw: dict, model_type: str, name: str):
    """The folder's model: its skeleton matched against the shards, then built and filled."""
    path = Path(folder) / CONFIG
    shards = Shards(folder, side)
    cls = model_class(side, model_type, name, path)
    try:
        config = cls.config_class.from_dict(dict(raw))
    except Exception as e:  # noqa: BLE001 - the library's own error on a config it cannot read, said in one line
        raise PipelineError(f"{path} cannot be read as {LIBRARY[side]}'s {name} config: {first_line(e, 200)} "
                            "[PC668]") from None
    config.use_cache = True
    if side == "torch":
        config._attn_implementation = "eager"
    elif hasattr(config, "dtype"):
        config.dtype = "float32"
    if side == "paddle" and raw.get("rope_theta") is not None:
        # paddlenlp's rotary models build their cosine and sine caches as the skeleton is built, weights or none
        checkpoint.rotary_fits(config, checkpoint.sizes(config), path)
    groups = tied_groups(built(cls, config, side, skeleton=True), side)
    present = matched(shards, groups)
    model = built(cls, config, side, skeleton=False)
    filled(model, side, shards, present)
    return model.eval() if side == "torch" else _eval(model)


def _eval(model):
    model.eval()
    return model


def built(cls, config, side: str, skeleton: bool):
    """The model of cls from config: a skeleton with no weights, or for real, its weights' initialisation skipped."""
    try:
        if side == "torch":
            import torch
            from transformers.modeling_utils import no_init_weights
            with (torch.device("meta") if skeleton else torch.device("cpu")), no_init_weights():
                model = cls(config)
            model.tie_weights()  # what from_pretrained ties, its initialisation skipped: the weights it shares
            return model
        import paddle
        from paddlenlp.transformers.model_utils import no_init_weights
        with no_init_weights():
            if skeleton:
                with paddle.LazyGuard():
                    return cls(config)
            return cls(config)
    except PipelineError:
        raise
    except Exception as e:  # noqa: BLE001 - the library's own error on a model it cannot build, said in one line
        raise PipelineError(f"{LIBRARY[side]}'s {cls.__name__} cannot be built from its folder's config: "
                            f"{first_line(e, 200)} [PC668]") from None


def tied_groups(model, side: str) -> list:
    """[(names, shape)]: the model's state dict, one entry per tensor, every name it is held under (a weight tied to
    another is one tensor of two names); a rotary inv_freq, computed from the config, left out."""
    state = model.state_dict(keep_vars=True) if side == "torch" else model.state_dict()
    groups = {}
    for name, tensor in state.items():
        if name.endswith(INV_FREQ):
            continue
        groups.setdefault(id(tensor), ([], tuple(tensor.shape)))[0].append(name)
    return list(groups.values())


def matched(shards: Shards, groups: list) -> dict:
    """{a name the shards hold: the model's names of that tensor}, every tensor of the model found once by name and
    shape; one line for a tensor missing, one left over, a shape that differs, or a tied tensor held twice with two
    values."""
    present, missing = {}, []
    for names, shape in groups:
        held = [n for n in names if n in shards.tensors]
        if not held:
            missing.append(names[0])
            continue
        for n in held:
            if tuple(shards.shape(n)) != shape:
                raise PipelineError(f"{shards.folder}: {n} is {list(shards.shape(n))}, the {shards.side} model's {n} "
                                    f"is {list(shape)}: the checkpoint does not fit its config's model [PC911]")
        first = shards.read(held[0])
        for n in held[1:]:
            if not np.array_equal(first, shards.read(n)):
                raise PipelineError(f"{shards.folder} holds {held[0]} and {n} with other values, one tensor of the "
                                    f"{shards.side} model (tied): save the checkpoint again [PC669]")
        present[held[0]] = names
    known = {n for names, _ in groups for n in names}
    extra = sorted(k for k in shards.tensors if k not in known and not k.endswith(INV_FREQ))
    side = shards.side
    if missing:
        raise PipelineError(f"{shards.folder} lacks {missing[0]}" + (f" (and {len(missing) - 1} more)" if
                            len(missing) > 1 else "") + f": the {side} checkpoint does not fit its config's model "
                                                        "[PC901]")
    if extra:
        raise PipelineError(f"{shards.folder} holds {extra[0]}, which the {side} model built from its config "
                            "lacks" + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "") + " [PC919]")
    return present


def filled(model, side: str, shards: Shards, present: dict):
    """Each tensor of the model set from the shards, in float32 (a tied one once: it is one tensor)."""
    if side == "torch":
        import torch
        state = model.state_dict(keep_vars=True)
        with torch.no_grad():
            for source, names in present.items():
                tensor = state[names[0]]
                tensor.copy_(torch.from_numpy(shards.read(source)).to(tensor.dtype))
        return
    state = model.state_dict()
    for source, names in present.items():
        state[names[0]].set_value(shards.read(source))
