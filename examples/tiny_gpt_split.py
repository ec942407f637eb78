"""A tiny random GPT with a fused q/k/v, transformers' GPT-2 in one process (its Conv1D c_attn computing [q | k | v])
and paddlenlp's GPT built with fuse_attention_qkv on each rank of a tensor-parallel run (its qkv_proj a
ColumnParallelLinear whose columns go per head: each rank holds its heads' q, k and v): what tests/test_split.py
judges beside examples/tiny_llama_split.py's Llama, standing for a GPT-style port split across ranks.

Each rank is a new process that imports this module: numpy alone at its top. Needs numpy, torch, paddlepaddle,
transformers and paddlenlp.
"""
import numpy as np

GPT = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
           max_position_embeddings=16)
HEADS = GPT["num_attention_heads"]
IDS = {"input_ids": np.random.RandomState(0).randint(1, 64, (2, 16)).astype("int64")}


def layouts():
    """convert's and compare_split's layouts: GPT-2's c_attn is [q | k | v], paddlenlp's qkv_proj per head."""
    from portcheck.mapping.recipes import paddlenlp_gpt
    return paddlenlp_gpt(heads=HEADS, fused=True)


def torch_gpt2():
    import torch
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=GPT["vocab_size"], n_positions=GPT["max_position_embeddings"],
                        n_embd=GPT["hidden_size"], n_layer=GPT["num_hidden_layers"], n_head=HEADS,
                        n_inner=GPT["intermediate_size"], resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, use_cache=False)
    model = GPT2Model(config).eval()
    with torch.no_grad():  # transformers starts the biases at zero, where a bias in the wrong columns would not show
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0, 0.1)
    return model


def _config(**tp):
    from paddlenlp.transformers import GPTConfig
    return GPTConfig(**GPT, hidden_dropout_prob=0, attention_probs_dropout_prob=0, fuse_attention_qkv=True,
                     hidden_act="gelu_new", **tp)


def torch_and_state():
    """(torch's model, its weights in the single-card Paddle model's layout: portcheck.convert's)."""
    from paddlenlp.transformers import GPTModel
    from portcheck import convert
    pt = torch_gpt2()
    return pt, dict(convert(pt, GPTModel(_config()), layouts=layouts(), inputs=IDS))


def build(rank, degree):
    """Rank `rank`'s Paddle model of `degree`: paddlenlp's GPT split by fleet (the weights are set after)."""
    from paddlenlp.transformers import GPTModel
    return GPTModel(_config(tensor_parallel_degree=degree, tensor_parallel_rank=rank))
