"""compare_split_backward: a Paddle model in tensor parallel trained K optimizer steps on its ranks (each rank steps
its own shard), its parameter gradients and weights gathered into the full tensors and judged against torch's one
process by judge_backward, the one gradients engine: a tensor split across the ranks (is_distributed, its
split_axis) joined on that axis, a replicated one taken from rank 0; then each rank's own part (its slice, or its
whole copy) judged against torch's too, so a gradient wrong on one rank is named at its parameter and rank. It rides
in the forward comparison's launch of the ranks (portcheck.parallel.split.compare_splits' also= and then=). Imports
numpy, core, mapping, forward's twin, parallel's split and split_rank, and this package's backward and result;
Paddle only on the ranks."""
import copy
import functools
import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from portcheck.core import calibrated
from portcheck.core.calibrated import measure
from portcheck.core.errors import PipelineError
from portcheck.forward.twin import F64
from portcheck.gradients.against_itself import spread_of
from portcheck.gradients.backward import _counterpart, checked_pairs, judge_backward, renames
from portcheck.gradients.recording import checked_steps, record_backward
from portcheck.gradients.result import LAST, BackwardReport
from portcheck.mapping import fused, modules, pairing, shards
from portcheck.parallel import split, split_rank

STEPS = "steps"  # each run's folder on each rank: its training record (arrays.npz, keys.json)
TENSORS = re.compile(r"^(grad|final|state\d+)/")  # a record's keys of a parameter (or buffer): joined on its axis


@dataclass
class SplitBackwardReport(BackwardReport):
    degree: int = 1
    ranks: dict = field(default_factory=dict)  # {row name: [the ranks whose own part differs from torch's]}
    standins: str = ""                         # the CPU stand-ins' line, "" where Paddle's own ops ran
    stopped: str = ""                          # the line a rank's training stopped on (nothing judged), or ""

    @property
    def passed(self) -> bool:
        return super().passed and not self.ranks and not self.stopped

    def parted(self, name=None) -> list:
        """The ranks whose own part of `name` (default: the first diverging gradient, else value) parts from torch."""
        name = name or self.first_diverging_gradient or next(iter(self.ranks), None)
        return self.ranks.get(name, [])

    def table(self) -> str:
        if self.stopped:
            return self.stopped
        lines = [super().table(), f"the Paddle model trained split across {self.degree} ranks, each stepping its "
                 "shard" + (f"; {self.standins}" if self.standins else "; Paddle's own model-parallel ops")]
        first = self.first_diverging_gradient
        if first in self.ranks:  # where the backward parts: its ranks first, the values it moved after
            lines.append(f"{first} parts from torch on rank {', '.join(map(str, self.ranks[first]))} of {self.degree}")
        named = [f"{name} (rank {', '.join(map(str, r))})" for name, r in self.ranks.items()]
        if named:
            lines.append(f"{len(named)} values part from torch on some rank's own part: {', '.join(named[:3])}"
                         + (f" and {len(named) - 3} more" if len(named) > 3 else ""))
        return "\n".join(lines)


def compare_split_backward(torch_model, build, inputs, targets, loss, optimizer, degree=2, state=None, steps=1,
                           layouts=None, timeout=split.TIMEOUT, stall=None) -> SplitBackwardReport:
    """compare_backward for a Paddle model split across `degree` ranks (built as compare_split builds it): both
    trained `steps` steps on the same batch, loss=(torch's, Paddle's) and optimizer=(torch's factory, Paddle's),
    Paddle's two functions at the top level of a module (each rank imports them). Every gradient after the first
    backward, every weight after the first step and after the last gathered from the ranks and judged as
    compare_backward judges them, each rank's own part too. torch_model is trained on a copy. timeout, stall:
    compare_split's."""
    return compare_split_steps(torch_model, build, inputs, targets, loss, optimizer, degree, state, steps,
                               layouts=layouts, timeout=timeout, stall=stall)[1][None]


def compare_split_steps(torch_model, build, inputs, targets, loss, optimizer, degree=2, state=None, steps=1,
                        variants=None, isolate=False, layouts=None, timeout=split.TIMEOUT, trained=None,
                        stall=None) -> tuple:
    """compare_splits (the forward, module by module) and compare_split_backward for the model and each variant
    (or those of `trained`, None standing for the model as built), in one launch of the ranks: ({None: forward
    report, name: ...}, {None: backward report, name: ...}); a variant that is another model (split.Another) is trained
    only where `trained` names it, against its own torch model, with its own layouts (its loss, optimizer and
    targets the model's)."""
    checked_steps(steps), checked_pairs(loss=loss, optimizer=optimizer)  # before any rank starts
    split.reachable("the Paddle loss", loss[1]), split.reachable("the Paddle optimizer factory", optimizer[1])
    names = [None, *(variants or {})]
    jobs = [(variants or {}).get(name) for name in names]
    # each run's torch model and layouts: an Another's own (another model in the launch), else the model's
    own = [(j.torch_model, j.layouts) if isinstance(j, split.Another) else (torch_model, layouts) for j in jobs]
    runs = sorted(n for n, name in enumerate(names) if name in (trained or ()) or
                  trained is None and not isinstance(jobs[n], split.Another))
    run_layouts = {n: own[n][1] for n in runs}
    also = functools.partial(rank_steps, runs=runs, inputs=inputs, targets=targets, loss=loss[1],
                             optimizer=optimizer[1], steps=steps, layouts=run_layouts)
    backward, torch_side = {}, {}

    def then(ranks, n, report):
        if n not in runs:
            return
        folders = [ranks.folder / f"rank{r}" / str(n) / STEPS for r in range(ranks.degree)]
        ranks.wait(lambda: all((f / "keys.json").is_file() for f in folders))
        first = next(i for i, (m, lay) in enumerate(own) if m is own[n][0] and lay == own[n][1])
        if first not in torch_side:  # each torch model's steps once, on a copy, its layouts by the Paddle types its
            # modules pair with
            torch_side[first] = record_backward(copy.deepcopy(own[n][0]), inputs, targets, loss[0], optimizer[0],
                                                None, steps, own[n][1], paddle_kinds=_kinds(report, folders[0]))
        backward[n] = judged(torch_side[first], folders)
    forward = split.compare_splits(torch_model, build, inputs, degree, state, variants, isolate, timeout, also, then,
                                   stall, layouts)
    for report in backward.values():
        report.standins = forward[None].standins
    return forward, {name: backward[n] for n, name in enumerate(names) if n in runs}


def _kinds(report, folder: Path) -> dict:
    """{torch module: a type named and based as the Paddle layer it pairs with (a rank's lineage)} from the
    forward's pairing: what record_backward's torch_layouts reads for a layout declared by a Paddle type."""
    lineage, out = json.loads((folder / "keys.json").read_text()).get("lineage", {}), {}  # none: its run stopped
    for t, p in report.pairing.pairs.items():
        names = lineage.get("" if p == modules.ROOT else p)
        if names:
            kind = object
            for name in reversed(names):
                kind = type(name, (kind,), {})
            out["" if t == modules.ROOT else t] = kind
    return out


def rank_steps(where: Path, model, rank, degree, runs, inputs, targets, loss, optimizer, steps, layouts):
    """A rank's training (compare_splits' also=): record_backward on its shard, each key written with its layout:
    a parameter's keys with the axis it is split on (None: whole on every rank), a module's output as split_rank
    lays it out; module descriptions at full size (split_rank.full_modules). A fused module its run's layouts
    ({run: layouts}) declare
    (split_rank.rank_parts: the rank's heads) cut into its parts, each part's gradient and weights the rank's
    columns of that part, laid out on the fused tensor's axis: joined across the ranks, each part is whole and
    judged on its own. Only the runs numbered in `runs`."""
    if int(Path(where).name) not in runs:
        return
    folder = Path(where) / STEPS
    folder.mkdir(parents=True, exist_ok=True)
    try:
        record = record_backward(model, inputs, targets, loss, optimizer, None, steps)
    except PipelineError as e:  # the run's own verdict (a forward that stops, a loss that raises): the parent's line
        split_rank.write(folder / "keys.json", json.dumps({"stopped": str(e)}))
        return
    record = {k: v for k, v in record.items() if not k.startswith((modules.META, "near"))}
    parts = split_rank.rank_parts(model, layouts[int(Path(where).name)], degree)
    record = fused.mark(record, parts, model)
    record.update(split_rank.full_modules(model, degree, parts))
    record = fused.cut(record)
    axes, kinds = shards.split_axes(model), split_rank.layouts(model)
    for name, spec in parts.items():  # each part laid out as its fused module's tensors and output
        axes.update({f"{name}.{part}.{key[len(name) + 1:]}": axis for key, axis in list(axes.items())
                     if key.startswith(f"{name}.") for part in spec.parts})
        kinds.update({f"{name}.{part}": kinds[name] for part in spec.parts})
    laid = {key: axes.get(key[m.end():]) if (m := TENSORS.match(key)) else split_rank.layout_of(key, value, kinds)
            for key, value in record.items()}
    laid = split_rank.as_its_module(record, laid)  # the model's output gathered as the forward gathers it
    np.savez(folder / "arrays.npz", **{f"k{i}": np.asarray(value) for i, value in enumerate(record.values())})
    lineage = {name: [k.__name__ for k in type(layer).__mro__[:-1]]
               for name, layer in model.named_sublayers(include_self=True)}
    split_rank.write(folder / "keys.json", json.dumps({"keys": [[key, laid[key]] for key in record],
                                                       "lineage": lineage}))


def _load(folder: Path) -> tuple:
    meta = json.loads((folder / "keys.json").read_text())
    if "stopped" in meta:
        return None, meta["stopped"]
    with np.load(folder / "arrays.npz", allow_pickle=False) as arrays:
        return {key: arrays[f"k{i}"] for i, (key, _) in enumerate(meta["keys"])}, dict(meta["keys"])


def gathered(records: list, layouts: dict) -> dict:
    """The whole model's record from the ranks': a split tensor's parts joined on its axis, a module output's
    columns on the last axis, a fused module's heads counted for every rank (split.gathered), the rest rank 0's."""
    out = {}
    for key, value in records[0].items():
        parts = [r.get(key) for r in records]
        layout = layouts.get(key)
        if key.startswith(fused.KEY):
            out[key] = split.gathered([{key: value}] * len(records), {})[key]
        elif any(p is None for p in parts) or layout in (None, split_rank.ONE) or not np.ndim(value):
            out[key] = value
        else:
            out[key] = np.concatenate(parts, axis=-1 if layout == split_rank.CAT else int(layout))
    return out


def judged(torch_record: dict, folders: list) -> SplitBackwardReport:
    """The ranks' records gathered and judged against torch's (judge_backward), each rank's own part too."""
    loaded = [_load(f) for f in folders]
    stops = [r for r, x in enumerate(loaded) if x[0] is None]
    if stops:
        return SplitBackwardReport(degree=len(loaded), stopped=f"the Paddle model's training stopped on rank "
                                   f"{', '.join(map(str, stops))} of {len(loaded)}: {loaded[stops[0]][1]}; nothing "
                                   "was judged [PC923]")
    records, layouts = [x[0] for x in loaded], loaded[0][1]
    # a plain layer on a shard paired and its columns joined as the forward's comparison does
    base, layouts = split.with_shards(judge_backward, lambda r: r.forward, gathered, torch_record, records, layouts)
    whole = gathered(records, layouts)
    report = SplitBackwardReport(**{f.name: getattr(base, f.name) for f in fields(BackwardReport)},
                                 degree=len(records))
    report.ranks = ranks_apart(report, torch_record, whole, records, layouts)
    return report


def ranks_apart(report, torch_record: dict, whole: dict, records: list, layouts: dict) -> dict:
    """{row name: [ranks]} for each gradient, loss and weight some rank's own part of differs from torch's: a split
    tensor's slice on its axis, a replicated one's whole copy, each held to the gathered row's allowance rule."""
    torch_record = fused.cut(torch_record)
    mapped = (report.forward.pairing if report.forward else pairing.pair(torch_record, whole)).modules()
    renamed, degree = renames(torch_record), len(records)
    judged_names = {r.name for rows in [report.grads, *report.steps] for r in rows}
    out = {}
    for key in torch_record:
        match = TENSORS.match(key)
        if key.startswith("loss/"):
            name, p_key, multiple = f"loss, step {int(key[5:]) + 1}", key, calibrated.K_BACKWARD
        elif match:
            name = {"grad": f"grad {key[5:]}", "final": f"{key[6:]}{LAST}"}.get(match.group(1),
                                                                                 key.partition("/")[2])
            p_key, multiple = _counterpart(key, mapped, renamed), (
                calibrated.K_GRAD if key.startswith("grad/") else calibrated.K_BACKWARD)
        else:
            continue
        if name not in judged_names and not key.startswith("loss/"):
            continue
        a, ref, parts = torch_record[key], torch_record.get(F64 + key), [r.get(p_key) for r in records]
        if ref is None or any(p is None for p in parts):
            continue
        axis = layouts.get(p_key)
        axis = None if axis in (None, split_rank.ONE, split_rank.CAT) else int(axis)
        if axis is not None and (np.ndim(a) <= axis or a.shape[axis] != sum(np.shape(p)[axis] for p in parts)):
            continue  # shapes differ: the gathered row says so
        edges = np.cumsum([0] + [np.shape(p)[axis] for p in parts]) if axis is not None else None
        cut = (lambda x, r: np.take(x, range(edges[r], edges[r + 1]), axis=axis)) if axis is not None else \
            (lambda x, r: x)
        bad = [r for r, p in enumerate(parts) if not calibrated.with_spread(
            measure(name, cut(a, r), cut(ref, r), p, None, multiple), spread_of(torch_record, key)).passed]
        if bad:
            out[name] = bad
    return out
