"""The Paddle side of portcheck.scripts.recorder: what it wraps in Paddle, how it reads a Paddle model and optimizer
(in torch's conventions: BatchNorm's momentum as torch's 1 - m, GELU's approximation as torch's string), and how
the model starts from the torch side's initial weights.

Torch is not imported: the Paddle script may run in a venv without it. The weights come from the torch side's
record in Paddle's layout (state0/), each module paired with no map (mapping.pairing, on the two first forwards),
each tensor placed as judge_backward pairs it (backward._counterpart).
"""
import functools
import platform
import random

import numpy as np

from portcheck.mapping import fused, settings
from portcheck.scripts.wrapping import LOSSES, LOSS_CLASSES, SharedSide, clipping, loss_wrapper, registering, sampling, \
    seeded, stepped_ahead, ties, wrap_framework


class PaddleSide(SharedSide):
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

    def start_from_torch(self, model, given: dict, first):
        """The model's weights set to the torch side's initial ones (given: the torch record), every Paddle key
        filled, every shape equal, before the first is set; else one line. first: the script's first call
        (trace.Arguments, torch's batch 0 in it), on which the model runs once for the pairing. Returns the pairing's calls
        {torch call: Paddle call} and record keys {torch key: Paddle key} (outputs.counterparts).
        A tensor one side alone holds is no problem where the run shows it unused (its module not called by that
        side's first forward) or the model fills it itself (a buffer, Paddle's position ids; a torch tensor without
        a gradient): kept at that side's own value, named in the configuration (one_sided), the comparison
        deciding. A torch name of a tied tensor (a head's weight tied to the embedding's: tied/ keys) is filled
        through the name paired; tied on torch's side and two tensors on Paddle's is said (untied), and so is the
        converse (untied_torch: torch's head a Linear of its own, Paddle's a matmul with the embedding's weight).
        A Paddle module --layouts declares fused (paddlenlp's qkv_proj) pairs by its parts, each with a torch module,
        and starts from their tensors joined as convert joins them (_join)."""
        from portcheck.core.errors import PipelineError
        split = self._split(model)
        from portcheck.gradients.backward import _counterpart, renames
        from portcheck.mapping.layouts import CONFIGS_DIFFER, flipped
        from portcheck.mapping.state import names_of_one_tensor
        from portcheck.forward.outputs import counterparts
        from portcheck.mapping.trace import Recorder, call, eval_mode
        from portcheck.core.keys import ROOT, module_of, split_key
        from portcheck.mapping import loose
        from portcheck.mapping.modules import NAMES, describe
        from portcheck.mapping.pairing import pair
        rec = Recorder()
        handles = rec.attach(model)
        try:
            with eval_mode(model), self.paddle.no_grad():
                call(model, first, self.to_tensor)
        except Exception as e:  # noqa: BLE001 - a split layer fed another width than its shard's: named
            if split is None:
                raise
            raise self.run.refuse(split.stopped(rec.arrays, e)) from None
        finally:
            for h in handles:
                h.remove()
        # each side's fused or packed modules seen as their parts (the torch side's marked in its record: TorchSide)
        torch_trace = fused.cut({k: v for k, v in given.items() if k.startswith(("mod/", NAMES, "out/", "in/",
                                                                                 fused.KEY))}, False)
        specs = fused.specs(model, self.run.layouts)  # Paddle's fused modules: each part paired, the parts joined below
        paddle_trace = fused.cut(fused.mark({**describe(model), **rec.arrays}, specs, model), False) if split is None \
            else split.whole_trace(rec.arrays)
        renamed = renames(given, paddle_trace)  # read before mark() redescribes the modules it pairs with none
        loose.mark(torch_trace, paddle_trace)  # a Linear against its parent's bare parameters: as convert pairs them
        try:
            paired = pair(torch_trace, paddle_trace)
            modules = paired.modules()
        except PipelineError as e:
            raise self.run.refuse(f"its model does not pair with the torch model's: {e}")
        params = model.state_dict() if split is None else split.full_params()
        state, problems, placed, said = {}, [], {}, set()  # said: Paddle keys a problem names already
        tied, missing, unplaced = ties(given), [], []
        ran = lambda trace: {module_of(split_key(k)[1]) for k in trace if k.startswith("out/")}
        torch_ran, paddle_ran = ran(given), ran(rec.arrays)
        # a packed module's parts never run (its forward reads them): used where it ran
        torch_ran |= {p for p in fused.packed_parts(torch_trace) if p.rpartition(".")[0] in torch_ran}
        module = lambda key: key.rpartition(".")[0] or ROOT
        one_sided = {"torch": [], "paddle": [], "tied": []}
        kinds = {k[4:].rpartition("/")[0]: k.rpartition("/")[2] for k in given if k.startswith("mod/")}

        def untied(name):
            """The torch Embedding weight a torch head's weight (a Linear's, [in, out] here) has the shape of, filled in
            Paddle, where nothing Paddle holds takes the head's: Paddle computes its head from the embedding (a matmul
            with its weight), torch holds the head apart. None otherwise."""
            shape = given[f"state0/{name}"].shape
            return next((k for k in placed if len(shape) == 2 and "Linear" in kinds.get(module(name), "")
                         and "Embedding" in kinds.get(module(k), "") and given[f"state0/{k}"].shape == shape[::-1]),
                        None)
        parts = {}  # {Paddle part key (<fused module>.<part>.<tensor>): torch's value}, joined into the module's
        # a layer of a type of its own holding a torch Linear's tensors (OPTLMHead's decoder_weight): as judged
        renamed.update({t: "/" + p for t, p in loose.held_by_type(given, paddle_trace, modules).items()})
        # a square weight under another name, in a module the run uses: PC455's line, the layouts= to declare
        squares = [line for name, line in loose.square_held(given, paddle_trace, modules).items() if name in torch_ran]
        if squares:
            raise self.run.refuse(squares[0])
        layers = {name: type(layer) for name, layer in model.named_sublayers(include_self=True)}
        flips = flipped(given, layers, lambda key: _counterpart(f"w/{key}", modules, renamed).partition("/")[2],
                        self.run.layouts)
        for key in (k for k in given if k.startswith("state0/")):
            target = _counterpart(key, modules, renamed).partition("/")[2]
            if target not in params and module(module(target)) in specs:
                parts[target], placed[key[7:]] = given[key], target
                continue
            if target not in params:
                like = params.get(key[7:])  # the Paddle tensor of its name, which its shape kept from pairing
                if like is None:
                    missing.append(key[7:])
                elif tuple(like.shape) == tuple(given[key].shape):  # the modules did not pair: their tensors differ
                    problems.append(f"torch {key[7:]} and Paddle {key[7:]}, one shape, in modules that do not pair: "
                                    "they hold other tensors (a bias on one side alone?)")
                else:
                    problems.append(f"torch {key[7:]} {list(given[key].shape)} vs Paddle {key[7:]} "
                                    f"{list(like.shape)}: {CONFIGS_DIFFER}")
                if like is not None:
                    said.add(key[7:])
                continue
            value, want = given[key], params[target]
            flip = target in flips.get(key[7:], ())  # held the other way: set_state transposes it
            # 0-d against [1], axes merged, a bare [out, in] against a Linear: the same values (judge_run's shapes)
            fits = loose.as_held(value.T if flip else value, tuple(want.shape),
                                 transposed=renamed.get(key[7:], "").startswith("/"))
            if fits is None:
                problems.append(f"torch {key[7:]} {list(value.shape)} vs Paddle {target} {list(want.shape)}")
            state[target], placed[key[7:]] = value if fits is None or flip else fits, target
        self.joins.clear()
        self.flipped = {target for found in flips.values() for target in found}
        problems += self._join(specs, parts, params, state, {p: t for t, p in placed.items() if p in parts}, said)
        for name in missing:  # a tied name filled through another (the name its tie's module is paired under)
            mates = {tied.get(name, name), *(a for a, f in tied.items() if f == tied.get(name, name))} - {name}
            if any(m in placed for m in mates):
                one_sided["tied"].append(name)
            elif module(name) not in torch_ran or f"grad/{name}" not in given:
                one_sided["torch"].append(name)
            elif untied(name):
                one_sided.setdefault("untied_torch", []).append([name, untied(name), placed[untied(name)]])
            else:
                problems.append(f"torch {name} has no Paddle counterpart")
                unplaced.append(name)
        same = names_of_one_tensor(params)
        unfilled = [k for k in params if k not in said and not any(a in state for a in same[k])]
        trained = {k for k, _ in model.named_parameters()}
        idle = self._unused(model, first, unfilled) if unfilled else set()
        one_sided["paddle"] = [k for k in unfilled if module(k) not in paddle_ran or k not in trained or k in idle]
        unfilled_problems = [k for k in unfilled if k not in one_sided["paddle"]]
        problems += [f"Paddle {k} no torch tensor fills" for k in unfilled_problems]
        for alias, tie in tied.items():  # tied on torch's side, each name placed in a Paddle tensor of its own
            if alias in placed and tie in placed and placed[tie] not in same[placed[alias]]:
                one_sided.setdefault("untied", []).append([alias, tie, placed[alias], placed[tie]])
        self.run.config["one_sided"] = one_sided
        if problems:
            # torch tensors left over and Paddle ones unfilled: perhaps one module against several, which no run infers
            fused_hint = ". A module computing several of the other side's in one (q, k and v in one Linear) is " \
                "declared with --layouts FILE (docs/run.md)" if unplaced and unfilled_problems else ""
            # declared so, and its parts left unpaired: a part pairs with a module holding tensors of its shapes
            lost = [f"{n}.{p}" for n, spec in specs.items() for p in spec.parts if f"{n}.{p}" not in modules.values()]
            if lost:
                fused_hint = f". --layouts declares Paddle's {', '.join(specs)} fused, and its part(s) " \
                    f"{', '.join(lost)} pair with no torch module: each part holds its share of its module's tensors " \
                    "(a bias on one side alone?)"
            raise self.run.refuse(f"its model cannot start from the torch model's weights ({len(problems)} "
                                  "problem(s)): " + "; ".join(problems) + fused_hint + " [PC831]")
        self.set_state(model, state if split is None else split.shard(state))
        self.placed = placed  # the kept layers' tensors are placed as the model's (start_kept), parts joined
        return paired.pairs, counterparts(torch_trace, paddle_trace, paired), placed

    def _split(self, model):
        """A model fleet split in tensor parallel: its rank (split_ranks.SplitRank), its place in the run's config;
        None for a whole model. Judged only against torch's one process (the run's torch_whole): else one line."""
        from portcheck.scripts import split_ranks
        name = next((name for name, p in model.named_parameters() if getattr(p, "is_distributed", False)), None)
        if name is None:
            return None
        if not self.run.torch_whole:
            raise self.run.refuse(f"its model is split in tensor parallel ({name} is one rank's shard) and the torch "
                                  "script runs as ranks too: a split Paddle script is judged against torch's script "
                                  "in one process: give --torch \"python pt_train.py\" without a launcher [PC925]")
        if fused.specs(model, self.run.layouts):
            raise self.run.refuse(f"--layouts declares Paddle's {', '.join(fused.specs(model, self.run.layouts))} "
                                  "fused in a model split in tensor parallel: run does not cut a fused module's "
                                  "shards per part; compare it with portcheck.parallel.split.compare_split(layouts=) "
                                  "[PC935]")
        if self.standins_error:  # standins' own line, coded (PC425, PC428)
            raise self.run.refuse(self.standins_error)
        self.split = split_ranks.SplitRank(model, *split_ranks.split_of(model))
        self.run.config[split_ranks.SPLIT] = self.split.config(self.standins)
        return self.split

    def _join(self, specs: dict, parts: dict, params: dict, state: dict, torch_keys: dict, said: set) -> list:
        """Each tensor of a Paddle fused module (specs: fused.specs) made of its parts' torch values (parts: {Paddle
        part key: value}), as convert joins them (fused.join), into state; the joins made kept (self.joins: {Paddle
        key: (Fused, [part keys])}). Returns the problems: a part's tensor no Paddle tensor takes, a join not of the
        Paddle tensor's shape, each Paddle key named added to said. A tensor none of whose parts torch fills is left
        unfilled (said as such)."""
        problems, used = [], set()
        for name, spec in specs.items():
            for tensor in {k.rpartition(".")[2] for k in parts if k.rpartition(".")[0] in
                           {f"{name}.{p}" for p in spec.parts}}:
                keys, whole = [f"{name}.{p}.{tensor}" for p in spec.parts], f"{name}.{tensor}"
                if whole not in params:
                    continue
                used.update(keys)
                lost = [k.rpartition(".")[0] for k in keys if k not in parts]
                if lost:
                    said.add(whole)
                    problems.append(f"Paddle {whole} no torch tensor fills whole: its part(s) {', '.join(lost)} "
                                    "pair with no torch module")
                    continue
                value = fused.join(spec, [parts[k] for k in keys])
                if value is None or tuple(value.shape) != tuple(params[whole].shape):
                    said.add(whole)
                    problems.append(f"torch {' + '.join(torch_keys[k] for k in keys)} "
                                    f"{' + '.join(str(list(parts[k].shape)) for k in keys)} vs Paddle {whole} "
                                    f"{list(params[whole].shape)} (its Fused: {len(spec.parts)} parts"
                                    f"{f' of {spec.heads} heads' if spec.heads else ''})")
                    continue
                state[whole], self.joins[whole] = value, (spec, keys)
        problems += [f"torch {torch_keys[k]} has no Paddle counterpart (Paddle {k.rpartition('.')[0]} pairs with its "
                     f"module, and {k.rpartition('.')[0].rpartition('.')[0]} holds no {k.rpartition('.')[2]})"
                     for k in parts if k not in used]
        return problems

    def _unused(self, model, first, keys) -> set:
        """Of the parameters `keys` names, those no output of the model depends on (paddlenlp's BertModel computes its
        pooler for a token classifier, which returns the sequence's logits alone): the gradient of its outputs' sum
        reaches none of them. Its forward in eval mode, .grad untouched; none where Paddle cannot tell."""
        from portcheck.mapping.trace import call, eval_mode
        paddle = self.paddle
        with eval_mode(model):
            out = call(model, first, self.to_tensor)
        found = []
        todo = [out]
        while todo:
            v = todo.pop()
            if isinstance(v, paddle.Tensor):
                if not v.stop_gradient and v.dtype in (paddle.float32, paddle.float64, paddle.float16, paddle.bfloat16):
                    found.append(v)
            elif isinstance(v, dict):
                todo += list(v.values())
            elif isinstance(v, (tuple, list)):
                todo += list(v)
            elif hasattr(v, "to_tuple"):  # a ModelOutput
                todo += list(v.to_tuple())
        named = [(k, p) for k, p in model.named_parameters() if k in keys and not p.stop_gradient]
        if not found or not named:
            return set()
        try:
            grads = paddle.grad(paddle.add_n([v.sum() for v in found]), [p for _, p in named], allow_unused=True)
        except (RuntimeError, ValueError):  # a parameter Paddle's grad cannot reach (an RNN's weight storage)
            return set()
        return {k for (k, _), g in zip(named, grads) if g is None}

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
        from portcheck.gradients.backward import _paddle_grads
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
