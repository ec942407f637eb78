"""compare_generate's and check_cache's results: each step's rows (the next token's logits, each layer's cached keys
and values, the tokens each side would choose), the first step where the two part, and that step's call module by
module (a ForwardReport); each side's cached decoding against its own recomputation. Data first; every line is
formatted from it. May import core and forward."""
from dataclasses import dataclass, field

from portcheck.core import page
from portcheck.core.diff import UNPAIRED, KeyResult


@dataclass
class Choice:
    """A batch row's token where the two sides' greedy choices differ: torch's and Paddle's, and torch's own
    logits' gap between the two against the step's allowance (a tie when the logits are within their rule)."""
    row: int
    torch: int
    paddle: int
    gap: float
    allowed: float
    tie: bool

    def line(self) -> str:
        what = "a tie, not a bug" if self.tie else "a differing choice"
        return (f"row {self.row}: torch chose {self.torch}, paddle {self.paddle}: {what} (torch's logits of the "
                f"two {self.gap:.3e} apart, the allowance {self.allowed:.3e})")


@dataclass
class Step:
    """One decoding step: step 1 reads the whole prompt, each later one the token fed (torch's choice before it).
    position: the sequence position of the token whose next-token logits are judged."""
    step: int
    position: int
    fed: list                                         # the token fed after this step, per batch row (torch's choice)
    logits: KeyResult = None
    cache: list = field(default_factory=list)         # [KeyResult], each layer's keys then values
    choices: list = field(default_factory=list)       # [Choice] where the greedy choices differ
    stopped: dict = field(default_factory=dict)       # {side: the error its step raised}
    raised_in: dict = field(default_factory=dict)     # {side: the innermost module of its model the error came through}
    left_out: int = 0                                 # cached values at left-padded positions, left out of the rule
    encoder: KeyResult = None                         # an encoder-decoder's encoder output (step 1 alone)

    @property
    def rows(self) -> list:
        return [r for r in (self.encoder, self.logits) if r is not None] + self.cache

    @property
    def passed(self) -> bool:
        return not self.stopped and self.logits is not None and all(r.passed for r in self.rows) and \
            not any(not c.tie for c in self.choices)

    @property
    def first_red(self):
        """The first row out of its rule (the encoder's output, then the logits, then the cache), or None."""
        return next((r for r in self.rows if not r.passed), None)

    def line(self) -> str:
        head = f"step {self.step} (position {self.position}): "
        if self.stopped:
            return head + "RED, " + "; ".join(f"the {side} step raised" + (
                f" in {self.raised_in[side]}" if self.raised_in.get(side) else "") + f": {e}"
                for side, e in self.stopped.items()) + " [PC655]"
        red = self.first_red
        said = (f"{red.name.split(': ', 1)[-1]}: {red.why}" if red is not None else
                ("the encoder's output within its rule, " if self.encoder is not None else "") +
                f"logits max diff {self.logits.max:.3e} (allowed {self.logits.allowed:.3e}), "
                f"{len(self.cache)} cached tensors within their rule")
        ties = "".join(f"; {c.line()}" for c in self.choices)
        if self.passed:
            return head + said + f"; fed {self.fed}" + ties
        return head + "RED, " + said + f"; fed {self.fed}" + ties + " [PC656]"


@dataclass
class OwnReport:
    """One side's cached decoding against its own recomputation of the whole prefix with no cache, step by step,
    by the measured rule (its own float64 run the yardstick: torch's twin, or Paddle's model in float64)."""
    side: str
    rows: list = field(default_factory=list)   # [KeyResult] per step: cached logits against recomputed ones
    yardstick: str = ""                        # what the float64 run was, or why there is none
    stopped: str = ""

    @property
    def first_step(self):
        """The first step (1-based) whose cached logits part from the recomputed ones, or None."""
        return next((i + 1 for i, r in enumerate(self.rows) if not r.passed), None)

    @property
    def passed(self) -> bool:
        return not self.stopped and bool(self.rows) and self.first_step is None

    def lines(self) -> list:
        if self.stopped:
            return [f"{self.side} against itself: RED, its run raised: {self.stopped} [PC657]"]
        first = self.first_step
        if first is None:
            worst = max(self.rows, key=lambda r: r.max / r.allowed if r.allowed else 0.0, default=None)
            return [f"{self.side} against itself: cached decoding equals recomputing the prefix with no cache at "
                    f"{len(self.rows)} steps" + (f" (largest {worst.max / worst.allowed:.3g} of its allowance)"
                                                 if worst is not None and worst.allowed else "")
                    + f"; yardstick {self.yardstick}"]
        row = self.rows[first - 1]
        return [f"{self.side} against itself: RED, a bug of the {self.side} side's cached decoding (its cache or its "
                f"step): from step {first} it parts from recomputing the prefix with no cache ({row.why}); yardstick "
                f"{self.yardstick} [PC658]"]


@dataclass
class GenerateReport(page.Viewable):
    """compare_generate's result: .passed, .first_step, .first_diverging (the module where that step's call parts,
    torch's name with Paddle's as .paddle), .steps (rows), .step_report (that step's ForwardReport), .own (each side
    against itself), .tokens; .lines() and .table() formatted from them."""
    steps: list = field(default_factory=list)        # [Step]
    tokens: dict = field(default_factory=dict)       # {"fed": torch's choices, "paddle": Paddle's own choices}
    step_report: object = None                       # ForwardReport of the first parting step's call
    own: dict = field(default_factory=dict)          # {side: OwnReport}
    notes: list = field(default_factory=list)        # lines on how the decoding was fed
    step_left_out: int = 0                           # values of the parting step's call left out (left padding)
    step_called: str = ""                            # the call step_report compares: the step's, or its encoder's
    handed: list = field(default_factory=list)       # arguments that call hands one model and not the other, or
    #                                                  with other values

    @property
    def first_step(self):
        """The first step (1-based) where the two part, or None."""
        return next((s.step for s in self.steps if not s.passed), None)

    @property
    def first_diverging(self):
        """The module where the first parting step's call parts (portcheck.forward.result.Named), or None: green,
        or that call's outputs within their rule at every module (the step's own handling differs: said by
        lines()). A module isolate alone finds (its own computation, on torch's input) does not explain a step whose
        call gives the same outputs: it is not named here, and stays in the table."""
        return None if self.step_report is None or self.call_held else self.step_report.first_diverging

    @property
    def call_held(self) -> bool:
        """The parting step's call made again: it ran on both sides and every module's output is within its rule."""
        from portcheck.core import calibrated
        report = self.step_report
        return report is not None and not report.stopped and bool(report.paired) and all(
            r.passed or r.beyond(calibrated.MEAN_BOUND) for r in report.rows
            if not r.problem.startswith(UNPAIRED))

    @property
    def passed(self) -> bool:
        return bool(self.steps) and self.first_step is None and all(o.passed for o in self.own.values())

    def headline(self) -> str:
        first = self.first_step
        if first is None:
            if self.passed:
                return f"compare_generate: green, {len(self.steps)} steps within the measured rule"
            return ("compare_generate: RED, the two sides agree at every step, and a side's cached decoding parts from "
                    "its own recomputation (below) [PC659]" if self.steps else
                    "compare_generate: RED, no step was decoded (below) [PC661]")
        module = self.first_diverging
        where = (f", at {module.both}" if module is not None else
                 ", the model's call within its rule at every module: the step's own handling differs (the position "
                 "its logits are taken at, a logits processor, the arguments it passes, the cache it hands on)"
                 if self.call_held else "")
        if self.handed:  # the two calls are not the same call: what differs is what they are handed
            where = (f", where the two models are handed {', '.join(self.handed)} otherwise (arguments, below; "
                     f"module by module it parts first at {module.both})" if module is not None else
                     f", where the two models are handed {', '.join(self.handed)} otherwise (arguments, below)")
        step = self.steps[first - 1]
        if step.stopped:
            where = "".join(f", the {side} step raised in {name}" for side, name in step.raised_in.items() if name)
        return f"compare_generate: RED, the two part at step {first} (position {step.position}){where} [PC660]"

    def called(self) -> str:
        return self.step_called or f"step {self.first_step}'s call"

    def padding_line(self) -> list:
        """The one line saying what the left padding left out of the rule, or none."""
        cached = sum(s.left_out for s in self.steps)
        said = ([f"{cached} cached keys' and values' entries at left-padded positions over {len(self.steps)} steps"]
                if cached else []) + \
            ([f"{self.step_left_out} values of {self.called()} there (its padding rows, their logits included)"]
             if self.step_left_out else [])
        if not said:
            return []
        return ["left out of the rule, read by no real token: " + ", and ".join(said)
                + "; a real token that reads the padding is judged at its own values"]

    def lines(self) -> list:
        out = [self.headline()] + [s.line() for s in self.steps] + self.notes + self.padding_line()
        for side in sorted(self.own):
            out += self.own[side].lines()
        return out

    def table(self) -> str:
        """lines(), then the first parting step's call module by module (compare_forward's table)."""
        text = "\n".join(self.lines())
        if self.step_report is not None:
            text += f"\n{self.called()}, module by module:\n" + self.step_report.table()
        return text

    def view(self, title: str = "compare_generate") -> dict:
        first = self.first_diverging
        return {"title": title, "passed": self.passed, "headline": self.headline(),
                "first": {"torch": str(first), "paddle": first.paddle} if first is not None else None,
                "verdicts": [{"name": "measured", "passed": self.passed,
                              "text": f"measured rule, step by step: {'green' if self.passed else 'red'}"}],
                "sections": [{"kind": "lines", "title": "step by step", "lines": self.lines()}]
                + ([{"kind": "lines", "title": f"{self.called()}, module by module",
                     "lines": self.step_report.table().splitlines()}] if self.step_report is not None else [])}
