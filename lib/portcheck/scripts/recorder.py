"""The recorder `python -m portcheck run` injects into a user's own training script (portcheck.scripts.run starts it):
Run, one side's recording.

The script is not edited: portcheck.scripts.install puts a Run in its process before it runs, with the run's settings
(side_files.SETTINGS: the side, the steps, the folder), and the side's hooks (hooks_torch or hooks_paddle, with
what both wrap alike: wrapping) report to it what every training script goes through, in either framework:

  the module call     the root model is the outermost module called, with gradients on, whose parameters an
                      optimizer holds (a data-parallel wrapper's: the model it holds); its first call records
                      every module's output (trace.Recorder) and what pairing reads (pairing.describe); each
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
  seeds, clipping     their arguments, for the configuration (portcheck.scripts.runconfig);
  torch's schedulers  whether one cycles the optimizer's momentum (OneCycleLR, CyclicLR), for it too;
  a Trainer           transformers' or paddlenlp's, on the stack at the first step: what it does beside the
                      optimizer (runconfig.TRAINER);
  kept state          the modules (and dicts of tensors) of the model's structure the script keeps beside it, no
                      optimizer holding them (an EMA copy, a teacher): each step's state (first_call.keep).

Sides: "torch" records the script as it is; "torch64" is the same script again in float64 (the model cast at its
first call, from the torch side's initial weights, fed its batches and targets widened): torch's own error, the
yardstick of the measured rule; "paddle" starts its model from torch's initial weights (paired with no map:
mapping.pairing), its samplers draw torch's order and it is fed torch's batches and targets, its own recorded apart
(the data pair: what it catches is then the preprocessing); "moved" (settings'
"against": i) is the same script again in float32 from torch's initial weights moved one ulp, fed its batches and
targets, with backward.AGAINST_ITSELF[i]'s kernels: torch against itself, as compare_backward's plain run measures
it (calibrated.SPREAD). The torch and Paddle sides also record each step's values near 0, the first
forward's too (kinks.near_zero's near<i>/ keys); "taking" (portcheck.scripts.run, only for a red run whose two sides put
such values on each side of 0) is the torch script again from torch's initial weights, fed its batches and targets,
taking Paddle's side of 0 at exactly those values (kinks.taking_paddles_side; side_files.CROSSED, the run's file of
them, in its folder). How each side starts, at the model's first call: first_call.start. Under a launcher each rank
records its own (portcheck.scripts.install).

A script that cannot be recorded (it trains two models, compiles its model, exits before N steps) ends with
one line in status.json, which portcheck.scripts.run reports for its side.
"""
import contextlib
import dataclasses
import itertools
import json
import os
import sys
from pathlib import Path

import numpy as np

from portcheck.scripts.arguments import flat, replaced, to_numpy, trainer_on_stack
from portcheck.scripts.first_call import dropout_site, keep, start
from portcheck.scripts.side_files import RECORD, STATUS, write_text
from portcheck.scripts.wrapping import class_loss
from portcheck.scripts.wrapping import LOSSES, loss_settings  # noqa: F401  (documented path: docs/run.md)

NEAR_SIDES = ("torch", "paddle")  # the sides recording each step's values near 0
BATCH = "input/batch_"       # + c/<argument>: the batch the root's call c was given (c counted over the steps)
TARGET = "target/batch_"     # + j: the target of loss call j
ORDER = "order/"             # + n: the indices the torch side's n-th framework sampler iteration drew, in order
AHEAD = 1000                 # scheduler steps a copy of each side's lr schedule takes past the run (runconfig.ahead)


class Refused(Exception):
    """A script the recorder cannot record: its one line goes to status.json."""


class Run:
    """One side's recording, framework-independent; `fw` (TorchSide or PaddleSide) knows the framework."""

    def __init__(self, settings: dict, fw):
        self.side, self.steps, self.out = settings["side"], int(settings["steps"]), Path(settings["out"])
        self.torch_dir = Path(settings["torch_dir"]) if settings.get("torch_dir") else None
        self.fw, self.root, self.called, self.optimizers = fw, None, None, []
        self.world = settings.get("world", 1)
        self.torch_whole = bool(settings.get("torch_whole"))  # a launched Paddle side against torch's one process
        from portcheck.mapping.layouts import from_json
        self.layouts = from_json(settings.get("layouts") or {})  # --layouts FILE's declarations (run.read_layouts)
        self.against = settings.get("against")  # the moved side's: its index in backward.AGAINST_ITSELF
        self.record, self.config = {}, {"seeds": {}, "clip": None, "loss": None, "versions": fw.versions()}
        self.step, self.depth, self.calls, self.loss, self.done = 0, 0, 0, None, False
        self.error, self.in_root, self.making = None, 0, False
        self.evaluating = False  # the root's last call was an evaluation (model.eval()): its losses not recorded
        self.evaluated = None  # a model called in eval mode before any in train mode (Run.backward)
        self.stepped = []  # the optimizers stepped in this step (several: each over a part of the model)
        self.clip_calls = None  # the first step's clipping calls' parameters, each a norm of its own (clip)
        self.stack, self.in_loss, self.names = [], 0, None  # the modules being called; a loss class's call; names
        # the root's forward calls and the backward() calls of this step (more than one: gradient accumulation), the
        # loss calls so far (each its own target), each framework sampler's indices as drawn (the torch side's)
        self.forwards, self.backwards, self.losses, self.drawn = 0, 0, 0, {}
        self.config["accumulation"] = {"forward": [], "backward": []}  # per step (runconfig.accumulation)
        self.config["orders"] = []  # each framework sampler's iteration (Run.order)
        self.config["losses"] = []  # each loss call of the first step, in order (loss_site; "loss": the first)
        self.given = None  # the torch side's record (paddle, torch64): its batches, targets, weights
        self.kept = {}  # the modules the script keeps beside the model (keep)
        self.conventions = {}  # the Paddle side's arguments its script computes in its own convention (_first_call)
        self.schedulers = []  # torch's lr schedulers as built (a Paddle optimizer holds its own): Run.scheduler
        self.crossed = []  # the taking side's: the values whose side of 0 it takes Paddle's (backward.Crossing)
        self.replays, self.replaying = {}, False  # each optimizer's float64 twin, and whether one steps (replay)
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
        # a recurrent layer's dropout between its layers runs inside the framework's own kernel, no functional to
        # wrap: off for the call (its p is configuration: module_config's "dropout")
        inner = self.dropout_off and self.fw.is_recurrent(module) and module.dropout
        if inner:
            module.dropout = 0.0
        try:
            if self.side == "torch64" and self._evaluation(module):  # the float64 model on the script's float32 data
                return self.fw.cast(self._module_call(module, call, self.fw.cast(args, True),
                                                      self.fw.cast(kwargs, True)), False)
            return self._module_call(module, call, args, kwargs)
        finally:
            if inner:
                module.dropout = inner
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

    def _evaluation(self, module) -> bool:
        """A call of the model, or of a module kept beside it (widened on the float64 side), in eval mode or with
        gradients off, outside any other call: the script's evaluation, given its inputs in float64 there and its
        outputs back in float32, as its own metric code expects them."""
        return self.root is not None and not self.depth and (not module.training or not self.fw.grad_enabled()) \
            and (module is self.called or any(module is m for m in self.kept.values()))

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
        flat(args, "args", own), flat(kwargs, "kwargs", own)
        near, taking = [], contextlib.nullcontext()
        self.record.update({f"{BATCH}{c}/{k}": v for k, v in own.items()})
        self.forwards += 1
        if self.forwards == 1:  # a step's first call (more calls: gradient accumulation's micro-batches)
            if self.side in NEAR_SIDES:  # as record_backward's runs: backward.crossings reads them
                from portcheck.gradients.kinks import near_zero
                near = near_zero(module, self.record, i)
            here = [dataclasses.replace(c, step=0) for c in self.crossed if c.step == i]
            if here:  # the call whose near<i>/ values crossed (an evaluation's or an accumulated call's: not it)
                from portcheck.gradients.kinks import taking_paddles_side
                taking = taking_paddles_side(module, here)
        if self.given is not None:  # fed torch's batch of this call
            given = {k: self._widened(v) for k, v in self.given_batch(c).items()}
            args, kwargs = replaced(args, "args", given, self.fw.to_tensor), \
                replaced(kwargs, "kwargs", given, self.fw.to_tensor)
        handles = near
        if self.calls == 0:
            from portcheck.mapping.trace import Recorder
            handles = near + Recorder(arrays=self.record).attach(module)
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

    def dropout_site(self, p, x=None, attention=False):
        """A dropout call in the first forward: first_call.dropout_site."""
        dropout_site(self, p, x, attention)

    def _widened(self, v):
        return v.astype(np.float64) if self.side == "torch64" and v.dtype.kind == "f" else v

    def _first_call(self, module, args, kwargs):
        """The model's first call: the side started (first_call.start)."""
        start(self, module, args, kwargs)

    def given_batch(self, c: int) -> dict:
        """The batch torch's root call c was given (0: the first step's first), but the arguments the Paddle script
        computes in its own convention (conventions)."""
        prefix = f"{BATCH}{c}/"
        return {k[len(prefix):]: v for k, v in self.given.items()
                if k.startswith(prefix) and k[len(prefix):] not in self.conventions}

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
            self.record[key] = to_numpy(target)
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
            self.loss = to_numpy(tensor).reshape(-1)
            self.backwards += 1

    def after_backward(self):
        if self.root is not None and not self.done and self.step == 0:
            self.record.update({f"grad/{k}": v for k, v in self.fw.grads(self.root).items()})

    def before_step(self, optimizer):
        if self.root is None or self.done or self.plain or self.replaying:
            return
        if any(o is optimizer for o in self.stepped):  # stepped twice: the step ended with the optimizers that did
            self._close_step()
        if self.side in NEAR_SIDES:
            from portcheck.scripts.replay import stepped
            stepped(self, optimizer)
        if self.stepped:  # another optimizer over another part of the model, in the same step
            if self.step == 0:
                self.config["optimizers"].append(self.fw.optimizer_config(optimizer, self.root))
            return
        if self.loss is None:
            raise self.refuse("its optimizer stepped before any backward() on a loss [PC825]")
        keep(self)
        if self.step == 0:
            self.config["optimizer"] = self.fw.optimizer_config(optimizer, self.root)
            self.config["optimizers"] = [self.config["optimizer"]]
            trainer = trainer_on_stack()
            if trainer is not None:  # what a Trainer does beside the optimizer's settings (runconfig.TRAINER)
                self.config["trainer"] = self.fw.trainer_config(trainer)
        self.record[f"loss/{self.step}"] = self.loss
        self.record[f"lr/{self.step}"] = np.array([self.fw.lr(optimizer)], dtype=np.float64)

    def after_step(self, optimizer):
        if self.replaying:
            return
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
        if any(self.replays.values()):  # each weight minus its optimizer's float64 replay
            from portcheck.scripts.replay import recorded
            recorded(self)
        self.config["accumulation"]["forward"].append(self.forwards)
        self.config["accumulation"]["backward"].append(self.backwards)
        self.loss, self.forwards, self.backwards = None, 0, 0
        if self.step >= self.steps:
            self.finish()

    def scheduler(self, sched):
        """A torch lr scheduler built: one that cycles its optimizer's momentum is named in the configuration under
        the key record_backward gives it (backward.CYCLES_MOMENTUM), whose one line runconfig says."""
        from portcheck.gradients.optimizers import CYCLES_MOMENTUM
        if any(s is sched for s in self.schedulers):
            return
        self.schedulers.append(sched)
        if getattr(sched, "cycle_momentum", False):
            self.config[CYCLES_MOMENTUM + type(sched).__name__] = True

    def clip(self, kind, bound, scope=None, groups=None):
        """The first step's clipping; scope: the root's trainable parameters it clips (runconfig.clip_scope);
        groups: [[names]] each clipped by its own norm (runconfig.clip_groups), None: one norm over the scope. A
        script calling clip_grad_norm_ once per parameter group in that step clips each group by a norm of its own:
        each further call of the same kind and bound over other parameters is one more group."""
        if self.root is None:
            return
        if self.config["clip"] is None:
            self.config["clip"] = {"kind": kind, "bound": float(bound)}
            if scope is not None:
                self.config["clip_scope"] = list(scope)
            if groups is not None:
                self.config["clip_groups"] = [list(g) for g in groups]
            self.clip_calls = [list(scope)] if scope and groups is None else None
        elif (self.step == 0 and self.clip_calls and groups is None and scope
              and self.config["clip"] == {"kind": kind, "bound": float(bound)}
              and not set(scope) & set(self.config["clip_scope"])):
            self.clip_calls.append(list(scope))
            self.config["clip_groups"] = [list(g) for g in self.clip_calls]
            self.config["clip_scope"] = [*self.config["clip_scope"], *scope]

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
        write_text(self.out / STATUS, json.dumps(status, indent=1, default=str) + "\n")


def flushed():
    """The script's output flushed before the recorder ends it: its sys.stdout (or stderr) may be anything with a
    write (no flush, or one that raises)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _kept(drawn, into: list):
    for i in drawn:
        into.append(int(i))
        yield i


def _given(order: list, drawn):
    yield from order
    yield from itertools.islice(drawn, len(order), None)  # past what torch drew: past the N steps


def _refused(status: Path) -> bool:
    """The status file holds a refusal (read while another process may be writing it: a torn one is not)."""
    try:
        return bool(json.loads(status.read_text()).get("error"))
    except (OSError, ValueError):
        return False


