"""One hand-in folder, one call per step of the guide: the short form of docs/own_model.md.

    steps = portcheck.Handin("log_reprod")
    steps.forward(torch_model, paddle_model, x)                            # Step 1: every module, the forward pair
    steps.data(torch_loader, paddle_loader)                                # Step 2: the first batches, exactly
    steps.metric((torch_metric, paddle_metric), predictions, labels)       # Step 2: the metric pair
    steps.loss(torch_model, paddle_model, x, y, (torch_loss, paddle_loss))  # Step 3
    steps.backward(torch_model, paddle_model, x, y, (torch_loss, paddle_loss), (make_opt, make_opt_pd),
                   (make_sched, None), steps=4)                            # Step 4: lr and bp_align
    logs = steps.training(torch_model, paddle_model, order, seeds, flags)  # Step 5: before the first step
    ...                                                                    # each side's loop: logs[i].step(...)
    steps.train(*logs)                                                     # the final metric and the curves

Each call runs both sides in this process with the library's own calls (record_*, save_side, judge_and_log): each
side's results and run records go to `<folder>_sides/`, the judged pair, its diff log and its diagnostics (the
picture, the page) to the hand-in, which `python -m portcheck check <folder>` re-derives. It returns the report it
made; `steps.verdicts` holds each pair's verdict, `print(steps)` says them. Each step that takes both models first
sets Paddle's weights to torch's (portcheck.convert, pairing as the first conversion's name_map and layouts), unless
convert=False; each side's run record binds that side's own weights under torch's names (`steps.port`), so a Paddle
model holding other weights is never the same run.
"""
import copy
import sys
from pathlib import Path

from portcheck.core import record
from portcheck.core.errors import PipelineError
from portcheck.pipeline import data, handin, training

SIDES = ("torch", "paddle")


def _named(inputs) -> list:
    """[(name, array)] of a batch as compare_forward takes it: an array, a tuple or list, or a dict."""
    if isinstance(inputs, dict):
        items = inputs.items()
    elif isinstance(inputs, (tuple, list)):
        items = ((str(i), v) for i, v in enumerate(inputs))
    else:
        items = [("x", inputs)]
    return [(str(k), data.to_numpy(v, f"inputs[{k}]")) for k, v in items]


def _pair(value, what: str) -> tuple:
    """(torch's, Paddle's) of a pair argument; one callable serves both sides."""
    if callable(value):
        return value, value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return tuple(value)
    raise PipelineError(f"{what}= must be (torch's, Paddle's) or one callable for both, got "
                        f"{type(value).__name__} [PC160]")


class Handin:
    """A hand-in folder (`log_reprod/`), filled one step at a time. folder: the hand-in; sides: where each side's
    results and run records go before they are judged (default: `<folder>_sides` beside it)."""

    def __init__(self, folder="log_reprod", sides=None):
        self.top = Path(folder)
        self.sides = Path(sides) if sides is not None else self.top.with_name(self.top.name + "_sides")
        self.script = Path(sys.argv[0]).name or "python"  # the run records' script: the one calling
        self.port, self.verdicts, self._map = None, {}, (None, None)

    def __repr__(self) -> str:
        return "\n".join(f"{pair}: {v.describe_measured()}" for pair, v in self.verdicts.items()) or \
            f"Handin({str(self.top)!r}): no step judged yet"

    @property
    def passed(self) -> bool:
        """Every step judged so far green (and at least one judged)."""
        return bool(self.verdicts) and all(v.passed for v in self.verdicts.values())

    def convert(self, torch_model, paddle_model, inputs, name_map=None, layouts=None):
        """Paddle's weights set to torch's (portcheck.convert, every key checked), kept as `steps.port`: the
        conversion every later run record fingerprints each side's weights under. Called by the first step that
        needs it; call it yourself to pass a name_map or layouts."""
        from portcheck.mapping.convert import convert
        self._map = name_map, layouts  # the later steps' conversions pair as this one did
        self.port = convert(torch_model, paddle_model, name_map=name_map, layouts=layouts, inputs=inputs)
        return self.port

    def _weights(self, model) -> str:
        return record.model_fingerprint(model, port=self.port)

    def _ported(self, torch_model, paddle_model, inputs, convert: bool):
        """Paddle's weights set to torch's (each step's models are its own), or with convert=False, kept: then
        they are judged as they are, under the last conversion's names."""
        if convert or self.port is None:
            self.convert(torch_model, paddle_model, inputs, *self._map)

    def _judge(self, pair: str, comparison=None, **kw):
        self.verdicts[pair] = handin.judge_and_log(self.sides, pair, top=self.top, comparison=comparison, **kw)
        return self.verdicts[pair]

    def forward(self, torch_model, paddle_model, inputs, name_map=None, layouts=None, isolate=True,
                convert: bool = True):
        """Step 1: compare_forward (every module, cumulative and with isolate= each on torch's own input) and the
        guide's forward pair (the model's output), handed in with its picture and page. Both models are put in
        eval mode. Returns the ForwardReport."""
        from portcheck.forward.compare import compare_forward, record_forward
        if name_map is not None or layouts is not None:
            self._map = name_map, layouts
        self._ported(torch_model, paddle_model, inputs, convert)
        name_map, layouts = self._map
        torch_model.eval(), paddle_model.eval()
        report = compare_forward(torch_model, paddle_model, inputs, name_map=name_map, isolate=isolate,
                                 layouts=layouts)
        batch = record.fingerprint(_named(inputs))
        handin.check_outputs(self.sides, ["forward"], self.top)
        for side, model in zip(SIDES, (torch_model, paddle_model)):
            rec = record_forward(model, inputs)
            exact = {"logits": handin.model_output(rec, exact=True)} if side == "torch" else None
            handin.save_side(self.sides, "forward", side, {"logits": handin.model_output(rec)},
                             {"inputs": batch, "weights": self._weights(model)}, self.script, exact=exact)
        self._judge("forward", comparison=report)
        return report

    def data(self, torch_loader, paddle_loader, batches: int = 3, names=None):
        """Step 2's data pair: the first `batches` batches each side's own loader gives, judged exactly.
        Returns the DataReport (the first differing batch, key and index)."""
        records = [data.record_batches(loader, batches=batches, names=names)
                   for loader in (torch_loader, paddle_loader)]
        handin.check_outputs(self.sides, ["data"], self.top)
        for side, batch in zip(SIDES, records):  # each side's record binds its own batches: the pair is the check
            handin.save_side(self.sides, "data", side, batch, {"batches": batches}, self.script)
        self._judge("data")
        return data.judge_batches(*records)

    def metric(self, metric, predictions, labels):
        """Step 2's metric pair: each side's metric (a pair, or one function both sides call with their own
        framework's tensors) on the same predictions and labels, judged exactly. Returns the verdict."""
        fns = _pair(metric, "metric")
        depends = {"inputs": record.fingerprint([("predictions", data.to_numpy(predictions, "predictions")),
                                                 ("labels", data.to_numpy(labels, "labels"))])}
        values = [data.record_metric(fn, predictions, labels, framework=side) for side, fn in zip(SIDES, fns)]
        handin.check_outputs(self.sides, ["metric"], self.top)
        for side, value in zip(SIDES, values):
            handin.save_side(self.sides, "metric", side, value, depends, self.script)
        return self._judge("metric")

    def loss(self, torch_model, paddle_model, inputs, targets, loss, convert: bool = True):
        """Step 3: each side's loss (loss=(torch's, Paddle's), called as loss(output, targets) with that side's
        tensors) on its own model's output in eval mode, within torch's own fp32 error. Returns the verdict."""
        import paddle
        import torch

        from portcheck.forward.compare import record_value
        fns = _pair(loss, "loss")
        self._ported(torch_model, paddle_model, inputs, convert)
        y = data.to_numpy(targets, "targets")
        batch = record.fingerprint(_named(inputs) + [("targets", y)])
        t = record_value(torch_model.eval(), inputs, lambda out: fns[0](out, torch.from_numpy(y)))
        p = record_value(paddle_model.eval(), inputs, lambda out: fns[1](out, paddle.to_tensor(y)))
        handin.check_outputs(self.sides, ["loss"], self.top)
        for side, model, value in (("torch", torch_model, t), ("paddle", paddle_model, p)):
            handin.save_side(self.sides, "loss", side, {"loss": value["value"]},
                             {"inputs": batch, "weights": self._weights(model)}, self.script,
                             exact={"loss": value["f64:value"]} if side == "torch" else None)
        return self._judge("loss")

    def backward(self, torch_model, paddle_model, inputs, targets, loss, optimizer, scheduler=None,
                 steps: int = 4, flags=None, convert: bool = True):
        """Step 4: `steps` optimizer steps on one batch on each side (record_backward: loss=, optimizer= and
        scheduler= are (torch's, Paddle's) factories; Paddle's scheduler None: the LRScheduler its optimizer
        was built with), judged with torch's run taking Paddle's side of a ReLU kink where one was crossed; the
        guide's lr and bp_align pairs handed in with the tables. Dropout off is the caller's (p=0 or eval).
        flags: every setting both sides share, bound in the run records. Returns the BackwardReport."""
        from portcheck.gradients import backward
        from portcheck.gradients.backward import record_backward
        from portcheck.gradients.backward import HELD
        loss, optimizer = _pair(loss, "loss"), _pair(optimizer, "optimizer")
        scheduler = (None, None) if scheduler is None else _pair(scheduler, "scheduler")
        scheduler = scheduler[0], HELD if scheduler[0] is not None and scheduler[1] is None else scheduler[1]
        self._ported(torch_model, paddle_model, inputs, convert)
        y = data.to_numpy(targets, "targets")
        depends = {"inputs": record.fingerprint(_named(inputs) + [("targets", y)]),
                   "flags": {"steps": steps, **dict(flags or {})}}
        weights = [self._weights(m) for m in (torch_model, paddle_model)]  # before the steps change them
        start = copy.deepcopy(torch_model.state_dict())
        t = record_backward(torch_model.train(), inputs, y, loss[0], optimizer[0], scheduler[0], steps)
        p = record_backward(paddle_model.train(), inputs, y, loss[1], optimizer[1], scheduler[1], steps)
        handin.check_outputs(self.sides, ["lr", "bp_align"], self.top)
        for side, rec, w in zip(SIDES, (t, p), weights):
            wide = side == "torch"
            for pair, arrays in (("lr", lambda exact: handin.per_step(rec, "lr", exact=exact)),
                                 ("bp_align", lambda exact: handin.bp_align(rec, exact=exact))):
                handin.save_side(self.sides, pair, side, arrays(False), {**depends, "weights": w}, self.script,
                                 exact=arrays(True) if wide else None)

        def again(crossed):  # torch's run once more from the same weights, on Paddle's side of each kink crossed
            torch_model.load_state_dict(start)
            return record_backward(torch_model, inputs, y, loss[0], optimizer[0], scheduler[0], steps,
                                   crossed=crossed)
        report = backward.judged(t, p, again=again)
        self._judge("lr")
        self._judge("bp_align", comparison=report, tables=report.table().splitlines(), after_steps=True)
        return report

    def training(self, torch_model, paddle_model, order, seeds: dict, flags: dict, inputs=None) -> tuple:
        """Step 5's two logs, each bound to its model's weights now (call it before the first step), the data
        order (each epoch's sample indices, or their fingerprint), the seeds and the flags: (torch's, Paddle's).
        In each side's loop: log.step(loss, lr, model=model, batch=labels) after each optimizer step, and
        log.evaluate(metrics) after each evaluation; then steps.train(*logs)."""
        if inputs is not None:
            self._ported(torch_model, paddle_model, inputs, True)
        elif self.port is None:
            raise PipelineError("steps.training: no conversion yet: give inputs= (a batch both models take: Paddle's "
                                "weights are set to torch's) or call an earlier step first [PC161]")
        logs = tuple(training.TrainingLog() for _ in SIDES)
        for log, model in zip(logs, (torch_model, paddle_model)):
            log.depends = training.run_depends(self._weights(model), order, seeds, flags)
        return logs

    def train(self, torch_log, paddle_log, own=()):
        """Step 5: both logs saved and judged (the final metric within the guide's 0.15%, the curves step by step,
        a cause named where they part). Returns the TrainingVerdict."""
        for side, log in zip(SIDES, (torch_log, paddle_log)):
            if getattr(log, "depends", None) is None:
                raise PipelineError(f"steps.train: the {side} log was not made by steps.training(...), which binds "
                                    "it to its model's weights, the data order, seeds and flags [PC162]")
        for side, log in zip(SIDES, (torch_log, paddle_log)):
            log.save(self.sides, side, log.depends, self.script)
        result = training.judge_and_log(self.sides, top=self.top, own=own)
        self.verdicts["train_align"] = result.verdict  # its passed holds the curves' too
        return result
