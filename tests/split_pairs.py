"""The tensor-parallel pair tests/test_split.py judges: transformers' tiny Llama (MLP biases on, so that a bias added
on every rank shows) against paddlenlp's, built on each rank at tensor-parallel degree `degree`, and the bugs
planted in a split. Each rank is a new process that imports this module: numpy alone at its top."""
import numpy as np

LLAMA = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0)
IDS = {"input_ids": np.random.RandomState(0).randint(1, 64, (2, 16)).astype("int64")}


def torch_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**LLAMA, mlp_bias=True, use_cache=False, attn_implementation="eager")).eval()
    with torch.no_grad():  # transformers starts biases at zero, which a bias added twice would not show
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0, 0.1)
    return model


def with_mlp_bias(model):
    """paddlenlp's Llama has no MLP biases: each projection given one, split as its layer splits its columns."""
    for layer in model.llama.layers:
        for name in ("gate_proj", "up_proj", "down_proj"):
            linear = getattr(layer.mlp, name)
            width = linear.weight.shape[1]
            linear.bias = linear.create_parameter([width], is_bias=True)
            if type(linear).__name__ == "ColumnParallelLinear":
                linear.bias.is_distributed, linear.bias.split_axis = True, 0
    return model


def paddle_state(pt):
    """torch's weights in the single-card Paddle model's layout (portcheck.convert)."""
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM
    from portcheck import convert
    single = with_mlp_bias(LlamaForCausalLM(LlamaConfig(**LLAMA, use_cache=False)))
    return dict(convert(pt, single, layouts={"LlamaLMHead": "transpose"}, inputs=IDS))


def build(rank, degree):
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM
    return with_mlp_bias(LlamaForCausalLM(LlamaConfig(**LLAMA, use_cache=False, tensor_parallel_output=False,
                                                      tensor_parallel_degree=degree, tensor_parallel_rank=rank)))


def _swap(a, b):
    x, y = a.numpy(), b.numpy()
    a.set_value(y), b.set_value(x)


def kv_order(model, rank):
    """A fused [q | k | v] checkpoint unpacked in the wrong order: k's columns in v_proj and v's in k_proj."""
    attn = model.llama.layers[0].self_attn
    _swap(attn.k_proj.weight, attn.v_proj.weight)


def gate_up_one_shard(model, rank):
    """gate and up swapped in rank 1's shard only."""
    if rank == 1:
        mlp = model.llama.layers[0].mlp
        _swap(mlp.gate_proj.weight, mlp.up_proj.weight), _swap(mlp.gate_proj.bias, mlp.up_proj.bias)


def input_not_parallel(model, rank):
    """o_proj told its input is whole: it cuts the columns it was given once more."""
    model.llama.layers[1].self_attn.o_proj.input_is_parallel = False


def allreduce_missing(model, rank):
    """A plain Linear holding the rank's rows of down_proj where a RowParallelLinear belongs: no all-reduce."""
    import paddle
    mlp = model.llama.layers[1].mlp
    row = mlp.down_proj
    plain = paddle.nn.Linear(*row.weight.shape)
    plain.weight.set_value(row.weight.numpy()), plain.bias.set_value(row.bias.numpy())
    mlp.down_proj = plain


def bias_every_rank(model, rank):
    """down_proj's bias added by every rank before the all-reduce: the sum holds it `degree` times."""
    import paddle.nn.functional as F
    from paddle.distributed.fleet.layers.mpu import mp_ops
    row = model.llama.layers[0].mlp.down_proj
    row.forward = lambda x: mp_ops._mp_allreduce(F.linear(x, row.weight, row.bias), group=row.model_parallel_group)


def vocab_offset(model, rank):
    """rank 1's vocabulary shard starting one row late: its tokens read their neighbour's row."""
    if rank == 1:
        model.llama.embed_tokens.vocab_start_index += 1


PLANTS = {"kv_order": kv_order, "gate_up_one_shard": gate_up_one_shard, "input_not_parallel": input_not_parallel,
          "allreduce_missing": allreduce_missing, "bias_every_rank": bias_every_rank, "vocab_offset": vocab_offset}


def dies_on_rank_1(rank, degree):
    """Rank 1 ends as a killed process does, with nothing said; rank 0 waits for it in the first all-reduce."""
    if rank == 1:
        import os
        os._exit(3)
    return build(rank, degree)
