"""AdamW and the warmup schedules, Paddle side; pt_optim.py is its twin (same function names).

    optimizer, scheduler = build(model, lr, "linear", warmup_steps, total_steps)   # scheduler.step() after each step
    optimizer, _ = build(model, lr)                                                  # constant lr

Every figure comes from bert_sst2/hparams.py and is passed explicitly: the
libraries' defaults differ between the frameworks (see pipeline/Step4/README.md).
"""
import paddle

from bert_sst2 import hparams
from portcheck.core.errors import PipelineError

SCHEDULES = ("linear", "cosine", "polynomial")

# The cosine curve both sides follow: half a cosine wave, from lr down to 0 at total_steps.
# Without restarts Paddle computes cos(2*pi*num_cycles*progress) and insists on an integer
# num_cycles, default 1: a FULL wave that climbs back to lr by the end. With hard restarts it
# computes cos(pi*((num_cycles*progress) % 1)): num_cycles=1.0 is exactly one half wave,
# transformers' num_cycles=0.5 (cos(pi*0.5*2*progress)), and bit for bit the same floats.
COSINE = {"with_hard_restarts": True, "num_cycles": 1.0}
# PolyDecayWithWarmup's defaults (lr_end=1e-7, power=1.0) match transformers' today; given explicitly anyway.
POLYNOMIAL = {"lr_end": hparams.SCHED_POLY_END_LR, "power": hparams.SCHED_POLY_POWER}


def decay_param_fun(model):
    """BERT's rule (hparams.decays) for apply_decay_param_fun, which is called with Paddle's
    internal parameter names (linear_3.w_0), not the structured ones hparams.decays reads."""
    decay = {p.name for n, p in model.named_parameters() if hparams.decays(n)}
    return lambda name: name in decay


def build_optimizer(model, lr, weight_decay=None, epsilon=None):
    """AdamW with hparams' betas; lr is a float or an LRScheduler from build_scheduler.
    weight_decay and epsilon default to hparams (Paddle's own epsilon is 1e-8, and without
    apply_decay_param_fun it decays every parameter)."""
    weight_decay = hparams.WEIGHT_DECAY if weight_decay is None else weight_decay
    epsilon = hparams.ADAM_EPSILON if epsilon is None else epsilon
    return paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(), weight_decay=weight_decay,
                                  apply_decay_param_fun=decay_param_fun(model),
                                  beta1=hparams.ADAM_BETAS[0], beta2=hparams.ADAM_BETAS[1], epsilon=epsilon)


def build_scheduler(name, lr, warmup_steps, total_steps):
    """A paddlenlp warmup schedule starting from `lr`; pass it to build_optimizer as the lr and
    step it after each optimizer.step()."""
    if name not in SCHEDULES:
        raise PipelineError(f"unknown schedule {name!r}; known: {', '.join(SCHEDULES)}")
    if not 0 <= warmup_steps <= total_steps or total_steps < 1:
        raise PipelineError(f"need 0 <= warmup_steps <= total_steps and total_steps >= 1, "
                            f"got warmup_steps {warmup_steps}, total_steps {total_steps}")
    # imported here, not at the top: importing paddlenlp loads its whole package (taskflow, datasets, sklearn:
    # ~3 s), which a constant-lr run (Step 4's pd_bp.py) never needs
    from paddlenlp.transformers import CosineDecayWithWarmup, LinearDecayWithWarmup, PolyDecayWithWarmup
    # int(): paddlenlp reads a non-int warmup (345.0, numpy.int64(345)) as a proportion of total_steps
    warmup_steps, total_steps = int(warmup_steps), int(total_steps)
    if name == "linear":
        return LinearDecayWithWarmup(lr, total_steps, warmup_steps)
    if name == "cosine":
        return CosineDecayWithWarmup(lr, total_steps, warmup_steps, **COSINE)
    return PolyDecayWithWarmup(lr, total_steps, warmup_steps, **POLYNOMIAL)


def build(model, lr, schedule=None, warmup_steps=0, total_steps=0, **optimizer_kwargs):
    """(optimizer, scheduler): AdamW following `schedule`, or at constant lr with scheduler None."""
    scheduler = build_scheduler(schedule, lr, warmup_steps, total_steps) if schedule else None
    return build_optimizer(model, lr if scheduler is None else scheduler, **optimizer_kwargs), scheduler


def current_lr(optimizer) -> float:
    """The lr the next optimizer.step() will use."""
    return optimizer.get_lr()
