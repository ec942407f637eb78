"""`portcheck run` of a Paddle script launched split in tensor parallel (fleet's mp_degree above 1, under python -m
paddle.distributed.launch) against torch's script in one process. On each rank (SplitRank, in the Paddle script's
process): the CPU stand-ins (parallel.standins), the first forward's trace made whole across the ranks (each output
gathered as its layer lays it out, parallel.split_rank) for the pairing, the model's tensors at their full shapes,
torch's weights cut into the rank's shard (mapping.shards); each rank records its own. In `run` (joined): the ranks'
records joined into one Paddle side in DIR/paddle, each parameter's shards on their axis, each output by its layer,
the loss rank 0's and checked the same on every rank.

May import portcheck.core, mapping, parallel, gradients and scripts.side_files (a side's files); Paddle only on the
ranks.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy, save_npy
from portcheck.core.keys import module_of, split_key
from portcheck.gradients import split_steps
from portcheck.mapping import modules
from portcheck.parallel import split, split_rank
from portcheck.scripts.side_files import RECORD, STATUS, write_text

SPLIT = "split"  # a rank's config entry: its degree, rank, tensors' axes, modules' layouts, the stand-ins' line
# a rank's configuration entries that make its model and its training: alike on every rank of one split model (the
# seeds and versions are shown, never judged; the split entry's rank is each rank's own)
ALIKE_CONFIG = ("modules", "optimizer", "optimizers", "loss", "losses", "clip", "accumulation", "autocast", "wrapper")
NEAR = re.compile(r"^near\d+/(?:in/)?([^#\[:]*)")  # kinks.near_zero's keys: flat indices into a rank's own part


def split_of(model) -> tuple:
    """(rank, degree) of a model fleet split in tensor parallel (its model-parallel group's)."""
    from paddle.distributed import fleet
    hcg = fleet.get_hybrid_communicate_group()
    return hcg.get_model_parallel_rank(), hcg.get_model_parallel_world_size()


def standins(world: int) -> str:
    """The CPU stand-ins installed where the ranks run on CPUs (standins.on_cpu), their line; "" on GPUs."""
    from portcheck.parallel import standins as ops
    return ops.install() if ops.on_cpu(world) else ""


class Whole:
    """A rank's tensor seen at the model's full size: the shape start_from_torch checks torch's against, the
    tensor's name (names_of_one_tensor) its own."""

    def __init__(self, tensor, shape):
        self.name, self.shape = getattr(tensor, "name", None), tuple(shape)


@dataclass
class SplitRank:
    """One rank of a split model as the Paddle side's start_from_torch sees it."""
    model: object
    rank: int
    degree: int
    kinds: dict = field(init=False)
    bare: list = field(init=False)  # the modules of no tensors and no children (key_layouts)
    layouts: dict = field(init=False, default_factory=dict)  # the first forward's keys' (whole_trace)
    shapes: dict = field(init=False, default_factory=dict)  # {key: its shape on each rank} (whole_trace)

    def __post_init__(self):
        self.kinds = split_rank.layouts(self.model)
        self.bare = [name for name, layer in self.model.named_sublayers(include_self=True)
                     if not layer.parameters(include_sublayers=False) and not list(layer.children())]

    def config(self, line: str) -> dict:
        """What the join reads of this rank: its place, each distributed tensor's axis, each module's layout."""
        return {"degree": self.degree, "rank": self.rank, "axes": _axes(self.model),
                "kinds": {k: list(v) for k, v in self.kinds.items()}, "bare": self.bare, "standins": line}

    def whole_trace(self, arrays: dict) -> dict:
        """The first forward's trace of every rank, each output joined as its layer lays it out, with the model's
        description at full size (split_rank.full_modules): the whole model, as pairing sees torch's."""
        import paddle.distributed as dist
        from paddle.distributed import fleet
        from portcheck.mapping.modules import describe
        group = fleet.get_hybrid_communicate_group().get_model_parallel_group()
        everyone = []
        dist.all_gather_object(everyone, dict(arrays), group=group)
        self.layouts = key_layouts(everyone[0], self.kinds, {}, self.bare)
        self.shapes = {k: [np.shape(r.get(k, ())) for r in everyone] for k in everyone[0]}
        whole = split_steps.gathered(everyone, self.layouts)
        return {**describe(self.model), **self.full_modules(), **whole}

    def stopped(self, arrays: dict, error: Exception) -> str:
        return stopped(self.rank, self.degree, arrays, error)

    def full_modules(self) -> dict:
        return split_rank.full_modules(self.model, self.degree)

    def torch_part(self, given: dict, counterparts: dict) -> dict:
        """torch's record as this rank holds its values (the isolated run's): each paired value of a split layer's
        columns cut to the rank's (split._part), the rest whole. counterparts: {torch key: Paddle key}."""
        from portcheck.parallel.split import _part
        out = dict(given)
        for t, p in counterparts.items():
            if t in given:
                out[t] = _part(given[t], self.layouts.get(p), self.shapes.get(p, []), self.rank)
        return out

    def full_params(self) -> dict:
        """model.state_dict() with each distributed tensor at its full shape (its split axis times the degree)."""
        axes, out = _axes(self.model), {}
        for key, tensor in self.model.state_dict().items():
            shape = list(tensor.shape)
            if key in axes:
                shape[axes[key]] *= self.degree
            out[key] = Whole(tensor, shape)
        return out

    def shard(self, state: dict) -> dict:
        """The rank's part of the whole state placed from torch's, each distributed tensor cut on its axis."""
        from portcheck.mapping import shards
        return shards.shard(state, self.model, self.rank, self.degree)


def stopped(rank: int, degree: int, arrays: dict, error: Exception) -> str:
    """The line for a rank's model stopping on torch's first batch (arrays: its trace so far), naming the module it
    stopped in (the last entered that did not return)."""
    from portcheck.core.errors import first_line
    inside = [k[3:].split("#")[0] for k in arrays if k.startswith("in/") and f"out/{k[3:]}" not in arrays]
    return (f"rank {rank} of {degree}: its model stopped in {inside[-1] if inside else 'its forward'} on torch's "
            f"first batch ({first_line(error, 200)}): a split layer was given another width than its shard's "
            "(input_is_parallel, gather_output) [PC936]")


def _module(key: str) -> str:
    """The module of a record key out/<module>#<n>[0]:x (or in/)."""
    return module_of(split_key(key)[1])


def _axes(model) -> dict:
    from portcheck.mapping import shards
    return shards.split_axes(model)


def key_layouts(record: dict, kinds: dict, axes: dict, bare=()) -> dict:
    """{record key: how its ranks' values join} (split_steps.gathered's): a parameter's tensors (grad/, state<i>/,
    final/) on the axis it is split on, a module's output and input by its layer (split_rank.layout_of); a module
    of no tensors and no children (bare: an activation between a column- and a row-parallel layer) given a split
    layer's columns gives columns of its input's shape; the model's own output laid out as the module output it is (the
    head's); a value the isolated run computed (iso/) as the one it stands for; the rest rank 0's."""
    out, columns, module = {}, [], _module
    fed = {}  # {module: the shape of its input where that is a split layer's columns}
    for key, value in record.items():
        match = split_steps.TENSORS.match(key)
        out[key] = axes.get(key[match.end():]) if match else split_rank.layout_of(key, value, kinds)
        if key.startswith("in/") and out[key] == split_rank.ONE and module(key) in bare and \
                any(np.array_equal(value, c) for c in columns):
            out[key], fed[module(key)] = split_rank.CAT, np.shape(value)
        elif key.startswith("out/") and np.shape(value) == fed.get(module(key), ()):
            out[key] = split_rank.CAT
        if key.startswith("out/") and out[key] == split_rank.CAT:
            columns.append(value)
    for key, value in record.items():
        if key.startswith(f"out/{modules.ROOT}"):
            continue  # laid out as the module's output it is, once the others are (split_rank.as_its_module)
        if key.startswith("out/") and out[key] == split_rank.ONE and any(
                np.shape(c) == np.shape(value) and np.array_equal(c, value) for c in columns):
            out[key] = split_rank.CAT  # a module handing on a split layer's columns (a block ending in one)
        elif key.startswith("iso/"):
            out[key] = out.get(key[4:], split_rank.ONE)
    out = split_rank.as_its_module(record, out)
    return {**out, **{k: out.get(k[4:], split_rank.ONE) for k in record if k.startswith(f"iso/out/{modules.ROOT}")}}


ALIKE = ("loss/", "out/", "grad/", "state", "final/")  # the keys every rank holds alike where not split (apart)


@dataclass
class Joined:
    """The ranks' records joined (joined()): the Paddle side's status, its split line, the values whose copies part."""
    status: dict
    degree: int
    standins: str
    apart: list  # [(what, [ranks whose copy is not rank 0's])], in the record's order, the loss first

    def lines(self) -> list:
        said = (f"the Paddle script ran split in tensor parallel across {self.degree} ranks (launched), each rank "
                "recording its shard; joined by each layer's layout: a split tensor's shards on its axis, a "
                "column-parallel output's columns, the rest and the loss rank 0's, checked the same on every rank "
                + ("(bit for bit: the loss, each whole output, each replicated tensor)" if self.standins else
                   "(the loss, bit for bit)"))
        return [said] + ([self.standins] if self.standins else ["Paddle's own model-parallel ops"])

    def apart_line(self) -> str:
        """One line where a rank holds another copy of a value every rank holds alike, "" where none does."""
        if not self.apart:
            return ""
        what, ranks = self.apart[0]
        return (f"the ranks part: rank(s) {', '.join(map(str, ranks))} of {self.degree} hold another {what} than rank "
                f"0 ({len(self.apart)} value(s) every rank holds alike differ): a split layer's sum is missing or "
                "doubled on some rank, or a rank's copy of a replicated tensor steps otherwise [PC933]")


def said_as(key: str) -> str:
    """A record key every rank holds alike, in words: the loss at step i, a module's output, a tensor's gradient."""
    kind, _, name = key.partition("/")
    if kind == "loss":
        return f"loss at step {int(name) + 1}"
    if kind in ("out", "grad"):
        return f"{name}'s output" if kind == "out" else f"grad {name}"
    return f"{name} after step {kind[5:]}" if kind.startswith("state") else f"{name} at the end"


def joined(out: Path, statuses: dict, said: str) -> Joined:
    """Each rank's record (DIR/rank<r>/paddle) joined into DIR/paddle's record and status, as one Paddle side; a
    launched Paddle script whose ranks are not one split model is one line."""
    configs = {r: s["config"].get(SPLIT) for r, s in statuses.items()}
    if not all(configs.values()):
        raise PipelineError(f"the torch script runs one process, {said} {len(statuses)} whose model is not split in "
                            "tensor parallel (data-parallel ranks): give both commands the same number of processes "
                            "(rank r is compared with rank r), or split the Paddle model with fleet's mp_degree "
                            "[PC937]")
    degree = configs[0]["degree"]
    if sorted(statuses) != list(range(degree)) or any(c["rank"] != r or c["degree"] != degree
                                                       for r, c in configs.items()):
        raise PipelineError(f"{said}'s ranks {sorted(statuses)} are not the {degree} ranks of one model-parallel "
                            "group: run it with mp_degree equal to --nproc_per_node (dp_degree 1) [PC934]")
    apart = config_apart([statuses[r]["config"] for r in range(degree)])
    if apart:
        raise PipelineError(f"{said}'s ranks disagree on their configuration: {'; '.join(apart[:3])}"
                            + (f" and {len(apart) - 3} more" if len(apart) > 3 else "") + ": its ranks are not one "
                            "model split; build and train every rank from one configuration, only its rank aside "
                            "[PC483]")
    records = [load_npy(out / f"rank{r}" / "paddle" / RECORD) for r in range(degree)]
    kinds = {k: tuple(v) for k, v in configs[0]["kinds"].items()}
    layouts = key_layouts(records[0], kinds, configs[0]["axes"], set(configs[0]["bare"]))
    split_modules = {name for name, kind in kinds.items() if set(kind[:2]) != {split_rank.ONE}}
    # a split module's near-0 values are flat indices into each rank's part: not joined, rank 0's alone unjudged
    kept = [{k: v for k, v in r.items() if not ((m := NEAR.match(k)) and m[1] in split_modules)} for r in records]
    whole = split_steps.gathered(kept, layouts)
    # the loss always; on a CPU, where each rank computes them bit for bit alike, every whole output and replicated
    # tensor too (a GPU's kernels may order their sums otherwise on each rank)
    # an output of a module given columns that is no row-parallel layer: laid out otherwise, not held alike
    fed = lambda k: layouts.get(f"in/{_module(k)}") == split_rank.CAT and \
        (kinds.get(_module(k)) or (None, None))[1] != split_rank.CAT
    alike = [k for k in records[0] if k.startswith("loss/") or configs[0]["standins"] and k.startswith(ALIKE) and
             layouts.get(k) in (None, split_rank.ONE) and not (k.startswith("out/") and fed(k))]
    apart = [(said_as(k), [r for r in range(1, degree) if not np.array_equal(records[r].get(k), records[0][k])])
             for k in sorted(alike, key=lambda k: not k.startswith("loss/"))]
    folder = out / "paddle"
    folder.mkdir(exist_ok=True)
    save_npy(folder / RECORD, whole)
    status = {**statuses[0], "world": 1, "ranks": degree}
    write_text(folder / STATUS, json.dumps(status, indent=1, default=str) + "\n")
    return Joined(status, degree, configs[0]["standins"], [(what, r) for what, r in apart if r])


def config_apart(configs: list) -> list:
    """One line per configuration field (ALIKE_CONFIG's, the split entry's but the rank) a rank's differs from rank
    0's in, as compare_split says a config field (split.config_differences)."""
    def flat(value, prefix=""):
        if isinstance(value, dict) and value:
            return {k: v for key, item in value.items() for k, v in flat(item, f"{prefix}{key}.").items()}
        return {prefix[:-1]: value}
    return split.config_differences([flat({**{k: c.get(k) for k in ALIKE_CONFIG}, SPLIT: {
        k: v for k, v in (c.get(SPLIT) or {}).items() if k != "rank"}}) for c in configs])


def launched(argvs: dict, out: Path, steps: int, judge, **settings) -> int:
    """`run` with torch's script in one process and the Paddle script under a launcher: torch's side, then the
    Paddle ranks (each fed and started from DIR/torch), joined into DIR/paddle, then torch's float64 run and its runs
    against itself (the float64 run reads the joined pairing), judged once as one process's are (judge:
    judge_run.judge).
    0 green, 1 red."""
    from portcheck.scripts.folders import SAID, SIDES, Sealed
    from portcheck.scripts.launch import run_ranks, run_side
    sealed, statuses = Sealed(out), {}
    statuses["torch"] = run_side("torch", argvs["torch"], out, steps, sealed, **settings)
    ranks = run_ranks("paddle", argvs["paddle"], out, steps, True, sealed, torch_whole=True, **settings)
    joint = joined(out, ranks, f"the {SAID['paddle']} script")
    sealed.side(out / "paddle", "the Paddle script's ranks, joined")
    for side, fw in SIDES[2:]:
        statuses[side] = run_side(side, argvs[fw], out, steps, sealed, **settings)
    statuses["paddle"] = joint.status
    print(f"\n===== the Paddle script's {joint.degree} ranks joined, against torch's one process")
    for line in joint.lines():
        print(f"  ({line})")
    code = judge(out, statuses, steps, sealed=sealed)
    said = joint.apart_line()
    print(f"\n{'RED' if code or said else 'green'}: " + (
        said or ("the joined ranks part from torch's run (the summary above)" if code else
                 f"the Paddle model split across {joint.degree} ranks, joined, is the same run for the first steps")))
    return 1 if code or said else 0
