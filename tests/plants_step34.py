"""Planted bugs for Steps 3 and 4 (registered into tests/plant.py's runner).

Each patches one side's framework or optimizer module in memory, the way the
bug would look in real code; the scripts themselves run unchanged.
"""
import functools

from plant import plant


@plant("torch_label_smoothing")
def _():
    """torch's loss built with label_smoothing=0.1 (as HF Trainer's label_smoothing_factor does)."""
    import torch
    torch.nn.CrossEntropyLoss = functools.partial(torch.nn.CrossEntropyLoss, label_smoothing=0.1)


@plant("paddle_sum_reduction")
def _():
    """Paddle's loss summed over the batch instead of averaged."""
    import paddle
    paddle.nn.CrossEntropyLoss = functools.partial(paddle.nn.CrossEntropyLoss, reduction="sum")


@plant("paddle_scheduler_shifted")
def _():
    """scheduler.step() once before the first optimizer.step(): every lr is one step early."""
    from bert_sst2.twins import pd_optim
    build = pd_optim.build_scheduler

    def shifted(*args, **kwargs):
        scheduler = build(*args, **kwargs)
        scheduler.step()
        return scheduler
    pd_optim.build_scheduler = shifted


@plant("paddle_cosine_default_cycles")
def _():
    """The reference repo's cosine: CosineDecayWithWarmup's default num_cycles=1, a full wave."""
    from bert_sst2.twins import pd_optim
    pd_optim.COSINE = {}


@plant("paddle_poly_default_end")
def _():
    """PolyDecayWithWarmup left at its default lr_end=1e-7 while torch decays to hparams' 0."""
    from bert_sst2.twins import pd_optim
    pd_optim.POLYNOMIAL = {}


@plant("paddle_decay_all")
def _():
    """AdamW without apply_decay_param_fun: Paddle then decays LayerNorm and bias parameters too."""
    from bert_sst2.twins import pd_optim
    pd_optim.decay_param_fun = lambda model: None


@plant("paddle_default_epsilon")
def _():
    """AdamW's epsilon not passed: Paddle's default 1e-8 instead of BERT's 1e-6."""
    import paddle

    class AdamW(paddle.optimizer.AdamW):  # a class, not a function: paddlenlp subclasses it on import
        def __init__(self, *args, epsilon=None, **kwargs):
            super().__init__(*args, **kwargs)
    paddle.optimizer.AdamW = AdamW
