"""A tiny random Llama, transformers' in one process and paddlenlp's built on each rank of a tensor-parallel run:
what docs/large_models.md's split comparison judges, standing for your model and its port. Each MLP projection
holds a bias (random: transformers starts them at zero, where a bias added on every rank would not show).

Each rank is a new process that imports this module: numpy alone at its top. Needs numpy, torch, paddlepaddle,
transformers and paddlenlp. tests/test_split.py plants its bugs in this pair.
"""
import numpy as np

LLAMA = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0)
IDS = {"input_ids": np.random.RandomState(0).randint(1, 64, (2, 16)).astype("int64")}


def torch_llama(**sizes):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(**{**LLAMA, **sizes}, mlp_bias=True, use_cache=False, attn_implementation="eager")
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0, 0.1)
    return model


def with_mlp_bias(model):
    """paddlenlp's Llama has no MLP biases: each projection given one, split as its layer splits its columns (a
    column-parallel layer's bias is cut with its columns; a row-parallel layer's is whole, added after the sum)."""
    for layer in model.llama.layers:
        for name in ("gate_proj", "up_proj", "down_proj"):
            linear = getattr(layer.mlp, name)
            linear.bias = linear.create_parameter([linear.weight.shape[1]], is_bias=True)
            if type(linear).__name__ == "ColumnParallelLinear":
                linear.bias.is_distributed, linear.bias.split_axis = True, 0
    return model


def torch_and_state(single=None, **sizes):
    """(torch's model, its weights in the single-card Paddle model's layout: portcheck.convert's); sizes: LLAMA's
    fields changed (tools/bench_split.py); single: a list given the single-card Paddle model, set with them."""
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM
    from portcheck import convert
    pt = torch_llama(**sizes)
    pd = with_mlp_bias(LlamaForCausalLM(LlamaConfig(**{**LLAMA, **sizes}, use_cache=False)))
    state = dict(convert(pt, pd, layouts={"LlamaLMHead": "transpose"}, inputs=IDS))
    if single is not None:
        pd.set_state_dict(state)
        single.append(pd.eval())
    return pt, state


def build(rank, degree, **sizes):
    """Rank `rank`'s Paddle model of `degree`: paddlenlp's layers split by fleet (the weights are set after).
    sizes: LLAMA's fields changed (functools.partial(build, **sizes) for compare_split)."""
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM
    return with_mlp_bias(LlamaForCausalLM(LlamaConfig(**{**LLAMA, **sizes}, use_cache=False,
                                                      tensor_parallel_output=False, tensor_parallel_degree=degree,
                                                      tensor_parallel_rank=rank)))
