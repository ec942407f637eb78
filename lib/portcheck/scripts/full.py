"""`python -m portcheck run --full` (Step 5's train_align): the recorder's Run for a script run to its end, as it
is, and the metrics its printed lines show. Imports the recorder (Run), a side's files (side_files) and the library
below; install starts it by name (install.FULL), never importing it.
"""
import json
import os
import sys

import numpy as np

from portcheck.scripts.arguments import to_numpy
from portcheck.scripts.first_call import by_keys, call_arguments, started
from portcheck.scripts.recorder import Run, flushed
from portcheck.scripts.side_files import INIT, STATUS, STOPPED_EXIT, write_text


class Full(Run):
    """`run --full`: the script to its end, as it is (its own batches, Dropout on), its model started from the
    torch side's initial weights; every step's loss, lr, weight norm, modes and targets, and each metric its
    printed lines show (METRIC, or the run's --metric), as a training.TrainingLog saved at exit: Step 5's
    train_align, judged by portcheck.pipeline.training."""
    dropout_off = False
    sites = False

    def __init__(self, settings: dict, fw):
        super().__init__(settings, fw)
        import re
        from portcheck.pipeline.training import TrainingLog
        self.log, self.metric = TrainingLog(), re.compile(settings.get("metric") or METRIC)
        self.framework, self.target, self.lr, self.weights = settings["framework"], None, None, ""
        self.batches = []  # each step's batch fingerprint, the data order it binds (never Run.order: the sampler hook)
        self.started = False  # the modules kept beside the model started from torch's (before_step)
        self.evaluated = None  # the module the last evaluation called (module_call): its modes logged with it
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
            try:  # the modes of what the evaluation called: the model, or a copy kept beside it (an EMA)
                self.log.evaluate(found, model=self.evaluated if self.evaluated is not None else self.root)
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
                first = call_arguments(self, args, kwargs)
                _, _, placed = self.fw.start_from_torch(module, self.given, first or by_keys(self))
                self.weights = state_fingerprint(self.fw.placed_state(module, placed))
                from portcheck.pipeline.training import torch_running_var
                torch_running_var(module)  # evaluation sees torch's (unbiased) running variance
        finally:
            self.depth -= 1

    def module_call(self, module, call, args, kwargs):
        """A call of the model, or of a module kept beside it, in eval mode or with gradients off, outside any other
        call: an evaluation, whose modes the next metric read is logged with (read)."""
        if self.root is not None and not self.depth and (module is self.called or any(
                module is m for m in self.kept.values())) and (not module.training or not self.fw.grad_enabled()):
            self.evaluated = module
        return super().module_call(module, call, args, kwargs)

    def _root_call(self, module, call, args, kwargs):
        return self._inner(call, args, kwargs)

    def loss_call(self, name, target, settings: dict):
        if self.root is not None and not self.in_root and hasattr(target, "numpy"):
            self.target = target
        return target

    def backward(self, tensor):
        if self.root is not None:
            self.loss = to_numpy(tensor).reshape(-1)

    def after_backward(self):
        pass

    def before_step(self, optimizer):
        if self.root is not None:
            if not self.started:  # what the script keeps beside the model (an EMA copy) starts as the model did
                self.started, self.kept = True, started(self, {})
            self.lr = self.fw.lr(optimizer)

    def after_step(self, optimizer):
        if self.root is None or self.loss is None:
            return
        from portcheck.pipeline.training_log import batch_fingerprint
        batch = None
        if self.target is not None and (self.step == 0 or "batch" in self.log.curves):
            batch = self.target
            self.batches.append(batch_fingerprint(batch))
        self.log.step(self.loss, self.lr, model=self.root, batch=batch)
        self.step += 1
        self.loss, self.target = None, None

    def write(self):
        """At exit: the training log (train_align and train_log, with their run records), or why not."""
        from portcheck.core.errors import PipelineError
        from portcheck.pipeline.training import run_depends
        if os.getpid() != self.pid:
            return
        if self.error is None and self.step:
            try:
                depends = run_depends(self.weights, [np.asarray(self.batches, dtype=np.int64)], {}, {})
                self.log.save(self.out, self.framework, depends, "python -m portcheck run --full")
            except PipelineError as e:
                self.error = str(e)
        status = {"side": self.side, "steps": self.step, "error": self.error, "config": self.config,
                  "root": type(self.root).__name__ if self.root is not None else None}
        write_text(self.out / f"{STATUS[:-5]}_{self.framework}.json", json.dumps(status, indent=1, default=str))


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
