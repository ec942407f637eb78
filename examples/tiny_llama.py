"""Two small checkpoints of one random Llama, transformers' and paddlenlp's, each saved by its own save_pretrained
as safetensors in small shards: what docs/large_models.md's block streams, standing for your two folders.

Needs numpy, torch, paddlepaddle, transformers and paddlenlp. tests/test_stream.py plants its bugs in them.
"""
import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch and Paddle load)
import paddle
import torch

from portcheck import convert

LLAMA = dict(vocab_size=64, hidden_size=32, intermediate_size=88, num_hidden_layers=6, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, use_cache=False)


def write_pair(folder, dtype="float32", shard="20KB", **config):
    """(torch folder, Paddle folder) under `folder`: one random Llama of LLAMA's config (updated by `config`), Paddle's
    weights set by portcheck.convert (the library's layouts), in `dtype`, in files of at most `shard`."""
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    c = {**LLAMA, **config}
    torch.manual_seed(0)
    paddle.seed(0)
    pt = LlamaForCausalLM(LlamaConfig(**c, attn_implementation="eager")).eval()
    pd = PaddleLlama(PaddleConfig(**c)).eval()
    pd.set_state_dict(convert(pt, pd, layouts={"LlamaLMHead": "transpose"}))
    if dtype != "float32":
        pt.to(getattr(torch, dtype))
        pd.to(dtype=dtype)
    pt.save_pretrained(folder / "torch", safe_serialization=True, max_shard_size=shard)
    pd.save_pretrained(folder / "paddle", safe_serialization=True, max_shard_size=shard)
    return folder / "torch", folder / "paddle"
