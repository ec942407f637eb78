"""Step 5's results as data: a row of the judge of two training logs (Row), the judge's report (TrainingReport: its
rows, the guide's causes the records show, where the loss curves part, torch's own runs) and judge_and_log's one
verdict of the pair and the curves (TrainingVerdict); each a page (portcheck.core.page), formatted from its data.
The judge that makes them is portcheck.pipeline.training.

Imports core and pipeline's training_log (the curves drawn) and handin (the pair's verdict); never training, which
builds them.
"""
from typing import NamedTuple

from portcheck.core import page
from portcheck.pipeline import handin
from portcheck.pipeline.training_log import curves_of


class Row(NamedTuple):
    name: str
    passed: bool
    detail: str


class TrainingReport(NamedTuple):
    rows: list
    causes: list       # the guide's causes the records show, as sentences
    loss: str          # where the loss curves part (said, not judged)
    evaluations: str = ""  # each metric's largest gap over the evaluations before the last (said, not judged)
    threshold: float = float("nan")  # the final metric's: the task's, widened by torch's own spread (own=)
    spread: float = 0.0    # how far torch's own runs widened it
    own: dict = None       # torch's own runs as own_runs reduces them, None without
    logs: tuple = None     # (torch's log, Paddle's): the curves its page draws

    def view(self) -> dict:
        """The page's data (portcheck.core.page): each row's verdict, then both sides' loss, lr and metric curves
        and their difference, then its lines."""
        drawn = curves_of(*self.logs) if self.logs is not None else []
        return {"title": "training", "passed": self.passed, "first": None,
                "headline": "training: " + ("green" if self.passed else "red"),
                "verdicts": [{"name": r.name, "passed": r.passed, "text": r.detail} for r in self.rows],
                "sections": ([{"kind": "curves", "title": "both sides and their difference", "curves": drawn}]
                             if drawn else []) + [{"kind": "lines", "title": "its lines", "lines": self.lines()}]}

    def html(self, path) -> str:
        """The training as one page at `path` (opens offline, fetches nothing); a line saying where."""
        return page.write(self.view(), path)

    def _repr_html_(self) -> str:
        return page.framed(page.page(self.view()))

    @property
    def eval_modes_logged(self) -> bool:
        return any(r.name == "evaluation modes" for r in self.rows)

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.passed for r in self.rows)

    def lines(self) -> list:
        out = [f"training {r.name}: {'passed' if r.passed else 'FAILED'}, {r.detail}" for r in self.rows]
        out.append(f"training loss curves: {self.loss}")
        if self.evaluations:
            out.append(f"training evaluations before the last: {self.evaluations}")
        if not self.passed or self.causes:
            out.append("the guide's causes the records show: " + ("; ".join(self.causes) if self.causes else
                       "none (the initial weights, data order, seeds, flags and dropout/BatchNorm modes are "
                       "the same" + ("" if self.eval_modes_logged else "; the modes at evaluation not logged: pass "
                                     "model= to log.evaluate") + "): the update itself differs; Step 4's lr and "
                       "bp_align pin it down"))
        return out


class TrainingVerdict(NamedTuple):
    """judge_and_log's one verdict: `passed` is the pair's and every curve row's at once (a schedule one step ahead
    is red here, as `python -m portcheck check` is on the folder). It unpacks as (verdict, curves), the verdict's
    own `passed` holding the curves too, so `verdict, curves = judge_and_log(...)` cannot be fooled either."""
    verdict: "handin.MeasuredVerdict"
    curves: TrainingReport

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    def view(self) -> dict:
        """The page's data: the pair's verdicts (handin.MeasuredVerdict's), then the curves (TrainingReport's)."""
        pair, curves = self.verdict.view(), self.curves.view()
        return {**pair, "passed": self.passed, "verdicts": pair["verdicts"] + curves["verdicts"],
                "sections": curves["sections"] + pair["sections"]}

    def html(self, path) -> str:
        return page.write(self.view(), path)

    def _repr_html_(self) -> str:
        return page.framed(page.page(self.view()))
