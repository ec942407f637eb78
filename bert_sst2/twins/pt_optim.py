"""AdamW and the warmup schedules, torch side; pd_optim.py is its twin (same function names).

    optimizer, scheduler = build(model, lr, "linear", warmup_steps, total_steps)   # scheduler.step() after each step
    optimizer, _ = build(model, lr)                                                  # constant lr

Every figure comes from bert_sst2/hparams.py and is passed explicitly: the
libraries' defaults differ between the frameworks (see pipeline/Step4/README.md).
"""
import torch

from bert_sst2 import hparams
from portcheck.core.errors import PipelineError

SCHEDULES = ("linear", "cosine", "polynomial")

# The cosine curve both sides follow: half a cosine wave, from lr down to 0 at total_steps.
# transformers counts full waves (0.5 = half a wave); Paddle's equivalent is spelled differently.
COSINE = {"num_cycles": 0.5}
# transformers' polynomial defaults are lr_end=1e-7, power=1.0: given explicitly, the same on both sides.
POLYNOMIAL = {"lr_end": hparams.SCHED_POLY_END_LR, "power": hparams.SCHED_POLY_POWER}


def param_groups(model, weight_decay):
    """BERT's rule (hparams.decays): weight decay on everything but biases and LayerNorm."""
    named = list(model.named_parameters())
    return [{"params": [p for n, p in named if hparams.decays(n)], "weight_decay": weight_decay},
            {"params": [p for n, p in named if not hparams.decays(n)], "weight_decay": 0.0}]


def build_optimizer(model, lr, weight_decay=None, epsilon=None):
    """AdamW with hparams' betas; weight_decay and epsilon default to hparams (torch's own eps is 1e-8).

    fused=True: torch's one-pass CPU kernel, the same update formula as the default multi-tensor
    path in a third of the time (33 vs 90-110 ms per step over MiniLM's 22.7M parameters, one thread;
    docs/bench/speed.md); Step 4 holds its updates to the same tolerances as before."""
    weight_decay = hparams.WEIGHT_DECAY if weight_decay is None else weight_decay
    epsilon = hparams.ADAM_EPSILON if epsilon is None else epsilon
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=hparams.ADAM_BETAS, eps=epsilon,
                             fused=True)


def build_scheduler(name, optimizer, warmup_steps, total_steps):
    """A transformers warmup schedule driving `optimizer`'s lr; step it after each optimizer.step()."""
    if name not in SCHEDULES:
        raise PipelineError(f"unknown schedule {name!r}; known: {', '.join(SCHEDULES)}")
    if not 0 <= warmup_steps <= total_steps or total_steps < 1:
        raise PipelineError(f"need 0 <= warmup_steps <= total_steps and total_steps >= 1, "
                            f"got warmup_steps {warmup_steps}, total_steps {total_steps}")
    # imported here, not at the top: a constant-lr run (Step 4's pt_bp.py) never loads transformers
    from transformers import get_scheduler
    extra = {"cosine": COSINE, "polynomial": POLYNOMIAL}.get(name)
    return get_scheduler(name, optimizer, num_warmup_steps=int(warmup_steps), num_training_steps=int(total_steps),
                         scheduler_specific_kwargs=extra)


def build(model, lr, schedule=None, warmup_steps=0, total_steps=0, **optimizer_kwargs):
    """(optimizer, scheduler): AdamW following `schedule`, or at constant lr with scheduler None."""
    optimizer = build_optimizer(model, lr, **optimizer_kwargs)
    return optimizer, build_scheduler(schedule, optimizer, warmup_steps, total_steps) if schedule else None


def current_lr(optimizer) -> float:
    """The lr the next optimizer.step() will use."""
    return optimizer.param_groups[0]["lr"]
