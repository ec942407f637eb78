"""Paddle's model-parallel ops that have no CPU kernel (c_identity, the calc-stream all-reduce, c_concat, c_split, and
the vocabulary-parallel cross entropy of fleet's ParallelCrossEntropy; flex checkpoint's resharding broadcast, which
moves each tensor onto a GPU),
stood in for on a CPU by paddle.distributed's collectives over gloo, so that a tensor-parallel model runs split across
processes on one machine (portcheck.parallel.split). Only on a CPU: on GPUs Paddle's own ops run, untouched. The names
replaced are Paddle's private ones, so the version is pinned and every name checked before anything is replaced: a
Paddle whose names moved is refused in one line, never run half-patched. Imports portcheck.core; Paddle only inside
its functions."""
import inspect

from portcheck.core.errors import PipelineError

CHECKED = ("3.3.1",)  # the Paddle versions the stand-ins were checked on (tests/test_split.py)
# where the ops live, and each one's parameters as that version spells them
MODULES = ("paddle.distributed.fleet.layers.mpu.mp_ops", "paddle.distributed.collective")
OPS = {"_c_identity": ("tensor", "group", "skip_c_identity_dynamic"),
       "_mp_allreduce": ("tensor", "op", "group", "use_calc_stream", "use_model_parallel", "skip_c_identity_dynamic"),
       "_c_concat": ("tensor", "group"), "_c_split": ("tensor", "group"),
       "_c_softmax_with_cross_entropy": ("logits", "label", "group", "return_softmax", "ignore_index")}
# fleet.distributed_model's input broadcast, which refuses a CPU (asserts a GPU): each tensor broadcast from the
# model-parallel group's first rank as on a GPU, by the helper it calls, the CPU's place given
BROADCAST = {"paddle.distributed.fleet.meta_parallel.tensor_parallel": ("broadcast_input_data", ("hcg", "inputs",
                                                                                                 "kwargs")),
             "paddle.distributed.fleet.utils.hybrid_parallel_util": ("_broadcast_nested_data",
                                                                     ("hcg", "dev", "place", "data"))}
# flex checkpoint's resharding (paddleformers' from_pretrained split across ranks), which moves every tensor it
# sends from one rank to another onto a GPU to broadcast it: its Tensor.cuda a copy on the CPU while it runs
RESHARD = ("paddle.distributed.flex_checkpoint.dcp.reshard_comm", "BroadcastCommunicator", "communicate",
           ("self", "read_items", "state", "context"))
LINE = ("on CPU: Paddle's c_identity, mp_allreduce, c_concat, c_split and c_softmax_with_cross_entropy (no CPU "
        "kernel) stood in for by paddle.distributed.all_reduce and all_gather over gloo, fleet's input broadcast "
        "and flex checkpoint's resharding broadcast given the CPU (Paddle {version})")


def on_cpu(degree: int) -> bool:
    """Whether the ranks run on CPUs: no CUDA build, or fewer GPUs than ranks."""
    import paddle
    return not paddle.is_compiled_with_cuda() or paddle.device.cuda.device_count() < degree


def checked() -> list:
    """The modules holding the ops, each checked: the version pinned, every op there with its parameters."""
    import importlib
    import paddle
    if paddle.__version__ not in CHECKED:
        raise PipelineError(f"Paddle {paddle.__version__}: the CPU stand-ins for its model-parallel ops are checked "
                            f"on Paddle {', '.join(CHECKED)} only: install paddlepaddle=={CHECKED[-1]} to compare a "
                            "split model on CPU, or run it on GPUs [PC425]")
    modules = [importlib.import_module(m) for m in MODULES]
    for module in modules:
        for name, params in OPS.items():
            op = getattr(module, name, None)
            got = tuple(inspect.signature(op).parameters) if callable(op) else None
            if got != params:
                raise PipelineError(f"Paddle {paddle.__version__}: {module.__name__}.{name} is "
                                    f"{'missing' if got is None else 'spelled ' + str(got)}, not what the CPU "
                                    f"stand-ins replace {params}: nothing was replaced; run on GPUs [PC428]")
    where, owner, name, params = RESHARD
    op = getattr(getattr(importlib.import_module(where), owner, None), name, None)
    got = tuple(inspect.signature(op).parameters) if callable(op) else None
    if got != params:
        raise PipelineError(f"Paddle {paddle.__version__}: {where}.{owner}.{name} is "
                            f"{'missing' if got is None else 'spelled ' + str(got)}, not what the CPU "
                            f"stand-ins replace {params}: nothing was replaced; run on GPUs [PC428]")
    for where, (name, params) in BROADCAST.items():
        op = getattr(importlib.import_module(where), name, None)
        got = tuple(inspect.signature(op).parameters) if callable(op) else None
        if got != params:
            raise PipelineError(f"Paddle {paddle.__version__}: {where}.{name} is "
                                f"{'missing' if got is None else 'spelled ' + str(got)}, not what the CPU "
                                f"stand-ins replace {params}: nothing was replaced; run on GPUs [PC428]")
    return modules


def install() -> str:
    """Replace the ops in every module that holds them, after checking them all; the report's line."""
    import paddle
    import paddle.distributed as dist
    from paddle.autograd import PyLayer
    modules = checked()

    class Identity(PyLayer):  # forward: the input; backward: the gradients of the ranks summed
        @staticmethod
        def forward(ctx, x, group):
            ctx.group = group
            return x.clone()

        @staticmethod
        def backward(ctx, dy):
            dy = dy.clone()
            dist.all_reduce(dy, group=ctx.group)
            return dy

    class AllReduce(PyLayer):  # forward: the ranks' partial sums added; backward: the gradient as it is
        @staticmethod
        def forward(ctx, x, group):
            x = x.clone()
            dist.all_reduce(x, group=group)
            return x

        @staticmethod
        def backward(ctx, dy):
            return dy

    class Concat(PyLayer):  # forward: the ranks' columns joined on the last axis; backward: this rank's columns
        @staticmethod
        def forward(ctx, x, group):
            ctx.group = group
            parts = []
            dist.all_gather(parts, x, group=group)
            return paddle.concat(parts, axis=-1)

        @staticmethod
        def backward(ctx, dy):
            return paddle.split(dy, ctx.group.nranks, axis=-1)[ctx.group.rank]

    class Split(PyLayer):  # forward: this rank's columns of the last axis; backward: the ranks' joined
        @staticmethod
        def forward(ctx, x, group):
            ctx.group = group
            return paddle.split(x, group.nranks, axis=-1)[group.rank].clone()

        @staticmethod
        def backward(ctx, dy):
            parts = []
            dist.all_gather(parts, dy, group=ctx.group)
            return paddle.concat(parts, axis=-1)

    def c_identity(tensor, group=None, skip_c_identity_dynamic=False):
        return Identity.apply(tensor, _group(group))

    def mp_allreduce(tensor, op=None, group=None, use_calc_stream=True, use_model_parallel=True,
                     skip_c_identity_dynamic=False):
        return AllReduce.apply(tensor, _group(group))

    def c_concat(tensor, group=None):
        return Concat.apply(tensor, _group(group))

    def c_split(tensor, group=None):
        return Split.apply(tensor, _group(group))

    def c_softmax_with_cross_entropy(logits, label, group=None, return_softmax=False, ignore_index=-100):
        # over the ranks' columns gathered (Concat: each rank's gradient its own columns), as the kernel computes it
        # from their partial maxima and sums: each token's loss, 0 where its label is ignore_index
        group = _group(group)
        whole = Concat.apply(logits, group)
        label = label.unsqueeze(-1) if label.ndim == logits.ndim - 1 else label
        ignored = label == ignore_index
        picked = paddle.take_along_axis(paddle.nn.functional.log_softmax(whole, axis=-1),
                                        paddle.where(ignored, paddle.zeros_like(label), label), axis=-1)
        loss = paddle.where(ignored, paddle.zeros_like(picked), -picked)
        if not return_softmax:
            return loss
        return loss, paddle.split(paddle.nn.functional.softmax(whole, axis=-1), group.nranks, axis=-1)[group.rank]

    import importlib
    util = importlib.import_module("paddle.distributed.fleet.utils.hybrid_parallel_util")

    def broadcast_input_data(hcg, *inputs, **kwargs):
        place = paddle.CPUPlace()
        return (util._broadcast_nested_data(hcg, "cpu", place, inputs) if inputs else inputs,
                util._broadcast_nested_data(hcg, "cpu", place, kwargs) if kwargs else kwargs)

    for module in modules:
        module._c_identity, module._mp_allreduce, module._c_concat, module._c_split = \
            c_identity, mp_allreduce, c_concat, c_split
        module._c_softmax_with_cross_entropy = c_softmax_with_cross_entropy
    importlib.import_module(next(iter(BROADCAST))).broadcast_input_data = broadcast_input_data
    owner = getattr(importlib.import_module(RESHARD[0]), RESHARD[1])
    own = getattr(owner, RESHARD[2])

    def communicate(self, read_items, state, context):
        # gloo broadcasts CPU tensors: the copy it would make on a GPU made on the CPU, copied back as from a GPU
        cuda = paddle.Tensor.cuda
        paddle.Tensor.cuda = lambda tensor, *args, **kwargs: tensor.clone()
        try:
            return own(self, read_items, state, context)
        finally:
            paddle.Tensor.cuda = cuda
    if not getattr(own, "stood_in", False):
        communicate.stood_in = True
        setattr(owner, RESHARD[2], communicate)
    return LINE.format(version=paddle.__version__)


def _group(group):
    from paddle.distributed import collective
    return collective._get_default_group() if group is None else group
