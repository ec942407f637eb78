"""The Step 5 training loop, written once for both frameworks.

twins/pt_backend.py and twins/pd_backend.py each implement the Backend protocol
below (model, optimizer, loader, one train step, evaluation, checkpoint state,
collectives) in their own framework; pipeline/Step5/{pt,pd}_train.py hand one to run(). Everything that must be identical between the two
lives here: the flags, the seeded per-epoch order both sides train in, how it is
split across processes, the step budget, progress lines, checkpoints and resume,
and the saved results.

Data-parallel runs (torchrun / paddle.distributed.launch, world size W): global
batch k is still order[k*B:(k+1)*B]; process r trains on its r-th slice of B/W
sentences, gradients are averaged, and process 0 alone prints, checkpoints and
writes results. So a W-process run trains on the same global batches as a
single-process one, in both frameworks.
"""
import fcntl
import json
import math
import os
import re
import shutil
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Protocol

import numpy as np

from bert_sst2 import data, keys, paths
from bert_sst2.flags import TrainArgs
from bert_sst2.shared_dropout import MaskStream
from portcheck.core import record
from portcheck.gradients import weight_stats
from portcheck.pipeline.data import each_batch
from portcheck.core.errors import Interrupted, PipelineError, require
from portcheck.core.fileio import atomic_write, open_new, writable


class Backend(Protocol):
    """What one framework supplies to run(). Every member is called by run() alone, in this order:
    distribute, build, share_dropout, then per epoch set_train and loader, per step seed, batch_len
    and train_step, evaluate after each epoch; save_state/load_state around checkpoints; leave at the end."""

    name: str  # "torch" or "paddle": names the output files and progress lines

    def distribute(self) -> tuple:
        """(rank, world size), joining the process group when launched by torchrun or paddle's launcher;
        (0, 1) in a single process."""

    def all_sum(self, values: list) -> list:
        """The element-wise sum of `values` over all processes (the values themselves when alone)."""

    def leave(self) -> None:
        """Leave the process group distribute joined (nothing when alone), every process at once after the last
        all_sum: a gloo group left to the interpreter's exit can abort a process (exit -6) whose results are written."""

    def build(self, total_steps: int, warmup_steps: int, lr: float) -> None:
        """Create the optimizer (twins/*_optim.build) with the linear warmup schedule of this run."""

    def head(self, dataset, n: int):
        """The first n rows of a dataset as load_split returned it (--train_limit)."""

    def encode(self, dataset):
        """The tokenized dataset (twins/*_data.encode with the exported vocab)."""

    def loader(self, encoded, order: list, batch_size: int) -> Iterable:
        """Batches of encoded[order], in exactly that order, padded to each batch's longest (*_data.loader)."""

    def lengths(self, encoded) -> list:
        """Tokens in each encoded example (input_ids length), in dataset order."""

    def batch_len(self, batch) -> int:
        """Sentences in a batch."""

    def seed(self, n: int) -> None:
        """Seed the framework's global generator (its own dropout masks when not shared)."""

    def share_dropout(self, stream) -> None:
        """Route every dropout layer of the model to `stream` (a MaskStream), or back to the framework's with None."""

    def set_train(self, on: bool) -> None:
        """Train mode (dropout on) or eval mode."""

    def train_step(self, batch, weight: float) -> tuple:
        """Forward, cross-entropy, backward of loss * weight, optimizer and scheduler step, zero the gradients.
        Returns (the unweighted loss as a float, the lr this step used)."""

    def evaluate(self, encoded, indices: list, batch_size: int) -> tuple:
        """(correct, count) over encoded[indices] in eval mode, counted with the *_data.Accuracy Step 2
        compares; the train/eval mode is restored afterwards."""

    def fingerprint(self) -> str:
        """portcheck.record's fingerprint of the weights as loaded, in torch's layout on both sides."""

    def named_arrays(self) -> Iterator:
        """(parameter name, numpy array) for every parameter, in the model's order."""

    def save_state(self, folder: Path) -> None:
        """Model, optimizer and scheduler state into folder (one file, the framework's format)."""

    def load_state(self, folder: Path) -> None:
        """The inverse of save_state."""


def parse_args(framework: str, argv=None) -> TrainArgs:
    args = TrainArgs.from_namespace(TrainArgs.parser(framework).parse_args(argv))
    args.output_dir = (args.output_dir or paths.step_dir(5) / "output" / framework).expanduser()
    validate(args, framework)
    return args


def validate(args: TrainArgs, framework=None):
    """Every flag checked before any work: a bad one ends in one line and changes no file.
    framework None (run_all.py): the outputs of both frameworks are checked."""
    problems = args.problems()
    if args.data_dir:  # before a framework loads: a missing folder is refused in a second
        try:
            for split in data.SPLITS:
                data.split_file(split, args.data_dir)
        except PipelineError as e:
            problems.append(str(e))
    if not args.demo and not args.data_dir and data.hub_off():
        problems.append(f"no data: the dataset hub is off (HF_DATASETS_OFFLINE=1); {data.HUB_HINT}, or --demo")
    out = args.output_dir
    if out is not None:  # every output can be written, before any old one (train_<fw>.log first) is touched
        try:
            Checkpoints(out).preflight(args.resume, args.overwrite)
            for name in ("train_{}.log", "train_align_{}.npy", "train_curves_{}.npy", "weight_stats_{}.npy"):
                for fw in [framework] if framework else ["torch", "paddle"]:
                    writable(paths.step_dir(5) / name.format(fw))
        except PipelineError as e:
            problems.append(str(e))
    if problems:
        raise PipelineError("; ".join(problems))


def load_data(data_module, backend, args):
    """(train, dev) through the framework's own data module: demo, --data_dir TSVs, or the hub."""
    if args.demo:
        train_set = dev_set = data_module.load_tsv(paths.DEMO_TSV)
    else:
        train_set, dev_set = (data_module.load_split(split, args.data_dir) for split in ("train", "dev"))
    if args.train_limit:
        train_set = backend.head(train_set, args.train_limit)
    return train_set, dev_set


def settings(args, backend, train_set, dev_set) -> dict:
    """What the results depend on, framework-free: check_step5 compares the two sides' copies and
    --resume refuses a checkpoint whose copy differs from the flags given."""
    return {
        "weights": backend.fingerprint(),
        "train_rows": data.fingerprint_rows(train_set),
        "dev_rows": data.fingerprint_rows(dev_set),
        "flags": {**args.record_flags(), "schedule": "linear", "dropout": mode_name(args)},
    }


@dataclass
class World:
    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def epoch_order(n: int, epoch: int, seed: int, lengths=None, batch_size: int = 0) -> list:
    """The shuffled order of epoch `epoch`: one seeded permutation, identical for both frameworks; with
    lengths (--group_by_length), regrouped into batches of similar length by bert_sst2.data.group_by_length."""
    order = data.permutation(n, seed + epoch)
    if lengths is None:
        return order
    return data.group_by_length(order, lengths, batch_size, seed=[seed, epoch, 1])


@dataclass
class RunState:
    """Everything of a run that is not framework tensors; saved as JSON next to each checkpoint."""
    global_step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of `epoch` already trained
    loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    acc_per_epoch: list = field(default_factory=list)
    eval_steps: list = field(default_factory=list)  # global steps after which dev accuracy was measured
    acc_per_eval: list = field(default_factory=list)
    train_seconds: float = 0.0
    train_sentences: int = 0
    eval_seconds: float = 0.0
    eval_sentences: int = 0
    settings: dict = field(default_factory=dict)  # settings() of the run that wrote it

    def problem(self, steps_per_epoch: int = 0):
        """None if every field has the type, range and length a run writes, else what is wrong."""
        def whole(v):
            return isinstance(v, int) and not isinstance(v, bool) and v >= 0

        def number(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        for name in ("global_step", "epoch", "batch_in_epoch", "train_sentences", "eval_sentences"):
            if not whole(getattr(self, name)):
                return f"{name} {getattr(self, name)!r} is not a whole number >= 0"
        for name in ("loss", "lr", "acc_per_epoch", "eval_steps", "acc_per_eval"):
            values = getattr(self, name)
            if not isinstance(values, list) or not all(number(v) for v in values):
                return f"{name} is not a list of finite numbers"
        if not all(number(v) and v >= 0 for v in (self.train_seconds, self.eval_seconds)) \
                or not isinstance(self.settings, dict):
            return "its timings or settings are malformed"
        flags = self.settings.get("flags")
        epochs = flags.get("epochs") if isinstance(flags, dict) else None
        if isinstance(epochs, int) and self.epoch > epochs:
            return f"epoch {self.epoch} of a run of {epochs} epochs"
        if not len(self.loss) == len(self.lr) == self.global_step:
            return f"{len(self.loss)} losses and {len(self.lr)} lrs for step {self.global_step}"
        if len(self.acc_per_epoch) != self.epoch or len(self.eval_steps) != len(self.acc_per_eval):
            return f"{len(self.acc_per_epoch)} epoch accuracies after {self.epoch} epochs, or unpaired evaluations"
        if not all(0 <= a <= 1 for a in self.acc_per_eval + self.acc_per_epoch) or self.eval_steps != sorted(self.eval_steps) \
                or any(not whole(k) or k > self.global_step for k in self.eval_steps):
            return "its accuracies or evaluation steps are out of range"
        full = self.epoch * steps_per_epoch
        # mid-epoch (--save_steps): after `epoch` whole epochs; at an epoch's end (batch 0): within the last,
        # which --max_steps may have cut short
        if steps_per_epoch and not (self.global_step == full + self.batch_in_epoch <= full + steps_per_epoch
                                    if self.batch_in_epoch else full - steps_per_epoch < self.global_step <= full):
            return (f"step {self.global_step} is not batch {self.batch_in_epoch} of epoch {self.epoch} "
                    f"at {steps_per_epoch} steps an epoch")
        return None


class Checkpoints:
    """output_dir/checkpoint-<step>/ written under a temp name and renamed; `latest` names the newest.

    Only what this class made is ever deleted: entries named checkpoint-<n>, .tmp-checkpoint-<n>,
    .old-checkpoint-<n> and latest, inside a folder it made its own. A folder becomes its own when a
    fresh run starts in it (MARKER); a fresh run in a non-empty folder without the marker is refused
    unless --overwrite, and even then refused while the folder holds entries of those names that
    Step 5 did not write. None of them may be a symbolic link. One run at a time holds the folder
    (lock). Re-saving a step keeps the last good checkpoint until the new one is in place.
    """

    MARKER = ".bert_align_step5"
    NAME = re.compile(r"^checkpoint-\d+$")
    OURS = re.compile(r"^(\.tmp-|\.old-)?checkpoint-\d+$")

    def __init__(self, output_dir: Path):
        self.dir = Path(output_dir)
        self._lock = None

    def _ours(self) -> bool:
        marker = self.dir / self.MARKER
        return marker.is_file() and not marker.is_symlink()

    def _named(self) -> list:
        """Entries with the names this class writes, sorted."""
        return sorted(e for e in self.dir.iterdir() if self.OURS.match(e.name) or e.name in ("latest", self.MARKER))

    def preflight(self, resume: bool, overwrite: bool):
        """Everything that would stop a run in this folder, checked before any file is written."""
        writable(self.dir, folder=True)
        if not self.dir.is_dir():
            return
        links = [e for e in self._named() if e.is_symlink()]
        if links:
            raise PipelineError(f"{links[0]} is a symbolic link; Step 5 never writes through or deletes one: "
                                "remove it, or choose another --output_dir")
        if resume or self._ours():
            return
        if any(self.dir.iterdir()) and not overwrite:
            raise PipelineError(f"--output_dir {self.dir} is not empty and is not a Step 5 output folder; choose "
                                "another folder, or pass --overwrite to write checkpoints into it")
        foreign = [e.name for e in self._named()]
        if foreign:
            raise PipelineError(f"--output_dir {self.dir} holds {', '.join(foreign[:3])}, which Step 5 did not "
                                "write; --overwrite replaces only Step 5's own entries: move them, or choose "
                                "another folder")

    def refuse_foreign(self):
        self.preflight(resume=False, overwrite=False)

    def lock(self):
        """Hold the folder for this run: a second training into it ends in one line, not in a race over
        its checkpoints. Released when the process ends."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = hold(self.dir, f"another Step 5 training is writing into {self.dir}; wait for it to end, "
                                    "or choose another --output_dir")

    def start_fresh(self, overwrite: bool):
        """Make the folder this run's: refuse a foreign one (preflight), clear only our own entries."""
        self.preflight(resume=False, overwrite=overwrite)
        self.dir.mkdir(parents=True, exist_ok=True)
        if self._ours():
            for entry in self._named():
                if self.OURS.match(entry.name) and entry.is_dir():
                    shutil.rmtree(entry)
            (self.dir / "latest").unlink(missing_ok=True)
        atomic_write(self.dir / self.MARKER,
                     lambda t: Path(t).write_text("Step 5 checkpoints; a fresh run replaces the checkpoint-* entries\n"))

    def save(self, backend, state: RunState):
        name = f"checkpoint-{state.global_step}"
        final, tmp, old = self.dir / name, self.dir / f".tmp-{name}", self.dir / f".old-{name}"
        for entry in (final, tmp, old, self.dir / "latest"):
            if entry.is_symlink():  # appeared since the preflight: still never followed or deleted
                raise PipelineError(f"{entry} is a symbolic link; Step 5 never writes through or deletes one: "
                                    "remove it and run again with --resume")
        for stale in (tmp, old):
            if stale.is_dir():
                shutil.rmtree(stale)
        tmp.mkdir(parents=True)
        backend.save_state(tmp)
        (tmp / "run_state.json").write_text(json.dumps(asdict(state)))  # tmp: a folder this run just made
        previous = self.latest()
        if final.exists():
            os.replace(final, old)  # the last good copy stays on disk until the new one is in place
        os.replace(tmp, final)
        atomic_write(self.dir / "latest", lambda t: Path(t).write_text(name + "\n"))
        if old.is_dir():
            shutil.rmtree(old)
        if previous and previous != final:
            shutil.rmtree(previous)

    def latest(self):
        """The newest checkpoint folder, or None; `latest` may only name a checkpoint-<n> inside this folder."""
        pointer = self.dir / "latest"
        if not pointer.is_file() or pointer.is_symlink():
            return None
        name = pointer.read_text(errors="replace").strip()
        if not self.NAME.match(name):
            raise PipelineError(f"{pointer} names {name[:80]!r}, not a checkpoint-<step> of this folder; "
                                "fix or delete that file")
        path = self.dir / name
        return path if path.is_dir() and not path.is_symlink() else None

    def load(self, backend, expected: dict, steps_per_epoch: int = 0) -> RunState:
        path = self.latest()
        if path is None:
            raise PipelineError(f"--resume: no checkpoint in {self.dir}; run without --resume first")
        state = self.run_state(path, steps_per_epoch)
        differ = record.differences({"depends": state.settings}, {"depends": expected})
        if differ:
            field_, was, now = differ[0]
            raise PipelineError(f"--resume: {path} was made with {record.shown(field_)} = {record.shown(was)}, "
                                f"this run has {record.shown(now)}; resume with the same flags, or start afresh "
                                "without --resume")
        backend.load_state(path)
        return state

    @staticmethod
    def run_state(checkpoint: Path, steps_per_epoch: int = 0) -> RunState:
        """The RunState saved beside one checkpoint's weights (step, loss and lr curves so far), every value
        checked: a hand-edited step or position would resume somewhere no run ever was."""
        path = require(Path(checkpoint) / "run_state.json", paths.rerun())
        try:
            state = RunState(**json.loads(path.read_text()))
            problem = state.problem(steps_per_epoch)
        except (ValueError, TypeError, UnicodeDecodeError, RecursionError) as e:
            problem = f"{type(e).__name__}: {e}"
        if problem:
            raise PipelineError(f"{path} is not a run state this project wrote ({record.shown(problem, 160)}); "
                                "run without --resume") from None
        return state


def hold(path, busy: str) -> int:
    """An exclusive lock on `path` (a folder, or an open file's descriptor), for as long as the process lives; `busy` if
    another process holds it."""
    try:
        fd = path if isinstance(path, int) else os.open(path, os.O_RDONLY)  # a folder preflight accepted
    except OSError as e:
        raise PipelineError(f"{path} cannot be opened ({e.strerror or e}): choose another --output_dir") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if fd != path:
            os.close(fd)
        raise PipelineError(busy) from None
    return fd


def plan_steps(n_train: int, args) -> tuple:
    steps_per_epoch = math.ceil(n_train / args.batch_size)
    total = args.epochs * steps_per_epoch
    if args.max_steps > 0:
        total = min(total, args.max_steps)
    return steps_per_epoch, total, int(total * args.warmup_proportion)


class Clock:
    """The run's training and evaluation time and sentences, kept apart (throughput counts training only),
    banked into the RunState so that a resumed run's totals continue; and this epoch's progress rates."""

    def __init__(self, state: RunState):
        self.state = state
        self.start_epoch()

    def start_epoch(self):
        self.started = self.mark = time.time()
        self.step0, self.epoch_sentences, self.unbanked = self.state.global_step, 0, 0

    def trained(self, sentences: int):
        self.epoch_sentences += sentences
        self.unbanked += sentences

    def bank(self):
        """Training time and sentences so far into the state, before it is saved or evaluation starts."""
        now = time.time()
        self.state.train_seconds += now - self.mark
        self.state.train_sentences += self.unbanked
        self.mark, self.unbanked = now, 0

    @contextmanager
    def evaluating(self, sentences: int):
        began = time.time()
        yield
        spent = time.time() - began
        self.state.eval_seconds += spent
        self.state.eval_sentences += sentences
        self.started += spent  # neither training time nor this epoch's rates count it
        self.mark += spent

    def progress(self, framework: str, total: int) -> str:
        """One progress line; rates are over this epoch's part of the run."""
        state, elapsed = self.state, time.time() - self.started
        rate = self.epoch_sentences / elapsed if elapsed else 0.0
        steps_per_s = (state.global_step - self.step0) / elapsed if elapsed else 0.0
        eta = (total - state.global_step) / steps_per_s if steps_per_s else 0.0
        return (f"[{framework}] step {state.global_step}/{total} epoch {state.epoch} loss {state.loss[-1]:.4f} "
                f"lr {state.lr[-1]:.3e} {rate:.1f} sent/s eta {eta / 60:.1f} min")


def evaluate(backend: Backend, dev_set, dev_lengths, args, world: World) -> float:
    """Dev accuracy over every dev sentence: each process counts its share, the counts are summed.
    Batches of sorted lengths (accuracy does not depend on the order; padding does)."""
    by_length = sorted(range(len(dev_set)), key=lambda i: dev_lengths[i])
    share = [int(i) for i in np.array_split(np.array(by_length), world.size)[world.rank]]
    correct, count = backend.all_sum(backend.evaluate(dev_set, share, args.batch_size))
    if count != len(dev_set):
        raise PipelineError(f"evaluated {count:.0f} of {len(dev_set)} dev sentences")
    return correct / count


class Tee:
    """stdout that also goes to a file: each run's full text output is handed in (train_<fw>.log)."""

    def __init__(self, stream, file):
        self.stream, self.file = stream, file

    def write(self, text):
        self.file.write(text)
        return self.stream.write(text)

    def flush(self):
        self.file.flush()
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def run(backend: Backend, args, train_set, dev_set):
    """Train `backend` on train_set in the shared order, evaluate on dev_set after each epoch.
    train_set, dev_set: the rows as load_data gave them (recorded, then tokenized here).
    Process 0's output also goes to pipeline/Step5/train_<framework>.log (appended to on --resume)."""
    world = World(*backend.distribute())
    if not world.main:
        return train(backend, args, train_set, dev_set, world, say=lambda *a, **k: None)
    Checkpoints(args.output_dir).lock()
    with open_new(paths.step_dir(5) / f"train_{backend.name}.log", append=True) as file:
        hold(file.fileno(), f"another {backend.name} training is writing pipeline/Step5/train_{backend.name}.log; "
                            "wait for it to end")
        if not args.resume:
            file.truncate(0)
        stdout, sys.stdout = sys.stdout, Tee(sys.stdout, file)
        try:
            print(f"$ python {' '.join(record.shown(paths.shown(a) if os.path.isabs(a) else a, 200) for a in sys.argv)}",
                  flush=True)  # escaped: an argument's newline must not forge a line of the handed-in log
            return train(backend, args, train_set, dev_set, world, say=print)
        finally:
            sys.stdout = stdout


def train(backend: Backend, args, train_set, dev_set, world: World, say):
    """The run in phases: set up (or resume), then per epoch its steps with evaluations and checkpoints
    between them, an evaluation and a checkpoint at its end, and the results."""
    fw = backend.name
    steps_per_epoch, total, warmup = plan_steps(len(train_set), args)
    data.rank_order(range(len(train_set)), args.batch_size, world.rank, world.size)  # refuse a bad split early
    per_rank = args.batch_size // world.size
    backend.build(total_steps=total, warmup_steps=warmup, lr=args.lr)
    run_settings = settings(args, backend, train_set, dev_set)
    train_set, dev_set = backend.encode(train_set), backend.encode(dev_set)
    lengths = backend.lengths(train_set) if args.group_by_length else None
    dev_lengths = backend.lengths(dev_set)
    ckpt = Checkpoints(args.output_dir)
    state = resume_or_start(backend, args, ckpt, run_settings, steps_per_epoch, world)
    stream = MaskStream() if args.shared_dropout else None
    backend.share_dropout(stream)
    say(f"[{fw}] {len(train_set)} train / {len(dev_set)} dev sentences, {total} steps "
        f"({steps_per_epoch}/epoch), warmup {warmup}, lr {args.lr}, batch {args.batch_size}"
        + (f" ({world.size} processes x {per_rank})" if world.size > 1 else "") + f", {mode_name(args)}"
        + (f", resumed at step {state.global_step}" if args.resume else ""), flush=True)

    def evaluation() -> float:
        with clock.evaluating(len(dev_set)):
            acc = evaluate(backend, dev_set, dev_lengths, args, world)
        state.eval_steps.append(state.global_step)
        state.acc_per_eval.append(acc)
        return acc

    def checkpoint():
        clock.bank()
        if world.main:
            ckpt.save(backend, state)

    clock = Clock(state)
    signal.signal(signal.SIGINT, lambda *_: interrupted(state, ckpt if world.main else None))
    # an epoch cut short by max_steps or a kill is still evaluated: batch_in_epoch > 0
    while state.epoch < args.epochs and (state.global_step < total or state.batch_in_epoch > 0):
        order = epoch_order(len(train_set), state.epoch, args.seed, lengths, args.batch_size)
        mine = data.rank_order(order, args.batch_size, world.rank, world.size)
        clock.start_epoch()
        backend.set_train(not args.deterministic)
        for batch in each_batch(backend.loader(train_set, mine[state.batch_in_epoch * per_rank:], per_rank)):
            if state.global_step >= total:
                break
            clock.trained(train_step(backend, batch, order, state, args, world, stream))
            if world.main and (state.global_step % args.log_every == 0 or state.global_step == total):
                say(clock.progress(fw, total), flush=True)
            if args.eval_steps and state.global_step % args.eval_steps == 0 and state.global_step < total:
                acc = evaluation()
                backend.set_train(not args.deterministic)
                say(f"[{fw}] step {state.global_step} dev acc {acc:.5f}", flush=True)
            if args.save_steps and state.global_step % args.save_steps == 0:
                checkpoint()
        clock.bank()
        acc = evaluation()
        state.acc_per_epoch.append(acc)
        say(f"[{fw}] epoch {state.epoch} dev acc {acc:.5f}", flush=True)
        state.epoch += 1
        state.batch_in_epoch = 0
        checkpoint()
    if world.main:
        save_results(fw, state, args)
        record.save_results({paths.step_dir(5) / f"weight_stats_{fw}.npy": weight_stats.summarize(backend.named_arrays())},
                            fw, paths.shown(sys.argv[0]), state.settings)
    if world.size > 1:
        backend.all_sum([0.0])  # every process leaves together, not the others while process 0 still writes
        backend.leave()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return state


def resume_or_start(backend: Backend, args, ckpt, run_settings: dict, steps_per_epoch: int, world: World) -> RunState:
    """The state of a resumed run (refused if made with other settings), or a fresh one in a cleared folder."""
    if args.resume:
        return ckpt.load(backend, run_settings, steps_per_epoch)
    if world.main:
        ckpt.start_fresh(args.overwrite)  # a fresh run never mixes with an old one
    return RunState(settings=run_settings)


def train_step(backend: Backend, batch, order: list, state: RunState, args, world: World, stream) -> int:
    """One optimizer step on this process's slice of global batch state.batch_in_epoch, recorded in state;
    returns the sentences of the global batch."""
    # Dropout masks of step k come from seed + k alone, so a resumed run draws exactly the masks an
    # uninterrupted one would, whatever else (a DataLoader, an evaluation) used the global RNG meanwhile.
    # Other processes draw their own (their slices of the batch are other sentences).
    backend.seed(args.seed + state.global_step + 1_000_003 * world.rank)
    if stream:
        stream.reseed([args.seed, state.global_step] + ([world.rank] if world.size > 1 else []))
    # Gradients are averaged over processes; weighting each process's mean loss by its share of the
    # global batch makes that average the global batch's mean even when the last batch splits unevenly.
    k = state.batch_in_epoch * args.batch_size
    global_len = len(order[k:k + args.batch_size])
    share = backend.batch_len(batch) / global_len
    loss, lr = backend.train_step(batch, world.size * share)
    loss = backend.all_sum([loss * share])[0] if world.size > 1 else loss
    state.loss.append(loss)
    state.lr.append(lr)
    state.global_step += 1
    state.batch_in_epoch += 1
    return global_len


def interrupted(state: RunState, ckpt):
    """Ctrl-C during training: one line saying where it stopped and what resumes it (exit 130)."""
    latest = ckpt.latest() if ckpt else None
    raise Interrupted(f"interrupted at step {state.global_step}; `--resume` continues from {latest.name}" if latest
                      else f"interrupted at step {state.global_step}, before the first checkpoint: nothing to "
                      "resume, run again (--save_steps N checkpoints every N steps)")


def mode_name(args) -> str:
    if args.deterministic:
        return "deterministic (no dropout)"
    return "shared dropout masks" if args.shared_dropout else "dropout on"


def save_results(framework: str, state: RunState, args):
    """train_align_<fw>.npy (what check_step5 compares) and train_curves_<fw>.npy (loss, lr per step)."""
    out = paths.step_dir(5)
    result = {
        "acc": np.array(state.acc_per_epoch[-1], dtype="float64"),
        "acc_per_epoch": np.array(state.acc_per_epoch, dtype="float64"),
        # in every mode: both sides took the same number of steps along the same lr curve
        "steps": np.array(state.global_step, dtype="int64"),
        "lr": np.array(state.lr, dtype="float64"),
        # dev accuracy over training, at the same steps on both sides (--eval_steps and each epoch's end)
        "eval_steps": np.array(state.eval_steps, dtype="int64"),
        "acc_per_eval": np.array(state.acc_per_eval, dtype="float64"),
    }
    # Only then must the two curves agree step by step; the key names the mode, so a deterministic run
    # compared with a shared-dropout one is a key mismatch, not a pass.
    for mode, key in keys.TRAIN_LOSS.items():
        if getattr(args, mode):
            result[key] = np.array(state.loss, dtype="float32")
    record.save_results({out / f"train_align_{framework}.npy": result, out / f"train_curves_{framework}.npy": {
        "loss": np.array(state.loss, dtype="float32"),
        "lr": np.array(state.lr, dtype="float64"),
        "train_sent_per_s": np.array(state.train_sentences / max(state.train_seconds, 1e-9)),
        "eval_sent_per_s": np.array(state.eval_sentences / max(state.eval_seconds, 1e-9)),
        "train_seconds": np.array(state.train_seconds),
        "eval_seconds": np.array(state.eval_seconds),
    }}, framework, paths.shown(sys.argv[0]), state.settings)
    print(f"[{framework}] final dev acc {state.acc_per_epoch[-1]:.5f}; "
          f"{state.train_sentences / max(state.train_seconds, 1e-9):.1f} train sent/s, "
          f"{state.eval_sentences / max(state.eval_seconds, 1e-9):.1f} eval sent/s; wrote {paths.shown(out)}/train_align_{framework}.npy")
