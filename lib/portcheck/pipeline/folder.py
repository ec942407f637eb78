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
picture, the page; Step 4's whole records) to the hand-in, which `python -m portcheck check <folder>` re-derives. It
returns the report it made; `steps.verdicts` holds each pair's verdict, `print(steps)` says them, `steps.html(path)`
shows them as one page (each step's own page beneath). Each step that takes both models first sets Paddle's weights
to torch's (portcheck.convert, pairing as the first conversion's name_map and layouts), unless convert=False; each
side's run record binds that side's own weights under torch's names (`steps.port`), so a Paddle model holding other
weights is never the same run.
"""
import copy
import sys
from pathlib import Path

from portcheck.core import page, record, report
from portcheck.core.errors import PipelineError
from portcheck.core.report import DIAGNOSTICS
from portcheck.core.tolerances import GUIDE
from portcheck.pipeline import bound_page, data, handin, training, whole
from portcheck.pipeline.whole import compared_beside

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


MODELS = (("torch_model", "named_modules", "a torch.nn.Module"), ("paddle_model", "named_sublayers", "a paddle.nn.Layer"))


def _models(step: str, torch_model, paddle_model):
    """Each side's model as its framework's module, before a step touches either: a string or the sides swapped
    stopped deep in the conversion, naming neither (a Paddle Layer has named_modules too, a torch Module no
    named_sublayers)."""
    for (what, has, want), model in zip(MODELS, (torch_model, paddle_model)):
        other = callable(getattr(model, "named_sublayers", None)) if what == "torch_model" else False
        if not callable(getattr(model, has, None)) or not callable(getattr(model, "state_dict", None)) or other:
            given = report.one_line(repr(model))[:60] if isinstance(model, (str, bytes, Path)) else ""
            raise PipelineError(f"steps.{step}: {what} is a {type(model).__name__}{f' ({given})' if given else ''}, "
                                f"not {want}: pass torch's model, then Paddle's [PC971]")


class Handin(page.Viewable):
    """A hand-in folder (`log_reprod/`), filled one step at a time. folder: the hand-in; sides: where each side's
    results and run records go before they are judged (default: `<folder>_sides` beside it). Its page
    (html(path), a notebook's _repr_html_; left as diagnostics/report.html after each step) shows every step's
    verdict and each step's own page beneath."""

    def __init__(self, folder="log_reprod", sides=None):
        self.top = Path(folder)
        self.sides = Path(sides) if sides is not None else self.top.with_name(self.top.name + "_sides")
        self.script = Path(sys.argv[0]).name or "python"  # the run records' script: the one calling
        self.port, self.verdicts, self.plots, self._map = None, {}, {}, (None, None)
        self.shown = {}  # {pair: what its page shows: its verdict, and its comparison (or the training's verdict)}
        self._half = Side(self.sides, weights=self._weights, whole=False)  # what each side saves, as a script's

    def __repr__(self) -> str:
        return "\n".join(f"{pair}: {v.describe_measured()}" + "".join(f"\n{pair}: {line}" for line in
                                                                        v.also_lines(red_only=True)) +
                         (f"\n{self.plots[pair]}" if self.plots.get(pair) else "")
                         for pair, v in self.verdicts.items()) or f"Handin({str(self.top)!r}): no step judged yet"

    @property
    def passed(self) -> bool:
        """Every step judged so far green (and at least one judged)."""
        return bool(self.verdicts) and all(v.passed for v in self.verdicts.values())

    def convert(self, torch_model, paddle_model, inputs, name_map=None, layouts=None):
        """Paddle's weights set to torch's (portcheck.convert, every key checked), kept as `steps.port`: the
        conversion every later run record fingerprints each side's weights under. Called by the first step that
        needs it; call it yourself to pass a name_map or layouts."""
        from portcheck.mapping.convert import convert
        _models("convert", torch_model, paddle_model)
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
        page.writable_page(self._page)  # before anything is judged: never over a file of the user's
        self.verdicts[pair] = handin.judge_and_log(self.sides, pair, comparison=comparison,
                                                   also=compared_beside(comparison), **kw)
        self.plots[pair] = handin.hand_in(self.sides, pair, self.top, comparison)  # "plot: <its picture>" or ""
        self.shown[pair] = [self.verdicts[pair], *([comparison] if comparison is not None else [])]
        bound_page.write(self.view(), self.top)
        return self.verdicts[pair]

    @property
    def _page(self):
        return bound_page.path(self.top)

    def view(self) -> dict:
        """The page's data (portcheck.core.page): each step's verdict (its pair's rules, one line each), then each
        step's own page beneath (its pair's keys; Step 1's module tree, Step 4's gradients and steps, Step 5's
        curves); the first red step whose own page marks where the runs part has that module marked and named."""
        verdicts, sections, marking = [], [], None
        for pair, verdict in self.verdicts.items():
            views = [shown.view() for shown in self.shown.get(pair, [verdict])]
            marks = next((v for v in views if v.get("first")), None) if not verdict.passed else None
            if marking is None and marks is not None:
                marking = marks
            step = f"Step {GUIDE[pair].step} {pair}" if pair in GUIDE else pair
            verdicts.append({"name": pair, "passed": verdict.passed, "text": "\n".join(
                [f"{step}: {'green' if verdict.passed else 'RED'}"] + [f"  {v['text']}" for v in views[0]["verdicts"]])})
            for v in views:  # one mark on the page: the first red step's
                sections += [{**s, "title": f"{step}: {s['title']}", **({"first": None} if v is not marking else {})}
                             for s in v["sections"]]
        red = [p for p, v in self.verdicts.items() if not v.passed]
        headline = (f"red at {', '.join(red)}" if red else f"every step green ({', '.join(self.verdicts)})"
                    if self.verdicts else "no step judged yet")
        return {"title": f"portcheck.Handin {self.top.name}", "passed": self.passed, "headline": headline,
                "first": (marking or {}).get("first"), "first_call": (marking or {}).get("first_call"),
                "verdicts": verdicts, "sections": sections}

    def judge(self, *pairs):
        """The split form's check: judge the pairs each side's script saved into `sides` (portcheck.Side), every
        pair both saved when none is named, the whole records drawn where a side saved them (the forward's every
        module, the backward's steps). Returns {pair: verdict}."""
        from portcheck.core.fileio import load_npy
        from portcheck.forward.compare import judge_forward
        from portcheck.gradients import backward
        saved = [p for p in ("forward", "data", "metric", "loss", "lr", "bp_align")
                 if all((self.sides / f"{p}_{side}.npy").is_file() for side in SIDES)]
        pairs = list(pairs) or saved
        if not pairs or set(pairs) - set(saved):
            missing = sorted(set(pairs) - set(saved)) if pairs else ["any pair"]
            raise PipelineError(f"{self.sides}: no {', '.join(missing)} saved by both sides: run each side's script "
                                "(portcheck.Side) first [PC163]")
        handin.check_outputs(self.sides, pairs, self.top)
        for pair in pairs:
            files = [whole.path(self.sides, pair, side) for side in SIDES]
            comparison = None
            if pair in ("forward", "bp_align") and all(f.is_file() for f in files):
                records = [load_npy(f) for f in files]
                for side, path, rec in zip(SIDES, files, records):
                    problem = whole.same_as_pair(record.path_for(self.sides / f"{pair}_{side}.npy"), path, side, rec)
                    if problem:
                        raise PipelineError(f"{path}: not the run of {pair}_{side}.npy ("
                                            f"{report.one_line(problem)[:200]}): run the {side} side's script again "
                                            "[PC477]")
                comparison = judge_forward(*records) if pair == "forward" else backward.judged(*records)
            extra = dict(after_steps=True) if pair == "bp_align" else {}
            if pair == "bp_align" and comparison is not None:
                extra["tables"] = comparison.table().splitlines()
            if pair == "data":  # the log names the first differing batch, key and index, as Handin.data's
                batches = data.judge_batches(*(load_npy(self.sides / f"data_{side}.npy") for side in SIDES))
                extra = dict(tables=[batches.line()])
            self._judge(pair, comparison=comparison, **extra)
        return {pair: self.verdicts[pair] for pair in pairs}

    def forward(self, torch_model, paddle_model, inputs, name_map=None, layouts=None, isolate=True,
                convert: bool = True):
        """Step 1: compare_forward (every module, cumulative and with isolate= each on torch's own input) and the
        guide's forward pair (the model's output, from compare_forward's own runs: each model run once), handed in
        with its picture and page. Both models are put in eval mode. Returns the ForwardReport."""
        _models("forward", torch_model, paddle_model)
        from portcheck.forward.compare import compare_forward
        if name_map is not None or layouts is not None:
            self._map = name_map, layouts
        self._ported(torch_model, paddle_model, inputs, convert)
        name_map, layouts = self._map
        torch_model.eval(), paddle_model.eval()
        kept = {}  # the guide's pair: compare_forward's own runs' model outputs, as record_forward's records hold them
        report = compare_forward(torch_model, paddle_model, inputs, name_map=name_map, isolate=isolate,
                                 layouts=layouts, kept=kept)
        handin.check_outputs(self.sides, ["forward"], self.top)
        for side, model in zip(SIDES, (torch_model, paddle_model)):
            if side in kept:
                self._half._forward(model, inputs, kept[side], whole=False)
            else:  # a run it kept nothing of (it stopped; torch's float64 run made again): record_forward's own
                self._half.forward(model, inputs)
        self._judge("forward", comparison=report)
        return report

    def generate(self, torch_model, paddle_model, input_ids, max_new_tokens: int = 8, attention_mask=None,
                 threshold: float = None, convert: bool = True, **kw):
        """Generation's pair: compare_generate (kw: its other arguments) and the `generate` pair, each side's greedy
        choice at every step (tokens [steps, batch]) and its next token's logits (logits [steps, batch, vocab])
        from the decoding compare_generate ran, torch's float64 twin's logits beside them; each side's run record
        binds the prompt, the tokens fed (torch's) and its own weights. Judged as the guide's pairs are, by the
        measured rule and the guide's rule on each key's mean (threshold: default reprod_log's), the report's lines
        in its diff log. Both models are put in eval mode. Returns the GenerateReport."""
        import numpy as np
        from portcheck.generation.generate import checked, compare_generate
        ids, mask, n = checked(input_ids, max_new_tokens, attention_mask)
        self._ported(torch_model, paddle_model, {"input_ids": ids}, convert)
        torch_model.eval(), paddle_model.eval()
        kept = {}
        report = compare_generate(torch_model, paddle_model, ids, n, attention_mask=mask, kept=kept, **kw)
        handin.check_outputs(self.sides, ["generate"], self.top)
        fed = np.asarray(kept["torch"].chosen, np.int64).reshape(-1, ids.shape[0])
        named = [("input_ids", ids), ("fed", fed), *([("attention_mask", mask)] if mask is not None else [])]
        for side, model in zip(SIDES, (torch_model, paddle_model)):
            ran = kept[side]  # a side that stopped saves the steps it ran: the shapes then differ, red
            arrays = {"tokens": np.asarray(ran.chosen, np.int64).reshape(-1, ids.shape[0])}
            if ran.logits:
                arrays["logits"] = np.stack(ran.logits)
            # torch's tokens are integers its float64 run holds as they are; its logits, the twin's
            exact = {"tokens": arrays["tokens"], **({"logits": np.stack(kept["twin"].logits)}
                                                     if kept["twin"].logits else {})} if side == "torch" else None
            depends = {"inputs": record.fingerprint(named), "weights": self._weights(model),
                       "flags": {"new_tokens": n}}
            self._half._save("generate", side, arrays, depends, exact)
        self._judge("generate", threshold=threshold, tables=report.lines())
        return report

    def data(self, torch_loader, paddle_loader, batches: int = 3, names=None):
        """Step 2's data pair: the first `batches` batches each side's own loader gives (or each of its {name:
        loader}, as Side.data), judged exactly.
        Returns the DataReport (the first differing batch, key and index, said in the pair's diff log too)."""
        records = [_batches_of(_loaders(loader), batches, names) for loader in (torch_loader, paddle_loader)]
        handin.check_outputs(self.sides, ["data"], self.top)
        for side, batch in zip(SIDES, records):
            self._half._batches(batch, side, batches)
        report = data.judge_batches(*records)
        self._judge("data", tables=[report.line()])  # the log names the first differing batch, key and index
        return report

    def metric(self, metric, predictions, labels):
        """Step 2's metric pair: each side's metric (a pair, or one function both sides call with their own
        framework's tensors) on the same predictions and labels, judged exactly. Returns the verdict."""
        fns = _pair(metric, "metric")
        handin.check_outputs(self.sides, ["metric"], self.top)
        for side, fn in zip(SIDES, fns):
            self._half.metric(fn, predictions, labels, framework=side)
        return self._judge("metric")

    def loss(self, torch_model, paddle_model, inputs, targets, loss, convert: bool = True):
        """Step 3: each side's loss (loss=(torch's, Paddle's), called as loss(output, targets) with that side's
        tensors) on its own model's output in eval mode, within torch's own fp32 error. Returns the verdict."""
        _models("loss", torch_model, paddle_model)
        fns = _pair(loss, "loss")
        self._ported(torch_model, paddle_model, inputs, convert)
        handin.check_outputs(self.sides, ["loss"], self.top)
        for model, fn in zip((torch_model, paddle_model), fns):
            self._half.loss(model.eval(), inputs, targets, fn)
        return self._judge("loss")

    def backward(self, torch_model, paddle_model, inputs, targets, loss, optimizer, scheduler=None,
                 steps: int = 4, flags=None, convert: bool = True):
        """Step 4: `steps` optimizer steps on one batch on each side (record_backward: loss=, optimizer= and
        scheduler= are (torch's, Paddle's) factories; Paddle's scheduler None: the LRScheduler its optimizer
        was built with), judged with torch's run taking Paddle's side of a ReLU kink where one was crossed; the
        guide's lr and bp_align pairs handed in with the tables, and each side's whole record (torch's as judged,
        whole.as_judged) in diagnostics/records/, which the reviewer's check judges again. Dropout off is the caller's
        (p=0 or eval).
        flags: every setting both sides share, bound in the run records. Returns the BackwardReport."""
        _models("backward", torch_model, paddle_model)
        from portcheck.gradients import backward
        from portcheck.gradients.recording import HELD, record_backward
        loss, optimizer = _pair(loss, "loss"), _pair(optimizer, "optimizer")
        scheduler = (None, None) if scheduler is None else _pair(scheduler, "scheduler")
        scheduler = scheduler[0], HELD if scheduler[0] is not None and scheduler[1] is None else scheduler[1]
        self._ported(torch_model, paddle_model, inputs, convert)
        y = data.to_numpy(targets, "targets")
        handin.check_outputs(self.sides, ["lr", "bp_align"], self.top)
        start = copy.deepcopy(torch_model.state_dict())
        t, p = (self._half._backward(model.train(), inputs, y, *parts, steps, flags)[1]
                for model, *parts in zip((torch_model, paddle_model), loss, optimizer, scheduler))

        def again(crossed):  # torch's run once more from the same weights, on Paddle's side of each kink crossed
            torch_model.load_state_dict(start)
            return record_backward(torch_model, inputs, y, loss[0], optimizer[0], scheduler[0], steps,
                                   crossed=crossed)
        judged_on = {}  # torch's record as judged (with its runs across a kink): what the reviewer's check judges
        report = backward.judged(t, p, again=again, keep=lambda rec: judged_on.update(torch=rec))
        self._keep_whole("bp_align", {"torch": whole.as_judged(t, judged_on["torch"]), "paddle": p})
        self._judge("lr")
        self._judge("bp_align", comparison=report, tables=report.table().splitlines(), after_steps=True)
        return report

    def _keep_whole(self, pair: str, records: dict):
        """Each side's whole record behind a pair, kept in `sides` with a run record binding what the pair's binds, so
        the hand-in carries it (whole.hand_in) and the reviewer's check judges it; none kept over whole.WHOLE_BYTES."""
        if not all(whole.fits(rec) for rec in records.values()):
            return
        for side, rec in records.items():
            own = record.load(self.sides / f"{pair}_{side}.npy")
            self._half._save_whole(pair, side, rec, own["depends"])

    def training(self, torch_model, paddle_model, order, seeds: dict, flags: dict, inputs=None) -> tuple:
        """Step 5's two logs, each bound to its model's weights now (call it before the first step), the data
        order (each epoch's sample indices, or their fingerprint), the seeds and the flags: (torch's, Paddle's).
        In each side's loop: log.step(loss, lr, model=model, batch=labels) after each optimizer step, and
        log.evaluate(metrics) after each evaluation; then steps.train(*logs)."""
        _models("training", torch_model, paddle_model)
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
        page.writable_page(self._page)
        for side, log in zip(SIDES, (torch_log, paddle_log)):
            log.save(self.sides, side, log.depends, self.script)
        result = training.judge_and_log(self.sides, top=self.top, own=own)
        self.verdicts["train_align"] = result.verdict  # its passed holds the curves' too
        self.shown["train_align"] = [result]  # the pair's verdicts and the curves
        bound_page.write(self.view(), self.top)
        return result


class Side:
    """One side of the guide's split form: a pt_ script and a pd_ script each save their half into one folder,
    and a check judges the two (`Handin(top, sides=folder).judge()`). Each call takes that script's own model and
    framework; the run record binds the inputs and the model's tensors (record.weights_fingerprint: under any names),
    so the two halves are the same run only when the Paddle model holds the torch model's weights.

        side = portcheck.Side("work")            # in pt_x.py and in pd_x.py alike
        side.forward(model, x)                   # Step 1
        side.loss(model, x, y, loss_fn)          # Step 3
        side.backward(model, x, y, loss_fn, make_optimizer, make_scheduler, steps=4)   # Step 4
        side.data(loader); side.metric(fn, predictions, labels)                         # Step 2

    script: the name the run records give (default: the running script's). depends: what every run record binds,
    in place of the fingerprints each call takes (the inputs, the model's weights, backward's flags and steps): a
    dict both of a pipeline's scripts build alike, e.g. of the checkpoint both loaded and the batch, where its step
    table and earlier hand-ins bind those. forward and backward also keep each side's whole record with its run
    record: whole_record(pair, side).
    """

    def __init__(self, folder="work", weights=None, whole: bool = True, script: str = None, depends: dict = None):
        self.folder = Path(folder)
        self.script = script or Path(sys.argv[0]).name or "python"  # the run records' script
        # how a run record fingerprints its model's weights (a Handin's: under its conversion's names), and whether
        # each side's whole record is kept for Handin.judge (a Handin judges both in its own process)
        self.weights, self.whole = weights or record.weights_fingerprint, whole
        self.depends = None if depends is None else dict(depends)

    def whole_record(self, pair: str, side: str) -> Path:
        """<folder>/records/<pair>_<side>.npy: the side's whole record behind a pair (every module's output, the
        backward's steps), with a run record binding what the pair's binds."""
        return whole.path(self.folder, pair, side)

    def _bound(self, depends: dict) -> dict:
        return depends if self.depends is None else self.depends

    def _save_whole(self, pair: str, side: str, whole: dict, depends: dict) -> Path:
        from portcheck.core.fileio import save_npy, writable
        path = self.whole_record(pair, side)
        writable(path), writable(record.path_for(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        save_npy(path, whole)
        record.save(path, side, self.script, self._bound(depends))
        return path

    def _save(self, pair: str, side: str, arrays: dict, depends: dict, exact=None, whole=None):
        if whole is not None and self.whole:
            self._save_whole(pair, side, whole, depends)
        return handin.save_side(self.folder, pair, side, arrays, self._bound(depends), self.script,
                                exact=exact if side == "torch" else None)

    def forward(self, model, inputs):
        """The model's every module on `inputs` (record_forward; torch's also in float64) and the guide's forward
        pair. Eval or train mode is the caller's."""
        from portcheck.forward.compare import record_forward
        return self._forward(model, inputs, record_forward(model, inputs))

    def _forward(self, model, inputs, rec: dict, whole: bool = True):
        """forward's pair from `rec`, record_forward's record of `model` on `inputs`, or (whole=False) its model
        output alone (compare_forward's kept=), kept as no whole record."""
        from portcheck.mapping.trace import STOPPED, framework_of, stopped
        side = framework_of(model)
        depends = {"inputs": record.fingerprint(_named(inputs)), "weights": self.weights(model)}
        if stopped(rec):  # what ran is kept: judged against the other side's, it names where the two models part
            from portcheck.core.fileio import MAX_KEY_LENGTH
            # the error's line cut to a key a record may hold (a Paddle error's first line runs to 300 characters)
            kept = {report.one_line(k)[:MAX_KEY_LENGTH] if k.startswith(STOPPED) else k: v for k, v in rec.items()}
            path = self._save_whole("forward", side, kept, depends)
            raise PipelineError(f"the {side} model stopped ({report.one_line(stopped(rec))[:200]}); the modules that "
                                f"ran are in {path}: judge them against the other side's to name the module where "
                                "the two models part [PC475]")
        return self._save("forward", side, {"logits": handin.model_output(rec)}, depends,
                          {"logits": handin.model_output(rec, exact=True)} if side == "torch" else None,
                          rec if whole else None)

    def loss(self, model, inputs, targets, loss):
        """loss(output, targets) on the model's output, targets as this framework's tensor (Step 3)."""
        from portcheck.forward.compare import record_value
        from portcheck.mapping.trace import framework_of
        side = framework_of(model)
        y = data.to_numpy(targets, "targets")
        tensor = _to_tensor(side)
        value = record_value(model, inputs, lambda out: loss(out, tensor(y)))
        depends = {"inputs": record.fingerprint(_named(inputs) + [("targets", y)]), "weights": self.weights(model)}
        return self._save("loss", side, {"loss": value["value"]}, depends,
                          {"loss": value.get("f64:value")} if side == "torch" else None)

    def backward(self, model, inputs, targets, loss, optimizer, scheduler=None, steps: int = 4, flags=None):
        """`steps` optimizer steps on one batch (record_backward: optimizer(parameters), scheduler(optimizer); a
        Paddle optimizer built with an LRScheduler: scheduler=None steps it), and the guide's lr and bp_align pairs.
        Dropout off is the caller's."""
        from portcheck.mapping.trace import framework_of
        from portcheck.gradients.recording import HELD
        if framework_of(model) == "paddle" and scheduler is None:
            scheduler = HELD if _holds_scheduler(model, optimizer) else None
        return self._backward(model, inputs, targets, loss, optimizer, scheduler, steps, flags)[0]

    def _backward(self, model, inputs, targets, loss, optimizer, scheduler, steps: int, flags) -> tuple:
        """backward's steps and pairs, its scheduler as given: (bp_align's path, the record)."""
        from portcheck.mapping.trace import framework_of
        from portcheck.gradients.recording import record_backward
        side = framework_of(model)
        y = data.to_numpy(targets, "targets")
        depends = {"inputs": record.fingerprint(_named(inputs) + [("targets", y)]),
                   "flags": {**dict(flags or {}), "steps": steps}, "weights": self.weights(model)}
        rec = record_backward(model, inputs, y, loss, optimizer, scheduler, steps)
        self._save("lr", side, handin.per_step(rec, "lr"), depends, handin.per_step(rec, "lr", exact=True))
        return self._save("bp_align", side, handin.bp_align(rec), depends, handin.bp_align(rec, exact=True),
                          rec), rec

    def data(self, loader, batches: int = 3, names=None, framework: str = None):
        """The first `batches` batches this side's own loader gives (Step 2's data pair), or of each loader of
        {name: loader} (a training and a test loader: one pair, each's keys under "<name>/"). framework: "torch" or
        "paddle" (default: read off the loader's type)."""
        loaders = _loaders(loader)
        return self._batches(_batches_of(loaders, batches, names),
                             framework or _framework_of_loader(next(iter(loaders.values()))), batches)

    def _batches(self, batch: dict, side: str, batches: int):
        return self._save("data", side, batch, {"batches": batches})  # the pair itself is the check of the data

    def metric(self, metric, predictions, labels, framework: str):
        """metric(predictions, labels) with this framework's tensors (Step 2's metric pair)."""
        value = data.record_metric(metric, predictions, labels, framework=framework)
        depends = {"inputs": record.fingerprint([("predictions", data.to_numpy(predictions, "predictions")),
                                                 ("labels", data.to_numpy(labels, "labels"))])}
        return self._save("metric", framework, value, depends)


def _to_tensor(side: str):
    if side == "torch":
        import torch
        return torch.from_numpy
    import paddle
    return paddle.to_tensor


def _holds_scheduler(model, optimizer) -> bool:
    """Whether a Paddle optimizer factory builds an optimizer on an LRScheduler (which record_backward then steps)."""
    import paddle
    opt = optimizer(model.parameters())
    return isinstance(getattr(opt, "_learning_rate", None), paddle.optimizer.lr.LRScheduler)


def _loaders(loader) -> dict:
    """{prefix: loader}: one loader's keys bare, each of {name: loader}'s under "<name>/"."""
    if not isinstance(loader, dict):
        return {"": loader}
    if not loader:
        raise PipelineError("data: an empty {name: loader}: give a loader, or a name and a loader for each [PC476]")
    return {f"{name}/": each for name, each in loader.items()}


def _batches_of(loaders: dict, batches: int, names) -> dict:
    out = {}
    for prefix, loader in loaders.items():
        out.update(data.record_batches(loader, batches=batches, names=names, prefix=prefix))
    return out


def _framework_of_loader(loader) -> str:
    module = type(loader).__module__
    if module.startswith("torch"):
        return "torch"
    if module.startswith("paddle"):
        return "paddle"
    raise PipelineError(f"Side.data: a {type(loader).__name__} is neither torch's nor Paddle's loader: give "
                        "framework='torch' or 'paddle' [PC164]")
