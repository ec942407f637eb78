"""The Paddle side of portcheck.scripts.recorder: what it wraps in Paddle, how it reads a Paddle model and optimizer
(in torch's conventions: BatchNorm's momentum as torch's 1 - m, GELU's approximation as torch's string); how the
model starts from the torch side's initial weights is its base's (portcheck.scripts.paddle_start).

Torch is not imported: the Paddle script may run in a venv without it. The weights come from the torch side's
record in Paddle's layout (state0/), each module paired with no map (mapping.pairing, on the two first forwards),
each tensor placed as judge_backward pairs it (backward._counterpart).
"""
import functools
import platform
import random

import numpy as np

from portcheck.mapping import fused, settings
from portcheck.scripts.paddle_start import PaddleStart
from portcheck.scripts.wrapping import LOSSES, LOSS_CLASSES, SharedSide, clipping, loss_wrapper, registering, sampling, \
    seeded, stepped_ahead, wrap_framework


class PaddleSide(PaddleStart, SharedSide):
    framework = "paddle"

    def __init__(self, float64: bool = False):
        import weakref

        import paddle
        self.paddle, self.placed, self.joins = paddle, {}, {}  # joins: a fused module's tensors' parts (_join)
        self.flipped = set()  # Paddle keys held transposed from the torch record's layout (_flips)
        self.standins, self.standins_error = "", ""  # the CPU stand-ins' line (install), or why they were not
        self.split = None  # a model split in tensor parallel: its rank (_split)
        self.loaders = weakref.WeakSet()  # the DataLoader iterators running workers (end_workers)

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

    def trainable(self, p) -> bool:
        return not p.stop_gradient

    def unwrapped(self, module):
        """The model paddle.DataParallel, or fleet's distributed_model (TensorParallel, a MetaParallelBase: by name,
        fleet not imported for a script that does not), holds (`._layers`)."""
        wrapped = isinstance(module, self.paddle.DataParallel) or "MetaParallelBase" in {
            k.__name__ for k in type(module).__mro__}
        return module._layers if wrapped else module

    def wrapper(self, module):
        """paddle.DataParallel keeps each rank's buffers its own: nothing judge_run.judge reads."""
        return None

    def to_tensor(self, array):
        return self.paddle.to_tensor(np.array(array))

    def check_not_compiled(self, module):
        pass  # paddle.jit.to_static is refused where it is called (install)

    # the layers kept beside the model (first_call.kept_modules, first_call.keep)
    @property
    def module_class(self):
        return self.paddle.nn.Layer

    def submodules(self, module) -> list:
        return module.sublayers(include_self=True)

    def is_tensor(self, value) -> bool:
        return isinstance(value, self.paddle.Tensor)

    def mark(self, tensor):
        """state_dict()'s tensors are the model's own objects."""
        return id(tensor)

    def averaged(self, module):
        return module

    def start_kept(self, module, init: dict, widen: bool):
        """A kept layer set to the torch side's (init: {torch key: value in Paddle's layout}), each tensor placed as
        the model's was (start_from_torch), a fused module's parts joined as its were."""
        state = {self.placed[k]: v for k, v in init.items() if k in self.placed}
        for whole, (spec, keys) in self.joins.items():
            if all(k in state for k in keys):
                state[whole] = fused.join(spec, [state[k] for k in keys])
        parts = {k for _, keys in self.joins.values() for k in keys}
        self.set_state(module, {k: v for k, v in state.items() if k not in parts})

    def placed_state(self, module, placed: dict) -> dict:
        """{torch key: the Paddle tensor start_from_torch placed it in (placed), in Paddle's layout}: a fused module's
        part its columns (self.joins), as the torch side holds it."""
        state = self.paddle_layout_state(module)
        for whole, (spec, keys) in self.joins.items():
            for key, columns in zip(keys, spec.columns(state[whole].shape[-1])):
                state[key] = np.ascontiguousarray(state[whole][..., columns])
        return {k: state[p] for k, p in placed.items()}

    def set_state(self, model, state: dict):
        """state in the record's layout: a weight held the other way (self.flipped) set transposed."""
        params = model.state_dict()
        for k, v in state.items():
            v = v.T if k in self.flipped else v
            params[k].set_value(v.astype(params[k].numpy().dtype, copy=False))

    def layout_keys(self, module) -> dict:
        """Each fused module's parts, which the torch side's modules pair with (fused.mark): its record cut as run
        judges it (fused.cut), as the torch side's is."""
        split = self.split if self.split is not None and self.split.model is module else None
        # a split model's description at its full size (split_rank.full_modules), as its whole trace was paired
        return {**fused.mark({}, fused.specs(module, self.run.layouts), module),
                **(split.full_modules() if split else {})}

    def paddle_layout_state(self, module) -> dict:
        """The state in the record's layout (a weight held the other way, self.flipped, transposed back)."""
        return {k: np.array(v.numpy().T if k in self.flipped else v.numpy(), copy=True)
                for k, v in module.state_dict().items()}

    def grads(self, module) -> dict:
        from portcheck.gradients.recording import _paddle_grads
        return {k: np.ascontiguousarray(v.T) if k in self.flipped else v for k, v in _paddle_grads(module).items()}

    def norms(self) -> dict:
        return {}

    def multiple(self, optimizer) -> float:
        """The lr multiple of the model's first trained parameter the optimizer holds (a parameter group's
        learning_rate, a ParamAttr's): the step's lr is that parameter's, as torch's is its group's."""
        held, root = self.held_parameters([optimizer]), getattr(self.run, "root", None)
        first = next((p for p in (root.parameters() if root is not None else ())
                      if not p.stop_gradient and id(p) in held), None)
        return float((getattr(first, "optimize_attr", None) or {}).get("learning_rate", 1.0))

    def lr(self, optimizer) -> float:
        return float(optimizer.get_lr()) * self.multiple(optimizer)

    def lr_ahead(self, optimizer, schedulers, steps: int):
        """TorchSide.lr_ahead's: a Paddle optimizer holds its schedule, which holds no parameter: copied whole."""
        import copy
        schedule, multiple = optimizer._learning_rate, self.multiple(optimizer)
        if not isinstance(schedule, self.paddle.optimizer.lr.LRScheduler):
            return [float(schedule) * multiple] * steps
        if isinstance(schedule, self.paddle.optimizer.lr.ReduceOnPlateau):
            return "stepped on a metric"
        schedule = copy.deepcopy(schedule)
        return stepped_ahead(schedule.step, lambda: schedule() * multiple, steps)

    def named_modules(self, model):
        return model.named_sublayers(include_self=True)

    def is_dropout(self, module) -> bool:
        nn = self.paddle.nn
        return isinstance(module, (nn.Dropout, nn.Dropout2D, nn.Dropout3D, nn.AlphaDropout))

    def is_recurrent(self, module) -> bool:  # asked of every module call: an attribute, not an import statement
        return isinstance(module, self.paddle.nn.layer.rnn.RNNBase)

    def loss_class(self, module) -> str:
        """A Paddle loss class's functional, by torch's name (wrapping.LOSS_CLASSES; one it does not know: its own
        name), else "". HuberLoss and SmoothL1Loss are Paddle's smooth_l1_loss (wrapping.loss_settings)."""
        kinds = [c for c in type(module).__mro__ if c.__module__ == "paddle.nn.layer.loss"]
        if not kinds:
            return ""
        known = next((c.__name__ for c in kinds if c.__name__ in LOSS_CLASSES), None)
        if known in ("SmoothL1Loss", "HuberLoss"):
            return "smooth_l1_loss"
        return self._paddle_name(LOSS_CLASSES[known]) if known else kinds[0].__name__

    @staticmethod
    def _paddle_name(torch_name: str) -> str:
        return LOSSES[torch_name][0] or torch_name

    def autocast(self):
        """The dtype auto_cast computes in around the first forward, else None (on a CPU Paddle's is off)."""
        tracer = self.paddle.base.framework._dygraph_tracer()
        return None if str(tracer._amp_level).endswith("O0") else str(tracer._amp_dtype)

    def module_config(self, model) -> dict:
        """Each module's settings in torch's conventions (portcheck.mapping.settings: BatchNorm's momentum m is
        torch's 1 - m, GELU's approximation a string)."""
        return settings.of_paddle(model)

    def optimizer_config(self, opt, model) -> dict:
        family = type(opt).__name__.lower()
        family = {"momentum": "sgd+momentum"}.get(family, family)
        rate = opt._learning_rate
        base = float(getattr(rate, "base_lr", rate))
        out = {"family": family, "lr": base * self.multiple(opt)}
        # each parameter's lr (a group's learning_rate is a multiple of the optimizer's), and the "lr" a dict group
        # gives, which Paddle ignores (PaConvert passes torch's group key through): runconfig.groups
        held = self.held_parameters([opt])
        out["lrs"] = {k: base * float((p.optimize_attr or {}).get("learning_rate", 1.0))
                      for k, p in model.named_parameters() if id(p) in held}
        ignored = {id(q): g["lr"] for g in getattr(opt, "_param_groups", None) or () if isinstance(g, dict)
                   and isinstance(g.get("lr"), (int, float)) for q in g.get("params", ())}
        out["ignored_lr"] = {k: float(ignored[id(p)]) for k, p in model.named_parameters() if id(p) in ignored}
        if hasattr(opt, "_beta1"):
            out["betas"] = [float(opt._beta1), float(opt._beta2)]
        if hasattr(opt, "_epsilon"):
            out["eps"] = float(opt._epsilon)
        if family == "sgd+momentum":
            out["momentum"], out["nesterov"] = float(opt._momentum), bool(opt._use_nesterov)
        if hasattr(opt, "_amsgrad"):
            out["amsgrad"] = bool(opt._amsgrad)
        for key, mine in (("etas", "_etas"), ("step_sizes", "_learning_rate_range")):  # Rprop's, a list of one pair
            if getattr(opt, mine, None):
                out[key] = [float(b) for b in getattr(opt, mine)[0]]
        # dict parameter groups: each group's own settings (AdamW's weight_decay, a float; Momentum's L2 decay as
        # regularization_method and _coeff, a float or L2Decay taken into its update), the optimizer's otherwise
        groups = {id(q): g for g in getattr(opt, "_param_groups", None) or () if isinstance(g, dict)
                  for q in g.get("params", ())}
        decay, held = {}, self.held_parameters([opt])
        for key, p in model.named_parameters():
            if id(p) not in held:  # a frozen layer's, another optimizer's
                continue
            group = groups.get(id(p), {})
            if family == "adamw":
                fun = opt._apply_decay_param_fun
                given = group.get("weight_decay", opt._weight_decay)  # a regularizer here: Paddle's step refuses it
                coeff = float(getattr(given, "_coeff", given)) if fun is None or fun(p.name) else 0.0
                decay[key] = [coeff, "decoupled"]
            else:
                reg = p.regularizer or opt.regularization
                decay[key] = [float(getattr(reg, "_coeff", 0.0)) if reg is not None else 0.0,
                              "L1" if type(reg).__name__ == "L1Decay" else "L2"]
                if reg is None and group.get("regularization_method", getattr(opt, "_regularization_method", "")) \
                        == "l2_decay":
                    # Momentum takes an L2 weight_decay (a float or L2Decay) into its own update, not as regularization
                    decay[key] = [float(group.get("regularization_coeff", getattr(opt, "_regularization_coeff", 0.0))),
                                  "L2"]
        out["weight_decay"] = decay
        clip = opt._grad_clip
        if clip is not None:
            kind = {"ClipGradByGlobalNorm": "global_norm", "ClipGradByNorm": "norm (each parameter)",
                    "ClipGradByValue": "value"}.get(type(clip).__name__, type(clip).__name__)
            clipped = lambda p: id(p) in held and not p.stop_gradient and getattr(p, "need_clip", True)
            names = {id(p): key for key, p in model.named_parameters() if clipped(p)}  # need_clip=False: skipped
            # with parameter groups Paddle clips each group by a norm of its own (torch's clip_grad_norm_: one norm)
            dicts = [g for g in getattr(opt, "_param_groups", None) or () if isinstance(g, dict)]
            groups = [[names[id(q)] for q in g.get("params", ()) if id(q) in names] for g in dicts] \
                if kind == "global_norm" and len(dicts) > 1 else None
            self.run.clip(kind, getattr(clip, "clip_norm", getattr(clip, "max", float("nan"))), list(names.values()),
                          groups)
        return out

    def trainer_config(self, trainer) -> dict:
        """paddlenlp's Trainer as it trains, as hooks_torch reads transformers' (runconfig.TRAINER). paddlenlp 2.8
        builds no label smoother (label_smoothing_factor is read by nothing); its warmup is warmup_steps, else
        int(warmup_ratio x steps), as its create_scheduler computes it."""
        args, steps = trainer.args, int(trainer.state.max_steps)
        smoother = getattr(trainer, "label_smoother", None)
        warmup = args.warmup_steps if args.warmup_steps > 0 else int(args.warmup_ratio * steps)
        return {"label_smoothing": float(smoother.epsilon) if smoother is not None else 0.0, "max_steps": steps,
                "gradient_accumulation_steps": int(args.gradient_accumulation_steps),
                "dataloader_drop_last": bool(args.dataloader_drop_last),
                "lr_scheduler_type": str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)),
                "warmup_steps": int(warmup)}

    def end_workers(self):
        """A DataLoader's worker processes ended before the recorder stops the script (os._exit runs no cleanup):
        blocked on a full queue, they outlive it otherwise."""
        for loader in list(self.loaders):
            for worker in getattr(loader, "_workers", ()):
                if worker.is_alive():
                    worker.terminate()

    # ------------------------------------------------------------------ wrapping
    def install(self, run):
        paddle = self.paddle
        if run.torch_whole:  # a split model's ops with no CPU kernel, stood in for before the script's first call
            from portcheck.core.errors import PipelineError
            from portcheck.scripts.split_ranks import standins
            try:
                self.standins = standins(run.world)
            except PipelineError as e:  # said where the model is found split (_split)
                self.standins_error = str(e)
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
            raise run.refuse("it compiles its model (paddle.jit.to_static): run it in dynamic mode for the check "
                             "[PC829]")
        paddle.jit.to_static = to_static
        clipping(run, paddle.nn.utils, paddle.Tensor, lambda p: not p.stop_gradient)
        # paddle.manual_seed, torch's name (PaConvert writes it), is paddle.seed under a name of its own
        for where, name in ((paddle, "seed"), (paddle, "manual_seed"), (np.random, "seed"), (random, "seed")):
            if hasattr(where, name):
                seeded(run, where, name, f"{where.__name__}.{name}")
        # the samplers that shuffle draw the torch side's indices (Run.order): DataLoader(shuffle=True)'s and
        # paddlenlp's Trainer's BatchSampler(shuffle=True) draw through a RandomSampler; DistributedBatchSampler
        # shuffles its own indices, batched here as it batches them
        io = paddle.io
        sampling(run, io.RandomSampler, "RandomSampler", lambda s: len(s.data_source),
                 lambda s: range(len(s.data_source)))
        sampling(run, io.SubsetRandomSampler, "SubsetRandomSampler", lambda s: len(s.indices), lambda s: set(s.indices))
        batches = io.DistributedBatchSampler.__iter__

        @functools.wraps(batches)
        def distributed(s):
            if not s.shuffle:
                return batches(s)
            drawn = (i for batch in batches(s) for i in batch)
            return _batched(run.order("DistributedBatchSampler(shuffle=True)", len(s.dataset), drawn,
                                      range(len(s.dataset))), s.batch_size * s._acc_steps, s.drop_last)
        io.DistributedBatchSampler.__iter__ = distributed
        from paddle.io.dataloader.dataloader_iter import _DataLoaderIterMultiProcess as multi
        start = multi.__init__

        @functools.wraps(start)
        def workers(loader, *args, **kwargs):
            self.loaders.add(loader)
            start(loader, *args, **kwargs)
        multi.__init__ = workers


def _batched(indices, size: int, drop_last: bool):
    batch = []
    for i in indices:
        batch.append(i)
        if len(batch) == size:
            yield batch
            batch = []
    if batch and not drop_last:
        yield batch


def _loss(run, name, fn):
    return loss_wrapper(run, name, fn, True)
