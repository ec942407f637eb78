"""BackwardReport: compare_backward's and judge_backward's result (the first forward, every gradient, each step's
rows, the kinks crossed), its verdict, where the runs part, its table, frame and plot.

May import portcheck.core, portcheck.forward and portcheck.gradients.kinks.
"""
from dataclasses import dataclass, field

from portcheck.core import calibrated, page, tolerances
from portcheck.core.diff import NOT_JUDGED, first_diverging
from portcheck.core.report import format_table
from portcheck.forward.result import ForwardReport, unjudged_lines
from portcheck.gradients.kinks import crossing_lines

# the loss rows' bound on the mean abs diff unless the caller gives one: the guide's bp_align threshold (losses
# over optimizer steps are its pair)
LOSS_MEAN_BOUND = tolerances.GUIDE["bp_align"].threshold


STATISTICS = (".running_mean", ".running_var")  # BatchNorm's running statistics' rows, by torch's names

LAST = " (after the last step)"  # a weight's row name after the last step, where no earlier step records it


@dataclass
class BackwardReport(page.Viewable):
    forward: ForwardReport = None                 # every module's output in the first step's forward
    grads: list = field(default_factory=list)    # [diff.KeyResult] per parameter, in forward order
    steps: list = field(default_factory=list)    # [[diff.KeyResult] per step: loss, lr, statistics (weights: last)]
    crossed: list = field(default_factory=list)  # [Crossing] in step order: a forward's values on each side of 0
    taken: bool = False                          # torch's run taking Paddle's side of them is in the record
    taking: dict = field(default_factory=dict)   # {record key: max |torch's run - that run|}: a hand-in carries it
    isolated: bool = False                       # each step started both sides from torch's weights
    by_design: list = field(default_factory=list)  # lines: a difference the two optimizers make on purpose
    on_branch: bool = False  # judged against torch's run taking Paddle's branch at the first forward's kinks
    branch: dict = field(default_factory=dict)  # {record key: that run's value}: a hand-in carries it (handin.BRANCH)
    # [(torch module, class, values per channel, the least judged)]: a BatchNorm in training over too few values
    few_values: list = field(default_factory=list)
    routing: dict = field(default_factory=dict)  # {step >= 1: [routing.Routing] of that step's forward}
    # {step: the earlier step whose forward's routing tie reaches it}: that step's routing read, not judged
    reached: dict = field(default_factory=dict)

    def judge_routing(self):
        """Each step's routing (self.routing, the first forward's in self.forward.routing) made rows: tokens sent to
        other experts, a red row at the router first in that step's rows; a tie broken otherwise makes every red
        value it reaches not judged, never red (the gradients and each step's values from that forward on; isolated,
        that step's alone: the next starts again from torch's weights). Where the runs differ before that forward (a
        red value before it; isolated, the first forward red), a token sent elsewhere is no tie: it is red."""
        from portcheck.forward.routing import TIED
        first = self.forward is not None and not self.forward.passed and not self.forward.tied_only
        tied = [r for r in (self.forward.routing if self.forward is not None else []) if r.flipped and not r.red]
        ties = {0: tied[0]} if tied else {}
        for i, routed in sorted(self.routing.items()):
            if ties and not self.isolated:  # reached by a tie before it: not judged, its lines said so
                self.reached.update(dict.fromkeys([k for k in self.routing if k >= i], min(ties)))
                break
            earlier = [r for r in [*self.grads, *(x for rows in self.steps[:i] for x in rows)]
                       if not r.passed and r.judged] if not self.isolated else []
            if first or earlier:  # the runs differ before this forward: its tokens sent elsewhere are no tie
                for r in routed:
                    r.differing, r.flipped, r.tied = sorted(r.differing + r.flipped), [], 0
            red = [r for r in routed if r.red or r.unread]  # a choice not read compared less: never green
            self.steps[i][:0] = [calibrated.unjudged(f"routing at {r.router}", (), r.line(self.forward.both, i))
                                 for r in red]
            if not red and any(r.flipped for r in routed):
                ties[i] = next(r for r in routed if r.flipped)
        # every value from that forward on, within or not: the allowance there is no measure either (torch's run
        # against itself, its weights moved one ulp, may break the tie otherwise: on one CPU its spread then holds
        # the other experts' difference, and Paddle's other choice was within it); the lr no forward reaches
        reached = lambda row: row.judged and row.name != "lr"
        for step, r in ties.items():
            why = (f"{TIED} {len(r.flipped)} token(s) at a tie of {r.router}'s logits in step {step + 1}'s forward, "
                   "broken otherwise by the two sides, reach it (routing)")
            if step == 0:
                self.grads = [calibrated.unjudged(g.name, g.shape, why) if reached(g) else g for g in self.grads]
            for i in range(step, step + 1 if self.isolated else len(self.steps)):
                self.steps[i] = [calibrated.unjudged(x.name, x.shape, why) if reached(x) else x for x in self.steps[i]]

    @property
    def tied_only(self) -> str:
        """The first routing tie broken otherwise (its line) where nothing but such ties keeps the report from green
        (judge_routing): not judged, never red; "" otherwise."""
        from portcheck.forward.routing import TIED
        forward = self.forward.routing if self.forward is not None else []
        ties = [r.line(self.forward.both) for r in forward if r.flipped] + \
            [r.line(self.forward.both, i) for i, routed in sorted(self.routing.items()) for r in routed if r.flipped]
        rows = [*self.grads, *(r for rows in self.steps for r in rows)]
        clean = self.forward is None or self.forward.passed or self.forward.tied_only
        return ties[0] if ties and clean and not self.passed and all(
            r.passed or r.problem.startswith(TIED) or r.beyond(LOSS_MEAN_BOUND) for r in rows) else ""

    @property
    def kinks(self) -> list:
        """The first forward's crossings: at a ReLU after them the first backward takes another branch."""
        return [c for c in self.crossed if c.step == 0]

    @property
    def passed(self) -> bool:
        """Every value within its rule, and no step's forward routed a token otherwise at a tie (what follows it is
        not judged: never green)."""
        return (self.forward is None or self.forward.passed) and all(r.passed for r in self.grads) \
            and all(r.passed or r.beyond(LOSS_MEAN_BOUND) for rows in self.steps for r in rows) \
            and not any(r.flipped for routed in self.routing.values() for r in routed)

    @property
    def cannot_judge(self) -> list:
        """One line per BatchNorm in training over too few values per channel (few_values) where only what its
        gradients reach is red: the gradients and what the steps make of them. Never passed: it compared less than
        asked. A difference the first forward, the first step's loss, an lr or the running statistics one forward
        makes (after step 1; isolated, after every step) show stays red: none of them goes through a gradient, but
        a forward red only at and after the first such BatchNorm (_forward_noise). The
        first step's loss red by the guide's bound on its mean alone, its max within the measured rule and the
        forward within its own, is that forward's noise through the same BatchNorm (torchvision's densenet121 at
        32 x 32, batch 2: its mean 2.1e-2 from torch's over the bound 1e-2, its max a tenth of its allowance)."""
        if self.passed or not self.few_values or self.unjudged or \
                (self.forward is not None and not self.forward.passed and not self._forward_noise()):
            return []
        for i, rows in enumerate(self.steps):
            for r in rows:
                forward_only = r.name == "lr" or i == 0 and r.name == "loss" or (i == 0 or self.isolated) and \
                    r.name.endswith(STATISTICS)
                noise = i == 0 and r.name == "loss" and not r.problems and r.max_ok
                if forward_only and not (r.passed or r.beyond(LOSS_MEAN_BOUND) or noise):
                    return []
        return [f"cannot be judged: {module} ({kind} in training) normalises {n} values per channel; gradients "
                f"through it are rounding noise at this size; give at least {least} (batch x spatial) [PC177]"
                for module, kind, n, least in self.few_values]

    def _forward_noise(self) -> bool:
        """The first forward red only at and after the first of those BatchNorms in torch's run order, nothing
        before it and no problem (a shape, a NaN): over two values its output is +-d / sqrt(d^2 + eps), d the
        rounding of two values that almost agree (densenet121 at 32 x 32, batch 2, a correct port: 0.71 at
        denseblock4's seventh norm1, whose outputs are within 1, 33 x torch's own error). A bug there is not told
        from that; one before it stays red."""
        few = {module for module, *_ in self.few_values}
        for rows in filter(None, (self.forward.paired, self.forward.isolated)):
            first = next((i for i, r in enumerate(rows) if r.key.split("#")[0] in few), None)
            if first is None or any(not (r.passed or r.beyond(calibrated.MEAN_BOUND)) for r in rows[:first]) or \
                    any(r.problems for r in rows[first:]):
                return False
        return bool(self.forward.paired) and not self.forward.stopped and not self.forward.isolation_stopped

    @property
    def unjudged(self) -> list:
        """The values whose yardstick failed (torch's float64 twin overflowed where its float32 run did not): the
        first forward's, the gradients', each step's, in that order; red, and said as not judged, never as where
        the runs part."""
        return (self.forward.unjudged if self.forward is not None else []) + \
            [r for rows in [self.grads, *self.steps] for r in rows if not r.judged]

    @property
    def first_diverging(self):
        """Where the two runs part, first place first: a module of the first forward, else the first step's loss
        (computed from that forward, before any backward: a loss reduced otherwise on one side is named there, not
        at the gradients it scales), else a gradient in backward order, else the first key over after an optimizer
        step (every weight after step 1: an optimizer's bug is named at the parameters it moves)."""
        if self.forward is not None and self.forward.first_diverging:
            return self.forward.first_diverging
        loss = next((r for r in self.steps[0] if r.name == "loss"), None) if self.steps else None
        if loss is not None and not loss.passed and loss.judged and not loss.beyond(LOSS_MEAN_BOUND):
            return "loss after step 1"
        step = self.first_diverging_step
        return self.first_diverging_gradient or (f"{step[1].removesuffix(LAST)} after step {step[0] + 1}"
                                                 if step else None)

    @property
    def first_diverging_gradient(self):
        """The first gradient out of tolerance in backward order (the backward pass reaches parameters in
        reverse): a bug corrupts every gradient from its place back to the input, and this one is its place."""
        r = first_diverging(self.grads, reverse=True)
        return r.name if r else None

    @property
    def first_diverging_step(self):
        """(step, the first key over tolerance) after the optimizer's steps, or None. Step i's loss is computed
        from the weights step i - 1 left; a plain run records them after the first step and the last only, so from
        step 3 on a red loss shows weights that differ where the record does not hold them: there a weight (or
        statistic) red in the same step is named first, the parameter the runs part at, and the loss only when no
        weight is red at or before its step (an optimizer's momentum or beta named at the weights it moves, as the
        isolated steps name it). The lr, which makes the step's update, stays first."""
        return next(((i, r.name) for i, r in enumerate(self.first_in_step(i, True) for i in range(len(self.steps)))
                     if r), None)

    def first_in_step(self, i, verdict=False):
        """The row of step i where the runs part by first_diverging_step's order (the table and the plot mark it);
        verdict: of the rows the verdict reads (a loss red by the guide's bound alone that no port can meet is not)."""
        rows = [r for r in self.steps[i] if not verdict or r.passed or not r.beyond(LOSS_MEAN_BOUND)]
        if i >= 2 and not self.isolated:
            rows = [r for r in rows if r.name != "loss"] + [r for r in rows if r.name == "loss"]
        return first_diverging(rows)

    def plot(self, path) -> str:
        """A PNG at `path`: the first forward's modules, every gradient and every key after the last step, each
        over its allowance on a log scale, where the runs part marked (forward.plot); a line saying what was done."""
        from portcheck.forward import plot
        return plot.draw(plot.backward_panels(self), path)

    def frame(self):
        """The table as a pandas DataFrame (report.COLUMNS): the first forward's rows (ForwardReport.frame), a row
        per gradient after the first backward (part "gradient"), then per step a row per value after it: its
        loss, lr, statistics and, after the last step, every weight (part "step", step 1, 2, ...). Needs pandas."""
        from portcheck.core import report
        rows = self.forward.figures() if self.forward is not None else []
        rows += report.figures(self.grads, "gradient", first=first_diverging(self.grads, reverse=True))
        for i, step in enumerate(self.steps):
            rows += report.figures(step, "step", i + 1, self.first_in_step(i))
        return report.frame(rows)

    def view(self) -> dict:
        """The page's data (portcheck.core.page): the first forward's module tree, then each parameter's gradient
        and each step's values (its loss, lr, weights), worst first."""
        from portcheck.core import report
        first = self.first_diverging
        data = self.forward.view("compare_backward") if self.forward is not None else {
            "title": "compare_backward", "verdicts": [], "sections": []}
        forward_first = self.forward is not None and self.forward.first_diverging
        grad = None if forward_first else self.first_diverging_gradient
        step = None if forward_first or grad else self.first_diverging_step
        sections = [s for s in data["sections"] if s["kind"] == "tree"]
        sections.append({"kind": "table", "title": "gradients after the first backward, per parameter, worst first",
                         "rows": report.figures(self.grads, "gradient"), "first": grad})
        for i, rows in enumerate(self.steps):
            sections.append({"kind": "table", "title": f"after step {i + 1}: loss, lr and weights, worst first",
                             "rows": report.figures(rows, "step", i + 1),
                             "first": step[1] if step and step[0] == i else None})
        sections.append({"kind": "lines", "title": "the table", "lines": self.table().splitlines()})
        cannot = self.cannot_judge
        data.update(passed=self.passed, sections=sections,
                    first={"torch": str(first), "paddle": getattr(first, "paddle", str(first))} if first else None,
                    headline=cannot[0] if cannot else f"the runs part at {getattr(first, 'both', first)}" if first else
                    "every module, gradient and step within its rule" if self.passed else
                    f"not judged: {self.tied_only}" if self.tied_only else "red")
        verdict = "cannot be judged" if cannot else "not judged (routing tie)" if self.tied_only else \
            'green' if self.passed else 'RED'
        data["verdicts"] = [{"name": "backward", "passed": self.passed, "text": "first forward, gradients and "
                             f"{len(self.steps)} step(s), measured rule: {verdict}"}] + data["verdicts"]
        return data


    def table(self) -> str:
        lines = self.cannot_judge
        lines += ["the first forward, every module:", self.forward.table()] if self.forward is not None else []
        if self.on_branch or self.taken or not self.passed:  # a green run's values near 0 decide nothing
            lines += crossing_lines(self.crossed, self.on_branch, self.taken, self.first_diverging or "")
        lines += ["gradients after the first backward (forward order):"]
        lines += format_table(calibrated.HEADER,
                              calibrated.table_rows(self.grads, first_diverging(self.grads, reverse=True)))
        lines += unjudged_lines([r for r in self.grads if not r.judged])
        notes = {r.name: r.by_design for rows in self.steps for r in rows if r.by_design}
        lines += [f"{name}: {note}" for name, note in notes.items()]  # one line per module and rule
        lines += self.by_design
        tied = lambda i: f"{NOT_JUDGED} reached by the routing tie in step {self.reached[i] + 1}'s forward: "  # noqa
        lines += [(tied(i) if i in self.reached else "") + r.line(self.forward.both, i)
                  for i, routed in sorted(self.routing.items()) for r in routed]
        for i, rows in enumerate(self.steps):
            bad, first = [r for r in rows if not r.passed], self.first_in_step(i)
            start = f" (started from torch's weights after step {i})" if self.isolated and i else ""
            unjudged = [r for r in bad if not r.judged]
            # a plain run holds the weights after step 1 and the last only: a loss red first shows an update between
            unheld = (first is not None and first.name == "loss" and 2 <= i < len(self.steps) - 1
                      and not self.isolated)
            lines.append(f"after step {i + 1}{start}: {len(rows) - len(bad)}/{len(rows)} within" +
                         (f"; first over: {first.name} ({first.why})" if first else "") +
                         (f"; the weights steps 2 to {i} left are not recorded in a plain run: compare_backward("
                          "isolate=True) judges each step's update alone, naming the parameter" if unheld else "") +
                         (f"; {len(unjudged)} not judged (from {unjudged[0].name}): "
                          f"{unjudged[0].why[len(NOT_JUDGED):].strip()}" if unjudged else ""))
        return "\n".join(lines)
