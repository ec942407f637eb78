"""compare_backward: gradients after one backward, then losses, learning rates, weights and buffers (BatchNorm's
running statistics) after each of N steps of the user's own optimizer and scheduler, on both sides.

Every compared tensor is held to the rule of checks/calibrated.py: a multiple of torch's own fp32 error,
measured by a float64 copy of the torch model that takes the same steps with the same optimizer and scheduler.
"""
import copy
from dataclasses import dataclass, field

import numpy as np

from align.compare import _float64, call, measure
from align.convert import plan
from checks import calibrated
from checks.report import format_table


@dataclass
class BackwardReport:
    grads: list = field(default_factory=list)    # [calibrated.Row] per parameter, in forward order
    steps: list = field(default_factory=list)    # [[calibrated.Row] per step: loss, lr, then every weight and buffer]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.grads) and all(r.passed for rows in self.steps for r in rows)

    @property
    def first_diverging_gradient(self):
        """The first gradient out of tolerance in backward order (the backward pass reaches parameters in
        reverse): a bug corrupts every gradient from its place back to the input, and this one is its place."""
        return next((r.name for r in reversed(self.grads) if not r.passed), None)

    @property
    def first_diverging_step(self):
        """(step, the first key over tolerance) after the optimizer's steps, or None."""
        return next(((i, r.name) for i, rows in enumerate(self.steps) for r in rows if not r.passed), None)

    def table(self) -> str:
        lines = ["gradients after the first backward (forward order):"]
        lines += format_table(calibrated.HEADER, calibrated.table_rows(self.grads))
        notes = {r.name: r.by_design for rows in self.steps for r in rows if r.by_design}
        lines += [f"{name}: {note}" for name, note in notes.items()]  # one line per module and rule
        for i, rows in enumerate(self.steps):
            bad = [r for r in rows if not r.passed]
            lines.append(f"after step {i + 1}: {len(rows) - len(bad)}/{len(rows)} within" +
                         (f"; first over: {bad[0].name} ({bad[0].max:.3e} > {bad[0].allowed:.3e})" if bad else ""))
        return "\n".join(lines)


def _lr(optimizer):
    if hasattr(optimizer, "param_groups"):
        return optimizer.param_groups[0]["lr"]
    return optimizer.get_lr()


def compare_backward(torch_model, paddle_model, inputs, targets, loss, optimizer, scheduler=None, steps=1,
                     name_map=None) -> BackwardReport:
    """Train both models `steps` steps on the same batch and compare them.

    loss: (torch_fn(output, targets), paddle_fn(output, targets)), each returning a scalar loss.
    optimizer: (torch_factory(parameters), paddle_factory(parameters)): the user's own optimizers.
    scheduler: None, or (torch_factory(optimizer), paddle_factory(optimizer)), stepped after each optimizer step
    (Paddle: return the LRScheduler the optimizer was given as its learning_rate).
    Train or eval mode is the caller's to set (BatchNorm's batch statistics and running-stat updates are
    compared in train mode). The models are changed by the steps: pass copies to keep them.
    """
    import paddle
    import torch
    mapping = plan(torch_model, paddle_model, name_map)
    t64 = copy.deepcopy(torch_model).double()
    sides = []
    for model in (torch_model, t64):
        opt = optimizer[0](model.parameters())
        sides.append((model, opt, scheduler[0](opt) if scheduler else None))
    p_opt = optimizer[1](paddle_model.parameters())
    p_sched = scheduler[1](p_opt) if scheduler else None
    x64 = _float64(inputs)
    report = BackwardReport()
    norms = _batch_norms(torch_model, mapping)
    for step in range(steps):
        p_before = paddle_model.state_dict()
        before = {name: (bn.running_var.detach().numpy().copy(), p_before[key].numpy().copy())
                  for name, (bn, key) in norms.items()}
        losses = []
        for (model, opt, _), x in zip(sides, (inputs, x64)):
            value = loss[0](call(model, x, torch.from_numpy), torch.from_numpy(np.asarray(targets)))
            value.backward()
            losses.append(value.detach().numpy())
        p_loss = loss[1](call(paddle_model, inputs, paddle.to_tensor), paddle.to_tensor(np.asarray(targets)))
        p_loss.backward()
        if step == 0:
            p_grads = {n: p.grad.numpy() for n, p in paddle_model.named_parameters() if p.grad is not None}
            t64_grads = dict(t64.named_parameters())
            for name, param in torch_model.named_parameters():
                if name not in mapping:
                    continue
                key, rule, tname, _ = mapping[name]
                g32 = rule(tname, param.grad.numpy())[1] if param.grad is not None else None
                g64 = rule(tname, t64_grads[name].grad.numpy())[1] if param.grad is not None else None
                if g32 is None or key not in p_grads:
                    row = calibrated.Row(f"grad {name}", (), 0.0, 0.0, 0.0, 0.0,
                                         problem="no gradient on " + ("torch" if g32 is None else "paddle"))
                else:
                    row = measure(f"grad {name}", g32, g64, p_grads[key])
                report.grads.append(row)
        t_lr, p_lr = _lr(sides[0][1]), _lr(p_opt)
        for model, opt, sched in sides:
            opt.step()
            opt.zero_grad()
            if sched:
                sched.step()
        p_opt.step()
        p_opt.clear_grad()
        if p_sched:
            p_sched.step()
        rows = [measure("loss", losses[0].reshape(-1), losses[1].reshape(-1), p_loss.numpy().reshape(-1), final=True),
                measure("lr", [t_lr], [t_lr], [p_lr])]
        p_state = paddle_model.state_dict()
        t64_state = t64.state_dict()
        for name, value in torch_model.state_dict().items():
            if name in mapping:
                key, rule, tname, _ = mapping[name]
                row = measure(name, rule(tname, value.numpy())[1], rule(tname, t64_state[name].numpy())[1],
                           p_state[key].numpy())
                module = name.rsplit(".", 1)[0]
                if not row.passed and not row.problem and tname == "running_var" and module in norms:
                    _biased_variance(row, norms[module][0], *before[module], value.numpy(), p_state[key].numpy())
                rows.append(row)
        report.steps.append(rows)
    for bn, _ in norms.values():
        bn._align_hook.remove()
    return report


def _batch_norms(torch_model, mapping) -> dict:
    """{module name: (torch BatchNorm in train mode, Paddle key of its running variance)}, each counting the
    values per channel it normalizes (its input's size over its channels) on every forward."""
    import torch
    found = {}
    for name, module in torch_model.named_modules():
        key = mapping.get(f"{name}.running_var", (None,))[0]
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.training and key \
                and isinstance(module.momentum, float):
            module._align_hook = module.register_forward_hook(
                lambda m, args, out: setattr(m, "_align_n", args[0].numel() // args[0].shape[1]))
            found[name] = (module, key)
    return found


BIASED_VARIANCE = ("by design: torch's BatchNorm updates running_var with the unbiased batch variance (n/(n-1)), "
                   "Paddle's with the biased one")


def _biased_variance(row, bn, t_prev, p_prev, t_now, p_now):
    """If the whole running_var difference is the biased-variance rule, the row says so and is judged on
    what the rule leaves; a wrong momentum or epsilon leaves more and stays red."""
    m, n = bn.momentum, bn._align_n
    batch_var = (t_now.astype(np.float64) - (1 - m) * t_prev) / m              # unbiased, from torch's update
    expected = (1 - m) * p_prev.astype(np.float64) + m * batch_var * (n - 1) / n  # Paddle's update, biased
    left = np.abs(p_now.astype(np.float64) - expected)
    raw = row.max
    row.max, row.mean = float(left.max()), float(left.mean())
    row.by_design = f"{BIASED_VARIANCE} (n = {n} values per channel): raw diff {raw:.3e}"

