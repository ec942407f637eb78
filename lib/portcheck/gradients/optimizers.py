"""Optimizer pairs that differ by design: the settings a record keeps of each side's optimizer (optimizer_settings),
the pairs no setting makes alike (BY_DESIGN) and their one line (by_design_lines), a torch scheduler cycling the
momentum Paddle's does not (cycled_momentum), BatchNorm's biased running variance (biased_variance) and batch
statistics (batch_statistics, norm_counter).

May import portcheck.core and portcheck.gradients.result (numpy; torch lazily).
"""
import numpy as np

from portcheck.mapping.modules import META

from portcheck.gradients.result import LAST

OPTIMIZER = "optimizer/"  # a record's key: optimizer/<the framework's public class>, the settings its rule reads
# Optimizers whose update no setting of the other framework's counterpart reproduces, each said in one line:
# (torch's class, Paddle's class): (the rule, the settings read on each side, their names on each side)
RMSPROP = ("torch.optim.RMSprop", "paddle.optimizer.RMSProp")
ADAMAX = ("torch.optim.Adamax", "paddle.optimizer.Adamax")
SQUARED = {RMSPROP: "eps"}  # the setting whose closest Paddle value is torch's squared (Paddle's inside the root)
# Where the rule acts only as far as eps reaches the gradients: the line says how far on this run's smallest first
# gradient and how to tell it from a bug, never "by design" (a beta1 planted beside it is a bug of its own)
NEAR_GRADIENTS = {ADAMAX: "eps"}
BY_DESIGN = {
    RMSPROP: (
        "torch.optim.RMSprop adds eps outside the square root (lr * g / (sqrt(v) + eps)), paddle.optimizer.RMSProp "
        "inside it (lr * g / sqrt(v + epsilon)): no Paddle setting is torch's update, which differs by about eps / "
        "sqrt(v) of each step (largest where gradients are small)",
        (("alpha", "rho"), ("eps", "epsilon"), ("momentum", "momentum"), ("centered", "centered"))),
    # measured: a GroupNorm conv net on sklearn's breast cancer data, some first-layer gradients near 1e-5, red at
    # 562 x after step 1 with eps 1e-8 on both sides and green with 1e-12
    ADAMAX: (
        "torch.optim.Adamax adds eps to the gradient inside the max (u = max(beta2 * u, |g| + eps)), "
        "paddle.optimizer.Adamax to the decayed norm (u = max(beta2 * u + epsilon, |g|)): no Paddle setting is "
        "torch's update, which differs by about eps / |g| of each step where |g| is small (an eps far below the "
        "gradients, 1e-12 on both sides, makes them agree)",
        (("eps", "epsilon"),)),
    ("torch.optim.ASGD", "paddle.optimizer.ASGD"): (
        "torch.optim.ASGD is averaged SGD (each step shrinks the weights by lambd * eta and decays eta as lr / (1 + "
        "lambd * lr * t) ** alpha, averaging them after t0 steps), paddle.optimizer.ASGD is stochastic average "
        "gradient (each step moves by the mean of the last batch_num gradients): two algorithms of one name, no "
        "setting of one is the other", ()),
}


def optimizer_settings(opt, side) -> dict:
    """{optimizer/<class>: the settings BY_DESIGN reads, as float64} for an optimizer of a pair it lists."""
    package = "paddle.optimizer" if side == "paddle" else "torch.optim"
    cls = next((c for c in type(opt).__mro__ if c.__module__.startswith(package + ".")), None)
    if cls is None:  # an optimizer of the user's own: no rule of the frameworks' applies
        return {}
    name = f"{package}.{cls.__name__}"
    names = next((n for pair, (_, n) in BY_DESIGN.items() if name in pair), None)
    if names is None:
        return {f"{OPTIMIZER}{name}": np.zeros(0)}
    paddle = side == "paddle"
    group = {k: getattr(opt, f"_{k}") for _, k in names} if paddle else opt.param_groups[0]
    return {f"{OPTIMIZER}{name}": np.array([float(group[n[paddle]]) for n in names], np.float64)}


# A record's key: replayed<i>/<tensor>, the tensor after step i minus the same tensor of the side's optimizer replayed
# in float64 from the run's starting weights on the run's own float32 gradients, step by step (portcheck.scripts'
# recorders; float32: a difference): what the optimizer's own float32 arithmetic moved the weight by, measured as
# torch's own error is (a float32 run against a float64 one of the same computation)
REPLAYED = "replayed{}/"
REPLAY_SAID = "each optimizer replayed in float64 on its run's own gradients"


def replayed_error(torch_record: dict, paddle_record: dict, key: str, paddle_key: str):
    """max over the values of |torch's weight - its optimizer's float64 replay| + |Paddle's - its replay| of one
    weight after step i (key: state<i>/<tensor>, paddle_key its counterpart), or None where either side made none."""
    head, _, tensor = key.partition("/")
    step, p_tensor = head[len("state"):], paddle_key.partition("/")[2]
    own, theirs = torch_record.get(REPLAYED.format(step) + tensor), paddle_record.get(REPLAYED.format(step) + p_tensor)
    if own is None or theirs is None or np.size(own) != np.size(theirs) or not np.size(own):
        return None
    total = np.abs(np.asarray(own, np.float64).reshape(-1)) + np.abs(np.asarray(theirs, np.float64).reshape(-1))
    return float(np.max(total))


def replayed_lines(report) -> list:
    """A line per weight whose difference is within its rule only with the two optimizers' own float32 error in it
    (calibrated.with_optimizers), with the bound torch's own error alone sets there, which no port can meet. A weight
    over its rule even so gets none: its row is red, and the arithmetic does not explain it."""
    rows = [(i, r) for i, step in enumerate(report.steps, 1) for r in step
            if r.judged and r.passed and getattr(r.rule, "optimizers", 0.0) and r.rule.optimizers_decide(r)]
    return [f"training: {r.name} after step {i} differs by {r.max:.3g}, within what the two optimizers' own float32 "
            f"arithmetic makes there ({r.rule.optimizers:.3g}: {REPLAY_SAID}); torch's own error alone allows "
            f"{r.rule._replace(optimizers=0.0).allowed(r):.3g}, which no port can meet there" for i, r in rows]


CYCLES_MOMENTUM = "cycle_momentum/"  # a torch record's key: its scheduler (the class named) cycles the momentum


def cycled_momentum(torch_record) -> list:
    """The line for a torch scheduler that cycles its optimizer's momentum (cycle_momentum=True, the default of
    OneCycleLR and CyclicLR): Paddle's counterparts change the lr alone, so the updates part from the second step
    with nothing in the lr to show it (a plain SGD given momentum by torch's scheduler)."""
    return [f"torch.optim.lr_scheduler.{k[len(CYCLES_MOMENTUM):]} cycles the optimizer's momentum (cycle_momentum="
            f"True, its default), paddle.optimizer.lr.{k[len(CYCLES_MOMENTUM):]} the lr alone: the updates part from "
            "the second step whatever the lr; give torch's cycle_momentum=False (with momentum fixed in the "
            "optimizer on both sides)" for k in torch_record if k.startswith(CYCLES_MOMENTUM)]


def by_design_lines(torch_record, paddle_record, steps) -> list:
    """The one line of an optimizer pair BY_DESIGN lists: its rule, the settings that differ beyond it, and how far
    the weights part (the first weight red and its share of the allowance; the verdict stays the rows')."""
    pair = tuple(next((k[len(OPTIMIZER):] for k in rec if k.startswith(OPTIMIZER)), None)
                 for rec in (torch_record, paddle_record))
    if pair not in BY_DESIGN:
        return []
    rule, names = BY_DESIGN[pair]
    t, p = torch_record[OPTIMIZER + pair[0]], paddle_record[OPTIMIZER + pair[1]]
    # the epsilons cannot agree: Paddle's inside the root is closest to torch's as torch's squared
    want = [a if n[0] != SQUARED.get(pair) else a * a for n, a in zip(names, t)]
    other = [f"{tn} {a:g} vs {pn} {b:g}" + (f" (torch's eps squared, {w:g}, is the closest)"
                                            if tn == SQUARED.get(pair) else "")
             for (tn, pn), a, b, w in zip(names, t, p, want) if not np.isclose(b, w, rtol=1e-6, atol=0.0)]
    if pair in NEAR_GRADIENTS:  # how far the rule can reach here, and how to tell it from a bug: never "by design"
        eps = float(t[[n[0] for n in names].index(NEAR_GRADIENTS[pair])])
        grads = [np.abs(np.asarray(v, np.float64)) for k, v in torch_record.items() if k.startswith("grad/")]
        smallest = min((float(g[g > 0].min()) for g in grads if np.any(g > 0)), default=np.inf)
        return [f"{rule}; here the smallest first gradient is {smallest:.2g}, whose update it moves by up to "
                f"{eps / (smallest + eps):.2g} x lr: to tell it from a bug, give eps 1e-12 on both sides (a weight red "
                "then is not this rule)" + (f"; the settings differ beyond it: {', '.join(other)}" if other else "")]
    weights = [(i, r) for i, rows in enumerate(steps) for r in rows if r.judged and r.name not in ("loss", "lr")]
    red = next(((i, r) for i, r in weights if not r.passed), None)
    measured = (f"first {red[1].name.removesuffix(LAST)} after step {red[0] + 1}, the largest "
                f"{max(r.used for _, r in weights):.3g} x its allowance" if red else
                "every weight within its allowance on this run")
    return [f"{rule}; " + (f"the settings differ beyond it: {', '.join(other)} (measured: {measured})" if other else
                           f"the weights part by design (measured: {measured})")]


BIASED_VARIANCE = ("by design: torch's BatchNorm updates running_var with the unbiased batch variance (n/(n-1)), "
                   "Paddle's with the biased one")


def biased_variance(row, norm, t_prev, p_prev, t_now, p_now, updates: int = 1):
    """Where the biased-variance rule explains the running_var difference better than none (it leaves less), the
    row says so and is judged on what the rule leaves; a wrong momentum or epsilon leaves more and stays red. Tried on
    every row: a difference by design that the allowance happens to cover would otherwise spend that allowance and
    hide how close the port came. updates: the layer's training calls in the step (gradient accumulation's
    micro-batches each update the statistics): torch's k updates add sum (1-m)^j m var_j to (1-m)^k of the previous
    value, Paddle's the same of (n-1)/n var_j."""
    n, m, k = int(norm[0]), float(norm[1]), int(updates)
    added = t_now.astype(np.float64) - (1 - m) ** k * t_prev                  # unbiased, from torch's updates
    expected = (1 - m) ** k * p_prev.astype(np.float64) + added * (n - 1) / n  # Paddle's updates, biased
    left = np.abs(p_now.astype(np.float64) - expected)
    raw = row.max
    if not float(left.max()) < raw:
        return
    row.max, row.mean = float(left.max()), float(left.mean())
    row.by_design = f"{BIASED_VARIANCE} (n = {n} values per channel): raw diff {raw:.3e}"


def copied_variance(row, kept_torch, kept_paddle, model_steps):
    """A running_var a script keeps beside the model (an EMA copy whose buffers follow the model's: copied, or
    averaged) is a convex combination of the model's running_var over the steps, from a start both sides share: it
    differs by at most the model's own difference at some step, element by element, which is BIASED_VARIANCE's. If
    the whole kept difference is within that, the row says so and is judged on what is left; a kept copy left behind
    or averaged otherwise leaves more and stays red. model_steps: [(torch's, Paddle's) running_var after each step so
    far]."""
    if not model_steps:
        return
    source = np.max([np.abs(p.astype(np.float64) - t.astype(np.float64)) for t, p in model_steps], axis=0)
    left = np.maximum(np.abs(kept_paddle.astype(np.float64) - kept_torch.astype(np.float64)) - source, 0.0)
    raw = row.max
    row.max, row.mean = float(left.max()), float(left.mean())
    row.by_design = f"{BIASED_VARIANCE}, in the model it follows: raw diff {raw:.3e}"


def batch_statistics(model) -> bool:
    """A torch BatchNorm normalizes by its batch's statistics (train mode, or no running statistics kept): dividing
    by a standard deviation over few values per channel amplifies a rounding of the weights into the gradients far
    past torch's own fp32 error, where no plain-run step has compounded it yet. Measured: resnext50_32x4d at 64 x 64
    (8 values per channel in layer4), torch against itself with every weight moved one ulp parts by 1.30e-3 at
    layer4.2.bn3.weight's gradient (both sign seeds), Paddle by 1.30e-3, torch's float32 error there 2.2e-6 (72 x
    K_GRAD's 8 red); with other threads alone 4.2e-7. There the gradients are also allowed calibrated.SPREAD x that
    run's distance, as a plain run's steps are."""
    import torch
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and (m.training or not m.track_running_stats)
               for m in model.modules())


# a BatchNorm in training must normalise at least this many values per channel (batch x spatial) for the gradients
# through it to be judged by the plain rule: below, its input gradient (which sums to 0 over the values) is mostly the
# rounding of its batch means, and correct ports are red in some seeds, thread counts and CPU kernels. Measured
# (tools/bn_few_values.py, docs/bench/bn_few_values.md): at 2 values up to 6 of 16 deep nets red (7.17 x), at 4 a
# DenseNet block of 16 concatenating layers red in 1 of 8 seeds (its loss's mean), green from 8 (0.441 at most); every
# plant red at every size. Kept at 16 until torchvision's densenet121 at 64 x 64 (7.08 x under an earlier kink rule)
# is measured again under gradients.kinks' rule
FEW_VALUES = 16
NORM = "norm/"  # a torch record's key per BatchNorm in training: norm/<module>, [values per channel, momentum, calls]


def few_values(record: dict) -> list:
    """[(torch module, its class, values per channel, FEW_VALUES)] of each BatchNorm in training in a torch record
    normalising fewer than FEW_VALUES values per channel (norm_counter's keys)."""
    classes = dict(k[len(META):].rpartition("/")[::2] for k in record if k.startswith(META))
    return [(k[len(NORM):], classes.get(k[len(NORM):], "BatchNorm"), int(v[0]), FEW_VALUES)
            for k, v in record.items() if k.startswith(NORM) and int(v[0]) < FEW_VALUES]


def norm_counter(model):
    """Counts the values per channel each torch BatchNorm in train mode normalizes (its input's size over its
    channels) and its calls in train mode in the first optimizer step (gradient accumulation's micro-batches each
    update the statistics): what the by-design running-variance rule needs. Returns the function that reads them."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook
    seen, first, handles = {}, {}, []

    def count(name):
        def hook(module, args, output):  # returns None: a forward hook's return value replaces the output
            if module.training:
                n, m, calls = seen.get(name, (args[0].numel() // args[0].shape[1], module.momentum, 0))
                seen[name] = (n, m, calls + 1)
        return hook
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.training \
                and isinstance(module.momentum, float):
            handles.append(module.register_forward_hook(count(name)))

    def stepped(*_):  # every call before the first optimizer step is the first step's
        if not first:
            first.update({name: calls for name, (_, _, calls) in seen.items()} or {None: 0})
    handles.append(register_optimizer_step_post_hook(stepped))

    def counts():
        for h in handles:
            h.remove()
        return {f"{NORM}{name}": np.array([n, m, first.get(name, calls)], dtype=np.float64)
                for name, (n, m, calls) in seen.items()}
    return counts
