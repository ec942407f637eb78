"""compare_split: a Paddle model in tensor parallel (its ranks as processes of paddle.distributed.spawn) judged
module by module against the torch model in this process, by judge_forward. Each rank records its modules
(split_rank); each output is gathered as its layer defines it (a column-parallel output's columns joined on the last
axis; a row-parallel or vocabulary-parallel output, after its all-reduce, taken whole; a plain layer's that holds one
rank's columns, as wide as torch's joined, joined: widened); then each rank's own part is
judged against torch's (its columns, or its whole copy), and a module whose part differs on any rank is red, with
the ranks named; isolate=True judges each module on torch's own values too, each rank's module fed its part of
them (portcheck.forward.isolate's judge, on the ranks' forced runs gathered). The allowance is judge_forward's:
torch's own fp32 error, measured. Imports numpy, core, mapping, forward's compare, judging, result,
twin and isolate, and this package's split_rank and standins; Paddle only inside its functions."""
import dataclasses
import json
import multiprocessing.connection
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError, first_line
from portcheck.forward.compare import judge_forward, record_forward
from portcheck.forward.judging import judge_one
from portcheck.forward.result import ForwardReport
from portcheck.forward.twin import F64
from portcheck.mapping import experts, fused
from portcheck.parallel import split_rank

TIMEOUT = 600  # seconds a launch may take, every rank: a rank that hangs ends them all


@dataclass
class SplitReport(ForwardReport):
    degree: int = 1
    ranks: dict = field(default_factory=dict)   # {torch row name: [the ranks whose own part differs]}
    standins: str = ""                          # the CPU stand-ins' line, "" where Paddle's own ops ran
    stop_ranks: list = field(default_factory=list)  # the ranks whose run stopped (report.stopped["paddle"] says how)
    peak_mb: list = field(default_factory=list)     # each rank's peak resident memory, MB

    @property
    def passed(self) -> bool:
        return super().passed and not self.ranks

    def parted(self, name=None) -> list:
        """The ranks where `name` (default the first diverging module) parts from torch."""
        name = self.first_diverging if name is None else name
        return self.ranks.get(str(name), list(range(self.degree)) if name is not None else [])

    def split_line(self) -> str:
        """How the Paddle model ran: its ranks, and the CPU stand-ins or Paddle's own ops."""
        return f"the Paddle model ran split across {self.degree} ranks" + (
            f"; {self.standins}" if self.standins else "; Paddle's own model-parallel ops")

    def table(self) -> str:
        lines = [super().table(), self.split_line()]
        first = self.first_diverging
        if first is not None and (str(first) in self.ranks or not self.stopped):
            whole = "" if str(first) in self.ranks else " (its output is whole on every rank)"
            lines.append(f"{first.both} parts from torch on rank {', '.join(map(str, self.parted()))} of "
                         f"{self.degree}{whole}")
        if len(self.ranks) > (first is not None and str(first) in self.ranks):
            named = [f"{name} (rank {', '.join(map(str, r))})" for name, r in self.ranks.items()]
            lines.append(f"{len(named)} module outputs part from torch on some rank: {', '.join(named[:3])}"
                         + (f" and {len(named) - 3} more" if len(named) > 3 else ""))
        stop = self.stopped.get("paddle")
        lines += [f"the Paddle model stopped on rank {', '.join(map(str, self.stop_ranks))}: {stop}"] \
            if stop and self.stop_ranks else []
        return "\n".join(lines)


@dataclass
class Another:
    """Another model judged in the same launch of the ranks, as a variant of compare_splits: its own torch model,
    build(rank, degree), single-card state (None: build loads its own) and layouts (convert's: a fused q/k/v's
    portcheck.Fused), and change(model, rank), a variant's function, made on each rank once its shard is loaded
    (None: the model as built). A launch costs a Paddle start on every rank: two models share one."""
    torch_model: object
    build: object
    state: dict = None
    layouts: dict = None
    change: object = None


def compare_split(torch_model, build, inputs, degree=2, state=None, isolate=False, timeout=TIMEOUT,
                  stall=None, layouts=None) -> SplitReport:
    """The Paddle model built by build(rank, degree) on each of `degree` ranks (a function at the top level of a
    module: each rank is a new process), judged against torch_model (eval mode is the caller's; Paddle's is set).
    state: a single-card Paddle state (convert's), each rank's shard cut from it and checked against its model
    (portcheck.mapping.shards); None: build loads its own (paddlenlp's from_pretrained(..., tensor_parallel_degree=,
    tensor_parallel_rank=)). isolate=True: every paired module judged on torch's own values too (compare_forward's),
    each rank's module fed its part of torch's input. Returns a SplitReport: compare_forward's report, with .ranks
    and .parted(). timeout: seconds the whole launch may take; stall: seconds a rank may stay behind the others
    (every one started) with none moving on (fleet set up, a model built, its modules recorded): a rank that hangs
    while the others wait for it is named then, not at the timeout. layouts: convert's, its portcheck.Fused
    entries judging each part of a fused module on its own (GPT-2's c_attn against paddlenlp's qkv_proj, each rank's
    its heads' columns: portcheck.mapping.recipes.paddlenlp_gpt)."""
    return compare_splits(torch_model, build, inputs, degree, state, isolate=isolate, timeout=timeout,
                          stall=stall, layouts=layouts)[None]


def compare_splits(torch_model, build, inputs, degree=2, state=None, variants=None, isolate=False,
                   timeout=TIMEOUT, also=None, then=None, stall=None, layouts=None) -> dict:
    """compare_split for the model as built and for each of `variants` ({name: fn(model, rank) changing the
    rank's model, or returning another; or an Another: another model, against its own torch model}), all in one
    launch of the ranks: {None: the model's report, name: ...}.
    also(folder, model, rank, degree), a function at the top level of a module: more work each rank does on each
    run's model once recorded, in that run's folder (portcheck.gradients.split_steps' training steps);
    then(ranks, n, report): the parent's side of it, after run n is judged (ranks.folder / f"rank{r}" / str(n))."""
    jobs = {None: Another(torch_model, build, state, layouts)}
    for name, variant in (variants or {}).items():
        jobs[name] = variant if isinstance(variant, Another) else Another(torch_model, build, state, layouts, variant)
    for job in jobs.values():
        checked_degree(job.torch_model, degree), checked_layouts(job.layouts, degree)
        if hasattr(job.build, "checked"):  # a build loading a folder (split_folders.Pretrained): the folder checked
            job.build.checked(degree)
    # each torch model recorded once, and paired once: a variant's modules are its model's
    first = [next(i for i, o in enumerate(jobs.values()) if o.torch_model is j.torch_model and o.layouts == j.layouts)
             for j in jobs.values()]
    torch_records, paired = {}, {}
    folder = Path(tempfile.mkdtemp(prefix="portcheck_split_"))
    ranks = Ranks(folder, degree, timeout, stall)
    try:
        ranks.start([dataclasses.replace(j, torch_model=None) for j in jobs.values()], inputs, isolate, also)
        out = {}
        for n, (name, job) in enumerate(jobs.items()):
            if first[n] not in torch_records:
                torch_records[first[n]] = torch_record_of(job, inputs)
            torch_record = torch_records[first[n]]
            ranks.wait(lambda: all((folder / f"rank{r}" / str(n) / "keys.json").is_file() for r in range(degree)))
            # torch's packed experts said as a list where the rank's model holds one (mapping.experts)
            experts.mark(torch_record, job.torch_model, _load(folder / "rank0" / str(n))[0])
            report = judged(torch_record, folder, n, degree, paired.get(first[n]))
            paired.setdefault(first[n], dict(report.pairing.pairs))
            if isolate:
                isolated(job.torch_model, inputs, torch_record, report, ranks, n)
            out[name] = report
            if then is not None:
                then(ranks, n, report)
        line, peaks = ranks.finish()
        for report in out.values():
            report.standins, report.peak_mb = line, peaks
        return out
    finally:
        ranks.end()
        shutil.rmtree(folder, ignore_errors=True)


def torch_record_of(job: Another, inputs) -> dict:
    """torch's record_forward of a job's model, each fused module its layouts declare cut into its parts."""
    record = record_forward(job.torch_model, inputs)
    specs = fused.specs(job.torch_model, job.layouts)
    return fused.cut(fused.mark(record, specs, job.torch_model), False) if specs else record


def checked_degree(torch_model, degree):
    """A degree that splits the model's heads and vocabulary (its config's, where it has one), else one line."""
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
        raise PipelineError(f"degree={degree!r}: give the number of ranks, an integer >= 1 [PC427]")
    config = getattr(torch_model, "config", None)
    for field_ in ("num_attention_heads", "num_key_value_heads", "vocab_size"):
        size = getattr(config, field_, None)
        if isinstance(size, int) and size % degree:
            raise PipelineError(f"degree {degree} does not divide the model's {field_} ({size}): each rank holds an "
                                f"equal part; give a degree that divides it [PC422]")


def checked_layouts(layouts, degree):
    """Each fused module's heads split in `degree` equal parts (each rank holds its heads' parts), else one line."""
    for name, spec in (layouts or {}).items():
        if isinstance(spec, fused.Fused) and spec.heads % degree:
            raise PipelineError(f"layouts[{getattr(name, '__name__', name)!r}]: its {spec.heads} heads do not split "
                                f"in {degree} equal parts (each rank holds its heads' parts); give a degree that "
                                "divides them [PC926]")


class Ranks:
    """The ranks of one launch: started, waited for while the parent judges, ended. A rank that fails, dies or
    outlasts the timeout (or stays behind the others `stall` seconds, none moving on) is one line naming it, every
    rank ended first."""

    def __init__(self, folder: Path, degree: int, timeout: float, stall=None):
        self.folder, self.degree, self.timeout, self.stall, self.processes = folder, degree, timeout, stall, []

    def start(self, jobs, inputs, isolate, also=None):
        """Every rank started on `jobs` (Another's, their torch models left here), each in turn."""
        import paddle.distributed as dist
        for what, fn in [("build", j.build) for j in jobs] + [("a variant", j.change) for j in jobs if j.change] + \
                [("also", also)] * bool(also):
            reachable(what, fn)
        from portcheck.parallel import standins
        cpu = standins.on_cpu(self.degree)
        if cpu:
            standins.checked()  # a Paddle whose names moved: its one line here, before any rank starts
        self.deadline = time.monotonic() + self.timeout
        args = (str(self.folder), jobs, inputs, self.degree, isolate, also)
        # kept while the ranks run: its queues, which each rank unpickles as it starts, die with it
        self.context = context = dist.spawn(split_rank.run, args=args, nprocs=self.degree, join=False, daemon=True,
                                            backend="gloo" if cpu else "nccl")
        self.processes = list(context.processes)

    def wait(self, ready):
        """Until ready() holds, or a rank fails, or the time is out (then every rank ended and one line)."""
        failed, stalled, stages, moved = None, False, None, time.monotonic()  # the parent's own work is no stall
        while not ready():
            failed = next((r for r, p in enumerate(self.processes) if p.exitcode not in (None, 0)), None)
            left = self.deadline - time.monotonic()
            if failed is not None or left <= 0 or not any(p.is_alive() for p in self.processes):
                break
            if self.stall is not None:
                now = [_stage(self.folder, r) for r in range(self.degree)]
                moved, stages = (moved, stages) if now == stages else (time.monotonic(), now)
                # a rank left behind the others, none moving on: the lockstep ranks' own work (a collective setup,
                # a build) never counts, nor does the parent's between waits
                stalled = 0 <= min(now) < max(now) and time.monotonic() - moved > self.stall
                if stalled:
                    break
            multiprocessing.connection.wait([p.sentinel for p in self.processes if p.is_alive()],
                                            timeout=min(left, 0.05))
        else:
            return
        # every rank ended, none failing, the time not out: what was waited for never came (or came as they ended)
        ended = failed is None and not stalled and time.monotonic() < self.deadline
        if ended and ready():
            return
        self.end()
        folder, degree = self.folder, self.degree
        if failed is not None:
            error = _error(folder, failed)
            raise PipelineError(f"rank {failed} of {degree} " + (f"stopped: {error}" if error else
                                f"died (exit code {self.processes[failed].exitcode})") + "; every rank ended [PC423]")
        stages = [_stage(folder, r) for r in range(degree)]
        behind = [r for r in range(degree) if stages[r] == min(stages)]  # the others wait for them in a collective
        if ended:
            raise PipelineError(f"rank {', '.join(map(str, behind))} of {degree} ended (exit code 0) without its "
                                f"record: {_behind(stages)}; look for what ends that rank early (an exit in the build, "
                                "a rank that took another's number) [PC932]")
        limit = (f"did not move on for {self.stall} s", "stall=") if stalled else \
            (f"did not finish in {self.timeout} s", "timeout=")
        raise PipelineError(f"rank {', '.join(map(str, behind))} of {degree} {limit[0]}: {_behind(stages)}; every "
                            f"rank ended; look for what only that rank does, or give {limit[1]} more seconds if the "
                            "model is that slow [PC424]")

    def finish(self) -> tuple:
        """Every rank's end waited for, their configs compared: (the stand-ins' line, each rank's peak memory)."""
        self.wait(lambda: all((self.folder / f"rank{r}" / split_rank.DONE).is_file() for r in range(self.degree)))
        done = [json.loads((self.folder / f"rank{r}" / split_rank.DONE).read_text()) for r in range(self.degree)]
        differ = config_differences([d["config"] for d in done])
        if differ:
            raise PipelineError(f"the ranks disagree on the model's config: {'; '.join(differ)}; build every rank "
                                "from one config, its rank aside [PC429]")
        return "; ".join(sorted({d["standins"] for d in done if d["standins"]})), [d["peak_mb"] for d in done]

    def end(self):
        for p in self.processes:
            p.join(timeout=0 if p.exitcode is None and not self._done(p) else 5)
            if p.is_alive():
                p.kill()
            p.join()
        for p in self.processes:  # what a rank started (a build's child, its own workers): in the rank's own group
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:  # none left, or the rank ended before it made its group
                pass

    def _done(self, process) -> bool:
        rank = self.processes.index(process)
        return (self.folder / f"rank{rank}" / split_rank.DONE).is_file()


def reachable(what: str, fn):
    """fn, which each rank imports, picklable; else one line naming `what`."""
    import pickle
    try:
        pickle.dumps(fn)
    except Exception as e:  # noqa: BLE001 - pickle says "Can't pickle" in several exception types
        raise PipelineError(f"{what} ({getattr(fn, '__qualname__', fn)!r}) cannot reach the ranks: each rank is a new "
                            "process that imports it, so give a function defined at the top level of a module (not a "
                            f"lambda, nor one defined inside another): {first_line(e)} [PC922]") from None


def _stage(folder: Path, rank: int) -> int:
    path = folder / f"rank{rank}" / split_rank.STAGE
    return int(path.read_text()) if path.is_file() and path.read_text().strip().isdigit() else -1


def _behind(stages: list) -> str:
    """Where the ranks left behind stopped, and how far the others got."""
    said = lambda s: "never started" if s < 0 else f"it had {split_rank.stage_name(s)}" if s else "it had started"
    ahead = sorted({s for s in stages if s > min(stages)})
    return said(min(stages)) + (f", the other ranks had {split_rank.stage_name(ahead[-1])}" if ahead else
                                ", as had every rank")


def config_differences(configs: list) -> list:
    """One line per config field the ranks' models disagree on (rank 0's against each other's)."""
    first, out = configs[0] or {}, []
    for rank, config in enumerate(configs[1:], 1):
        for key in sorted(set(first) | set(config or {})):
            if first.get(key) != (config or {}).get(key):
                out.append(f"{key}: rank 0 {first.get(key)!r}, rank {rank} {(config or {}).get(key)!r}")
    return out


def _error(folder: Path, rank: int) -> str:
    path = folder / f"rank{rank}" / split_rank.ERROR
    return path.read_text().splitlines()[0] if path.is_file() else ""


def _load(where: Path) -> tuple:
    """A rank's record ({key: array}), its keys' layouts and the error its run stopped on."""
    meta = json.loads((where / "keys.json").read_text())
    with np.load(where / "arrays.npz", allow_pickle=False) as arrays:
        record = {key: arrays[f"k{i}"] for i, (key, _) in enumerate(meta["keys"])}
    return record, {key: layout for key, layout in meta["keys"]}, meta["stopped"]


def gathered(records: list, layouts: dict) -> dict:
    """One record of the whole model from the ranks': a column layout's parts joined on the last axis, the rest
    rank 0's (each rank's own is judged apart, ranks_apart); keys only some ranks hold: rank 0's; a fused module's
    heads, each rank's, counted for them all."""
    out = {}
    for key, value in records[0].items():
        parts = [r.get(key) for r in records]
        if key.startswith(fused.KEY):
            out[key] = np.concatenate([np.asarray(value).reshape(-1)[:1] * len(records),
                                       np.asarray(value).reshape(-1)[1:]])
        elif axis_of(layouts.get(key)) is not None and all(p is not None and np.ndim(p) for p in parts):
            out[key] = np.concatenate(parts, axis=axis_of(layouts.get(key)))
        else:
            out[key] = value
    return out


def with_shards(judge, forward_of, gather, torch_record: dict, records: list, layouts: dict, name_map=None) -> tuple:
    """judge(torch_record, gather(records, layouts), name_map) (judge_forward, or judge_backward: forward_of(its
    report) its forward's), with each plain layer that holds one rank's shard paired where it stands (shard_pairs)
    and its input or output joined as wide as torch's (widened), judged again where either finds one: (the report,
    the layouts it gathered by)."""
    report = judge(torch_record, gather(records, layouts), name_map)
    forward = forward_of(report)
    if forward is None:
        return report, layouts
    extra = shard_pairs(forward.pairing, len(records))
    if extra:
        name_map = {**(name_map or dict(forward.pairing.pairs)), **extra}
        report = judge(torch_record, gather(records, layouts), name_map)
        forward = forward_of(report)
    name_map = name_map or dict(forward.pairing.pairs)
    for _ in range(3):  # a module paired once its neighbours' parts are joined (an activation between two) is joined
        wider = widened(torch_record, records, layouts, forward.counterparts)
        if wider == layouts:
            break
        layouts = wider  # judged again on the parts joined, each module paired as it was
        report = judge(torch_record, gather(records, layouts), name_map)
        forward = forward_of(report)
    return report, layouts


def shard_pairs(pairing, degree: int) -> dict:
    """{torch module: Paddle module} of each Paddle module left unpaired whose tensors are the unpaired torch
    module's where it stands (pairing.Pairing.by_place), each as large as one of torch's or a 1/degree share of it
    (by size, each side's in its own layout): a plain layer holding one rank's rows or columns, paired with torch's
    whole layer though its shapes differ."""
    t_calls = {c.name: c for c in pairing.torch_calls if c.name in set(pairing.torch_unpaired) and "#" not in c.name}
    out = {}
    for call in pairing.paddle_calls:
        if "#" in call.name or not call.tensors or call.name not in set(pairing.paddle_unpaired):
            continue
        t_name = pairing.by_place(call.name, t_calls)
        sizes = [sorted(int(np.prod(x)) for x in tensors) for tensors in (call.tensors, t_calls[t_name].tensors
                                                                            if t_name else ())]
        if t_name not in out and len(sizes[0]) == len(sizes[1]) and sizes[0] != sizes[1] and \
                all(a in (b, b // degree) and a * degree >= b for a, b in zip(*sizes)):
            out[t_name] = call.name
    return out


def axis_of(layout):
    """The axis a layout joins the ranks' parts on (CAT: the last; a number: that axis), or None (whole)."""
    if layout == split_rank.CAT:
        return -1
    return int(layout) if isinstance(layout, str) and layout.lstrip("-").isdigit() else None


def widened(torch_record: dict, records: list, layouts: dict, counterparts: dict) -> dict:
    """layouts with each module's input or output that no split layer lays out, yet holds one rank's columns, laid
    out as columns: every rank's as wide, joined as wide as torch's counterpart, each alone narrower (a plain Linear
    holding one rank's rows of a row-parallel layer, its input the rank's columns; an activation between a column-
    and a row-parallel layer). So a plain layer on a shard is judged with its input joined, and named itself. One
    that holds one rank's share of another axis (a per-head norm after a column-parallel projection, its output
    [batch, length, the rank's heads, head size]; attention weights [batch, the rank's heads, ...]) is laid out
    as that axis, counted from the end."""
    out = dict(layouts)
    for t_key, p_key in counterparts.items():
        if not p_key.startswith(("in/", "out/")) or layouts.get(p_key, split_rank.ONE) != split_rank.ONE:
            continue
        a, parts = torch_record.get(t_key), [r.get(p_key) for r in records]
        if a is None or any(p is None for p in parts) or len({np.shape(p) for p in parts}) != 1:
            continue
        shape, whole = np.shape(parts[0]), np.shape(a)
        if shape and whole and shape[:-1] == whole[:-1] and shape[-1] < whole[-1] == shape[-1] * len(parts):
            out[p_key] = split_rank.CAT
        elif len(shape) == len(whole) and shape[-1:] == whole[-1:]:
            apart = [i for i, (s, w) in enumerate(zip(shape, whole)) if s != w]
            if len(apart) == 1 and shape[apart[0]] * len(parts) == whole[apart[0]]:
                out[p_key] = str(apart[0] - len(shape))
    return out


def ranks_apart(report, torch_record: dict, records: list, layouts: dict) -> dict:
    """{torch row name: [ranks]} for each judged output some rank's own part of differs from torch's: its columns,
    or its whole copy; each such row replaced by the first differing rank's where the gathered one passed."""
    out = {}
    for i, row in enumerate(report.rows):
        p_key = report.counterparts.get(f"out/{row.name}")
        a, ref = torch_record.get(f"out/{row.name}"), torch_record.get(F64 + f"out/{row.name}")
        if p_key is None or a is None or ref is None or not row.judged:
            continue
        parts = [r.get(p_key) for r in records]
        if any(p is None for p in parts):
            continue
        axis = axis_of(layouts.get(p_key))
        if axis is not None and (np.ndim(a) < -axis or any(np.ndim(p) != np.ndim(a) for p in parts) or
                                 a.shape[axis] != sum(np.shape(p)[axis] for p in parts)):
            continue  # shapes differ: the gathered row says so
        edges = np.cumsum([0] + [np.shape(p)[axis] for p in parts]) if axis is not None else None
        cut = (lambda x, r: np.take(x, range(edges[r], edges[r + 1]), axis=axis)) if axis is not None else \
            (lambda x, r: x)
        rows = [judge_one(row.name, cut(a, r), cut(ref, r), p) for r, p in enumerate(parts)]
        bad = [r for r, judged in enumerate(rows) if not judged.passed]
        if bad:
            out[row.name] = bad
            if row.passed:
                report.rows[i] = rows[bad[0]]
    return out


def judged(torch_record: dict, folder: Path, n: int, degree: int, name_map=None) -> SplitReport:
    """Run n's records of every rank gathered and judged against torch's (judge_forward), each rank's part too."""
    loaded = [_load(folder / f"rank{r}" / str(n)) for r in range(degree)]
    records, layouts = [x[0] for x in loaded], loaded[0][1]
    stops = [r for r, x in enumerate(loaded) if x[2]]
    try:
        base, layouts = with_shards(judge_forward, lambda r: r, gathered, torch_record, records, layouts, name_map)
    except PipelineError as e:
        if not stops:
            raise
        raise PipelineError(f"the Paddle model stopped on rank {', '.join(map(str, stops))} of {degree}, "
                            f"{loaded[stops[0]][2]}, and what ran cannot be paired alone: {e} [PC426]") from None
    report = SplitReport(**{f.name: getattr(base, f.name) for f in dataclasses.fields(ForwardReport)},
                         degree=degree)
    if stops:
        report.stopped["paddle"], report.stop_ranks = loaded[stops[0]][2], stops
    report.ranks = ranks_apart(report, torch_record, records, layouts)
    return report


def isolated(torch_model, inputs, torch_record: dict, report: SplitReport, ranks: Ranks, n: int):
    """isolate=True for run n: each rank's modules run on its part of torch's values (split_rank.forced), what they
    computed gathered as the cumulative run's outputs are, then judged as compare_forward's isolate judges one
    process's run (portcheck.forward.isolate.judge)."""
    from portcheck.forward import isolate
    folder, degree = ranks.folder, ranks.degree
    records, layouts = zip(*[_load(folder / f"rank{r}" / str(n))[:2] for r in range(degree)])
    keys, pairing = report.counterparts, report.pairing
    layouts = [widened(torch_record, records, layouts[0], keys)] * degree  # as the cumulative run was gathered
    through = {chain[-1]: t for t, chain in pairing.paddle_composed.items()}
    request = {"calls": {**{p: t for t, p in pairing.pairs.items()}, **through}, "through": sorted(through),
               "leaves": {p: t for t, p in keys.items() if t.startswith("out/")}, "applied": pairing.applied_to(keys)}
    for r in range(degree):
        part = {}
        for t, p in keys.items():
            if t in torch_record and not t.startswith(F64):
                part[t] = _part(torch_record[t], layouts[0].get(p), [np.shape(x.get(p, ())) for x in records], r)
        where = folder / f"rank{r}" / str(n)
        np.savez(where / "torch.npz", **{f"k{i}": v for i, v in enumerate(part.values())})
        split_rank.write(where / split_rank.REQUEST, json.dumps({**request, "keys": list(part)}))
    ranks.wait(lambda: all((folder / f"rank{r}" / str(n) / split_rank.KEPT).is_file() for r in range(degree)))
    kept = [split_rank.read_kept(folder / f"rank{r}" / str(n)) for r in range(degree)]
    items, error = [], next((k[1] for k in kept if k[1]), None)
    for i, (key, value, source) in enumerate(kept[0][0]):
        parts = [k[0][i] if i < len(k[0]) and k[0][i][0] == key else None for k in kept]
        sources = {p[2] for p in parts if p is not None}
        if len(sources) == 1 and None not in sources and all(parts):
            items.append((key, value, source))  # torch's own value on every rank, passed on as it was
        elif axis_of(layouts[0].get(key)) is not None and all(parts) and np.ndim(value):
            items.append((key, np.concatenate([p[1] for p in parts], axis=axis_of(layouts[0].get(key))), None))
        else:
            items.append((key, value, None))
    isolate.judge(torch_model, None, inputs, torch_record, report, paddle_kept=(items, error))


def _part(value, layout, shapes: list, rank: int):
    """torch's value as rank `rank` holds it: its share of the layout's axis (its columns, or its heads), else
    whole."""
    axis = axis_of(layout)
    if axis is None or not all(len(s) == np.ndim(value) and len(s) >= -axis for s in shapes) or \
            sum(s[axis] for s in shapes) != np.shape(value)[axis]:
        return value
    edges = np.cumsum([0] + [s[axis] for s in shapes])
    return np.ascontiguousarray(np.take(value, range(edges[rank], edges[rank + 1]), axis=axis))
