"""Convert weights/torch_weight.bin into weights/paddle_weight.pdparams, verified.

BERT is one client of the model-agnostic layer: each tensor's Paddle name and layout come
from portcheck.convert's layouts, by the type of the torch module that holds it (every
nn.Linear weight transposed, [out, in] in torch, [in, out] in Paddle, whatever it is
called; name patterns miss a Linear with an unusual name and catch an Embedding with a
usual one). Before anything is written, every torch key must be used exactly once, every
Paddle parameter filled, every shape equal; otherwise the script lists every offending
key and writes nothing (portcheck.convert stops at the first; a checkpoint's file is read
here key by key, so all of them are named at once).
"""
import argparse
from collections import defaultdict

try:
    import portcheck.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import paths
from bert_sst2.twins.weights import EXPORT, load_config, load_torch_tensors
from portcheck.convert import torch_layouts
from portcheck.errors import PipelineError, run_main
from portcheck.fileio import atomic_write

# torch key -> Paddle key, for names the twins spell differently. The twins share
# every name today; a port whose Paddle model renames a layer adds it here.
NAME_MAP = {}


def convert(torch_state: dict, torch_model, paddle_shapes: dict, name_map=NAME_MAP):
    """Return ({paddle_key: ndarray}, n_transposed) or raise PipelineError naming every problem. Each key's
    Paddle name and layout follow its module's type in torch_model (portcheck.convert.torch_layouts)."""
    layouts = torch_layouts(torch_model)
    out, sources, problems, transposed = {}, defaultdict(list), [], 0
    for tkey, tensor in torch_state.items():
        layout = layouts.get(tkey)
        pkey = name_map.get(tkey, f"{layout.module}.{layout.paddle_name}" if layout and layout.module else tkey)
        sources[pkey].append(tkey)
        array = tensor.detach().cpu().numpy()
        if layout is not None:
            transposed += layout.transposed
            array = layout.to_paddle(array)
        if pkey not in paddle_shapes:
            problems.append(f"torch key {tkey} has no Paddle parameter {pkey}")
        elif tuple(array.shape) != tuple(paddle_shapes[pkey]):
            problems.append(f"{tkey} -> {pkey}: shape {tuple(array.shape)} != Paddle {tuple(paddle_shapes[pkey])}")
        out[pkey] = array
    problems += [f"Paddle parameter {k} is filled by {len(v)} torch keys: {', '.join(v)}"
                 for k, v in sources.items() if len(v) > 1]
    problems += [f"Paddle parameter {k} is not filled by any torch key" for k in paddle_shapes if k not in sources]
    if problems:
        raise PipelineError("refusing to convert, nothing written: " + "; ".join(problems))
    return out, transposed


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False).parse_args()
    config = load_config()
    # the frameworks load once the flags and the config are known to be good
    import paddle
    from models import pd_bert, pt_bert
    torch_state = load_torch_tensors(paths.torch_weight(), EXPORT)
    torch_model = pt_bert.BertModel(config)
    unknown = sorted(set(torch_state) - set(torch_model.state_dict()))
    if unknown:
        raise PipelineError(f"refusing to convert, nothing written: {paths.torch_weight()} has keys "
                            f"pt_bert does not: {', '.join(unknown)}")
    paddle_shapes = {k: tuple(v.shape) for k, v in pd_bert.BertModel(config).state_dict().items()}
    state, n_transposed = convert(torch_state, torch_model, paddle_shapes)
    tensors = {k: paddle.to_tensor(v) for k, v in state.items()}
    atomic_write(paths.paddle_weight(), lambda tmp: paddle.save(tensors, tmp))
    print(f"wrote {paths.paddle_weight()}: {len(state)} tensors, {n_transposed} Linear weights transposed, "
          "every key used once, every shape checked")


if __name__ == "__main__":
    run_main(main)
