"""What portcheck.mapping.pairing chose, as data (Pairing): every pair of calls and every call left unpaired on both
sides, how each pair was made (the name map, the run's values, a chain one side's module computes whole, an
activation torch's forward applies outside any module), the torch module to Paddle module map it gives (modules(),
a weight torch shares between calls refused with the map that settles it; copies()) and its lines as a report says
them.

May import portcheck.core and mapping's trace and ties.
"""
import re
from dataclasses import dataclass, field
from typing import Optional

from portcheck.core.errors import PipelineError
from portcheck.core.keys import module_of, split_key
from portcheck.mapping.taken import TAKE, taken_said
from portcheck.mapping.ties import entry
from portcheck.mapping.trace import SCALES, scale_said


@dataclass
class Pairing:
    """The calls of two records paired: every pair chosen and every call left unpaired, on both sides."""
    pairs: dict = field(default_factory=dict)        # torch call -> Paddle call, in torch's order
    torch_calls: list = field(default_factory=list)  # [Call] of each side, in its order
    paddle_calls: list = field(default_factory=list)
    named: set = field(default_factory=set)          # torch calls paired by the name map
    settled: dict = field(default_factory=dict)      # torch call -> Paddle call: ties the run's values settled
    doubtful: list = field(default_factory=list)     # [[(torch call, Paddle call), ...]]: pairs only the order chose
    missing: dict = field(default_factory=dict)      # torch module -> the Paddle module the map names, absent
    # torch call -> [the parameter-free torch calls after it] its Paddle call computes too (_composed)
    composed: dict = field(default_factory=dict)
    # torch call -> [the parameter-free Paddle calls after its Paddle call] the torch call computes too
    paddle_composed: dict = field(default_factory=dict)
    # torch call -> the activation torch's forward applies to its output, outside any module (trace.watch), that
    # its Paddle call is judged through (_applied), or the scale rule "*c"/"/c" (trace.scale_rules); Paddle call ->
    # the activation it declares (modules.ACT)
    applied: dict = field(default_factory=dict)
    acts: dict = field(default_factory=dict)
    # torch call -> the Paddle call whose input its output is judged against: Paddle's forward computes the rest of
    # what torch's module does after its own module returns (pairing._met)
    met: dict = field(default_factory=dict)
    # {module's last name: its parts}: a module of one side holding what the other side's modules a tie left hold
    # together (ties.fusions_of), the tie settled by the run's values: paired with nothing (fused.taken declares it)
    fusions: dict = field(default_factory=dict)

    @property
    def torch_unpaired(self) -> list:
        within = {c for chain in self.composed.values() for c in chain}
        return [c.name for c in self.torch_calls if c.name not in self.pairs and c.name not in within]

    def composing(self) -> dict:
        """{torch call: the paired torch call it is judged as}: each composed chain's calls, its last one's output
        judged as the first's (the module Paddle's computes: its row is named by it, on its input)."""
        return {c: t for t, chain in self.composed.items() for c in [t, *chain]}

    def judged_as(self, call: str) -> str:
        """The torch call whose output a paired torch call's Paddle counterpart is judged against: its own, or
        the last of those its Paddle call computes too (composed)."""
        return self.composed[call][-1] if call in self.composed else call

    @property
    def paddle_unpaired(self) -> list:
        taken = set(self.pairs.values()) | {c for chain in self.paddle_composed.values() for c in chain}
        return [c.name for c in self.paddle_calls if c.name not in taken]

    def paddle_judged_as(self, call: str) -> str:
        """The Paddle call whose output a torch call is judged against: its pair's, or the last of those the torch
        call computes too (paddle_composed)."""
        return self.paddle_composed[call][-1] if call in self.paddle_composed else self.pairs[call]

    def by_place(self, paddle_module: str, torch_modules) -> Optional[str]:
        """The torch module (of `torch_modules`) where a Paddle module that paired with none stands: its last name
        under the torch module its parent's other children pair under (llama.layers.1.mlp.down_proj:
        model.layers.1.mlp.down_proj, where gate_proj pairs so), or its own name; None where neither is there."""
        parent, _, leaf = paddle_module.rpartition(".")
        under = [module_of(t).rpartition(".")[0] for t, p in self.pairs.items() if "." in module_of(t) and
                 "." in module_of(p) and module_of(p).rpartition(".")[0] == parent]
        return next((f"{t}.{leaf}" for t in under if f"{t}.{leaf}" in torch_modules),
                    paddle_module if paddle_module in torch_modules else None)

    def applied_to(self, keys) -> dict:
        """{torch output key (out/<call>...): the activation it is judged through} of `keys` (applied); and a first
        input (in/<call>) the port takes an index of before its module (taken.taken_rules), judged so too."""
        return {k: self.applied[split_key(k)[1]] for k in keys if split_key(k)[1] in self.applied and
                (k.startswith("out/") or k.startswith("in/") and self.applied[split_key(k)[1]][:1] == TAKE)}

    def modules(self) -> dict:
        """torch module -> Paddle module, from their calls. A torch module holding tensors whose calls pair with
        several Paddle modules (one weight torch shares between its calls, one module per call in the port) is
        refused, naming the name_map entry that settles it: the module of its first call, which it is then judged
        against; the others are filled with copies of its tensors (copies())."""
        out, holds = {}, {c.module for c in self.torch_calls if c.tensors}
        for t, p in self.pairs.items():
            out.setdefault(module_of(t), []).append(module_of(p))  # in torch's run order: the first call's first
        chosen = {module_of(t): module_of(p) for t, p in self.pairs.items() if t in self.named}
        split = {t: ps for t, ps in out.items() if len(set(ps)) > 1 and t in holds and chosen.get(t) not in ps}
        if split:
            children = {c.module: c.children for c in self.torch_calls}
            said = [f"torch {t} runs as {len(set(ps))} Paddle modules ({', '.join(dict.fromkeys(ps))})" for t, ps in
                    split.items()]
            first, ps = next(iter(split.items()))
            # one map settling them all: one module's entry pasted alone is refused again at the next one
            one = entry(first, ps[0], max(children.get(first, 0), 0)) if len(split) == 1 else \
                repr([("^" + re.escape(t) + "$", ps[0]) for t, ps in split.items()])
            raise PipelineError(f"{'; '.join(said[:3])}{f'; {len(said) - 3} more' if len(said) > 3 else ''}: "
                                f"{'it holds' if len(split) == 1 else 'each holds'} tensors, one weight torch shares "
                                "between its calls and the Paddle port holds once per call (it trains them apart: "
                                "compare_backward judges that); to fill each with its tensors and judge it against "
                                f"its first call's, name_map={one} [PC316]")
        return {t: chosen[t] if chosen.get(t) in ps else min(ps) for t, ps in out.items()}

    def copies(self) -> dict:
        """{torch module holding tensors: the Paddle modules its later calls pair with, besides modules()'s}: each
        is filled with a copy of its tensors (a weight torch shares between calls, held once per call in the port)."""
        modules, holds, out = self.modules(), {c.module for c in self.torch_calls if c.tensors}, {}
        for t, p in self.pairs.items():
            m, q = module_of(t), module_of(p)
            if m in holds and q != modules[m] and q not in out.get(m, []):
                out.setdefault(m, []).append(q)
        return out

    def _kind(self, call: str) -> str:
        return next((c.kind for c in self.paddle_calls if c.name == call), "")

    def lines(self) -> list:
        """Every pair, then every call left unpaired on each side: what the report says it chose."""
        how = lambda t: " (name map)" if t in self.named else " (by value)" if t in self.settled else \
            f" ({scale_said(self.applied[t])})" if self.applied.get(t, "")[:1] in SCALES else \
            f" ({taken_said(self.applied[t])})" if self.applied.get(t, "")[:1] == TAKE else \
            (f" (Paddle {self.pairs[t]} is {self._kind(self.pairs[t])}(act={self.acts.get(self.pairs[t])}): judged "
             f"against torch's {t} followed by {self.applied[t]}, which torch's forward applies to it)"
             if t in self.applied else
             f" (judged against the input of Paddle's {self.met[t]}, which Paddle's forward computes from its output)"
             if t in self.met else "")
        out = [f"{' + '.join([t, *self.composed[t]])} -> {p} (Paddle's module computes torch's in turn)"
               if t in self.composed else
               f"{t} -> {' + '.join([p, *self.paddle_composed[t]])} (torch's module computes Paddle's in turn)"
               if t in self.paddle_composed else f"{t} -> {p}{how(t)}" for t, p in self.pairs.items()]
        out.append(f"torch calls unpaired ({len(self.torch_unpaired)}): {', '.join(self.torch_unpaired) or '-'}")
        out.append(f"Paddle calls unpaired ({len(self.paddle_unpaired)}): {', '.join(self.paddle_unpaired) or '-'}")
        return out
