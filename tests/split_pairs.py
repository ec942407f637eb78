"""The bugs tests/test_split.py plants in the tensor-parallel pair of examples/tiny_llama_split.py, each a change
to one rank's model (or every rank's) after its shard is loaded. Each rank is a new process that imports this module:
nothing heavy at its top."""
import functools

import numpy as np

from examples.tiny_llama_split import build


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


def forks_a_child(rank, degree):
    """Each rank's build starts a process of its own that outlives it (a server, a data worker), its pid written into
    the folder HOSTILE84_PIDS names."""
    import os
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.path.join(os.environ["HOSTILE84_PIDS"], f"rank{rank}.pid"), "w") as f:
        f.write(str(child.pid))
    return build(rank, degree)


def hangs_on_rank_1(rank, degree):
    """Rank 1 never returns its model; rank 0 records on and waits for it in the first all-reduce."""
    if rank == 1:
        import time
        time.sleep(3600)
    return build(rank, degree)


def identity_not_summing(model, rank):
    """layers.1's MLP column-parallel projections fed their input with no c_identity: the same forward, but in
    backward the input's gradient is each rank's partial sum, never added across the ranks."""
    import paddle.nn.functional as F
    mlp = model.llama.layers[1].mlp
    for linear in (mlp.gate_proj, mlp.up_proj):
        linear.forward = functools.partial(F.linear, weight=linear.weight, bias=linear.bias)


def grad_scaled_on_rank_1(model, rank):
    """rank 1's shard of layers.1's down_proj weight given twice its gradient (a hook doubling it)."""
    if rank == 1:
        model.llama.layers[1].mlp.down_proj.weight.register_hook(lambda g: g * 2)


def k_grad_doubled_on_rank_1(model, rank):
    """examples/tiny_gpt_split.py's GPT: rank 1's k columns of layer 1's fused qkv_proj (its heads' k, read per head)
    given twice their gradient; q and v, and rank 0's k, as they are."""
    if rank != 1:
        return
    import paddle
    qkv = model.decoder.layers[1].self_attn.qkv_proj
    heads = model.config.num_attention_heads // model.config.tensor_parallel_degree
    scale = np.ones((heads, 3, qkv.weight.shape[-1] // (3 * heads)), dtype="float32")
    scale[:, 1] = 2
    scale = paddle.to_tensor(scale.reshape(-1))
    qkv.weight.register_hook(lambda g: g * scale)


def pretrained(folder):
    """The build of a tiny Llama checkpoint folder split by paddlenlp's own from_pretrained on each rank."""
    from paddlenlp.transformers import LlamaForCausalLM
    from portcheck.checkpoints.split_folders import Pretrained
    return Pretrained(LlamaForCausalLM, folder, tensor_parallel_output=False, dtype="float32")


def pretrained_class(model_class, folder, rank, degree):
    """pretrained's build with its class handed to the ranks as an object (functools.partial): unpickled as each
    rank starts, it imports paddlenlp before spawn sets the rank's number, and Paddle's get_rank keeps the 0 it read
    then (portcheck.parallel.split_rank.run reads spawn's setting)."""
    return model_class.from_pretrained(folder, tensor_parallel_degree=degree, tensor_parallel_rank=rank,
                                       tensor_parallel_output=False, dtype="float32")


BACKWARD_PLANTS = {"identity_not_summing": identity_not_summing, "grad_scaled_on_rank_1": grad_scaled_on_rank_1}
TARGETS = np.random.RandomState(1).randint(0, 64, (2, 16)).astype("int64")


def _logits(output):
    return output if hasattr(output, "shape") else output[0]


def torch_loss(output, targets):
    """Cross-entropy over the output's last axis (the Llama's vocabulary; the GPT's hidden states, the targets taken
    modulo its width)."""
    import torch.nn.functional as F
    logits = _logits(output)
    return F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), targets.reshape([-1]) % logits.shape[-1])


def paddle_loss(output, targets):
    import paddle.nn.functional as F
    logits = _logits(output)
    return F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), targets.reshape([-1]) % logits.shape[-1])


def torch_sgd(parameters):
    import torch
    return torch.optim.SGD(parameters, lr=0.5)


def paddle_sgd(parameters):
    import paddle
    return paddle.optimizer.SGD(learning_rate=0.5, parameters=parameters)


def qkv_blocks(model, rank):
    """examples/tiny_gpt_split.py's GPT: rank 1's shard of layer 0's fused qkv_proj laid out [q | k | v] (its
    heads' q, then their k, then their v: a fused q/k/v cut in the wrong order) where paddlenlp's forward reads it
    per head."""
    if rank != 1:
        return
    qkv = model.decoder.layers[0].self_attn.qkv_proj
    heads = model.config.num_attention_heads // model.config.tensor_parallel_degree
    for tensor in (qkv.weight, qkv.bias):
        width = tensor.shape[-1]
        order = np.arange(width).reshape(heads, 3, width // (3 * heads)).transpose(1, 0, 2).reshape(-1)
        tensor.set_value(tensor.numpy()[..., order])


# examples/tiny_llama_split.py's Llama with paddlenlp's default head, tensor_parallel_output=True: each rank's
# output its columns of the vocabulary, the loss fleet's ParallelCrossEntropy over them (tests/test_split_head.py)
HEAD_TARGETS = np.where(np.arange(32).reshape(2, 16) % 5 == 4, -100, TARGETS)  # some tokens ignored: -100, torch's
LOSS = {"mean": "kept"}  # how the Paddle loss averages: over the tokens it keeps, as torch's; a plant changes it


def build_vocab_parallel(rank, degree):
    """The rank's Llama whose forward returns its head's output as paddlenlp's does when given labels: the rank's
    columns of the vocabulary (tensor_parallel_output=True), what ParallelCrossEntropy takes."""
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM
    from examples.tiny_llama_split import LLAMA, with_mlp_bias

    class ColumnsOut(LlamaForCausalLM):
        def forward(self, input_ids):
            return (self.lm_head(self.llama(input_ids)[0]),)
    config = LlamaConfig(**LLAMA, use_cache=False, tensor_parallel_output=True, tensor_parallel_degree=degree,
                         tensor_parallel_rank=rank)
    return with_mlp_bias(ColumnsOut(config))


def torch_kept_loss(output, targets):
    """torch's cross entropy over the whole vocabulary, the tokens labelled -100 ignored (its default)."""
    import torch.nn.functional as F
    logits = _logits(output)
    return F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), targets.reshape([-1]))


def paddle_parallel_loss(output, targets):
    """fleet's ParallelCrossEntropy over each rank's columns, averaged over the tokens it keeps (LOSS)."""
    from paddle.distributed.fleet.layers.mpu import ParallelCrossEntropy
    each = ParallelCrossEntropy(ignore_index=-100)(_logits(output), targets)
    return each.mean() if LOSS["mean"] == "every" else each.sum() / (targets != -100).astype(each.dtype).sum()


def mean_counts_ignored(model, rank):
    """The port's loss a plain mean of ParallelCrossEntropy's per-token losses: the ignored tokens, 0 there, counted
    in it (the loss is no module: this sets how the rank's loss averages, for this run, the launch's last)."""
    LOSS["mean"] = "every"


def head_grad_doubled_on_rank_1(model, rank):
    """rank 1's columns of the vocabulary-parallel head given twice their gradient."""
    if rank == 1:
        model.lm_head.weight.register_hook(lambda g: g * 2)
