"""What each rank of a tensor-parallel Paddle model does under portcheck.parallel.split: fleet set up for model
parallel, the CPU stand-ins installed where there is no GPU (standins), the model built and its shard loaded and
checked (mapping.shards), every module's output recorded (mapping.trace) with how its layer lays it out across the
ranks, written to the run's folder for the parent to gather; with isolate=True, a forced run on the rank's part
of torch's values (forward.isolate's forced_run) once the parent has paired the ranks' records. Imports numpy,
core, mapping, forward's isolate and this package's standins; Paddle inside its functions."""
import dataclasses
import json
import traceback
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError, first_line
from portcheck.mapping import fused, modules, shards
from portcheck.mapping.trace import STOPPED, trace

CAT, ONE = "cat", "one"  # an output's layout: columns on the last axis per rank, or whole and the same on every rank
ERROR, DONE = "error.txt", "done.json"  # each rank's folder: the one line it stopped on, or what it recorded
REQUEST, KEPT = "request.json", "kept.json"  # isolate=True: the parent's torch values for the rank, what it computed
STAGE = "stage.txt"  # each rank's folder: how far it got (stage_name), so that a rank that hangs is named
LOG = "rank.log"  # each rank's folder: what the libraries print on it


def layouts(model) -> dict:
    """{module name: (its output's layout, its first input's)} as its layer defines it: a ColumnParallelLinear
    without gather_output gives its columns, a RowParallelLinear with input_is_parallel takes them and gives the
    whole after its all-reduce, a VocabParallelEmbedding the whole; a module holding a tensor split on its last axis
    (paddlenlp's LlamaLMHead) its columns where its output is as wide as its part. Every other module: the whole.
    A port's own subclass of fleet's layer (its forward rewritten) is laid out as the layer it derives from."""
    out = {}
    for name, layer in model.named_sublayers(include_self=True):
        lineage = [k.__name__ for k in type(layer).__mro__]
        kind = next((k for k in ("ColumnParallelLinear", "RowParallelLinear") if k in lineage), type(layer).__name__)
        if kind == "ColumnParallelLinear":
            out[name] = (ONE if layer.gather_output else CAT, ONE)
        elif kind == "RowParallelLinear":
            out[name] = (ONE, CAT if layer.input_is_parallel else ONE)
        else:
            split = [p for p in layer.parameters(include_sublayers=False) if getattr(p, "is_distributed", False)
                     and int(getattr(p, "split_axis", 0)) == len(p.shape) - 1 and kind != "VocabParallelEmbedding"]
            # its columns only where its output is as wide as its part (with gather_output-like joins: the whole)
            out[name] = (CAT, ONE, int(split[0].shape[-1])) if split else (ONE, ONE)
    return out


def full_modules(model, degree: int, parts: dict = None) -> dict:
    """modules.describe's mod/ keys with each distributed tensor at its full size (its split axis times the
    degree): the model as pairing sees torch's, one process. parts: {module: Fused} (rank_parts), each part's
    mod/ key as fused.mark writes it, at its full size too (the output axis, Paddle's last, divided)."""
    out = {}
    flat = lambda children, shapes: np.array([children, len(shapes)] + [d for s in shapes for d in (len(s), *s)],
                                             dtype=np.int64)
    for name, layer in model.named_sublayers(include_self=True):
        shapes = []
        for p in layer.parameters(include_sublayers=False):
            shape = list(p.shape)
            if getattr(p, "is_distributed", False):
                shape[int(getattr(p, "split_axis", 0))] *= degree
            shapes.append(shape)
        children, spec = len(list(layer.children())), (parts or {}).get(name)
        # a packed module (output=False): a container of its parts, which never ran, as fused.mark writes it
        out[f"{modules.META}{name or modules.ROOT}/{type(layer).__name__}"] = flat(children, shapes) if \
            spec is None or spec.output else np.array([children + len(spec.parts), 0], dtype=np.int64)
        for part, share in zip(spec.parts, spec.shares) if spec else ():  # each part its share of the columns
            out[f"{modules.META}{name}.{part}/{type(layer).__name__}"] = flat(
                children if spec.output else 0, [s[:-1] + [s[-1] * share // sum(spec.shares)] for s in shapes])
    return out


def rank_parts(model, layouts, degree: int) -> dict:
    """{module: Fused} of the rank's model its layouts declare fused, each with the rank's heads (a rank holds
    its heads' parts, per head as the whole does; parts one after the other, each its columns, as paddlenlp splits
    them). The degree divides the heads: split.checked_layouts, before any rank starts."""
    return {name: dataclasses.replace(spec, heads=spec.heads // degree)
            for name, spec in fused.specs(model, layouts).items()}


def run(folder, jobs, inputs, degree, isolate=False, also=None):
    """One rank's whole work (paddle.distributed.spawn's target): each job's record in folder/rank<r>/<n>/ (a
    split.Another: its model built, its shard loaded, its change made), then also(that folder, the model, rank,
    degree) where given (split.compare_splits').
    Any failure is one line in its folder's error.txt; the parent reads it."""
    import os
    import paddle.distributed as dist
    # spawn's own setting, read now: Paddle's get_rank keeps the first it read, rank 0 for every rank where a library
    # read it as this process started (paddlenlp imported at the top of the main module); fleet's setup reads anew
    os.setpgid(0, 0)  # a group of its own: what it starts (a build's child) ends with it (split.Ranks.end)
    rank = int(os.environ.get("PADDLE_TRAINER_ID", dist.get_rank()))
    where = Path(folder) / f"rank{rank}"
    where.mkdir(parents=True, exist_ok=True)
    # what Paddle, fleet and paddlenlp print on each rank goes to the rank's folder, not between the report's lines
    log = os.open(where / LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1), os.dup2(log, 2)
    reached = lambda stage: (where / STAGE).write_text(str(stage))
    try:
        reached(0)
        line = _setup(degree)
        reached(1)
        config = None
        for n, job in enumerate(jobs):
            model = _built(job.build, rank, degree, job.state)
            config = _config(model) if config is None else config
            reached(2 + 2 * n)
            if job.change is not None:
                model = job.change(model, rank) or model
            parts = rank_parts(model, job.layouts, degree)
            _record(where / str(n), model, inputs, degree, parts)
            reached(3 + 2 * n)
            if isolate:
                forced(where / str(n), model, inputs, parts)
            if also is not None:
                also(where / str(n), model, rank, degree)
        write(where / DONE, json.dumps({"standins": line, "config": config, "peak_mb": _peak_mb()}))
    except Exception as e:  # noqa: BLE001 - any failure of a rank is its one line, read by the parent
        message = str(e) if isinstance(e, PipelineError) else first_line(e, 300)
        (where / ERROR).write_text(message + "\n" + traceback.format_exc())
        raise SystemExit(1)


def _peak_mb():
    """This process's peak resident memory in MB (Linux's VmHWM: its own, where ru_maxrss keeps the parent's from
    before the exec that started it), or None where the system does not say."""
    try:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) / 1024


def _config(model) -> dict:
    """The model's config as JSON-able values (paddlenlp's PretrainedConfig), its rank left out: {} without one."""
    config = getattr(model, "config", None)
    values = config.to_dict() if hasattr(config, "to_dict") else {}
    return {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in values.items()
            if k != "tensor_parallel_rank"}


def stage_name(stage: int) -> str:
    """A rank's stage number (run's `reached`) in words: started, fleet set up, then per run its model built and
    its modules recorded."""
    if stage < 2:
        return ("started", "set up fleet")[max(stage, 0)]
    return f"{'built its model' if stage % 2 == 0 else 'recorded its modules'} (run {stage // 2})"


def _setup(degree):
    """fleet for model parallel on `degree` ranks; the stand-ins' line on a CPU, else ""."""
    from paddle.distributed import fleet
    from portcheck.parallel import standins
    line = standins.install() if standins.on_cpu(degree) else ""
    strategy = fleet.DistributedStrategy()
    strategy.hybrid_configs = {"dp_degree": 1, "mp_degree": degree, "pp_degree": 1, "sharding_degree": 1}
    fleet.init(is_collective=True, strategy=strategy)
    return line


def _built(build, rank, degree, state):
    """The rank's model from the caller's build(rank, degree), in eval mode, its shard loaded when a state is given."""
    model = build(rank, degree)
    if state is not None:
        model.set_state_dict(shards.checked_shard(state, model, rank, degree))
    return model.eval()


def _record(where: Path, model, inputs, degree, parts=None):
    """The rank's record written: arrays.npz (k0, k1, ... in run order), keys.json (their keys, each with its
    layout); a run that stopped names the module it stopped in. parts: rank_parts', each fused module's output
    cut into its parts here, each laid out as the module's."""
    where.mkdir(parents=True, exist_ok=True)
    record = fused.mark(trace(model, inputs), parts or {}, model)
    record.update(full_modules(model, degree, parts))  # the same mod/ keys, each tensor at its full size
    kinds = layouts(model)
    if parts:
        record = fused.cut(record, False)
        kinds.update({f"{name}.{part}": kinds[name] for name, spec in parts.items() for part in spec.parts})
    laid = as_its_module(record, {key: layout_of(key, value, kinds) for key, value in record.items()})
    np.savez(where / "arrays.npz", **{f"k{i}": np.asarray(value) for i, value in enumerate(record.values())})
    write(where / "keys.json", json.dumps({"keys": [[key, laid[key]] for key in record], "stopped": _stopped(record)}))


def as_its_module(record: dict, layouts: dict) -> dict:
    """layouts ({record key: layout}) with the model's own output laid out as the module's output it is (the head's:
    its columns where the head keeps each rank's columns, tensor_parallel_output=True), else whole: what the forward
    and the steps both gather it by."""
    out = dict(layouts)
    for key, value in record.items():
        if key.startswith(f"out/{modules.ROOT}"):
            out[key] = next((layouts[k] for k, v in record.items() if k.startswith("out/") and not k.startswith(
                f"out/{modules.ROOT}") and np.shape(v) == np.shape(value) and np.array_equal(v, value)), ONE)
    return out


def write(path: Path, text: str):
    """A file the other side polls for: whole when it appears (written beside it, then renamed)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.replace(path)


def forced(where: Path, model, inputs, parts=None):
    """isolate=True: the rank's modules run on its part of torch's values (the parent's request, once it is
    there: it pairs the ranks' records first), every value they computed written: kept.npz, kept.json. parts:
    rank_parts', each fused module's parts forced and kept as its parts'."""
    import time
    from portcheck.forward.isolate import forced_run
    from portcheck.mapping.trace import values
    while not (where / REQUEST).is_file():  # the parent ends this process if it never comes
        time.sleep(0.05)
    request = json.loads((where / REQUEST).read_text())
    with np.load(where / "torch.npz", allow_pickle=False) as arrays:
        torch_part = {key: arrays[f"k{i}"] for i, key in enumerate(request["keys"])}
    kept = []

    def keep(key, tensor, source):
        if key is None:
            kept.clear()
        else:
            kept.append((key, np.array(values(tensor)), source))
    _, error = forced_run(model, inputs, torch_part, request["calls"], request["leaves"], keep, parts=parts,
                          through=set(request["through"]), applied=request["applied"])
    np.savez(where / "kept.npz", **{f"k{i}": v for i, (_, v, _) in enumerate(kept)})
    write(where / KEPT, json.dumps({"keys": [[k, s] for k, _, s in kept], "error": error}))


def read_kept(where: Path) -> tuple:
    """([(key, value, source)], error) a rank's forced run wrote."""
    meta = json.loads((where / KEPT).read_text())
    with np.load(where / "kept.npz", allow_pickle=False) as arrays:
        return [(k, arrays[f"k{i}"], s) for i, (k, s) in enumerate(meta["keys"])], meta["error"]


def layout_of(key, value, kinds) -> str:
    """A record key's layout across the ranks (layouts): out/ and in/ keys by their module's; the rest the same."""
    side, _, rest = key.partition("/")
    if side not in ("out", "in"):
        return ONE
    name = rest.split("#")[0].split("[")[0].split(":")[0]
    kind = kinds.get(name)
    if kind is None:
        return ONE
    if side == "in":
        return kind[1]
    if len(kind) == 3:  # a module holding a tensor split on its last axis: its columns where it is that wide
        return CAT if np.ndim(value) and np.shape(value)[-1] == kind[2] else ONE
    return kind[0]


def _stopped(record):
    """The error the run stopped on, with the module it was inside (the last entered that did not return), or None."""
    error = next((k[len(STOPPED):] for k in record if k.startswith(STOPPED)), None)
    if error is None:
        return None
    inside = [k[len("in/"):] for k in record if k.startswith("in/") and f"out/{k[len('in/'):]}" not in record]
    return f"in {inside[-1]}: {error}" if inside else error
