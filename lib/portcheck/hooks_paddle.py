"""The Paddle side of portcheck.recorder: what it wraps in Paddle, how it reads a Paddle model and optimizer
(in torch's conventions: BatchNorm's momentum as torch's 1 - m, GELU's approximation as torch's string), and how
the model starts from the torch side's initial weights.

Torch is not imported: the Paddle script may run in a venv without it. The weights come from the torch side's
record in Paddle's layout (state0/), each module paired with no map (portcheck.pairing, on the two first forwards),
each tensor placed as judge_backward pairs it (backward._counterpart).
"""
import functools
import platform
import random

import numpy as np

from portcheck.recorder import loss_wrapper, module_settings, registering, seeded, wrap_framework


class PaddleSide:
    def __init__(self, float64: bool = False):
        import paddle
        self.paddle = paddle

    # ------------------------------------------------------------------ reading
    def versions(self) -> dict:
        return {"python": platform.python_version(), "paddle": self.paddle.__version__, "numpy": np.__version__}

    def grad_enabled(self) -> bool:
        return self.paddle.is_grad_enabled()

    def held_parameters(self, optimizers) -> set:
        out = set()
        for opt in optimizers:
            for item in opt._parameter_list or ():
                out |= {id(p) for p in item["params"]} if isinstance(item, dict) else {id(item)}
        return out

    def parameters(self, module) -> list:
        return list(module.parameters())

    def unwrapped(self, module):
        """The model paddle.DataParallel holds (`._layers`)."""
        return module._layers if isinstance(module, self.paddle.DataParallel) else module

    def wrapper(self, module):
        """paddle.DataParallel keeps each rank's buffers its own: nothing run.judge reads."""
        return None

    def to_tensor(self, array):
        return self.paddle.to_tensor(np.array(array))

    def check_not_compiled(self, module):
        pass  # paddle.jit.to_static is refused where it is called (install)

    def start_from_torch(self, model, given: dict, first: dict):
        """The model's weights set to the torch side's initial ones (given: the torch record), every Paddle key
        filled, every shape equal, before the first is set; else one line. Returns the pairing's calls
        {torch call: Paddle call} and record keys {torch key: Paddle key} (compare.counterparts)."""
        from portcheck.backward import _counterpart, renames
        from portcheck.convert import CONFIGS_DIFFER, names_of_one_tensor
        from portcheck.compare import _Recorder, counterparts, eval_mode
        from portcheck.pairing import describe, pair
        from portcheck.recorder import RUN
        from portcheck.errors import PipelineError
        args = [self.to_tensor(first[k]) for k in sorted((k for k in first if k.startswith("args/")),
                                                         key=lambda k: int(k.split("/")[1]))]
        kwargs = {k.split("/", 1)[1]: self.to_tensor(v) for k, v in first.items() if k.startswith("kwargs/")}
        rec = _Recorder()
        handles = rec.attach(model)
        try:
            with eval_mode(model), self.paddle.no_grad():
                model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
        torch_trace, paddle_trace = {k: v for k, v in given.items() if k.startswith(("mod/", "out/", "in/"))}, \
            {**describe(model), **rec.arrays}
        try:
            paired = pair(torch_trace, paddle_trace)
            modules = paired.modules()
        except PipelineError as e:
            raise RUN.refuse(f"its model does not pair with the torch model's: {e}")
        renamed = renames(given)
        params = model.state_dict()
        state, problems, placed, said = {}, [], {}, set()  # said: Paddle keys a problem names already
        for key in (k for k in given if k.startswith("state0/")):
            target = _counterpart(key, modules, renamed).partition("/")[2]
            if target not in params:
                like = params.get(key[7:])  # the Paddle tensor of its name, which its shape kept from pairing
                if like is None:
                    problems.append(f"torch {key[7:]} has no Paddle counterpart")
                else:
                    problems.append(f"torch {key[7:]} {list(given[key].shape)} vs Paddle {key[7:]} "
                                    f"{list(like.shape)}: {CONFIGS_DIFFER}")
                    said.add(key[7:])
                continue
            value, want = given[key], params[target]
            if tuple(value.shape) != tuple(want.shape):
                problems.append(f"torch {key[7:]} {list(value.shape)} vs Paddle {target} {list(want.shape)}")
            state[target], placed[key[7:]] = value, target
        same = names_of_one_tensor(params)
        problems += [f"Paddle {k} no torch tensor fills" for k in params
                     if k not in said and not any(a in state for a in same[k])]
        if problems:
            raise RUN.refuse(f"its model cannot start from the torch model's weights ({len(problems)} problem(s)): "
                             + "; ".join(problems[:4]))
        self.set_state(model, state)
        return paired.pairs, counterparts(torch_trace, paddle_trace, paired), placed

    def set_state(self, model, state: dict):
        params = model.state_dict()
        for k, v in state.items():
            params[k].set_value(v.astype(params[k].numpy().dtype, copy=False))

    def layout_keys(self, module) -> dict:
        return {}

    def paddle_layout_state(self, module) -> dict:
        return {k: np.array(v.numpy(), copy=True) for k, v in module.state_dict().items()}

    def grads(self, module) -> dict:
        from portcheck.backward import _paddle_grads
        return _paddle_grads(module)

    def norms(self) -> dict:
        return {}

    def lr(self, optimizer) -> float:
        return float(optimizer.get_lr())

    def module_config(self, model) -> dict:
        """In torch's conventions: BatchNorm's momentum m is torch's 1 - m, GELU's approximation a string."""
        nn = self.paddle.nn
        from paddle.nn.layer.conv import _ConvNd
        from paddle.nn.layer.norm import _BatchNormBase
        return module_settings(model.named_sublayers(include_self=True), [
            ((_BatchNormBase, nn.BatchNorm), lambda m: {"momentum": round(1 - float(m._momentum), 10),
                                                        "eps": float(m._epsilon)}),
            ((nn.Dropout, nn.Dropout2D, nn.Dropout3D), lambda m: {"p": float(m.p)}),
            (nn.GELU, lambda m: {"approximate": "tanh" if m._approximate in (True, "tanh") else "none"}),
            (nn.LayerNorm, lambda m: {"eps": float(m._epsilon), "bias": m.bias is not None}),
            (nn.Linear, lambda m: {"bias": m.bias is not None}),
            (_ConvNd, lambda m: {"bias": m.bias is not None, "padding_mode": m._padding_mode,
                                 "stride": list(m._stride), "dilation": list(m._dilation), "groups": m._groups}),
            (nn.Embedding, lambda m: {"padding_idx": m._padding_idx}),
            (nn.LeakyReLU, lambda m: {"negative_slope": m._negative_slope})])

    def optimizer_config(self, opt, model) -> dict:
        family = type(opt).__name__.lower()
        family = {"momentum": "sgd+momentum"}.get(family, family)
        rate = opt._learning_rate
        out = {"family": family, "lr": float(getattr(rate, "base_lr", rate))}
        if hasattr(opt, "_beta1"):
            out["betas"] = [float(opt._beta1), float(opt._beta2)]
        if hasattr(opt, "_epsilon"):
            out["eps"] = float(opt._epsilon)
        if family == "sgd+momentum":
            out["momentum"], out["nesterov"] = float(opt._momentum), bool(opt._use_nesterov)
        if hasattr(opt, "_amsgrad"):
            out["amsgrad"] = bool(opt._amsgrad)
        decay = {}
        for key, p in model.named_parameters():
            if family == "adamw":
                fun = opt._apply_decay_param_fun
                coeff = float(opt._weight_decay) if fun is None or fun(p.name) else 0.0
                decay[key] = [coeff, "decoupled"]
            else:
                reg = p.regularizer or opt.regularization
                decay[key] = [float(getattr(reg, "_coeff", 0.0)) if reg is not None else 0.0,
                              "L1" if type(reg).__name__ == "L1Decay" else "L2"]
                if reg is None and getattr(opt, "_regularization_method", "") == "l2_decay":
                    # Momentum takes an L2 weight_decay (a float or L2Decay) into its own update, not as regularization
                    decay[key] = [float(opt._regularization_coeff), "L2"]
        out["weight_decay"] = decay
        clip = opt._grad_clip
        if clip is not None:
            from portcheck.recorder import RUN
            kind = {"ClipGradByGlobalNorm": "global_norm", "ClipGradByNorm": "norm (each parameter)",
                    "ClipGradByValue": "value"}.get(type(clip).__name__, type(clip).__name__)
            RUN.clip(kind, getattr(clip, "clip_norm", getattr(clip, "max", float("nan"))))
        return out

    # ------------------------------------------------------------------ wrapping
    def install(self, run):
        paddle = self.paddle
        F = paddle.nn.functional
        wrap_framework(run, paddle.nn.Layer, paddle.Tensor, F, _loss)
        base = paddle.optimizer.Optimizer
        stepping = []  # a subclass's step calling its parent's is one step

        def wrap(step):
            @functools.wraps(step)
            def optimizer_step(opt, *args, **kwargs):
                if stepping:
                    return step(opt, *args, **kwargs)
                stepping.append(opt)
                try:
                    run.before_step(opt)
                    out = step(opt, *args, **kwargs)
                finally:
                    stepping.pop()
                run.after_step(opt)
                return out
            return optimizer_step
        classes, todo = [], [base]
        while todo:
            cls = todo.pop()
            classes.append(cls)
            todo += cls.__subclasses__()
        for cls in classes:
            if "step" in cls.__dict__:
                cls.step = wrap(cls.__dict__["step"])
            if "__init__" in cls.__dict__:  # AdamW's __init__ does not call Optimizer's: each class's own
                cls.__init__ = registering(run, cls.__dict__["__init__"])

        def to_static(*args, **kwargs):
            raise run.refuse("it compiles its model (paddle.jit.to_static): run it in dynamic mode for the check")
        paddle.jit.to_static = to_static
        for where, name in ((paddle, "seed"), (np.random, "seed"), (random, "seed")):
            seeded(run, where, name, f"{where.__name__}.{name}")


def _loss(run, name, fn):
    return loss_wrapper(run, name, fn, "label")
