"""The recorder `python -m portcheck run` injects into a user's own training script (portcheck.run starts it).

The script is not edited: portcheck/inject/sitecustomize.py, first on the interpreter's PYTHONPATH, calls
install() before the script runs, with the run's settings in the environment (SETTINGS: the side, the steps, the
folder). install() wraps what every training script goes through, in either framework:

  the module call     the root model is the outermost module called, with gradients on, whose parameters an
                      optimizer holds; its first call records every module's output (compare._Recorder) and
                      what pairing reads (pairing.describe); each call records the batch it is given;
  Tensor.backward     the tensor it is called on is the loss; the gradients after the first backward;
  optimizer.step      before it, the lr; after it, every weight; after step N, the record is written and the
                      script is stopped (exit 0);
  the loss functions  each functional loss (cross_entropy, mse_loss, ...) records its target and settings;
  dropout             off for the N steps (the functional dropout returns its input);
  seeds, clipping     their arguments, for the configuration (portcheck.runconfig).

Sides: "torch" records the script as it is; "torch64" is the same script again in float64 (the model cast at its
first call, from the torch side's initial weights, fed its batches and targets widened): torch's own error, the
yardstick of the measured rule; "paddle" starts its model from torch's initial weights (paired with no map:
portcheck.pairing) and is fed torch's batches and targets, its own recorded apart (the data pair).

A script that cannot be recorded (it trains two models, compiles its model, exits before N steps) ends with
one line in status.json, which portcheck.run reports for its side.
"""
import atexit
import json
import os
import sys
from pathlib import Path

import numpy as np

SETTINGS = "PORTCHECK_RUN"   # the environment variable holding the run's settings (json)
RECORD = "record.npy"        # each side's record, in its folder
STATUS = "status.json"       # each side's outcome: steps taken, config, the error that stopped it
INIT = "init.npy"            # the torch side's initial weights, in torch's layout (the float64 run starts there)
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
        self.fw, self.root, self.optimizers = fw, None, []
        self.record, self.config = {}, {"seeds": {}, "clip": None, "loss": None, "versions": fw.versions()}
        self.step, self.depth, self.calls, self.loss, self.grads_taken, self.done = 0, 0, 0, None, False, False
        self.error, self.fed, self.in_root = None, set(), 0
        self.given = None  # the torch side's record (paddle, torch64): its batches, targets, weights
        if self.side != "torch":
            from portcheck.fileio import load_npy
            self.given = load_npy(self.torch_dir / RECORD)

    # ------------------------------------------------------------------ the hooks the framework side calls
    def module_call(self, module, call, args, kwargs):
        """Every module call: the root's are recorded; everything else runs as it is."""
        if self.depth or self.done or not self.fw.grad_enabled():
            return self._inner(call, args, kwargs)
        if self.root is None:
            held = self.fw.held_parameters(self.optimizers)
            own = {id(p) for p in self.fw.parameters(module)}
            if own and own <= held:
                self.root = module
                self._first_call(module, args, kwargs)
        elif module is not self.root and self.fw.parameters(module) and \
                {id(p) for p in self.fw.parameters(module)} <= self.fw.held_parameters(self.optimizers):
            raise self.refuse(f"it trains two models ({type(self.root).__name__}, then {type(module).__name__}): "
                              "give each model its own script")
        if module is not self.root:
            return self._inner(call, args, kwargs)
        self.in_root += 1
        try:
            return self._root_call(module, call, args, kwargs)
        finally:
            self.in_root -= 1

    def _root_call(self, module, call, args, kwargs):
        i = self.step
        own = {}
        _flat(args, "args", own), _flat(kwargs, "kwargs", own)
        if i not in self.fed:  # a step's first call (more calls: gradient accumulation)
            self.fed.add(i)
            self.record.update({f"input/batch_{i}/{k}": v for k, v in own.items()})
        if self.given is not None:  # fed torch's batch of this step
            prefix = f"input/batch_{i}/"
            given = {k[len(prefix):]: self._widened(v) for k, v in self.given.items() if k.startswith(prefix)}
            args, kwargs = _replaced(args, "args", given, self.fw.to_tensor), \
                _replaced(kwargs, "kwargs", given, self.fw.to_tensor)
        if self.calls == 0:
            from portcheck.compare import _Recorder, hook_points
            recorder = _Recorder(arrays=self.record)
            handles = [post(recorder.hook(name)) for name, _, post in hook_points(module)]
            try:
                return self._inner(call, args, kwargs)
            finally:
                for h in handles:
                    h.remove()
                self.calls += 1
        self.calls += 1
        return self._inner(call, args, kwargs)

    def _inner(self, call, args, kwargs):
        self.depth += 1
        try:
            return call(*args, **kwargs)
        finally:
            self.depth -= 1

    def _widened(self, v):
        return v.astype(np.float64) if self.side == "torch64" and v.dtype.kind == "f" else v

    def _first_call(self, module, args, kwargs):
        from portcheck.pairing import describe
        self.fw.check_not_compiled(module)
        if self.side == "torch":
            from portcheck.fileio import save_npy
            save_npy(self.out / INIT, self.fw.state(module))
        elif self.side == "torch64":
            from portcheck.fileio import load_npy
            self.fw.load_float64(module, load_npy(self.torch_dir / INIT))
        else:
            first = {k[len("input/batch_0/"):]: v for k, v in self.given.items() if k.startswith("input/batch_0/")}
            self.depth += 1  # its pairing run is not a training call
            try:
                self.fw.start_from_torch(module, self.given, first)
            finally:
                self.depth -= 1
        self.record.update(describe(module))
        self.record.update(self.fw.layout_keys(module))
        self.config["modules"] = self.fw.module_config(module)
        self.record.update({f"state0/{k}": v for k, v in self.fw.paddle_layout_state(module).items()})

    def loss_call(self, name, target, settings: dict):
        """A functional loss called on the root's output: its target recorded (paddle, torch64: replaced)."""
        if self.root is None or self.done or self.in_root:  # a loss inside the model is not the loss
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
        if self.root is None or self.done:
            return
        if self.loss is None:
            raise self.refuse("its optimizer stepped before any backward() on a loss")
        if self.step == 0:
            self.config["optimizer"] = self.fw.optimizer_config(optimizer, self.root)
        self.record[f"loss/{self.step}"] = self.loss
        self.record[f"lr/{self.step}"] = np.array([self.fw.lr(optimizer)], dtype=np.float64)

    def after_step(self, optimizer):
        if self.root is None or self.done:
            return
        self.step += 1
        self.record.update({f"state{self.step}/{k}": v for k, v in self.fw.paddle_layout_state(self.root).items()})
        self.loss = None
        if self.step >= self.steps:
            self.finish()

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
        if self.record and self.error is None:
            save_npy(self.out / RECORD, self.record)
        status = {"side": self.side, "steps": self.step, "asked": self.steps, "error": self.error,
                  "root": type(self.root).__name__ if self.root is not None else None, "config": self.config}
        (self.out / STATUS).write_text(json.dumps(status, indent=1, default=str) + "\n")


RUN = None


def install():
    """Called by the injected sitecustomize: the side's hooks in place before the user's script runs."""
    global RUN
    settings = json.loads(os.environ[SETTINGS])
    if settings["side"] == "paddle":
        from portcheck.hooks_paddle import PaddleSide as Side
    else:
        from portcheck.hooks_torch import TorchSide as Side
    fw = Side(settings["side"] == "torch64")
    RUN = Run(settings, fw)
    fw.install(RUN)
    atexit.register(_early_exit)
    previous = sys.excepthook

    def refused(kind, value, tb):  # a Refused is our one line, in status.json; anything else the script's own
        if isinstance(value, Refused):
            print(f"portcheck run: stopped: {value}", file=sys.stderr)
            return
        previous(kind, value, tb)
    sys.excepthook = refused


def _early_exit():
    """The script ended before N steps (or was stopped): what was recorded says how far it got."""
    if RUN is not None and not RUN.done:
        RUN.write()
