"""The recorder `python -m portcheck run` injects into a user's own training script (portcheck.run starts it).

The script is not edited: scripts/inject/sitecustomize.py, first on the interpreter's PYTHONPATH, calls
install() before the script runs, with the run's settings in the environment (SETTINGS: the side, the steps, the
folder). install() wraps what every training script goes through, in either framework:

  the module call     the root model is the outermost module called, with gradients on, whose parameters an
                      optimizer holds (a data-parallel wrapper's: the model it holds); its first call records
                      every module's output (compare._Recorder) and what pairing reads (pairing.describe); each
                      call records the batch it is given (BATCH: gradient accumulation's micro-batches each their own);
  Tensor.backward     the tensor it is called on is the loss; the gradients after the first backward; how many
                      backward() calls each step makes (configuration: gradient accumulation);
  optimizer.step      before it, the lr; after it, every weight; after step N, the record is written and the
                      script is stopped (exit 0);
  the losses          each loss functional and loss class of the framework (LOSSES: cross_entropy, mse_loss, ...;
                      nn.MSELoss, ...) records its target (TARGET, per call) and its settings in torch's
                      conventions (loss_settings), a class once (Paddle's compute with their own kernels); one it does not know, as not known;
                      each loss call of the first step (the model's own too) in order (config losses, runconfig.losses);
  the samplers        each iteration of a sampler that shuffles (torch's RandomSampler, SubsetRandomSampler,
                      DistributedSampler; Paddle's RandomSampler, SubsetRandomSampler, DistributedBatchSampler): the
                      torch side records the indices it draws (ORDER), the others draw those (Run.order);
  dropout             off for the N steps (the functional dropout returns its input); the p of each call in the
                      first forward recorded under the module calling it (dropout_site);
  seeds, clipping     their arguments, for the configuration (portcheck.runconfig);
  torch's schedulers  whether one cycles the optimizer's momentum (OneCycleLR, CyclicLR), for it too;
  a Trainer           transformers' or paddlenlp's, on the stack at the first step: what it does beside the
                      optimizer (runconfig.TRAINER);
  kept state          the modules (and dicts of tensors) of the model's structure the script keeps beside it, no
                      optimizer holding them (an EMA copy, a teacher): each step's state (Run.keep).

Sides: "torch" records the script as it is; "torch64" is the same script again in float64 (the model cast at its
first call, from the torch side's initial weights, fed its batches and targets widened): torch's own error, the
yardstick of the measured rule; "paddle" starts its model from torch's initial weights (paired with no map:
portcheck.pairing), its samplers draw torch's order and it is fed torch's batches and targets, its own recorded apart
(the data pair: what it catches is then the preprocessing); "moved" (settings'
"against": i) is the same script again in float32 from torch's initial weights moved one ulp, fed its batches and
targets, with backward.AGAINST_ITSELF[i]'s kernels: torch against itself, as compare_backward's plain run measures
it (calibrated.SPREAD). The torch and Paddle sides also record each step's values within the floor of 0, the first
forward's too (backward._near_zero's near<i>/ keys); "taking" (portcheck.run, only for a red run whose two sides put
such values on each side of 0) is the torch script again from torch's initial weights, fed its batches and targets,
taking Paddle's side of 0 at exactly those values (backward._taking; CROSSED, the run's file of them, in its folder).

Under a launcher (torchrun, paddle.distributed.launch: portcheck.run.ranks) each rank records in DIR/rank<r>/<side>,
fed and started from torch's rank r; the launcher's own process records nothing. Only the process that installed
the recorder records and writes: the settings it leaves in the environment mark what the script starts (STARTED: a
Python monitor, a spawned DataLoader worker), which is not recorded (only a rank of a launcher portcheck does not
know still refuses), and a process forked from it (Run.pid) writes nothing.

A script that cannot be recorded (it trains two models, compiles its model, exits before N steps) ends with
one line in status.json, which portcheck.run reports for its side.
"""
import atexit
import contextlib
import dataclasses
import functools
import inspect
import itertools
import json
import os
import sys
from pathlib import Path

import numpy as np

SETTINGS = "PORTCHECK_RUN"   # the environment variable holding the run's settings (json)
RECORD = "record.npy"        # each side's record, in its folder
STATUS = "status.json"       # each side's outcome: steps taken, config, the error that stopped it
INIT = "init.npy"            # the torch side's initial weights, in torch's layout (the float64 run starts there)
CROSSED = "crossed.json"     # the taking side's folder: the values it takes Paddle's side of 0 at (crossed_file)
NEAR_SIDES = ("torch", "paddle")  # the sides recording each step's values within the floor of 0
STOPPED_EXIT = 3             # the exit code of a script the recorder stopped with an error
STARTED = "started"          # in SETTINGS once installed: a process the script starts (install: not recorded)
BATCH = "input/batch_"       # + c/<argument>: the batch the root's call c was given (c counted over the steps)
TARGET = "target/batch_"     # + j: the target of loss call j
ORDER = "order/"             # + n: the indices the torch side's n-th framework sampler iteration drew, in order
AHEAD = 1000                 # scheduler steps a copy of each side's lr schedule takes past the run (runconfig.ahead)


class Refused(Exception):
    """A script the recorder cannot record: its one line goes to status.json."""


def _numpy(t) -> np.ndarray:
    if hasattr(t, "detach"):
        t = t.detach().cpu()
    return np.array(t.numpy(), copy=True)


def _flat(value, prefix, out):
    """The tensors of a call's arguments, {prefix/<position or name>: array}; positions of nested tuples as a.b."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        out[prefix] = _numpy(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _flat(v, f"{prefix}/{k}", out)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _flat(v, f"{prefix}/{i}", out)


def _replaced(value, prefix, given: dict, to_tensor):
    """The call's arguments with each tensor replaced by given[its key] (another framework's batch), if there."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        return to_tensor(given[prefix]) if prefix in given else value
    if isinstance(value, dict):
        return type(value)({k: _replaced(v, f"{prefix}/{k}", given, to_tensor) for k, v in value.items()})
    if isinstance(value, (tuple, list)):
        return type(value)(_replaced(v, f"{prefix}/{i}", given, to_tensor) for i, v in enumerate(value))
    return value


class Unbuilt(Exception):
    """A model call's argument the recorder cannot take apart into arrays (an object holding tensors)."""


def _arrays(value, prefix, batch: dict):
    """A call's arguments as compare.Arguments holds them: each tensor as numpy, batch[its key] where batch has it
    (torch's batch of the call), in the lists, tuples and dicts it was in; a number or a flag as the script gave it;
    Unbuilt for anything else (an object holding tensors)."""
    if hasattr(value, "numpy") and hasattr(value, "shape"):
        return batch[prefix] if prefix in batch else _numpy(value)
    if isinstance(value, dict):
        return type(value)({k: _arrays(v, f"{prefix}/{k}", batch) for k, v in value.items()})
    if isinstance(value, (tuple, list)):
        return type(value)(_arrays(v, f"{prefix}/{i}", batch) for i, v in enumerate(value))
    if value is None or isinstance(value, (bool, str, int, float, np.generic)):
        return value
    raise Unbuilt(type(value).__name__)


class Run:
    """One side's recording, framework-independent; `fw` (TorchSide or PaddleSide) knows the framework."""

    def __init__(self, settings: dict, fw):
        self.side, self.steps, self.out = settings["side"], int(settings["steps"]), Path(settings["out"])
        self.torch_dir = Path(settings["torch_dir"]) if settings.get("torch_dir") else None
        self.fw, self.root, self.called, self.optimizers = fw, None, None, []
        self.world = settings.get("world", 1)
        from portcheck.mapping.fused import from_json
        self.layouts = from_json(settings.get("layouts") or {})  # --layouts FILE's declarations (run.read_layouts)
        self.against = settings.get("against")  # the moved side's: its index in backward.AGAINST_ITSELF
        self.record, self.config = {}, {"seeds": {}, "clip": None, "loss": None, "versions": fw.versions()}
        self.step, self.depth, self.calls, self.loss, self.done = 0, 0, 0, None, False
        self.error, self.in_root, self.making = None, 0, False
        self.evaluating = False  # the root's last call was an evaluation (model.eval()): its losses not recorded
        self.evaluated = None  # a model called in eval mode before any in train mode (Run.backward)
        self.stepped = []  # the optimizers stepped in this step (several: each over a part of the model)
        self.stack, self.in_loss, self.names = [], 0, None  # the modules being called; a loss class's call; names
        # the root's forward calls and the backward() calls of this step (more than one: gradient accumulation), the
        # loss calls so far (each its own target), each framework sampler's indices as drawn (the torch side's)
        self.forwards, self.backwards, self.losses, self.drawn = 0, 0, 0, {}
        self.config["accumulation"] = {"forward": [], "backward": []}  # per step (runconfig.accumulation)
        self.config["orders"] = []  # each framework sampler's iteration (Run.order)
        self.config["losses"] = []  # each loss call of the first step, in order (loss_site; "loss": the first)
        self.given = None  # the torch side's record (paddle, torch64): its batches, targets, weights
        self.kept = {}  # the modules the script keeps beside the model (keep)
        self.schedulers = []  # torch's lr schedulers as built (a Paddle optimizer holds its own): Run.scheduler
        self.crossed = []  # the taking side's: the values whose side of 0 it takes Paddle's (backward.Crossing)
        self.plain = self.side == "plain"  # tools/bench_run.py: the script's own first N steps, nothing recorded
        self.pid = os.getpid()  # the script's own process: a child forked from it (a DataLoader worker) writes nothing
        if self.side not in ("torch", "plain"):
            from portcheck.core.fileio import load_npy
            self.given = load_npy(self.torch_dir / RECORD)

    @property
    def dropout_off(self) -> bool:
        return not (self.done or self.plain)

    @property
    def sites(self) -> bool:
        """In the first training forward, whose dropout call sites are recorded (dropout_site)."""
        return bool(self.in_root) and not (self.calls or self.making or self.done)

    # ------------------------------------------------------------------ the hooks the framework side calls
    def module_call(self, module, call, args, kwargs):
        """Every module call: the root's are recorded, a loss class's settings too; everything else runs as it is."""
        if self.plain:
            return call(*args, **kwargs)
        self.stack.append(module)  # the innermost module is a dropout's call site (dropout_site)
        try:
            return self._module_call(module, call, args, kwargs)
        finally:
            self.stack.pop()

    def _module_call(self, module, call, args, kwargs):
        if self.depth or self.done or not self.fw.grad_enabled():
            kind = self.in_root and not (self.making or self.in_loss or self.done) and \
                (self.config["loss"] is None or self.step == 0) and self.fw.loss_class(module)
            found = kind and class_loss(module, kind, self.fw.framework == "paddle", args, kwargs)
            if not found:
                return self._inner(call, args, kwargs)
            if self.config["loss"] is None:  # the model's own loss (labels=): its settings, its target in the batch
                self.config["loss"], self.config["loss_inside"] = {"function": found[0], **found[1]}, True
            self.loss_site(found[0], found[1])
            self.in_loss += 1  # the functional it calls is not a loss of its own
            try:
                return self._inner(call, args, kwargs)
            finally:
                self.in_loss -= 1
        if self.root is None and not module.training and self.evaluated is None and self._optimized(module):
            self.evaluated = module  # an evaluation, or a model trained in eval mode (backward says which)
        if self.root is None and module.training and self._optimized(module):
            self.called, self.root = module, self.fw.unwrapped(module)  # a data-parallel wrapper: its model
            self.config["wrapper"] = self.fw.wrapper(module)
            self._first_call(self.root, args, kwargs)
        elif self.root is not None and module is not self.called and self._trained(module):
            self._not_direct(module)
            raise self.refuse(f"it trains two models ({type(self.root).__name__}, then {type(module).__name__}): "
                              "give each model its own script [PC826]")
        if module is self.called and not module.training:  # an evaluation (model.eval()): not a training batch
            self.evaluating = True
            return self._inner(call, args, kwargs)
        if module is not self.called:
            kind = self.fw.loss_class(module)
            return self.loss_module(module, kind, call, args, kwargs) if kind else self._inner(call, args, kwargs)
        self.in_root += 1
        try:
            return self._root_call(self.root, call, args, kwargs)
        finally:
            self.in_root -= 1

    def _optimized(self, module) -> bool:
        """An optimizer holds a parameter of the module that takes a gradient: the model a script trains, all of it
        or a part (a head fine-tuned by giving its optimizer the head's parameters alone, the rest left trainable)."""
        own = {id(p) for p in self.fw.parameters(module) if self.fw.trainable(p)}
        return bool(own & self.fw.held_parameters(self.optimizers))

    def _trained(self, module) -> bool:
        """Every parameter of the module that takes a gradient (a frozen layer's do not) an optimizer holds."""
        own = {id(p) for p in self.fw.parameters(module) if self.fw.trainable(p)}
        return bool(own) and own <= self.fw.held_parameters(self.optimizers)

    def _not_direct(self, module):
        """A second module trained, the root and it called from inside a method of a module holding both that was
        not itself called (model.forward(x) called directly: the model's call, its batch, is never seen): one line."""
        frame, here = sys._getframe(1), str(Path(__file__).parent.parent)
        while frame is not None:
            owner = frame.f_locals.get("self") if not frame.f_code.co_filename.startswith(here) else None
            held = self.fw.submodules(owner) if isinstance(owner, self.fw.module_class) else ()
            if owner is not module and not any(m is owner for m in self.stack) and \
                    any(m is module for m in held) and any(m is self.called for m in held):
                raise self.refuse(f"it calls {type(owner).__name__}.{frame.f_code.co_name}() directly (as "
                                  f"model.{frame.f_code.co_name}(x)), not the model itself: portcheck records the "
                                  "calls of the model; call model(x) [PC827]")
            frame = frame.f_back

    def _root_call(self, module, call, args, kwargs):
        if self.stepped:  # not every optimizer over the model stepped: the step ended with those that did
            self._close_step()
        self.evaluating = False
        i, c = self.step, self.calls  # c: the root's call, counted over the steps (input/batch_<c>: BATCH)
        own = {}
        _flat(args, "args", own), _flat(kwargs, "kwargs", own)
        near, taking = [], contextlib.nullcontext()
        self.record.update({f"{BATCH}{c}/{k}": v for k, v in own.items()})
        self.forwards += 1
        if self.forwards == 1:  # a step's first call (more calls: gradient accumulation's micro-batches)
            if self.side in NEAR_SIDES:  # as record_backward's runs: backward.crossings reads them
                from portcheck.gradients.backward import _near_zero
                near = _near_zero(module, self.record, i)
            here = [dataclasses.replace(c, step=0) for c in self.crossed if c.step == i]
            if here:  # the call whose near<i>/ values crossed (an evaluation's or an accumulated call's: not it)
                from portcheck.gradients.backward import _taking
                taking = _taking(module, here)
        if self.given is not None:  # fed torch's batch of this call
            given = {k: self._widened(v) for k, v in self._given_batch(c).items()}
            args, kwargs = _replaced(args, "args", given, self.fw.to_tensor), \
                _replaced(kwargs, "kwargs", given, self.fw.to_tensor)
        handles = near
        if self.calls == 0:
            from portcheck.forward.compare import _Recorder
            handles = near + _Recorder(arrays=self.record).attach(module)
        try:
            with taking:
                return self._inner(call, args, kwargs)
        finally:
            for h in handles:
                h.remove()
            self.calls += 1

    def _inner(self, call, args, kwargs):
        self.depth += 1
        try:
            return call(*args, **kwargs)
        finally:
            self.depth -= 1

    def loss_module(self, module, name, call, args, kwargs):
        """A framework's loss class called (nn.CrossEntropyLoss()(out, y)): recorded by its own settings, once
        (Paddle's MSELoss computes with its own kernels, no functional; the functional torch's calls passes through)."""
        found = class_loss(module, name, self.fw.framework == "paddle", args, kwargs)
        if found is None:
            return self._inner(call, args, kwargs)  # the call's own error
        said, settings, bound, target = found
        if target is not None:
            bound.arguments[target] = self.loss_call(said, bound.arguments[target], settings)
        self.in_loss += 1
        try:
            return self._inner(call, bound.args, bound.kwargs)
        finally:
            self.in_loss -= 1

    def dropout_site(self, p):
        """A dropout given as a number (functional dropout's p, an attention's dropout_p) in the first forward:
        under the module calling it, for the configuration (a Dropout module's own call: its p, module_config's)."""
        site = self.stack[-1] if self.stack else None
        if site is None or self.fw.is_dropout(site) or not float(p):
            return
        if self.names is None:
            self.names = {id(m): n for n, m in self.fw.named_modules(self.root)}
        name = self.names.get(id(site))
        if name is not None:
            ps = self.config.setdefault("dropouts", {}).setdefault(name, {"type": type(site).__name__, "p": []})["p"]
            ps[:] = sorted({*ps, round(float(p), 7)})

    def _widened(self, v):
        return v.astype(np.float64) if self.side == "torch64" and v.dtype.kind == "f" else v

    def _first_call(self, module, args, kwargs):
        from portcheck.mapping.pairing import describe
        self.fw.check_not_compiled(module)
        self.first = self._arguments(args, kwargs)  # the isolated run's call, the Paddle side's first
        self.depth += 1  # the runs made here (pairing, isolation) are not training calls
        self.making = True
        try:
            if self.side == "torch":
                from portcheck.core.fileio import save_npy
                save_npy(self.out / INIT, self.fw.state(module))
            elif self.side == "torch64":
                from portcheck.core.fileio import load_npy
                init = load_npy(self.torch_dir / INIT)
                self.fw.load(module, init)
                pairs = json.loads((self.out.parent / "paddle" / STATUS).read_text())["config"].get("pairs") or {}
                self.isolated(module, {t: t for t in pairs}, {k: k for k in self.given if k.startswith("out/")})
                # BatchNorm's statistics as they were before the isolated run: a model in float64 already (under
                # DDP: hooks_torch) has them updated in place by it, no float32 copy taken
                self.fw.load(module, init)
                module.double()  # in place: the optimizer's Parameters are the same objects, now float64
            elif self.side == "taking":  # as record_backward(crossed=): from torch's start (_root_call takes them)
                from portcheck.core.fileio import load_npy
                self.fw.load(module, load_npy(self.torch_dir / INIT))
                self.crossed = crossed_file(self.out / CROSSED)
            elif self.against is not None:  # as record_backward's runs against itself, to the process's end
                from portcheck.gradients.backward import AGAINST_ITSELF, moved_one_ulp
                from portcheck.core.fileio import load_npy
                self.fw.load(module, load_npy(self.torch_dir / INIT))
                moved_one_ulp(module)
                self.kernels = AGAINST_ITSELF[self.against]()
                self.kernels.__enter__()  # never left: the recorder ends the process after step N
            else:
                pairs, keys, _ = self.fw.start_from_torch(module, self.given, self.first or self._by_keys())
                self.config["pairs"] = pairs
                state = self.fw.paddle_layout_state(module)
                self.isolated(module, {p: t for t, p in pairs.items()},
                              {p: t for t, p in keys.items() if t.startswith("out/")})
                self.fw.set_state(module, state)  # BatchNorm's statistics as they were before the isolated run
        finally:
            self.depth -= 1
            self.making = False
        self.record.update(describe(module))
        self.record.update(self.fw.layout_keys(module))
        self.config["modules"] = self.fw.module_config(module)
        self.config["autocast"] = self.fw.autocast()
        self.record.update({f"state0/{k}": v for k, v in self.fw.paddle_layout_state(module).items()})

    def _arguments(self, args, kwargs):
        """The root's first call as compare.Arguments: the script's own arguments (a number, a flag, a list or dict
        around tensors: model(x, 0.5), model([x]), model({"x": x})), each tensor torch's batch 0 at its place (the
        torch side's: its own); None where an argument is none of these."""
        from portcheck.forward.compare import Arguments
        batch = self._given_batch(0) if self.given is not None else {}
        try:
            return Arguments(_arrays(tuple(args), "args", batch), _arrays(dict(kwargs), "kwargs", batch))
        except Unbuilt:
            return None

    def _by_keys(self):
        """Torch's batch 0 as compare.Arguments by its keys alone (args/<i>, kwargs/<name>): the call the Paddle model
        starts on where the script's own arguments cannot be taken apart (_arguments)."""
        from portcheck.forward.compare import Arguments
        first = self._given_batch(0)
        positional = sorted((k for k in first if k.startswith("args/") and k.count("/") == 1),
                            key=lambda k: int(k[5:]))
        return Arguments(tuple(first[k] for k in positional),
                         {k[7:]: v for k, v in first.items() if k.startswith("kwargs/") and k.count("/") == 1})

    def _given_batch(self, c: int) -> dict:
        """The batch torch's root call c was given (0: the first step's first)."""
        prefix = f"{BATCH}{c}/"
        return {k[len(prefix):]: v for k, v in self.given.items() if k.startswith(prefix)}

    def isolated(self, module, calls: dict, leaves: dict):
        """Every paired module call on torch's recorded first-forward values (portcheck.isolate.forced_run): the
        value each computes, under iso/<its key> (torch's float64 side: torch's own error per module; Paddle's:
        its counterpart's computation on the same values)."""
        from portcheck.forward.compare import values
        from portcheck.forward.isolate import forced_run
        inputs = self.first  # tensors, numbers and flags, in the lists and dicts the script passed them in
        if inputs is None or not calls:
            self.config["isolated"] = "not run: the model's batch holds an object other than tensors, numbers, " \
                "flags (True, None, a string) and lists, tuples or dicts of them" if calls else \
                "not run: no module paired"
            return
        kept = {}

        def keep(key, tensor, source):
            if key is None:
                kept.clear()
            else:
                kept[f"iso/{key}"] = np.array(values(tensor), copy=True)
        from portcheck.mapping.fused import specs
        # the Paddle modules --layouts fuses: each call its parts' (their torch modules' values forced)
        parts = {n: s for n, s in specs(module, self.layouts).items() if s.output and self.fw.framework == "paddle"}
        parents, error = forced_run(module, inputs, self.given, calls, leaves, keep, parts=parts)
        self.record.update(kept)
        self.config["isolated"] = error or "run"
        self.config["parents"] = parents

    def loss_call(self, name, target, settings: dict):
        """A functional loss called on the root's output: its target recorded (paddle, torch64: replaced)."""
        # a loss inside the model is not the loss, nor one in the runs the recorder makes itself at the model's
        # first call (pairing, isolation), which a model computing its loss from labels= makes too
        if self.in_root and not (self.making or self.in_loss or self.done):
            if self.config["loss"] is None:
                self.config["loss"], self.config["loss_inside"] = {"function": name, **settings}, True  # the model's
            self.loss_site(name, settings)
        # (an evaluation's, gradients off, is not the training's: its root calls are not counted either)
        if self.root is None or self.done or self.in_root or self.making or self.in_loss or self.evaluating or \
                not self.fw.grad_enabled():
            return target
        key = f"{TARGET}{self.losses}"  # each loss call its own (gradient accumulation: each micro-batch's)
        self.losses += 1
        if self.config["loss"] is None:
            self.config["loss"] = {"function": name, **settings}
        self.loss_site(name, settings)
        if hasattr(target, "numpy"):
            self.record[key] = _numpy(target)
        if self.given is not None and key in self.given and hasattr(target, "numpy"):
            return self.fw.to_tensor(self._widened(self.given[key]))
        return target

    def loss_site(self, name: str, settings: dict):
        """A loss call of the first step with gradients on (the script's, or the model's own from labels=): its
        settings appended to config["losses"], which runconfig.losses reads one micro-batch's of."""
        if self.step == 0 and self.fw.grad_enabled():
            self.config["losses"].append({"function": name, **settings})

    def order(self, sampler: str, size: int, drawn, allowed):
        """A framework sampler's iteration, one epoch of indices (drawn: its own iterator; size: how many samples it
        draws from; allowed: the indices its dataset has): the torch side records the indices as they are drawn
        (ORDER<n>, n the framework samplers' iterations so far); the runs fed torch's batches (paddle, torch64, moved,
        taking) draw torch's n-th instead, then their own past it (past the N steps), as the weights and batches are
        synced. Called where the iteration starts, not at its first index: two loaders' n stay in their order."""
        if self.plain or self.done or self.side == "full":
            return drawn
        n = len(self.config["orders"])
        said = {"sampler": sampler, "of": int(size)}
        self.config["orders"].append(said)
        if self.given is None:
            kept = self.drawn[n] = []
            return _kept(drawn, kept)
        torch_said = (json.loads((self.torch_dir / STATUS).read_text())["config"].get("orders") or [])[n:n + 1]
        order = self.given.get(f"{ORDER}{n}")
        if order is None or not torch_said:
            said["kept"] = "the torch script drew no such order with a torch sampler"
        elif torch_said[0]["of"] != size:
            said["kept"] = f"torch's {torch_said[0]['sampler']} draws from {torch_said[0]['of']} samples, this one " \
                           f"from {size}"
        elif not all(int(i) in allowed for i in order):
            said["kept"] = f"torch's {torch_said[0]['sampler']} drew indices its dataset has not"
        else:
            said["torch"] = torch_said[0]["sampler"]
            return _given(order.tolist(), drawn)
        return drawn

    def backward(self, tensor):
        """Tensor.backward's tensor, before it runs."""
        if self.stepped:  # not every optimizer over the model stepped: the step ended with those that did
            self._close_step()
        if self.root is None and self.evaluated is not None and not self.plain:
            raise self.refuse(f"it trains its model ({type(self.evaluated).__name__}) in eval mode (model.eval(); "
                              "from_pretrained returns a model so): portcheck takes a call in eval mode for an "
                              "evaluation, not a training batch; call model.train() before the training loop "
                              "(BatchNorm kept frozen: .eval() on its layers after it, which the check compares) [PC824]")
        if self.root is not None and not self.done:
            self.loss = _numpy(tensor).reshape(-1)
            self.backwards += 1

    def after_backward(self):
        if self.root is not None and not self.done and self.step == 0:
            self.record.update({f"grad/{k}": v for k, v in self.fw.grads(self.root).items()})

    def before_step(self, optimizer):
        if self.root is None or self.done or self.plain:
            return
        if any(o is optimizer for o in self.stepped):  # stepped twice: the step ended with the optimizers that did
            self._close_step()
        if self.stepped:  # another optimizer over another part of the model, in the same step
            if self.step == 0:
                self.config["optimizers"].append(self.fw.optimizer_config(optimizer, self.root))
            return
        if self.loss is None:
            raise self.refuse("its optimizer stepped before any backward() on a loss [PC825]")
        self.keep()
        if self.step == 0:
            self.config["optimizer"] = self.fw.optimizer_config(optimizer, self.root)
            self.config["optimizers"] = [self.config["optimizer"]]
            trainer = _trainer()
            if trainer is not None:  # what a Trainer does beside the optimizer's settings (runconfig.TRAINER)
                self.config["trainer"] = self.fw.trainer_config(trainer)
        self.record[f"loss/{self.step}"] = self.loss
        self.record[f"lr/{self.step}"] = np.array([self.fw.lr(optimizer)], dtype=np.float64)

    def keep(self):
        """The modules the script keeps beside the model, of its structure, that no optimizer holds (an EMA copy, a
        teacher: kept_modules), found as the first step starts; each step's state recorded as it is when the next
        starts (after the script's own update of it), KEPT<i>/<name>/<key> in Paddle's layout as the weights are. The
        other sides start each from torch's (its torch layout, KEPT + "init/"; the torch64 run's widened), paired by
        name, or one with one."""
        from portcheck.gradients.backward import KEPT
        if self.step == 0:
            self.kept = kept_modules(self.fw, self.root, self.called, self.optimizers)
            if self.side == "torch":
                for name, m in self.kept.items():
                    self.record.update({f"{KEPT}init/{name}/{k}": v for k, v in self.fw.state(m).items()})
            elif self.given is not None:
                theirs = sorted({k.split("/")[1] for k in self.given if k.startswith(f"{KEPT}init/")})
                if len(theirs) == len(self.kept) == 1 and theirs != list(self.kept):
                    self.kept = {theirs[0]: next(iter(self.kept.values()))}  # one with one, whatever its name
                for name, m in self.kept.items():
                    prefix = f"{KEPT}init/{name}/" if self.side != "paddle" else f"{KEPT}0/{name}/"
                    init = {k[len(prefix):]: v for k, v in self.given.items() if k.startswith(prefix)}
                    if init:
                        self.fw.start_kept(m, init, self.side == "torch64")
            self.config["kept"] = {name: getattr(m, "kind", type(m).__name__) for name, m in self.kept.items()}
        for name, m in self.kept.items():
            self.record.update({f"{KEPT}{self.step}/{name}/{k}": v
                                for k, v in self.fw.paddle_layout_state(m).items()})

    def after_step(self, optimizer):
        if self.plain and self.step + 1 >= self.steps:
            self.fw.end_workers()
            os._exit(0)
        if self.root is None or self.done:
            self.step += self.plain
            return
        self.stepped.append(optimizer)
        trained = {id(p) for p in self.fw.parameters(self.root) if self.fw.trainable(p)}
        if all(any(o is s for s in self.stepped) for o in self.optimizers if self.fw.held_parameters([o]) & trained):
            self._close_step()

    def _close_step(self):
        """Every optimizer over the model stepped (or the next step began): the weights after the step recorded."""
        self.stepped = []
        self.step += 1
        self.record.update({f"state{self.step}/{k}": v for k, v in self.fw.paddle_layout_state(self.root).items()})
        self.config["accumulation"]["forward"].append(self.forwards)
        self.config["accumulation"]["backward"].append(self.backwards)
        self.loss, self.forwards, self.backwards = None, 0, 0
        if self.step >= self.steps:
            self.finish()

    def scheduler(self, sched):
        """A torch lr scheduler built: one that cycles its optimizer's momentum is named in the configuration under
        the key record_backward gives it (backward.CYCLES_MOMENTUM), whose one line runconfig says."""
        from portcheck.gradients.backward import CYCLES_MOMENTUM
        self.schedulers.append(sched)
        if getattr(sched, "cycle_momentum", False):
            self.config[CYCLES_MOMENTUM + type(sched).__name__] = True

    def clip(self, kind, bound, scope=None):
        """The first clipping of the steps; scope: the names of the root's trainable parameters it clips (torch's
        clip_grad_norm_'s given, Paddle's optimizer's held but need_clip=False), runconfig.clip_scope's."""
        if self.config["clip"] is None and self.root is not None:
            self.config["clip"] = {"kind": kind, "bound": float(bound)}
            if scope is not None:
                self.config["clip_scope"] = list(scope)

    # ------------------------------------------------------------------ the end
    def refuse(self, why: str) -> Refused:
        self.error = why
        self.write()
        return Refused(why)

    def finish(self):
        """N steps taken: the record written, the script stopped."""
        self.done = True
        self.record.update(self.fw.norms())
        # over N steps a schedule stepped per epoch, or slowly, shows none of its settings (a cosine's T_max): a copy
        # of each optimizer's schedule is stepped on, its lrs compared as configuration (runconfig.ahead)
        self.config["ahead"] = [self.fw.lr_ahead(o, self.schedulers, AHEAD) for o in self.optimizers]
        self.write()
        flushed()
        self.fw.end_workers()
        os._exit(0)  # the script's own loop, evaluation and saves are not ours to run

    def write(self):
        from portcheck.core.fileio import save_npy
        if os.getpid() != self.pid:
            return
        if self.error is None and self.root is None and _refused(self.out / STATUS):
            return  # another process of this run refused (an unknown launcher's worker): nothing to add
        self.record.update({f"{ORDER}{n}": np.asarray(drawn, np.int64) for n, drawn in self.drawn.items()})
        if self.record and self.error is None:
            save_npy(self.out / RECORD, self.record)
        status = {"side": self.side, "steps": self.step, "asked": self.steps, "error": self.error,
                  "world": self.world,
                  "root": type(self.root).__name__ if self.root is not None else None, "config": self.config,
                  "loaded": sorted({"torch", "paddle"} & set(sys.modules))}  # a Paddle result from Paddle code
        _write_text(self.out / STATUS, json.dumps(status, indent=1, default=str) + "\n")


def _write_text(path: Path, text: str):
    from portcheck.core.fileio import atomic_write  # never through a link; a kill leaves no half-written file
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def flushed():
    """The script's output flushed before the recorder ends it: its sys.stdout (or stderr) may be anything with a
    write (no flush, or one that raises)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


TIED = "tied/"  # a torch record's key: tied/<torch key>/<the first key of its tensor>, an empty array


def ties(record: dict) -> dict:
    """{torch key: the first torch key of the same tensor} (a head's weight tied to the embedding's), from a torch
    record's TIED keys."""
    return dict(k[len(TIED):].rsplit("/", 1) for k in record if k.startswith(TIED))


def kept_modules(fw, root, called, optimizers) -> dict:
    """{name: module} of the modules alive beside the root whose state holds the root's keys (a copy of the model:
    an EMA, a teacher; torch's AveragedModel by the model it holds) and whose parameters no optimizer holds, and of
    the dicts of tensors keyed as its state, every parameter there, none of them the model's own (Tensors), each
    named as the script holds it (a variable, an attribute)."""
    import gc
    import warnings
    own = {id(m) for m in fw.submodules(root)} | {id(called)}
    keys, held, out = set(fw.state_keys(root)), fw.held_parameters(optimizers), {}
    gc.collect()  # a copy the recorder's own runs made (pairing, isolation) and dropped is not the script's
    with warnings.catch_warnings():  # a lazy module's deprecated attributes, asked by isinstance
        warnings.simplefilter("ignore")
        found = [obj for obj in gc.get_objects() if isinstance(obj, fw.module_class) and id(obj) not in own]
        # a dict of tensors keyed as the model's state (an EMA's shadow weights), none of them the model's own
        names, marks = set(fw.parameter_names(root)), {fw.mark(t) for t in fw.state_tensors(root)}
        dicts = {id(d): d for d in [*gc.get_objects(), *_on_stack()] if isinstance(d, dict)}
        found += [Tensors(obj) for obj in dicts.values() if len(obj) >= len(names) and names <= set(obj) <= keys
                  and all(fw.is_tensor(v) and fw.mark(v) not in marks for v in obj.values())]
    for obj in found:
        m = fw.averaged(obj) if not isinstance(obj, Tensors) else obj
        if not isinstance(obj, Tensors) and (set(fw.state_keys(m)) != keys or
                                             {id(p) for p in fw.parameters(m)} & held or id(m) in own):
            continue
        name = _held_as(obj.held if isinstance(obj, Tensors) else obj)
        while name in out:
            name += "#2"
        out[name] = m
    return out


class Tensors:
    """A dict of tensors the script keeps beside the model, keyed as its state (an EMA's shadow weights), read and
    set as a module's state is (kept_modules): the script's own dict, its entries as they are when read."""
    kind = "dict of tensors"

    def __init__(self, held: dict):
        self.held = held

    def state_dict(self) -> dict:
        return dict(self.held)

    def load_state_dict(self, state: dict):  # torch's sides (hooks_torch.load): each tensor set in place
        for k, v in state.items():
            if k in self.held:
                self.held[k].data.copy_(v)

    def double(self):  # torch's float64 run: the entries widened, as the model is
        for k, v in self.held.items():
            self.held[k] = v.double()
        return self


def _on_stack() -> list:
    """What the script's functions on the stack hold, and their objects' attributes: a dict of Paddle tensors is not
    tracked by gc (its tensors are not), so gc.get_objects does not list it."""
    out, frame, here = [], sys._getframe(1), str(Path(__file__).parent.parent)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(here):
            held = list(frame.f_locals.values())
            out += held
            for v in held:
                attrs = getattr(v, "__dict__", None) if not isinstance(v, type) else None
                out += list(attrs.values()) if isinstance(attrs, dict) else []
        frame = frame.f_back
    return out


def _held_as(obj) -> str:
    """The name the script holds obj by: a variable of a function on the stack (the recorder's own frames passed
    over), an attribute, a container's key; its class's if none."""
    import gc
    frame, here = sys._getframe(1), str(Path(__file__).parent.parent)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(here):
            name = next((k for k, v in frame.f_locals.items() if v is obj and k != "self"), None)
            if name:
                return name
        frame = frame.f_back
    for ref in gc.get_referrers(obj):
        name = next((k for k, v in ref.items() if v is obj and isinstance(k, str)), None) \
            if isinstance(ref, dict) else None
        if name:
            return name
    return type(obj).__name__


def _trainer():
    """The transformers or paddlenlp Trainer whose training loop is on the stack (its optimizer stepping), or None."""
    frame = sys._getframe(1)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if any(c.__name__ == "Trainer" and c.__module__.startswith(("transformers.", "paddlenlp."))
               for c in type(obj).__mro__):
            return obj
        frame = frame.f_back
    return None


def crossed_file(path: Path, crossed=None) -> list:
    """The taking side's [backward.Crossing], written by portcheck.run (crossed given) or read by the recorder: json,
    nothing in it run."""
    from portcheck.gradients.backward import Crossing
    if crossed is not None:
        _write_text(path, json.dumps([{"step": c.step, "module": c.module, "index": c.index.tolist(),
                                     "torch": c.torch.tolist(), "paddle": c.paddle.tolist()} for c in crossed]))
        return crossed
    return [Crossing(int(c["step"]), str(c["module"]), np.asarray(c["index"], np.int64),
                     np.asarray(c["torch"], np.float64), np.asarray(c["paddle"], np.float64))
            for c in json.loads(path.read_text())]


# every loss of both frameworks, by torch's functional name: (Paddle's functional name, its settings, by torch's
# names, in torch's conventions). A Paddle setting spelled otherwise: PADDLE_SPELLING; Paddle's smooth_l1_loss is
# torch's huber_loss unless is_huber=False (loss_settings).
LOSSES = {
    "cross_entropy": ("cross_entropy", ("reduction", "weight", "ignore_index", "label_smoothing", "soft_label",
                                        "use_softmax")),
    "nll_loss": ("nll_loss", ("reduction", "weight", "ignore_index")),
    "mse_loss": ("mse_loss", ("reduction", "weight")),
    "l1_loss": ("l1_loss", ("reduction", "weight")),
    "smooth_l1_loss": ("smooth_l1_loss", ("reduction", "beta")),
    "huber_loss": (None, ("reduction", "delta", "weight")),
    "binary_cross_entropy": ("binary_cross_entropy", ("reduction", "weight")),
    "binary_cross_entropy_with_logits": ("binary_cross_entropy_with_logits", ("reduction", "weight", "pos_weight")),
    "kl_div": ("kl_div", ("reduction", "log_target")),
    "ctc_loss": ("ctc_loss", ("reduction", "blank", "zero_infinity", "norm_by_times")),
    "margin_ranking_loss": ("margin_ranking_loss", ("reduction", "margin")),
    "cosine_embedding_loss": ("cosine_embedding_loss", ("reduction", "margin")),
    "hinge_embedding_loss": ("hinge_embedding_loss", ("reduction", "margin")),
    "soft_margin_loss": ("soft_margin_loss", ("reduction",)),
    "triplet_margin_loss": ("triplet_margin_loss", ("reduction", "margin", "p", "eps", "swap")),
    "triplet_margin_with_distance_loss": ("triplet_margin_with_distance_loss", ("reduction", "margin", "swap")),
    "multilabel_soft_margin_loss": ("multi_label_soft_margin_loss", ("reduction", "weight")),
    "multilabel_margin_loss": ("multi_label_margin_loss", ("reduction",)),
    "multi_margin_loss": ("multi_margin_loss", ("reduction", "p", "margin", "weight")),
    "poisson_nll_loss": ("poisson_nll_loss", ("reduction", "log_input", "full", "eps")),
    "gaussian_nll_loss": ("gaussian_nll_loss", ("reduction", "full", "eps")),
}
# Paddle's losses that are one of torch's with some settings fixed
PADDLE_ONLY = {"softmax_with_cross_entropy": ("cross_entropy", {"reduction": "none"}),
               "square_error_cost": ("mse_loss", {"reduction": "none"})}
PADDLE_SPELLING = {"eps": "epsilon"}
# a setting one framework does not have, as the other's default
DEFAULTS = {"weight": None, "pos_weight": None, "label_smoothing": 0.0, "soft_label": False, "use_softmax": True,
            "zero_infinity": False, "norm_by_times": False, "log_target": False}
TARGETS = ("target", "targets", "label", "labels")  # the argument a loss's target is
# the loss classes, by the name both frameworks give them: their functional's torch name
LOSS_CLASSES = {"CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll_loss", "MSELoss": "mse_loss",
                "L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss", "HuberLoss": "huber_loss",
                "BCELoss": "binary_cross_entropy", "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
                "KLDivLoss": "kl_div", "CTCLoss": "ctc_loss", "MarginRankingLoss": "margin_ranking_loss",
                "CosineEmbeddingLoss": "cosine_embedding_loss", "HingeEmbeddingLoss": "hinge_embedding_loss",
                "SoftMarginLoss": "soft_margin_loss", "TripletMarginLoss": "triplet_margin_loss",
                "TripletMarginWithDistanceLoss": "triplet_margin_with_distance_loss",
                "MultiLabelSoftMarginLoss": "multilabel_soft_margin_loss",
                "MultiLabelMarginLoss": "multilabel_margin_loss", "MultiMarginLoss": "multi_margin_loss",
                "PoissonNLLLoss": "poisson_nll_loss", "GaussianNLLLoss": "gaussian_nll_loss"}
DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
# attention with its own dropout (transformers' and paddlenlp's attention in train mode, torch's MultiheadAttention):
# (query, key, value, attn_mask, dropout_p, ...) in both frameworks
ATTENTIONS = ("scaled_dot_product_attention",)
DROPOUT_P = 4  # dropout_p's place among their arguments


def _value(v):
    """A setting as the configuration holds it: a tensor (a class weight) as its values, rounded."""
    if hasattr(v, "numpy") and hasattr(v, "shape"):
        v = v.detach().cpu() if hasattr(v, "detach") else v
        return [round(float(w), 7) for w in np.asarray(v.numpy()).reshape(-1)]
    if isinstance(v, (bool, str)) or v is None:
        return v
    return float(v) if isinstance(v, (float, np.floating)) else int(v) if isinstance(v, (int, np.integer)) else str(v)


def loss_settings(name: str, get, paddle: bool, target=None) -> tuple:
    """(torch's name of a loss, {setting: value} in torch's conventions), or (its own name, {"known": False}) for a
    loss portcheck does not know. name: the framework's functional name; get(setting): the call's value of a setting
    by its framework's spelling (a loss class's: its attribute), DEFAULTS' where it has none; target: its target
    (a float one of cross_entropy is torch's soft label)."""
    fixed = {}
    if paddle:
        if name in PADDLE_ONLY:
            name, fixed = PADDLE_ONLY[name]
        elif name == "smooth_l1_loss" and get("is_huber") is not False:
            name, fixed = "huber_loss", {"delta": get("delta")}
        elif name == "smooth_l1_loss":
            fixed = {"beta": get("delta")}
        else:
            name = next((t for t, (p, _) in LOSSES.items() if p == name), None) or f"paddle:{name}"
    if name not in LOSSES:
        return name.removeprefix("paddle:"), {"known": False}
    spelled = PADDLE_SPELLING if paddle else {}
    read = lambda k: fixed[k] if k in fixed else get(spelled.get(k, k))
    out = {k: _value(read(k)) for k in LOSSES[name][1]}
    if not paddle:
        if get("reduce") is not None or get("size_average") is not None:  # torch's legacy spelling of reduction
            out["reduction"] = "none" if get("reduce") is False else "sum" if get("size_average") is False else "mean"
        if name == "cross_entropy":
            out["soft_label"] = bool(getattr(target, "is_floating_point", lambda: False)())
    if name in ("smooth_l1_loss", "huber_loss"):  # torch's huber_loss(delta) is delta x smooth_l1_loss(beta=delta)
        beta = out.pop("delta", None) if name == "huber_loss" else out["beta"]
        out.update(beta=beta, scale=beta if name == "huber_loss" else 1.0)
        name = "smooth_l1_loss"
    return name, out


def class_loss(module, name: str, paddle: bool, args, kwargs):
    """(torch's name, settings, the call's bound arguments, its target's argument name) of a loss class's call
    (name: its functional's, the framework's loss_class), its settings read from its attributes and the call's
    arguments (Paddle's CTCLoss takes norm_by_times in its call); None when the arguments do not fit its forward."""
    bound = _bound(inspect.signature(module.forward), args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    target = next((k for k in TARGETS if k in a), None)
    # its attribute (some of Paddle's classes keep a setting as _<name>: NLLLoss's _weight; Layer.full is a method),
    # else the call's argument (torch's PoissonNLLLoss calls its input log_input: an attribute first)
    missing = object()
    get = lambda k: next((v for v in (getattr(module, n, missing) for n in (k, "_" + k))
                          if v is not missing and not callable(v)), a.get(k, DEFAULTS.get(k)))
    return (*loss_settings(name, get, paddle, a.get(target)), bound, target)


def framework_losses(functional) -> list:
    """The loss functionals a framework has: the ones portcheck knows and any other (said as not known)."""
    return [n for n in dir(functional) if n.endswith(("_loss", "entropy", "_cost")) or n in LOSSES or n == "kl_div"]


def wrap_framework(run, module_class, tensor_class, functional, loss):
    """What a script of either framework goes through, wrapped alike: every module call, Tensor.backward, the
    functional losses (loss(run, name, fn): the framework's wrapper) and dropouts."""
    module_call = module_class.__call__

    def call(module, *args, **kwargs):
        return run.module_call(module, functools.partial(module_call, module), args, kwargs)
    module_class.__call__ = call
    backward = tensor_class.backward

    @functools.wraps(backward)
    def tensor_backward(tensor, *args, **kwargs):
        run.backward(tensor)
        out = backward(tensor, *args, **kwargs)
        run.after_backward()
        return out
    tensor_class.backward = tensor_backward
    for name in framework_losses(functional):
        if callable(getattr(functional, name)):
            setattr(functional, name, loss(run, name, getattr(functional, name)))
    for name in DROPOUTS:
        if hasattr(functional, name):
            setattr(functional, name, no_dropout(run, getattr(functional, name)))
    for name in ATTENTIONS:
        if hasattr(functional, name):
            setattr(functional, name, no_attention_dropout(run, getattr(functional, name)))


class SharedSide:
    """What hooks_torch.TorchSide and hooks_paddle.PaddleSide read alike: both frameworks' modules have state_dict()
    and named_parameters() (the modules kept beside the model: kept_modules, Run.keep)."""

    def state_keys(self, module) -> list:
        return list(module.state_dict())

    def parameter_names(self, module) -> list:
        return [n for n, _ in module.named_parameters()]

    def state_tensors(self, module) -> list:
        return list(module.state_dict().values())


def registering(run, init):
    """An optimizer class's __init__ that registers the optimizer it builds (once: a subclass's calls its parent's)."""
    @functools.wraps(init)
    def optimizer_init(opt, *args, **kwargs):
        init(opt, *args, **kwargs)
        if not any(o is opt for o in run.optimizers):
            run.optimizers.append(opt)
    return optimizer_init


def _bound(signature, args, kwargs):
    """The call's arguments by name, its defaults filled; None if they do not fit (the call's own error follows)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return bound


def no_dropout(run, fn):
    """Dropout off for the N steps: the two frameworks draw different masks. Its p, at its call site in the first
    forward (run.dropout_site), is compared instead."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def dropout(input, *args, **kwargs):
        if run.sites:
            bound = _bound(signature, (input, *args), kwargs)
            if bound is not None:
                a = bound.arguments
                run.dropout_site(a.get("p", 0.0) if a.get("training", True) else 0.0)
        return input if run.dropout_off else fn(input, *args, **kwargs)
    return dropout


def no_attention_dropout(run, fn):
    """An attention's own dropout (dropout_p) off for the N steps, as no_dropout's, its p recorded as no_dropout's."""
    @functools.wraps(fn)
    def attention(*args, **kwargs):
        if run.sites:
            run.dropout_site(args[DROPOUT_P] if len(args) > DROPOUT_P else kwargs.get("dropout_p", 0.0))
        if run.dropout_off:
            if len(args) > DROPOUT_P:
                args = (*args[:DROPOUT_P], 0.0, *args[DROPOUT_P + 1:])
            else:
                kwargs["dropout_p"] = 0.0
        return fn(*args, **kwargs)
    return attention


def seeded(run, where, name, said):
    fn = getattr(where, name)

    @functools.wraps(fn)
    def seed(*args, **kwargs):
        if args:
            run.config["seeds"][said] = repr(args[0])
        return fn(*args, **kwargs)
    setattr(where, name, seed)



def _kept(drawn, into: list):
    for i in drawn:
        into.append(int(i))
        yield i


def _given(order: list, drawn):
    yield from order
    yield from itertools.islice(drawn, len(order), None)  # past what torch drew: past the N steps


def sampling(run, cls, sampler: str, size, allowed, shuffles=lambda s: True):
    """cls.__iter__ (a framework sampler's, yielding indices) drawing through run.order while shuffles(it): size(it)
    the samples it draws from, allowed(it) the indices its dataset has."""
    own = cls.__iter__

    @functools.wraps(own)
    def iterate(s):
        drawn = own(s)
        return run.order(sampler, size(s), drawn, allowed(s)) if shuffles(s) else drawn
    cls.__iter__ = iterate


def loss_wrapper(run, name, fn, paddle: bool, widen=None):
    """A functional loss whose target (torch's "target", Paddle's "label") goes through run.loss_call with its
    settings (loss_settings); widen(bound), the float64 run's, casts what meets its float64 output."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn  # a builtin without a signature: not a loss a script calls

    @functools.wraps(fn)
    def loss(*args, **kwargs):
        bound = _bound(signature, args, kwargs)
        if bound is None:
            return fn(*args, **kwargs)  # the call's own error, as the user would see it
        a = bound.arguments
        target = next((k for k in TARGETS if k in a), None)
        said, settings = loss_settings(name, lambda k: a.get(k, DEFAULTS.get(k)), paddle, a.get(target))
        given = run.loss_call(said, a.get(target), settings)
        if target is not None:
            a[target] = given
        if widen is not None:
            widen(bound)
        return fn(*bound.args, **bound.kwargs)
    return loss


def module_settings(named_modules, table) -> dict:
    """{module name: {"type": class, setting: value}} of the modules whose class the table knows ([(classes,
    their settings(module))], first match), for the configuration's comparison (portcheck.runconfig)."""
    out = {}
    for name, m in named_modules:
        found = next((read for kinds, read in table if isinstance(m, kinds)), None)
        if found is not None:
            out[name] = {"type": type(m).__name__, **found(m)}
    return out


class Full(Run):
    """`run --full`: the script to its end, as it is (its own batches, Dropout on), its model started from the
    torch side's initial weights; every step's loss, lr, weight norm, modes and targets, and each metric its
    printed lines show (METRIC, or the run's --metric), as a portcheck.training.TrainingLog saved at exit: Step 5's
    train_align, judged by portcheck.training."""
    dropout_off = False
    sites = False

    def __init__(self, settings: dict, fw):
        super().__init__(settings, fw)
        import re
        from portcheck.pipeline.training_log import TrainingLog
        self.log, self.metric = TrainingLog(), re.compile(settings.get("metric") or METRIC)
        self.framework, self.target, self.lr, self.weights, self.order = settings["framework"], None, None, "", []
        self.lines = Lines(self.read)
        stdout = sys.stdout

        class Tee:  # the script's printing as it is, each line read for a metric
            def __getattr__(_, name):
                return getattr(stdout, name)

            def write(_, text):
                if isinstance(text, str):  # anything else is the stream's to refuse, as it would
                    self.lines.write(text)
                return stdout.write(text)
        sys.stdout = Tee()

    def read(self, line: str):
        """A printed line: the metrics it shows, an evaluation once the script trained; a value that is no number
        stops the script with one line."""
        if self.root is None or not len(self.log.curves["loss"]) or os.getpid() != self.pid:
            return
        try:
            found = metrics(self.metric, line)
        except ValueError as e:
            self.refuse(str(e))
            flushed()
            os._exit(STOPPED_EXIT)
        if found:
            try:
                self.log.evaluate(found)
            except Exception:  # noqa: BLE001 - a line naming other metrics than the first: not an evaluation
                pass

    def _first_call(self, module, args, kwargs):
        from portcheck.core.fileio import load_npy
        from portcheck.core.record import state_fingerprint
        self.fw.check_not_compiled(module)
        self.depth += 1
        try:
            if self.framework == "torch":
                self.fw.load(module, load_npy(self.torch_dir / INIT))
                self.fw.layout_keys(module)
                self.weights = state_fingerprint(self.fw.paddle_layout_state(module))
            else:
                first = self._arguments(args, kwargs)
                _, _, placed = self.fw.start_from_torch(module, self.given, first or self._by_keys())
                self.weights = state_fingerprint(self.fw.placed_state(module, placed))
                from portcheck.pipeline.training_log import torch_running_var
                torch_running_var(module)  # evaluation sees torch's (unbiased) running variance
        finally:
            self.depth -= 1

    def _root_call(self, module, call, args, kwargs):
        return self._inner(call, args, kwargs)

    def loss_call(self, name, target, settings: dict):
        if self.root is not None and not self.in_root and hasattr(target, "numpy"):
            self.target = target
        return target

    def backward(self, tensor):
        if self.root is not None:
            self.loss = _numpy(tensor).reshape(-1)

    def after_backward(self):
        pass

    def before_step(self, optimizer):
        if self.root is not None:
            self.lr = self.fw.lr(optimizer)

    def after_step(self, optimizer):
        if self.root is None or self.loss is None:
            return
        from portcheck.pipeline.training_log import batch_fingerprint
        batch = None
        if self.target is not None and (self.step == 0 or "batch" in self.log.curves):
            batch = self.target
            self.order.append(batch_fingerprint(batch))
        self.log.step(self.loss, self.lr, model=self.root, batch=batch)
        self.step += 1
        self.loss, self.target = None, None

    def write(self):
        """At exit: the training log (train_align and train_log, with their run records), or why not."""
        from portcheck.core.errors import PipelineError
        from portcheck.pipeline.training_log import run_depends
        if os.getpid() != self.pid:
            return
        if self.error is None and self.step:
            try:
                depends = run_depends(self.weights, [np.asarray(self.order, dtype=np.int64)], {}, {})
                self.log.save(self.out, self.framework, depends, "python -m portcheck run --full")
            except PipelineError as e:
                self.error = str(e)
        status = {"side": self.side, "steps": self.step, "error": self.error, "config": self.config,
                  "root": type(self.root).__name__ if self.root is not None else None}
        _write_text(self.out / f"{STATUS[:-5]}_{self.framework}.json", json.dumps(status, indent=1, default=str))


class Lines:
    """Text as a terminal shows it, each line handed to read(line) as a newline ends it: a carriage return (a
    progress bar's update) starts the line again, so only the current line is kept (linear in the output)."""

    def __init__(self, read):
        self.read, self.parts, self.returned = read, [], False

    def write(self, text: str):
        for i, line in enumerate(text.split("\n")):
            if i:
                self.read("".join(self.parts))
                self.parts, self.returned = [], False
            for j, part in enumerate(line.split("\r")):
                self.returned |= j > 0
                if part:
                    if self.returned:  # the text after a carriage return writes over the line
                        self.parts, self.returned = [], False
                    self.parts.append(part)


def metrics(metric, line: str) -> dict:
    """{name: value} of the metrics a printed line shows (metric: group 1 the name, group 2 the value); a value that
    is no number is a ValueError naming the line."""
    found = {}
    for m in metric.finditer(line):
        try:
            found[m.group(1).lower()] = float(m.group(2))
        except (TypeError, ValueError):
            raise ValueError(f"--metric {metric.pattern!r} read {m.group(2)!r} as {m.group(1)}'s value in the "
                             f"printed line {line.strip()[:200]!r}, which is not a number: give a regex whose group 2 "
                             "is the number alone, e.g. '(acc)\\s+([0-9.]+)' [PC832]") from None
    return found


# a metric in a printed line: "acc 0.97", "accuracy: 97.3", "val_f1=0.81" (its name, then its value)
METRIC = r"(?<![A-Za-z])((?:val_|test_|eval_)?(?:acc|accuracy|f1))\s*[:=]?\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

RUN = None


def install():
    """Called by the injected sitecustomize: the side's hooks in place before the user's script runs."""
    global RUN
    given = json.loads(os.environ[SETTINGS])
    settings = given
    rank = os.environ.get("RANK", os.environ.get("PADDLE_TRAINER_ID"))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("PADDLE_TRAINERS_NUM", "1")) or 1)
    if settings.get("launcher") and rank is None:
        return  # the launcher's own process: its workers record, one rank each
    if settings.get(STARTED) and (world == 1 or settings.get("ranked")):
        return  # a process the script started (a monitor, a spawned DataLoader worker): the script is recorded
    if settings.get("ranked"):  # a launched run (portcheck.run.ranks): DIR/rank<r>/<side>
        settings = {**settings, "world": world, **{k: str(Path(settings[k]).parent / f"rank{rank or 0}" /
                                                        Path(settings[k]).name) for k in ("out", "torch_dir")}}
        from portcheck.core.fileio import writable
        writable(settings["out"], folder=True).mkdir(parents=True, exist_ok=True)
    if settings.get("framework", settings["side"]) == "paddle":
        from portcheck.scripts.hooks_paddle import PaddleSide as Side
    else:
        from portcheck.scripts.hooks_torch import TorchSide as Side
    fw = Side(settings["side"] == "torch64")
    os.environ[SETTINGS] = json.dumps({**given, STARTED: True})  # the script's children: not recorded (above)
    RUN = (Full if settings["side"] == "full" else Run)(settings, fw)
    fw.install(RUN)
    if world > 1 and not settings.get("ranked"):  # a launcher run does not know: its ranks would share one folder
        RUN.refuse(f"it runs as rank {rank} of {world} under a launcher `portcheck run` does not know: give torchrun "
                   "or python -m paddle.distributed.launch, or one process [PC823]")
        os._exit(STOPPED_EXIT)
    atexit.register(_early_exit)
    previous = sys.excepthook

    def refused(kind, value, tb):  # a Refused is our one line, in status.json, which `portcheck run` says (once)
        if isinstance(value, Refused):
            return
        previous(kind, value, tb)
    sys.excepthook = refused


def _refused(status: Path) -> bool:
    """The status file holds a refusal (read while another process may be writing it: a torn one is not)."""
    try:
        return bool(json.loads(status.read_text()).get("error"))
    except (OSError, ValueError):
        return False


def _early_exit():
    """The script ended before N steps (or was stopped): what was recorded says how far it got."""
    if RUN is not None and not RUN.done:
        RUN.write()
