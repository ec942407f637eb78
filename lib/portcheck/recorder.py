"""The recorder `python -m portcheck run` injects into a user's own training script (portcheck.run starts it).

The script is not edited: portcheck/inject/sitecustomize.py, first on the interpreter's PYTHONPATH, calls
install() before the script runs, with the run's settings in the environment (SETTINGS: the side, the steps, the
folder). install() wraps what every training script goes through, in either framework:

  the module call     the root model is the outermost module called, with gradients on, whose parameters an
                      optimizer holds (a data-parallel wrapper's: the model it holds); its first call records
                      every module's output (compare._Recorder) and what pairing reads (pairing.describe); each
                      call records the batch it is given;
  Tensor.backward     the tensor it is called on is the loss; the gradients after the first backward;
  optimizer.step      before it, the lr; after it, every weight; after step N, the record is written and the
                      script is stopped (exit 0);
  the loss functions  each functional loss (cross_entropy, mse_loss, ...) records its target and settings;
  dropout             off for the N steps (the functional dropout returns its input);
  seeds, clipping     their arguments, for the configuration (portcheck.runconfig);
  torch's schedulers  whether one cycles the optimizer's momentum (OneCycleLR, CyclicLR), for it too.

Sides: "torch" records the script as it is; "torch64" is the same script again in float64 (the model cast at its
first call, from the torch side's initial weights, fed its batches and targets widened): torch's own error, the
yardstick of the measured rule; "paddle" starts its model from torch's initial weights (paired with no map:
portcheck.pairing) and is fed torch's batches and targets, its own recorded apart (the data pair); "moved" (settings'
"against": i) is the same script again in float32 from torch's initial weights moved one ulp, fed its batches and
targets, with backward.AGAINST_ITSELF[i]'s kernels: torch against itself, as compare_backward's plain run measures
it (calibrated.SPREAD). The torch and Paddle sides also record each step's values within the floor of 0, the first
forward's too (backward._near_zero's near<i>/ keys); "taking" (portcheck.run, only for a red run whose two sides put
such values on each side of 0) is the torch script again from torch's initial weights, fed its batches and targets,
taking Paddle's side of 0 at exactly those values (backward._taking; CROSSED, the run's file of them, in its folder).

Under a launcher (torchrun, paddle.distributed.launch: portcheck.run.ranks) each rank records in DIR/rank<r>/<side>,
fed and started from torch's rank r; the launcher's own process records nothing.

A script that cannot be recorded (it trains two models, compiles its model, exits before N steps) ends with
one line in status.json, which portcheck.run reports for its side.
"""
import atexit
import contextlib
import dataclasses
import functools
import inspect
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


class Run:
    """One side's recording, framework-independent; `fw` (TorchSide or PaddleSide) knows the framework."""

    def __init__(self, settings: dict, fw):
        self.side, self.steps, self.out = settings["side"], int(settings["steps"]), Path(settings["out"])
        self.torch_dir = Path(settings["torch_dir"]) if settings.get("torch_dir") else None
        self.fw, self.root, self.called, self.optimizers = fw, None, None, []
        self.world = settings.get("world", 1)
        self.against = settings.get("against")  # the moved side's: its index in backward.AGAINST_ITSELF
        self.record, self.config = {}, {"seeds": {}, "clip": None, "loss": None, "versions": fw.versions()}
        self.step, self.depth, self.calls, self.loss, self.done = 0, 0, 0, None, False
        self.error, self.fed, self.in_root, self.making = None, set(), 0, False
        self.given = None  # the torch side's record (paddle, torch64): its batches, targets, weights
        self.crossed = []  # the taking side's: the values whose side of 0 it takes Paddle's (backward.Crossing)
        self.plain = self.side == "plain"  # tools/bench_run.py: the script's own first N steps, nothing recorded
        if self.side not in ("torch", "plain"):
            from portcheck.fileio import load_npy
            self.given = load_npy(self.torch_dir / RECORD)

    @property
    def dropout_off(self) -> bool:
        return not (self.done or self.plain)

    # ------------------------------------------------------------------ the hooks the framework side calls
    def module_call(self, module, call, args, kwargs):
        """Every module call: the root's are recorded; everything else runs as it is."""
        if self.plain:
            return call(*args, **kwargs)
        if self.depth or self.done or not self.fw.grad_enabled():
            return self._inner(call, args, kwargs)
        if self.root is None:
            held = self.fw.held_parameters(self.optimizers)
            own = {id(p) for p in self.fw.parameters(module)}
            if own and own <= held:
                self.called, self.root = module, self.fw.unwrapped(module)  # a data-parallel wrapper: its model
                self.config["wrapper"] = self.fw.wrapper(module)
                self._first_call(self.root, args, kwargs)
        elif module is not self.called and self.fw.parameters(module) and \
                {id(p) for p in self.fw.parameters(module)} <= self.fw.held_parameters(self.optimizers):
            raise self.refuse(f"it trains two models ({type(self.root).__name__}, then {type(module).__name__}): "
                              "give each model its own script")
        if module is not self.called:
            return self._inner(call, args, kwargs)
        self.in_root += 1
        try:
            return self._root_call(self.root, call, args, kwargs)
        finally:
            self.in_root -= 1

    def _root_call(self, module, call, args, kwargs):
        i = self.step
        own = {}
        _flat(args, "args", own), _flat(kwargs, "kwargs", own)
        near, taking = [], contextlib.nullcontext()
        if i not in self.fed:  # a step's first call (more calls: gradient accumulation)
            self.fed.add(i)
            self.record.update({f"input/batch_{i}/{k}": v for k, v in own.items()})
            if self.side in NEAR_SIDES:  # as record_backward's runs: backward.crossings reads them
                from portcheck.backward import _near_zero
                near = _near_zero(module, self.record, i)
            here = [dataclasses.replace(c, step=0) for c in self.crossed if c.step == i]
            if here:  # the call whose near<i>/ values crossed (an evaluation's or an accumulated call's: not it)
                from portcheck.backward import _taking
                taking = _taking(module, here)
        if self.given is not None:  # fed torch's batch of this step
            given = {k: self._widened(v) for k, v in self._given_batch(i).items()}
            args, kwargs = _replaced(args, "args", given, self.fw.to_tensor), \
                _replaced(kwargs, "kwargs", given, self.fw.to_tensor)
        handles = near
        if self.calls == 0:
            from portcheck.compare import _Recorder
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

    def _widened(self, v):
        return v.astype(np.float64) if self.side == "torch64" and v.dtype.kind == "f" else v

    def _first_call(self, module, args, kwargs):
        from portcheck.compare import is_flag
        from portcheck.pairing import describe
        self.fw.check_not_compiled(module)
        # the first call's own flags (return_dict=True) and its count of positional arguments: the isolated run's call
        self.positional_flags = {i: v for i, v in enumerate(args) if is_flag(v)}
        self.keyword_flags = {k: v for k, v in kwargs.items() if is_flag(v)}
        self.positional = len(args)
        self.depth += 1  # the runs made here (pairing, isolation) are not training calls
        self.making = True
        try:
            if self.side == "torch":
                from portcheck.fileio import save_npy
                save_npy(self.out / INIT, self.fw.state(module))
            elif self.side == "torch64":
                from portcheck.fileio import load_npy
                init = load_npy(self.torch_dir / INIT)
                self.fw.load(module, init)
                pairs = json.loads((self.out.parent / "paddle" / STATUS).read_text())["config"].get("pairs") or {}
                self.isolated(module, {t: t for t in pairs}, {k: k for k in self.given if k.startswith("out/")})
                # BatchNorm's statistics as they were before the isolated run: a model in float64 already (under
                # DDP: hooks_torch) has them updated in place by it, no float32 copy taken
                self.fw.load(module, init)
                module.double()  # in place: the optimizer's Parameters are the same objects, now float64
            elif self.side == "taking":  # as record_backward(crossed=): from torch's start (_root_call takes them)
                from portcheck.fileio import load_npy
                self.fw.load(module, load_npy(self.torch_dir / INIT))
                self.crossed = crossed_file(self.out / CROSSED)
            elif self.against is not None:  # as record_backward's runs against itself, to the process's end
                from portcheck.backward import AGAINST_ITSELF, moved_one_ulp
                from portcheck.fileio import load_npy
                self.fw.load(module, load_npy(self.torch_dir / INIT))
                moved_one_ulp(module)
                self.kernels = AGAINST_ITSELF[self.against]()
                self.kernels.__enter__()  # never left: the recorder ends the process after step N
            else:
                first = self._given_batch(0)
                pairs, keys, _ = self.fw.start_from_torch(module, self.given, first)
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
        self.record.update({f"state0/{k}": v for k, v in self.fw.paddle_layout_state(module).items()})

    def _given_batch(self, i: int) -> dict:
        prefix = f"input/batch_{i}/"
        return {k[len(prefix):]: v for k, v in self.given.items() if k.startswith(prefix)}

    def isolated(self, module, calls: dict, leaves: dict):
        """Every paired module call on torch's recorded first-forward values (portcheck.isolate.forced_run): the
        value each computes, under iso/<its key> (torch's float64 side: torch's own error per module; Paddle's:
        its counterpart's computation on the same values)."""
        from portcheck.compare import Arguments, values
        from portcheck.isolate import forced_run
        first = self._given_batch(0)
        args = {**{int(k[5:]): v for k, v in first.items() if k.startswith("args/") and k[5:].isdigit()},
                **self.positional_flags}
        kwargs = {k[7:]: v for k, v in first.items() if k.startswith("kwargs/") and k.count("/") == 1}
        # tensors and flags alone, as the script passed them (a nested argument, a list of tensors: not)
        inputs = Arguments(tuple(args[i] for i in range(len(args))), {**kwargs, **self.keyword_flags}) \
            if len(args) - len(self.positional_flags) + len(kwargs) == len(first) and \
            sorted(args) == list(range(self.positional)) else None
        if inputs is None or not calls:
            self.config["isolated"] = "not run: the model's batch is not tensors and flags (True, None, a string) " \
                "passed as they are" if calls else "not run: no module paired"
            return
        kept = {}

        def keep(key, tensor, source):
            if key is None:
                kept.clear()
            else:
                kept[f"iso/{key}"] = np.array(values(tensor), copy=True)
        parents, error = forced_run(module, inputs, self.given, calls, leaves, keep)
        self.record.update(kept)
        self.config["isolated"] = error or "run"
        self.config["parents"] = parents

    def loss_call(self, name, target, settings: dict):
        """A functional loss called on the root's output: its target recorded (paddle, torch64: replaced)."""
        # a loss inside the model is not the loss, nor one in the runs the recorder makes itself at the model's
        # first call (pairing, isolation), which a model computing its loss from labels= makes too
        if self.root is None or self.done or self.in_root or self.making:
            return target
        key = f"target/batch_{self.step}"
        if self.config["loss"] is None:
            self.config["loss"] = {"function": name, **settings}
        if hasattr(target, "numpy") and key not in self.record:
            self.record[key] = _numpy(target)
        if self.given is not None and key in self.given and hasattr(target, "numpy"):
            return self.fw.to_tensor(self._widened(self.given[key]))
        return target

    def backward(self, tensor):
        """Tensor.backward's tensor, before it runs."""
        if self.root is not None and not self.done:
            self.loss = _numpy(tensor).reshape(-1)

    def after_backward(self):
        if self.root is not None and not self.done and self.step == 0:
            self.record.update({f"grad/{k}": v for k, v in self.fw.grads(self.root).items()})

    def before_step(self, optimizer):
        if self.root is None or self.done or self.plain:
            return
        if self.loss is None:
            raise self.refuse("its optimizer stepped before any backward() on a loss")
        if self.step == 0:
            self.config["optimizer"] = self.fw.optimizer_config(optimizer, self.root)
        self.record[f"loss/{self.step}"] = self.loss
        self.record[f"lr/{self.step}"] = np.array([self.fw.lr(optimizer)], dtype=np.float64)

    def after_step(self, optimizer):
        if self.plain and self.step + 1 >= self.steps:
            os._exit(0)
        if self.root is None or self.done:
            self.step += self.plain
            return
        self.step += 1
        self.record.update({f"state{self.step}/{k}": v for k, v in self.fw.paddle_layout_state(self.root).items()})
        self.loss = None
        if self.step >= self.steps:
            self.finish()

    def scheduler(self, sched):
        """A torch lr scheduler built: one that cycles its optimizer's momentum is named in the configuration under
        the key record_backward gives it (backward.CYCLES_MOMENTUM), whose one line runconfig says."""
        from portcheck.backward import CYCLES_MOMENTUM
        if getattr(sched, "cycle_momentum", False):
            self.config[CYCLES_MOMENTUM + type(sched).__name__] = True

    def clip(self, kind, bound):
        if self.config["clip"] is None and self.root is not None:
            self.config["clip"] = {"kind": kind, "bound": float(bound)}

    # ------------------------------------------------------------------ the end
    def refuse(self, why: str) -> Refused:
        self.error = why
        self.write()
        return Refused(why)

    def finish(self):
        """N steps taken: the record written, the script stopped."""
        self.done = True
        self.record.update(self.fw.norms())
        self.write()
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(0)  # the script's own loop, evaluation and saves are not ours to run

    def write(self):
        from portcheck.fileio import save_npy
        if self.error is None and self.root is None and _refused(self.out / STATUS):
            return  # another process of this run refused (an unknown launcher's worker): nothing to add
        if self.record and self.error is None:
            save_npy(self.out / RECORD, self.record)
        status = {"side": self.side, "steps": self.step, "asked": self.steps, "error": self.error,
                  "world": self.world,
                  "root": type(self.root).__name__ if self.root is not None else None, "config": self.config,
                  "loaded": sorted({"torch", "paddle"} & set(sys.modules))}  # a Paddle result from Paddle code
        (self.out / STATUS).write_text(json.dumps(status, indent=1, default=str) + "\n")


def crossed_file(path: Path, crossed=None) -> list:
    """The taking side's [backward.Crossing], written by portcheck.run (crossed given) or read by the recorder: json,
    nothing in it run."""
    from portcheck.backward import Crossing
    if crossed is not None:
        path.write_text(json.dumps([{"step": c.step, "module": c.module, "index": c.index.tolist(),
                                     "torch": c.torch.tolist(), "paddle": c.paddle.tolist()} for c in crossed]))
        return crossed
    return [Crossing(int(c["step"]), str(c["module"]), np.asarray(c["index"], np.int64),
                     np.asarray(c["torch"], np.float64), np.asarray(c["paddle"], np.float64))
            for c in json.loads(path.read_text())]


LOSSES = ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
          "binary_cross_entropy_with_logits", "kl_div", "huber_loss")
DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
# attention with its own dropout (transformers' and paddlenlp's attention in train mode, torch's MultiheadAttention):
# (query, key, value, attn_mask, dropout_p, ...) in both frameworks
ATTENTIONS = ("scaled_dot_product_attention",)
DROPOUT_P = 4  # dropout_p's place among their arguments


def loss_settings(bound) -> dict:
    """The settings of a loss call both frameworks share, as one dict (bound: its inspect.BoundArguments)."""
    a = bound.arguments
    weight = a.get("weight", a.get("pos_weight"))
    return {"reduction": a.get("reduction", "mean"), "label_smoothing": float(a.get("label_smoothing", 0.0) or 0.0),
            "ignore_index": a.get("ignore_index"),
            "weight": None if weight is None else [round(float(w), 7) for w in np.asarray(
                weight.detach().cpu().numpy() if hasattr(weight, "detach") else weight.numpy()).reshape(-1)]}




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
    for name in LOSSES:
        if hasattr(functional, name):
            setattr(functional, name, loss(run, name, getattr(functional, name)))
    for name in DROPOUTS:
        if hasattr(functional, name):
            setattr(functional, name, no_dropout(run, getattr(functional, name)))
    for name in ATTENTIONS:
        if hasattr(functional, name):
            setattr(functional, name, no_attention_dropout(run, getattr(functional, name)))


def registering(run, init):
    """An optimizer class's __init__ that registers the optimizer it builds (once: a subclass's calls its parent's)."""
    @functools.wraps(init)
    def optimizer_init(opt, *args, **kwargs):
        init(opt, *args, **kwargs)
        if not any(o is opt for o in run.optimizers):
            run.optimizers.append(opt)
    return optimizer_init


def no_dropout(run, fn):
    """Dropout off for the N steps: the two frameworks draw different masks."""
    @functools.wraps(fn)
    def dropout(input, *args, **kwargs):
        return input if run.dropout_off else fn(input, *args, **kwargs)
    return dropout


def no_attention_dropout(run, fn):
    """An attention's own dropout (dropout_p) off for the N steps, as no_dropout's."""
    @functools.wraps(fn)
    def attention(*args, **kwargs):
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



def loss_wrapper(run, name, fn, target: str, widen=None):
    """A functional loss whose target (the argument named `target`: torch's "target", Paddle's "label") goes
    through run.loss_call; widen(bound), the float64 run's, casts what meets its float64 output."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def loss(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)  # the call's own error, as the user would see it
        bound.apply_defaults()
        if target in bound.arguments:
            bound.arguments[target] = run.loss_call(name, bound.arguments[target], loss_settings(bound))
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

    def __init__(self, settings: dict, fw):
        super().__init__(settings, fw)
        import re
        from portcheck.training import TrainingLog
        self.log, self.metric = TrainingLog(), re.compile(settings.get("metric") or METRIC)
        self.framework, self.target, self.lr, self.weights, self.order = settings["framework"], None, None, "", []
        self.line = ""
        stdout = sys.stdout

        class Tee:  # the script's printing as it is, each line read for a metric
            def __getattr__(_, name):
                return getattr(stdout, name)

            def write(_, text):
                self.read(text)
                return stdout.write(text)
        sys.stdout = Tee()

    def read(self, text: str):
        self.line += text
        *lines, self.line = self.line.split("\n")
        for line in lines:
            found = {m.group(1).lower(): float(m.group(2)) for m in self.metric.finditer(line)}
            if found and self.root is not None and len(self.log.curves["loss"]):
                try:
                    self.log.evaluate(found)
                except Exception:  # noqa: BLE001 - a line naming other metrics than the first: not an evaluation
                    pass

    def _first_call(self, module, args, kwargs):
        from portcheck.fileio import load_npy
        from portcheck.record import state_fingerprint
        self.fw.check_not_compiled(module)
        self.depth += 1
        try:
            if self.framework == "torch":
                self.fw.load(module, load_npy(self.torch_dir / INIT))
                self.fw.layout_keys(module)
                self.weights = state_fingerprint(self.fw.paddle_layout_state(module))
            else:
                first = self._given_batch(0)
                _, _, placed = self.fw.start_from_torch(module, self.given, first)
                state = self.fw.paddle_layout_state(module)
                self.weights = state_fingerprint({k: state[p] for k, p in placed.items()})
                from portcheck.training import torch_running_var
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
        from portcheck.training import batch_fingerprint
        batch = None
        if self.target is not None and (self.step == 0 or "batch" in self.log.curves):
            batch = self.target
            self.order.append(batch_fingerprint(batch))
        self.log.step(self.loss, self.lr, model=self.root, batch=batch)
        self.step += 1
        self.loss, self.target = None, None

    def write(self):
        """At exit: the training log (train_align and train_log, with their run records), or why not."""
        from portcheck.errors import PipelineError
        from portcheck.training import run_depends
        if self.error is None and self.step:
            try:
                depends = run_depends(self.weights, [np.asarray(self.order, dtype=np.int64)], {}, {})
                self.log.save(self.out, self.framework, depends, "python -m portcheck run --full")
            except PipelineError as e:
                self.error = str(e)
        status = {"side": self.side, "steps": self.step, "error": self.error, "config": self.config,
                  "root": type(self.root).__name__ if self.root is not None else None}
        (self.out / f"{STATUS[:-5]}_{self.framework}.json").write_text(json.dumps(status, indent=1, default=str))


# a metric in a printed line: "acc 0.97", "accuracy: 97.3", "val_f1=0.81" (its name, then its value)
METRIC = r"(?<![A-Za-z])((?:val_|test_|eval_)?(?:acc|accuracy|f1))\s*[:=]?\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

RUN = None


def install():
    """Called by the injected sitecustomize: the side's hooks in place before the user's script runs."""
    global RUN
    settings = json.loads(os.environ[SETTINGS])
    rank = os.environ.get("RANK", os.environ.get("PADDLE_TRAINER_ID"))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("PADDLE_TRAINERS_NUM", "1")) or 1)
    if settings.get("launcher") and rank is None:
        return  # the launcher's own process: its workers record, one rank each
    if settings.get("ranked"):  # a launched run (portcheck.run.ranks): DIR/rank<r>/<side>
        settings = {**settings, "world": world, **{k: str(Path(settings[k]).parent / f"rank{rank or 0}" /
                                                        Path(settings[k]).name) for k in ("out", "torch_dir")}}
        Path(settings["out"]).mkdir(parents=True, exist_ok=True)
    if settings.get("framework", settings["side"]) == "paddle":
        from portcheck.hooks_paddle import PaddleSide as Side
    else:
        from portcheck.hooks_torch import TorchSide as Side
    fw = Side(settings["side"] == "torch64")
    RUN = (Full if settings["side"] == "full" else Run)(settings, fw)
    fw.install(RUN)
    if world > 1 and not settings.get("ranked"):  # a launcher run does not know: its ranks would share one folder
        RUN.refuse(f"it runs as rank {rank} of {world} under a launcher `portcheck run` does not know: give torchrun "
                   "or python -m paddle.distributed.launch, or one process")
        os._exit(STOPPED_EXIT)
    atexit.register(_early_exit)
    previous = sys.excepthook

    def refused(kind, value, tb):  # a Refused is our one line, in status.json; anything else the script's own
        if isinstance(value, Refused):
            print(f"portcheck run: stopped: {value}", file=sys.stderr)
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
