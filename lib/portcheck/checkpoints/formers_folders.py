"""`python -m portcheck layers` on PaddleFormers checkpoint folders: a transformers 5 `save_pretrained` folder of a
Llama-family model (Qwen3, Qwen3-MoE, ERNIE 4.5, ...) against paddleformers' `save_pretrained` folder of its port,
each model loaded by its own library from its own folder and judged as loaded (compare_forward, cumulative and
isolated, no weight overwritten), one line per block.

    from portcheck.checkpoints import formers_folders
    report, said = formers_folders.compare("qwen3-hf/", "qwen3-pd/", ids)
    report, said = formers_folders.compare("qwen3-hf/", "qwen3-hf/", ids, convert_from_hf=True)

The Paddle folder is read by paddleformers' names: `model_type` and `architectures` pick the classes (transformers'
class of the same name on the torch side), `tensor_model_parallel_size` is the degree it was split for. The
layouts the port uses (qkv_proj per key-value group, up_gate_proj [gate | up]: recipes.paddleformers) come from the
config's heads, with no map given. convert_from_hf: the Paddle model is what paddleformers' own converter makes of
a transformers folder (`from_pretrained(folder, convert_from_hf=True)`). Where the folder's architecture is a
causal LM whose paddleformers class needs paddlefleet (not on PyPI) and paddlefleet is missing, both sides are the
base model (XModel), said in one line. Unlike paddlenlp Llama folders (portcheck.checkpoints.stream), the models are
whole in memory.

Imports core, mapping's recipes, forward's compare, and this package's checkpoint, fleet, split_folders
and stream; torch, transformers, Paddle and paddleformers
inside its functions.
"""
import contextlib
import importlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from portcheck.checkpoints import checkpoint, fleet
from portcheck.checkpoints.split_folders import first_red
from portcheck.core.errors import PipelineError

VERSION = "paddleformers_version"   # what paddleformers' save_pretrained writes into config.json
TP = "tensor_model_parallel_size"   # paddleformers' name for the tensor-parallel degree
CAUSAL = "ForCausalLM"


def is_formers(folder) -> bool:
    """Whether the folder's config.json was written by paddleformers (its version recorded there)."""
    try:
        return VERSION in checkpoint.read_config(checkpoint.a_folder(folder, "paddle"), split=(TP,))
    except PipelineError:
        return False


def architecture(raw: dict, path) -> tuple:
    """(model_type, the first of architectures) of a config.json, each a name; one line where either is missing."""
    model_type, names = raw.get("model_type"), raw.get("architectures")
    for key, value, fits in (("model_type", model_type, isinstance(model_type, str) and
                               re.fullmatch(r"[a-z0-9_]+", model_type)),
                              ("architectures", names, isinstance(names, list) and names and
                               isinstance(names[0], str) and names[0].isidentifier())):
        if not fits:
            raise PipelineError(f"{path}: {key} is {str(value)[:60]!r}: give the config.json save_pretrained wrote "
                                "(its model_type names the family, qwen3; architectures the class) [PC350]")
    return model_type, names[0]


def _paddle_class(model_type: str, name: str, path):
    try:
        module = importlib.import_module(f"paddleformers.transformers.{model_type}.modeling")
        return getattr(module, name)
    except (ImportError, AttributeError) as e:
        raise PipelineError(f"{path}: paddleformers has no {name} of model_type {model_type!r} "
                            f"({str(e).splitlines()[0][:120]}): give a folder of a family paddleformers ships "
                            "[PC351]") from None


def _torch_class(name: str, path):
    import transformers
    try:
        return getattr(transformers, name)
    except AttributeError:
        raise PipelineError(f"{path}: transformers has no {name}: give the torch folder of the same family "
                            "[PC358]") from None


def base_name(name: str) -> str:
    return name[:-len(CAUSAL)] + "Model" if name.endswith(CAUSAL) else name


def built(model_type: str, name: str, fleet_missing: bool, path) -> bool:
    """Whether paddleformers' class of that name can be built here: where paddlefleet is missing, a causal LM whose
    modeling module defines a provider of paddlefleet's own GPTModel (a class on the stand-ins' GPTModelProvider:
    qwen3's, glm4_moe's) cannot; llama's and phi3's are plain Paddle. Asked of the module, not of the family's name."""
    if not (name.endswith(CAUSAL) and fleet_missing):
        return True
    module = sys.modules[_paddle_class(model_type, name, path).__module__]
    return not any(isinstance(v, type) and issubclass(v, fleet.GPTModelProvider) and v is not fleet.GPTModelProvider
                   for v in vars(module).values())


def checked_degree(raw: dict, path):
    """The folder's tensor-parallel degree (its config's tensor_model_parallel_size): a folder saved split for N
    ranks is one line, since paddleformers' save_pretrained writes a model merged into one (--tp splits that one
    across ranks as paddleformers loads it: portcheck.checkpoints.formers_split)."""
    degree = raw.get(TP, 1)
    if type(degree) is not int or degree < 1:
        raise PipelineError(f"{path}: {TP} is {str(degree)[:40]!r}: a whole number, 1 or more [PC359]")
    if degree > 1:
        raise PipelineError(f"{path}: its config says {TP} {degree}; portcheck reads a PaddleFormers folder saved "
                            f"merged into one: give the folder saved merged ({TP} 1), and --tp N to split it across "
                            "N ranks as paddleformers loads it [PC352]")


def classes(torch_dir, paddle_dir) -> tuple:
    """(transformers' class, paddleformers' class, the torch folder, the Paddle folder, what was said): the
    classes the folders' configs name, the base models where the causal LM cannot be built (said)."""
    t_path, p_path = (Path(checkpoint.a_folder(d, s)) / checkpoint.CONFIG
                      for d, s in ((torch_dir, "torch"), (paddle_dir, "paddle")))
    t_raw = checkpoint.read_config(t_path.parent)
    p_raw = checkpoint.read_config(p_path.parent, split=(TP,))
    checked_degree(p_raw, p_path)
    t_type, t_name = architecture(t_raw, t_path)
    p_type, p_name = architecture(p_raw, p_path)
    if t_type != p_type:
        raise PipelineError(f"the torch folder is a {t_type!r} model, the Paddle one a {p_type!r}: give two folders "
                            "of one family [PC353]")
    said = [line for line in (fleet.install(),) if line]
    fleet_missing = fleet.needed()
    name = p_name if built(p_type, p_name, fleet_missing, p_path) else base_name(p_name)
    if name != p_name:
        said.append(f"{p_name} builds paddlefleet's own model (paddlefleet is not on PyPI): both sides compared as "
                    f"the base {name}")
    elif name.endswith(CAUSAL) != t_name.endswith(CAUSAL):
        name = base_name(name)
        said.append(f"one folder is a causal LM, the other a base model: both sides compared as {name}")
    t_class = _torch_class(t_name if name.endswith(CAUSAL) else base_name(t_name), t_path)
    return t_class, _paddle_class(p_type, name, p_path), t_path.parent, p_path.parent, said


def torch_loaded(t_class, folder, use_cache: bool = False):
    """transformers' model from its folder's safetensors (no pickle read), float32, eager attention, eval mode."""
    import torch
    return t_class.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager",
                                   use_safetensors=True, local_files_only=True, use_cache=use_cache).eval()


def port_layouts(config, torch_model) -> dict:
    """The layouts paddleformers' port uses (recipes.paddleformers: qkv_proj per key-value group, up_gate_proj
    [gate | up]), from the config's heads."""
    from portcheck.mapping.recipes import paddleformers
    layouts = paddleformers(config.num_attention_heads, config.num_key_value_heads or config.num_attention_heads)
    if any(n.split(".")[-1] == "experts" for n, _ in torch_model.named_modules()):
        # a mixture of experts' up_gate_proj is per expert, against transformers' packed experts: paired by index
        # (portcheck.mapping's experts), not as a fused [gate | up]
        del layouts["up_gate_proj"]
    return layouts


def load(torch_dir, paddle_dir, convert_from_hf: bool = False, use_cache: bool = False) -> tuple:
    """(torch model, Paddle model, layouts, what was said): each side from its own folder by its own library, in
    float32, eval mode, no cache unless use_cache (generation's); the base models where the causal LM cannot be
    built (said)."""
    t_class, p_class, t_folder, p_folder, said = classes(torch_dir, paddle_dir)
    if convert_from_hf:
        said.append(f"the Paddle model: paddleformers' {p_class.__name__}.from_pretrained(folder, convert_from_hf="
                    "True)")
    t_model = torch_loaded(t_class, t_folder, use_cache)
    p_model = paddle_loaded(p_class, p_folder, convert_from_hf, use_cache)
    return t_model, p_model, port_layouts(p_model.config, t_model), said


@contextlib.contextmanager
def private_view(folder):
    """A private folder of links to `folder`'s files, removed afterwards: paddleformers' loader writes its
    flex-ckpt metadata beside the files it reads, and the user's folder is never written."""
    view = tempfile.mkdtemp(prefix="portcheck_formers_")
    try:
        for entry in os.scandir(folder):
            os.symlink(os.path.join(os.path.abspath(folder), entry.name), os.path.join(view, entry.name))
        yield view
    finally:
        shutil.rmtree(view, ignore_errors=True)


def paddle_loaded(p_class, folder, convert_from_hf: bool = False, use_cache: bool = False, degree: int = 1,
                  rank: int = 0):
    """paddleformers' model from its folder, float32, eval mode; degree > 1: this rank's shard of it, split as
    paddleformers splits it (tensor_model_parallel_size, in a rank of fleet's model-parallel group)."""
    kw = {"convert_from_hf": True} if convert_from_hf else {}
    try:
        with private_view(folder) as view:
            # the fused norm kernel is not registered on CPU
            config = p_class.config_class.from_pretrained(view)
            config.fuse_rms_norm, config.use_cache = False, use_cache
            if degree > 1:
                config.tensor_model_parallel_size, config.tensor_parallel_rank = degree, rank
            model = p_class.from_pretrained(view, config=config, dtype="float32", **kw)
    except Exception as e:  # noqa: BLE001 - the library's own error on a folder it cannot load, said in one line
        raise PipelineError(f"{folder}: paddleformers' {p_class.__name__}.from_pretrained cannot load it "
                            f"({str(e).splitlines()[0][:160]}): give the folder its save_pretrained wrote"
                            + (" or a transformers one with --convert-from-hf" if not convert_from_hf else "")
                            + " [PC354]") from None
    model.eval()
    return model


def checked_vocab(ids, vocab: int):
    if int(ids.max()) >= vocab or ids.min() < 0:
        raise PipelineError(f"inputs: token ids must lie in [0, {vocab}) [PC906]")


def ids_of(args):
    """The token ids `layers` runs on: --ids' array, or --tokens' (the folder's sizes), [batch, length]."""
    import numpy as np
    raw = checkpoint.read_config(checkpoint.a_folder(args.torch, "torch"))
    s = checkpoint.sizes(type("Config", (), raw))
    if args.ids is not None:
        from portcheck.core.fileio import load_array
        from portcheck.checkpoints.stream import checked_ids
        return np.asarray(checked_ids(load_array(args.ids, "give an integer array saved with np.save")))
    from portcheck.checkpoints.stream import tokens_flag
    return np.asarray(tokens_flag(args.tokens, s))


def compare(torch_dir, paddle_dir, ids, convert_from_hf: bool = False) -> tuple:
    """(compare_forward's report of the two folders' models as loaded, isolate=True; the lines said about how they
    were loaded). ids: token ids [batch, length]."""
    from portcheck.forward.compare import compare_forward
    t_model, p_model, layouts, said = load(torch_dir, paddle_dir, convert_from_hf)
    checked_vocab(ids, t_model.config.vocab_size)
    report = compare_forward(t_model, p_model, {"input_ids": ids}, isolate=True, layouts=layouts)
    return report, said


def block_of(name: str):
    """A torch row's block: the embeddings, a decoder layer, the final norm or the head (None: the model's own
    output, judged in the last line)."""
    name = re.split(r"[\[#:]", str(name))[0]
    m = re.match(r"^((?:model\.)?layers\.\d+)(\.|$)", name)
    if m:
        return m.group(1)
    m = re.match(r"^((?:model\.)?(?:embed_tokens|norm)|lm_head)(\.|$)", name)
    return m.group(1) if m else None


def block_lines(report) -> list:
    """One line per block, cumulative and isolated, the first red module in it named."""
    return [f"{block}: " + ", ".join(f"{how} green" if red is None else f"{how} RED at {red.name} [PC355]"
                                     for how, red in reds.items())
            for block, reds in first_red(report, block_of).items()]


def prepared():
    """paddleformers importable, then imported in the order it and transformers 5 need (fleet.prepare); else one
    line."""
    import importlib.util
    if importlib.util.find_spec("paddleformers") is None:
        raise PipelineError("paddleformers is not installed here: run layers on PaddleFormers folders in the "
                            "PaddleFormers environment (pip install -r requirements-formers.txt) [PC357]")
    fleet.prepare()  # before transformers is imported: the order paddleformers and transformers 5 import in


def main(args) -> int:
    """`layers` on a PaddleFormers folder (or with --convert-from-hf): a line per block, then the verdict."""
    prepared()
    if getattr(args, "html", None) is not None:
        from portcheck.core import page
        page.writable_page(args.html)
    report, said = compare(args.torch, args.paddle, ids_of(args), args.convert_from_hf)
    for line in said:
        print(line)
    lines = block_lines(report)
    print("\n".join(lines))
    if args.table:
        print(report.table())
    if args.plot:
        print(report.plot(args.plot))
    if getattr(args, "html", None) is not None:
        print(report.html(args.html))
    first = report.first_diverging
    print(f"{len(lines)} blocks, each side loaded from its own folder: " + (
        "green, cumulative and isolated" if report.passed else
        f"RED: first diverging {first} (block {block_of(first) if first is not None else None}); on torch's input: "
        f"{report.differing[0] if report.differing else None} [PC356]"))
    return 0 if report.passed else 1
