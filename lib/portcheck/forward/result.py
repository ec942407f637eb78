"""compare_forward's result: ForwardReport (rows, verdicts, the table, the plot) and Named, a torch module
call's name with its Paddle counterpart's. May import core and mapping; forward's isolate only lazily (.differing)."""
import dataclasses
from dataclasses import dataclass, field

from portcheck.core import calibrated, page, report
from portcheck.core.diff import NOT_JUDGED, UNPAIRED, first_diverging
from portcheck.core.report import format_table
from portcheck.mapping.pairing import ROOT, split_key


class Named(str):
    """A torch module call's name, as report.first_diverging and report.differing give it (it equals torch's name,
    as it always did), with its Paddle counterpart's beside it: .paddle, and .both, the two said."""
    paddle: str

    def __new__(cls, torch_name: str, paddle_name: str = None):
        named = super().__new__(cls, torch_name)
        named.paddle = paddle_name or torch_name
        return named

    @property
    def both(self) -> str:
        return str(self) if self.paddle == self else f"{self} (Paddle: {self.paddle})"


@dataclass
class ForwardReport(page.Viewable):
    rows: list = field(default_factory=list)       # [diff.KeyResult] in torch's run order
    unpaired: list = field(default_factory=list)   # Paddle records no torch module maps to
    stopped: dict = field(default_factory=dict)    # {"torch" or "paddle": the error its run stopped on}
    stopped_in: dict = field(default_factory=dict)  # {side: the module (its own name) its run stopped inside}
    pairing: object = None                         # a pairing.Pairing: which module call is which
    counterparts: dict = field(default_factory=dict)  # torch record key -> the Paddle key it was judged against
    isolated: list = None          # isolate=True: [diff.KeyResult], every paired module on torch's own values
    parents: dict = field(default_factory=dict)    # isolate=True: torch call -> the paired call it ran inside
    isolation_stopped: dict = field(default_factory=dict)  # isolate=True: {side: the error its run stopped on}
    left_out: list = field(default_factory=list)   # the model outputs outputs= left out, each "<side> <name>"
    outputs_said: list = field(default_factory=list)  # a line per module whose outputs one side returns alone
    fused_found: dict = field(default_factory=dict)  # {module: Fused} the pairing's ties declared (fused.taken)
    first_call: object = None      # red: calls.FirstCall, the first framework call that differs in first_diverging
    flow: dict = field(default_factory=dict)  # {side: graph.flow of its record}: which call's output each call took
    routing: list = field(default_factory=list)  # [routing.Routing]: each MoE block's tokens and their experts
    settings: dict = field(default_factory=dict)  # {side: {module: its settings}} its record keeps (mapping.settings)

    @property
    def passed(self) -> bool:
        """Every paired module within its rule, and something paired: a report that compared nothing is red.
        With isolate=True, every module's own computation within its rule too; every token routed to the same
        experts (routing): a tie broken otherwise leaves what follows it not judged, never green, and so does a
        choice of experts it could not read (Routing.unread)."""
        isolated = self.isolated is None or (not self.isolation_stopped and all(r.passed for r in self.isolated))
        return not self.stopped and bool(self.paired) and isolated and \
            not any(r.red or r.flipped or r.unread for r in self.routing) and \
            all(r.passed or r.beyond(calibrated.MEAN_BOUND) for r in self.rows if not r.problem.startswith(UNPAIRED))

    @property
    def guide_passed(self) -> bool:
        """passed, with the guide's bound on the model output's mean deciding even where torch's own fp32 misses
        it (diff.KeyResult.beyond): the guide's verdict, said beside the measured one."""
        return self.passed and not any(r.beyond(calibrated.MEAN_BOUND) for r in self.rows)

    @property
    def differing(self) -> list:
        """isolate=True: every module whose own computation differs, on torch's own values (isolate.differing), each
        a Named: torch's name, Paddle's beside it."""
        from portcheck.forward.isolate import differing
        return [Named(d, self._paddle_differing(d)) for d in differing(self)]

    def _paddle_differing(self, name: str) -> str:
        parent, before, child = name.partition(" (before ")  # isolate.differing's "parent (before child)"
        return f"{self.paddle_name(parent)} (before {self.paddle_name(child[:-1])})" if before else \
            self.paddle_name(name)

    def paddle_name(self, name: str) -> str:
        """The Paddle name of torch's row or call `name` ("layer1.0.relu", "encoder#2[0]"): its call's counterpart
        in report.pairing, what follows the call kept; `name` itself where no call pairs with it."""
        try:
            _, call_, rest = split_key(f"out/{name}")
        except AttributeError:  # no record key's form: not a module call's name
            return name
        paddle = ROOT if call_ == ROOT else self.pairing.pairs.get(call_) if self.pairing else None
        return f"{paddle}{rest}" if paddle else name

    def both(self, name: str) -> str:
        """`name`, and Paddle's beside it where it differs: every printed line names both."""
        return Named(name, self.paddle_name(name)).both

    @property
    def unjudged(self) -> list:
        """The rows whose yardstick failed (torch's float64 run stopped, or overflowed where fp32 did not), in
        run order, the cumulative run's then isolate's: red, and said as not judged, never as differing."""
        return [r for r in self.paired + (self.isolated or []) if not r.judged]

    @property
    def tied_only(self) -> bool:
        """Kept from green by nothing but a router's tie the two sides broke otherwise (routing): not judged."""
        from portcheck.forward.routing import TIED
        rows = self.paired + (self.isolated or [])
        return any(r.flipped for r in self.routing) and not self.stopped and not any(r.red for r in self.routing) \
            and all(r.passed or r.problem.startswith(TIED) for r in rows)

    def pairs(self) -> str:
        """Every pair of module calls chosen (or named by the map), then each side's calls left unpaired."""
        return "\n".join(self.pairing.lines()) if self.pairing else ""

    @property
    def first_diverging(self):
        """The module where the outputs part (its input was within tolerance), or None. Where every output of the
        cumulative run is within its rule and isolate=True finds a module whose own computation differs (an
        integer it computes, a difference too small to show downstream), that module: it names one whenever
        differing does."""
        origin = first_diverging([r for r in self.paired if not r.beyond(calibrated.MEAN_BOUND)])
        # an expert of a block whose tokens reached other experts (routing), its router within its rule: the expert
        # fed other rows is not where the runs part; the block that routed them is
        routed = next((r for r in self.routing if origin and r.red and origin.name.startswith(r.block + ".")
                       and not origin.name.startswith(r.router)), None)
        # a router choosing its top k itself (routing.topk): its choice and its weights are its own output, the
        # block's difference its own, and so is one too small to show downstream
        chose = next((r for r in self.routing if r.red and r.topk and (origin is None or (
            origin.name == r.block or origin.name.startswith(r.block + ".")))), None)
        if chose:
            return Named(chose.router, self.paddle_name(chose.router))
        if routed:
            return Named(routed.block, routed.paddle_block)
        stop = self.stopped_at()
        if stop is not None and (origin is None or origin.name.startswith(ROOT)):  # the stop, not its missing output
            return stop
        if origin:
            return self._root_own(origin) or Named(origin.name, self.paddle_name(origin.name))
        differ = self.differing if self.isolated is not None else []
        return Named(differ[0].split(" (before ")[0], differ[0].paddle.split(" (before ")[0]) if differ else None

    def stopped_at(self):
        """The module the Paddle run stopped inside, both its names (Named), or None. It never returned, so it pairs
        by where it stands (pairing.Pairing.by_place)."""
        module = self.stopped_in.get("paddle")
        if module is None or self.pairing is None:
            return None
        name = self.pairing.by_place(module, {split_key(f"out/{r.name}")[1].split("#")[0] for r in self.rows})
        return Named(name, module) if name else None

    def _root_own(self, origin):
        """The model's own forward, named as differing does, "(model) (before <child>)", where the runs part there:
        a module's input no module output and the model computed (a position table or a scale it holds and applies
        itself), or the model's output row where isolate=True finds its own computation differing before a child.
        None elsewhere: the whole model names no place, the child before which it computes does."""
        call_ = split_key(f"out/{origin.name}")[1]
        if origin.input_ok is False and origin.input_unsourced == ROOT and call_ != ROOT:
            name = f"{ROOT} (before {call_})"
            return Named(name, self._paddle_differing(name))
        if call_ == ROOT and self.isolated is not None:
            return next((d for d in self.differing if d.startswith(f"{ROOT} (before ")), None)
        return None

    @property
    def paired(self) -> list:
        """The rows with a Paddle counterpart."""
        return [r for r in self.rows if not r.problem.startswith(UNPAIRED)]

    def plot(self, path) -> str:
        """A PNG at `path`: each module's max diff over its allowance along the network, log scale, the first
        diverging module marked; with isolate=True each module on torch's own values beside it (portcheck.forward.plot).
        A line saying what was done (without matplotlib: that it is missing)."""
        from portcheck.forward import plot
        return plot.draw(plot.forward_panels(self), path)

    def frame(self):
        """The table as a pandas DataFrame (report.COLUMNS): a row per paired module output, then with
        isolate=True a row per module on torch's own values (part "forward, isolated"). Needs pandas."""
        from portcheck.core import report
        return report.frame(self.figures())

    def figures(self) -> list:
        """frame()'s rows, as dicts (report.figures)."""
        from portcheck.core import report
        paired = self.paired
        first = first_diverging([r for r in paired if not r.beyond(calibrated.MEAN_BOUND)])
        return report.figures(paired, "forward", first=first) + report.figures(self.isolated or [], "forward, isolated")

    def graphs(self, folder) -> list:
        """Both runs' graphs in Model Explorer's JSON, written into `folder` without Model Explorer
        (portcheck.forward.graph; portcheck.explorer.show starts it on them); the paths written."""
        from portcheck.forward import graph
        return graph.write(self, report.figures(self.paired, "forward"),
                           report.figures(self.isolated or [], "forward, isolated"), folder)

    def view(self, title: str = "compare_forward") -> dict:
        """The page's data (portcheck.core.page): the verdict, every paired module output nested as the model
        nests it, each beside its own computation on torch's values (isolate=True), the first differing call."""
        paired, first = self.paired, self.first_diverging
        origin = first_diverging([r for r in paired if not r.beyond(calibrated.MEAN_BOUND)])
        rows = [dict(row, paddle=self.paddle_name(row["name"]))
                for row in report.figures(paired, "forward", first=origin)]
        isolated = {row["name"]: row for row in report.figures(self.isolated or [], "forward, isolated")}
        said = (f"the runs part at {first.both}" if first else "every module within its rule" if self.passed else
                "red: " + "; ".join(f"the {side} model stopped" for side in self.stopped) if self.stopped else
                "red: nothing paired" if not paired else
                "not judged: " + "; ".join(r.line(self.both) for r in self.routing if r.flipped) if self.tied_only
                else "red: " + "; ".join(r.line(self.both) for r in self.routing if r.unread)
                if any(r.unread for r in self.routing) else "red")
        verdicts = [{"name": "measured", "passed": self.passed, "text": f"measured rule (K x torch's own fp32 "
                     f"error): {'green' if self.passed else 'RED'}"},
                    {"name": "guide", "passed": self.guide_passed, "text": "the guide's bound on the mean: "
                     + ("green" if self.guide_passed else "RED")}]
        call = self.first_call
        return {"title": title, "passed": self.passed, "headline": said,
                "first": {"torch": str(first), "paddle": first.paddle} if first else None,
                "verdicts": verdicts,
                "first_call": {"torch": str(call.torch), "paddle": str(call.paddle)} if call and call.found else
                ({"no call named": call.line()} if call else None),
                "sections": [{"kind": "tree", "title": "module by module: cumulative, and isolated on torch's values",
                              "rows": rows, "isolated": isolated, "first": first and str(first)},
                             {"kind": "lines", "title": "the table", "lines": self.table().splitlines()}]}


    def table(self) -> str:
        """Every paired module output, in run order (torch modules with no Paddle counterpart are counted
        below it: containers and activations one side folds into another)."""
        paired = self.paired
        lines = format_table(calibrated.HEADER, self._named_rows(
            paired, first_diverging([r for r in paired if not r.beyond(calibrated.MEAN_BOUND)])))
        lines += [f"the {side} model stopped: {error}" for side, error in self.stopped.items()]
        lines += [f"{self.both(r.name)}: {r.why}" + ("; the measured verdict decides passed (green), the guide's is red"
                                          if r.beyond(calibrated.MEAN_BOUND) else "")
                  for r in paired if r.mean_bound is not None and not r.passed and r.judged]
        lines += unjudged_lines([r for r in paired if not r.judged])
        origin = first_diverging([r for r in paired if not r.beyond(calibrated.MEAN_BOUND)])
        # the row marked as where the runs part shows the mark in place of its problem: said here, once
        lines += [f"{self.both(origin.name)}: {origin.problem}"] if origin is not None and origin.problem and \
            origin.mean_bound is None and origin.judged else []
        lines += [unsourced_line(dataclasses.replace(origin, key=self.both(origin.name)))] \
            if origin is not None and origin.input_unsourced else []
        lines += [self.first_call.line()] if self.first_call is not None else []
        lines += [f"{len(self.rows) - len(paired)} torch module outputs have no Paddle counterpart; "
                  f"{len(self.unpaired)} Paddle outputs no torch module maps to"]
        lines += [f"model outputs left out (outputs=), not judged: {', '.join(self.left_out)}"] if self.left_out else []
        lines += self.outputs_said
        lines += [r.line(self.both) for r in self.routing]
        if self.isolated is not None:
            differ = self.differing
            lines += ["each module on torch's own values (isolate=True):"]
            lines += format_table(calibrated.HEADER, self._named_rows(self.isolated))  # every one differing
            lines += [f"the {side} model stopped on torch's values: {e}" for side, e in self.isolation_stopped.items()]
            unjudged = [r for r in self.isolated if not r.judged]
            lines += unjudged_lines(unjudged)
            lines.append(f"modules whose own computation differs: {', '.join(d.both for d in differ)}" if differ else
                         f"every module's own computation within its rule ({len(self.isolated) - len(unjudged)}"
                         f" compared{f', {len(unjudged)} not judged' if unjudged else ''})")
        return "\n".join(lines)


    def _named_rows(self, rows: list, origin=None) -> list:
        """calibrated.table_rows, each red row's name with Paddle's beside it where they differ."""
        out = calibrated.table_rows(rows, origin)
        return [(self.both(r.name) if not r.passed else row[0], *row[1:]) for r, row in zip(rows, out)]


def unjudged_lines(rows: list) -> list:
    """One line per reason some rows were not judged, naming the first row and counting the rest."""
    by_why = {}
    for r in rows:
        by_why.setdefault(r.problem, []).append(r.name)
    return [f"not judged ({len(names)} value(s), from {names[0]}): {why[len(NOT_JUDGED):].strip()}"
            for why, names in by_why.items()]


def unsourced_line(row) -> str:
    """The one line for a module named where the runs part because its input differs and came from no module."""
    return (f"{row.name}: its input differs and no module output it: a buffer, or a value {row.input_unsourced}'s "
            "forward computes (check what it reads there); the runs part here")
