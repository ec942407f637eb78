"""The torch side of portcheck.scripts.recorder: what it wraps in torch, and how it reads a torch model and optimizer.

Tensors are recorded by torch's names in Paddle's layout (tensors.torch_layouts), as record_backward records
them, so that portcheck.gradients.backward.judge_backward judges the two sides' records as it judges its own.
"""
import functools
import platform
import random

import numpy as np

from portcheck.mapping import settings
from portcheck.scripts.wrapping import LOSS_CLASSES, TIED, SharedSide, clipping, loss_wrapper, registering, sampling, \
    seeded, stepped_ahead, wrap_framework


class TorchSide(SharedSide):
    framework = "torch"

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

    def trainable(self, p) -> bool:
        return p.requires_grad

    def unwrapped(self, module):
        """The model a data-parallel wrapper holds (DistributedDataParallel, DataParallel: `.module`)."""
        nn = self.torch.nn
        return module.module if isinstance(module, (nn.DataParallel, nn.parallel.DistributedDataParallel)) else module

    def wrapper(self, module):
        """What judge_run.judge reads of a DistributedDataParallel (its broadcast_buffers: judge_run.DDP_BUFFERS), or
        None."""
        if isinstance(module, self.torch.nn.parallel.DistributedDataParallel):
            return {"type": type(module).__name__, "broadcast_buffers": bool(module.broadcast_buffers)}
        return None

    def cast(self, value, wide: bool):
        """value's floating tensors (in tuples, lists, dicts) in float64 (wide) or float32: the float64 run's
        evaluations (recorder.Run._evaluation)."""
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return (value.double() if wide else value.float()) if value.is_floating_point() and \
                value.dtype in (torch.float32, torch.float64) else value
        if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
            return type(value)(self.cast(v, wide) for v in value)
        if isinstance(value, dict) and type(value) is dict:
            return {k: self.cast(v, wide) for k, v in value.items()}
        return value

    def to_tensor(self, array):
        return self.torch.from_numpy(np.array(array))

    def state(self, module) -> dict:
        return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}

    def load(self, module, init: dict):
        module.load_state_dict({k: self.torch.from_numpy(np.array(v)) for k, v in init.items()})

    # the modules kept beside the model (first_call.kept_modules, first_call.keep)
    @property
    def module_class(self):
        return self.torch.nn.Module

    def submodules(self, module) -> list:
        return list(module.modules())

    def is_tensor(self, value) -> bool:
        return isinstance(value, self.torch.Tensor)

    def mark(self, tensor):
        """What tells a tensor's memory: state_dict()'s tensors are views of the model's own."""
        return tensor.data_ptr()

    def averaged(self, module):
        """torch.optim.swa_utils.AveragedModel's model (its state: module.<key> and n_averaged)."""
        return module.module if isinstance(module, self.torch.optim.swa_utils.AveragedModel) else module

    def start_kept(self, module, init: dict, widen: bool):
        """A kept module set to the torch side's (init: its state, torch's layout); the float64 run's widened."""
        self.load(module, init)
        if widen:
            module.double()

    def start_from_torch(self, module, given, first):
        raise AssertionError("the torch side starts from its own weights")

    def check_not_compiled(self, module):
        if type(module).__name__ == "OptimizedModule":
            raise self.run.refuse("it compiles its model (torch.compile): run it uncompiled for the check [PC828]")

    def layout_keys(self, module) -> dict:
        from portcheck.mapping import fused
        from portcheck.gradients.recording import RENAMED
        from portcheck.gradients.optimizers import norm_counter
        from portcheck.mapping.tensors import torch_layouts
        from portcheck.mapping.layouts import TRANSPOSED
        from portcheck.core.errors import PipelineError
        given = getattr(self.run, "layouts", None) or {}  # --layouts FILE's (recorder.Run)
        layouts = {**self.packed(module, given), **given}
        try:
            self.layouts = torch_layouts(module, layouts)
        except PipelineError as e:  # one line, not a traceback in the script's output
            raise self.run.refuse("its model has a module whose Paddle layout is unknown (declare it in a --layouts "
                                  f"FILE, the same JSON declarations, docs/run.md): {e}")
        self.counter = norm_counter(module)
        # each fused or packed module's parts, which the Paddle side pairs and fills (fused.mark): after describe's keys
        return {**{f"{RENAMED}{k}/{t.paddle_name}": np.zeros(0, np.float32) for k, t in self.layouts.items()
                   if t.paddle_name != t.name},
                # which Linear weights are written [in, out]: a Paddle layer keeping torch's Linear's layout (declared
                # for its type, layouts.declared) is started and read the other way (paddle_start.start_from_torch)
                **{f"{TRANSPOSED}{k}": np.zeros(0, np.float32) for k, t in self.layouts.items() if t.in_out},
                **{f"{TIED}{k}/{t.tie}": np.zeros(0, np.float32) for k, t in self.layouts.items()
                   if t.tie and t.tie != k},
                **fused.mark({}, fused.specs(module, layouts), module)}

    def packed(self, module, layouts: dict) -> dict:
        """recipes.TORCH_ATTENTION by name for each MultiheadAttention holding q, k and v packed in in_proj_weight
        (always so: Paddle's MultiHeadAttention holds them in q_proj, k_proj, v_proj), unless `layouts` (--layouts)
        declares the module: no flag needed for torch's own packed layer."""
        from portcheck.mapping import fused
        from portcheck.mapping.recipes import TORCH_ATTENTION
        declared = fused.specs(module, layouts)
        return {name: spec for spec in TORCH_ATTENTION.values() for name, m in module.named_modules()
                if name and isinstance(m, self.torch.nn.MultiheadAttention) and m.in_proj_weight is not None
                and name not in declared}

    def paddle_layout_state(self, module) -> dict:
        from portcheck.gradients.recording import _torch_state
        if isinstance(module, self.torch.nn.Module):
            return _torch_state(module, self.layouts)
        held = module.state_dict()  # a dict of tensors kept beside the model: the keys it holds
        return _torch_state(module, {k: t for k, t in self.layouts.items() if (t.source or k) in held})

    def grads(self, module) -> dict:
        from portcheck.gradients.recording import _torch_grads
        return _torch_grads(module, self.layouts)

    def norms(self) -> dict:
        return self.counter() if self.counter else {}

    def first_group(self, optimizer) -> int:
        """The parameter group holding the model's first trained parameter the optimizer holds (0 where none): its
        lr is the step's, as the Paddle side's is that parameter's (hooks_paddle.multiple)."""
        where = {id(p): i for i, g in enumerate(optimizer.param_groups) for p in g["params"]}
        root = getattr(self.run, "root", None)
        return next((where[id(p)] for p in (root.parameters() if root is not None else ())
                     if p.requires_grad and id(p) in where), 0)

    def lr(self, optimizer) -> float:
        return float(optimizer.param_groups[self.first_group(optimizer)]["lr"])

    def lr_ahead(self, optimizer, schedulers, steps: int):
        """[the lr after each of `steps` more steps of the optimizer's schedule], stepped on a copy whose optimizer
        holds the groups' settings and no parameter; a line where it cannot be (a schedule stepped on a metric)."""
        import copy
        import types
        import warnings
        inner = {id(s) for outer in schedulers for s in getattr(outer, "_schedulers", ())}  # SequentialLR's parts
        mine = [s for s in schedulers if s.optimizer is optimizer and id(s) not in inner]
        if any(isinstance(s, self.torch.optim.lr_scheduler.ReduceLROnPlateau) for s in mine):
            return "stepped on a metric"
        stepped = lambda: None  # noqa: E731  the scheduler's own check that the optimizer stepped first
        stepped._wrapped_by_lr_sched = True
        stand_in = types.SimpleNamespace(param_groups=[{**g, "params": []} for g in optimizer.param_groups],
                                         step=stepped, _opt_called=True)
        copies = copy.deepcopy(mine, {id(optimizer): stand_in})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            group = self.first_group(optimizer)
            return stepped_ahead(lambda: [s.step() for s in copies], lambda: stand_in.param_groups[group]["lr"], steps)

    def named_modules(self, model):
        return model.named_modules()

    def is_dropout(self, module) -> bool:
        return isinstance(module, self.torch.nn.modules.dropout._DropoutNd)

    def is_recurrent(self, module) -> bool:
        return isinstance(module, self.torch.nn.RNNBase)

    def loss_class(self, module) -> str:
        """A torch loss class's functional (wrapping.LOSS_CLASSES; one it does not know: its own name), else ""."""
        if not isinstance(module, self.torch.nn.modules.loss._Loss):
            return ""
        known = next((c.__name__ for c in type(module).__mro__ if c.__name__ in LOSS_CLASSES
                      and c.__module__.startswith("torch.")), None)
        return LOSS_CLASSES[known] if known else type(module).__name__

    def autocast(self):
        """The dtype autocast computes in around the first forward ("cuda bfloat16"), else None."""
        torch = self.torch
        on = [d for d in ("cuda", "cpu") if torch.is_autocast_enabled(d)]
        return f"{str(torch.get_autocast_dtype(on[0])).replace('torch.', '')}" if on else None

    def module_config(self, model) -> dict:
        """Each module's settings (portcheck.mapping.settings, the reader a record's cfg/ keys are written by)."""
        return settings.of_torch(model)

    def optimizer_config(self, opt, model) -> dict:
        names = {id(p): n for n, p in model.named_parameters()}
        family = type(opt).__name__.lower()
        g = opt.param_groups[self.first_group(opt)]
        if family == "sgd" and g.get("momentum"):
            family = "sgd+momentum"
        out = {"family": family, "lr": float(g.get("initial_lr", g["lr"]))}
        # each parameter group's parameters and lr, compared group by group (runconfig.groups)
        out["groups"] = [[names[id(p)] for p in group["params"] if id(p) in names] for group in opt.param_groups]
        out["lrs"] = {names[id(p)]: float(group.get("initial_lr", group["lr"]))
                      for group in opt.param_groups for p in group["params"] if id(p) in names}
        for key in ("betas", "eps", "momentum", "nesterov", "amsgrad", "etas", "step_sizes"):
            if key in g and (key not in ("momentum", "nesterov") or family == "sgd+momentum"):  # Paddle's SGD has none
                out[key] = [float(b) for b in g[key]] if key in ("betas", "etas", "step_sizes") else g[key]
        decoupled = family == "adamw"
        out["weight_decay"] = {names[id(p)]: [float(group.get("weight_decay", 0.0)),
                                              "decoupled" if decoupled else "L2"]
                               for group in opt.param_groups for p in group["params"] if id(p) in names}
        return out

    def trainer_config(self, trainer) -> dict:
        """transformers' Trainer as it trains (runconfig.TRAINER): the label smoothing it applies outside the model,
        its optimizer steps in all, accumulation, drop_last, its schedule's kind and warmup steps."""
        args, steps = trainer.args, int(trainer.state.max_steps)
        smoother = getattr(trainer, "label_smoother", None)
        return {"label_smoothing": float(smoother.epsilon) if smoother is not None else 0.0, "max_steps": steps,
                "gradient_accumulation_steps": int(args.gradient_accumulation_steps),
                "dataloader_drop_last": bool(args.dataloader_drop_last),
                "lr_scheduler_type": str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)),
                "warmup_steps": int(args.get_warmup_steps(steps))}

    def end_workers(self):
        pass  # a DataLoader's workers watch their parent and end with it

    # ------------------------------------------------------------------ wrapping
    def install(self, run):
        torch, F = self.torch, self.torch.nn.functional
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        wrap_framework(run, torch.nn.Module, torch.Tensor, F, self._loss)
        torch.optim.Optimizer.__init__ = registering(run, torch.optim.Optimizer.__init__)
        scheduler_init = torch.optim.lr_scheduler.LRScheduler.__init__

        @functools.wraps(scheduler_init)
        def scheduler(sched, *args, **kwargs):  # OneCycleLR and CyclicLR set cycle_momentum before calling it
            scheduler_init(sched, *args, **kwargs)
            run.scheduler(sched)
        torch.optim.lr_scheduler.LRScheduler.__init__ = scheduler
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau
        plateau_init = plateau.__init__  # its own, not calling LRScheduler's: a schedule stepped on a metric

        @functools.wraps(plateau_init)
        def on_metric(sched, *args, **kwargs):
            plateau_init(sched, *args, **kwargs)
            run.scheduler(sched)
        plateau.__init__ = on_metric
        if self.float64:  # DDP's reducer averages gradients of its model's dtype when built: widened before it
            ddp = torch.nn.parallel.DistributedDataParallel
            ddp_init = ddp.__init__

            @functools.wraps(ddp_init)
            def wide_ddp(wrapper, module, *args, **kwargs):
                ddp_init(wrapper, module.double(), *args, **kwargs)
            ddp.__init__ = wide_ddp
        register_optimizer_step_pre_hook(lambda opt, args, kwargs: run.before_step(opt))
        register_optimizer_step_post_hook(lambda opt, args, kwargs: run.after_step(opt))


        clipping(run, torch.nn.utils, torch.Tensor, lambda p: p.requires_grad)

        def compile_(*args, **kwargs):
            raise run.refuse("it compiles its model (torch.compile): run it uncompiled for the check [PC828]")
        torch.compile = compile_
        for where, name in ((torch, "manual_seed"), (np.random, "seed"), (random, "seed")):
            seeded(run, where, name, f"{where.__name__}.{name}")
        # the samplers that shuffle (DataLoader(shuffle=True)'s, transformers' Trainer's: RandomSampler; a BatchSampler
        # draws through the one it holds): their indices recorded as drawn, for the Paddle side to draw (Run.order)
        data = torch.utils.data
        sampling(run, data.RandomSampler, "RandomSampler", lambda s: len(s.data_source),
                 lambda s: range(len(s.data_source)))
        sampling(run, data.SubsetRandomSampler, "SubsetRandomSampler", lambda s: len(s.indices), lambda s: set(s.indices))
        sampling(run, data.DistributedSampler, "DistributedSampler(shuffle=True)", lambda s: len(s.dataset),
                 lambda s: range(len(s.dataset)), shuffles=lambda s: s.shuffle)

    def _loss(self, run, name, fn):
        return loss_wrapper(run, name, fn, False, _double if self.float64 else None)


def _double(bound):
    """A class weight in float32 meets the float64 output: widened with it."""
    for key in ("weight", "pos_weight"):
        w = bound.arguments.get(key)
        if w is not None and hasattr(w, "double") and w.is_floating_point():
            bound.arguments[key] = w.double()
