"""The torch side of portcheck.recorder: what it wraps in torch, and how it reads a torch model and optimizer.

Tensors are recorded by torch's names in Paddle's layout (convert.torch_layouts), as record_backward records
them, so that portcheck.backward.judge_backward judges the two sides' records as it judges its own.
"""
import functools
import inspect
import platform
import random

import numpy as np

LOSSES = ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
          "binary_cross_entropy_with_logits", "kl_div", "huber_loss")
DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


def loss_settings(bound) -> dict:
    """The settings of a loss call both frameworks share, as one dict (bound: its inspect.BoundArguments)."""
    a = bound.arguments
    weight = a.get("weight", a.get("pos_weight"))
    return {"reduction": a.get("reduction", "mean"), "label_smoothing": float(a.get("label_smoothing", 0.0) or 0.0),
            "ignore_index": a.get("ignore_index"),
            "weight": None if weight is None else [round(float(w), 7) for w in np.asarray(
                weight.detach().cpu().numpy() if hasattr(weight, "detach") else weight.numpy()).reshape(-1)]}


class TorchSide:
    def __init__(self, float64: bool):
        import torch
        self.torch, self.float64, self.layouts, self.counter = torch, float64, None, None

    # ------------------------------------------------------------------ reading
    def versions(self) -> dict:
        return {"python": platform.python_version(), "torch": self.torch.__version__, "numpy": np.__version__}

    def grad_enabled(self) -> bool:
        return self.torch.is_grad_enabled()

    def held_parameters(self, optimizers) -> set:
        return {id(p) for opt in optimizers for g in opt.param_groups for p in g["params"]}

    def parameters(self, module) -> list:
        return list(module.parameters())

    def to_tensor(self, array):
        return self.torch.from_numpy(np.array(array))

    def state(self, module) -> dict:
        return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}

    def load_float64(self, module, init: dict):
        module.load_state_dict({k: self.torch.from_numpy(np.array(v)) for k, v in init.items()})
        module.double()  # in place: the optimizer's Parameters are the same objects, now float64

    def start_from_torch(self, module, given, first):
        raise AssertionError("the torch side starts from its own weights")

    def check_not_compiled(self, module):
        if type(module).__name__ == "OptimizedModule":
            from portcheck.recorder import RUN
            raise RUN.refuse("it compiles its model (torch.compile): run it uncompiled for the check")

    def layout_keys(self, module) -> dict:
        from portcheck.backward import RENAMED, _norm_counter
        from portcheck.convert import torch_layouts
        self.layouts = torch_layouts(module)
        self.counter = _norm_counter(module)
        return {f"{RENAMED}{k}/{t.paddle_name}": np.zeros(0, np.float32) for k, t in self.layouts.items()
                if t.paddle_name != t.name}

    def paddle_layout_state(self, module) -> dict:
        from portcheck.backward import _torch_state
        return _torch_state(module, self.layouts)

    def grads(self, module) -> dict:
        from portcheck.backward import _torch_grads
        return _torch_grads(module, self.layouts)

    def norms(self) -> dict:
        return self.counter() if self.counter else {}

    def lr(self, optimizer) -> float:
        return float(optimizer.param_groups[0]["lr"])

    def module_config(self, model) -> dict:
        nn = self.torch.nn
        out = {}
        for name, m in model.named_modules():
            c = {}
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                c = {"momentum": m.momentum, "eps": m.eps, "affine": m.affine}
            elif isinstance(m, nn.modules.dropout._DropoutNd):
                c = {"p": m.p}
            elif isinstance(m, nn.GELU):
                c = {"approximate": m.approximate}
            elif isinstance(m, nn.LayerNorm):
                c = {"eps": m.eps, "bias": m.bias is not None}
            elif isinstance(m, nn.Linear):
                c = {"bias": m.bias is not None}
            elif isinstance(m, nn.modules.conv._ConvNd):
                c = {"bias": m.bias is not None, "padding_mode": m.padding_mode, "stride": list(m.stride),
                     "padding": m.padding if isinstance(m.padding, str) else list(m.padding),
                     "dilation": list(m.dilation), "groups": m.groups}
            elif isinstance(m, nn.Embedding):
                c = {"padding_idx": m.padding_idx}
            elif isinstance(m, nn.LeakyReLU):
                c = {"negative_slope": m.negative_slope}
            if c:
                out[name] = {"type": type(m).__name__, **c}
        return out

    def optimizer_config(self, opt, model) -> dict:
        names = {id(p): n for n, p in model.named_parameters()}
        family = type(opt).__name__.lower()
        g = opt.param_groups[0]
        if family == "sgd" and g.get("momentum"):
            family = "sgd+momentum"
        out = {"family": family, "lr": float(g.get("initial_lr", g["lr"]))}
        for key in ("betas", "eps", "momentum", "nesterov", "amsgrad"):
            if key in g and (key != "momentum" or family == "sgd+momentum"):
                out[key] = [float(b) for b in g[key]] if key == "betas" else g[key]
        decoupled = family == "adamw"
        out["weight_decay"] = {names[id(p)]: [float(group.get("weight_decay", 0.0)),
                                              "decoupled" if decoupled else "L2"]
                               for group in opt.param_groups for p in group["params"] if id(p) in names}
        return out

    # ------------------------------------------------------------------ wrapping
    def install(self, run):
        torch, F = self.torch, self.torch.nn.functional
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        module_call = torch.nn.Module.__call__

        def call(module, *args, **kwargs):
            return run.module_call(module, functools.partial(module_call, module), args, kwargs)
        torch.nn.Module.__call__ = call

        init = torch.optim.Optimizer.__init__

        @functools.wraps(init)
        def optimizer_init(opt, *args, **kwargs):
            init(opt, *args, **kwargs)
            run.optimizers.append(opt)
        torch.optim.Optimizer.__init__ = optimizer_init
        register_optimizer_step_pre_hook(lambda opt, args, kwargs: run.before_step(opt))
        register_optimizer_step_post_hook(lambda opt, args, kwargs: run.after_step(opt))

        backward = torch.Tensor.backward

        @functools.wraps(backward)
        def tensor_backward(tensor, *args, **kwargs):
            run.backward(tensor)
            out = backward(tensor, *args, **kwargs)
            run.after_backward()
            return out
        torch.Tensor.backward = tensor_backward

        for name in LOSSES:
            if hasattr(F, name):
                setattr(F, name, self._loss(run, name, getattr(F, name)))
        for name in DROPOUTS:
            if hasattr(F, name):
                setattr(F, name, _no_dropout(run, getattr(F, name)))

        norm = torch.nn.utils.clip_grad_norm_

        @functools.wraps(norm)
        def clip_norm(parameters, max_norm, norm_type=2.0, *args, **kwargs):
            run.clip("global_norm" if float(norm_type) == 2.0 else f"global_norm (norm {norm_type})", max_norm)
            return norm(parameters, max_norm, norm_type, *args, **kwargs)
        value = torch.nn.utils.clip_grad_value_

        @functools.wraps(value)
        def clip_value(parameters, clip_value, *args, **kwargs):
            run.clip("value", clip_value)
            return value(parameters, clip_value, *args, **kwargs)
        torch.nn.utils.clip_grad_norm_ = torch.nn.utils.clip_grad.clip_grad_norm_ = clip_norm
        torch.nn.utils.clip_grad_value_ = torch.nn.utils.clip_grad.clip_grad_value_ = clip_value

        def compile_(*args, **kwargs):
            raise run.refuse("it compiles its model (torch.compile): run it uncompiled for the check")
        torch.compile = compile_
        for where, name in ((torch, "manual_seed"), (np.random, "seed"), (random, "seed")):
            _seed(run, where, name, f"{where.__name__}.{name}")

    def _loss(self, run, name, fn):
        signature = inspect.signature(fn)
        float64 = self.float64

        @functools.wraps(fn)
        def loss(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return fn(*args, **kwargs)
            bound.apply_defaults()
            target = "target" if "target" in bound.arguments else None
            if target:
                bound.arguments[target] = run.loss_call(name, bound.arguments[target], loss_settings(bound))
            if float64:  # a class weight in float32 meets the float64 output
                for key in ("weight", "pos_weight"):
                    w = bound.arguments.get(key)
                    if w is not None and hasattr(w, "double") and w.is_floating_point():
                        bound.arguments[key] = w.double()
            return fn(*bound.args, **bound.kwargs)
        return loss


def _no_dropout(run, fn):
    """Dropout off for the N steps: the two frameworks draw different masks."""
    @functools.wraps(fn)
    def dropout(input, *args, **kwargs):
        return input if not run.done else fn(input, *args, **kwargs)
    return dropout


def _seed(run, where, name, said):
    fn = getattr(where, name)

    @functools.wraps(fn)
    def seed(*args, **kwargs):
        if args:
            run.config["seeds"][said] = repr(args[0])
        return fn(*args, **kwargs)
    setattr(where, name, seed)
