"""Flag rules that several scripts share, and Step 5's flags as one dataclass: each written once.

A rule judges one value and returns what is wrong with it (None if nothing), so a script can gather
every problem of its flags into one line before it loads a framework or touches a file:

    check(("--lr", args.lr, LR), ("--iters", args.iters, Whole(1)))

`TrainArgs` declares every Step 5 flag once, in the manner of Hugging Face's TrainingArguments:
each field carries its default, help, rule, whether run_all.py forwards it and whether it belongs to
the run record. The Step 5 scripts' parser, run_all's Step 5 flags, `to_argv()` (back into arguments
for a script) and `record_flags()` (the run record's flags) are all built from it, so a new flag is
one field.
"""
import argparse
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Optional

from bert_sst2 import data, hparams
from portcheck.core.errors import PipelineError

# Step 5 seeds a draw per step: the seed plus the step (up to 2^21 of them) must still be a 32-bit numpy seed.
MAX_SEED = 2 ** 32 - 2 ** 21 - 1


@dataclass(frozen=True)
class Number:
    """A finite number in [low, high] (or (low, high] with open_low, [low, high) with open_high)."""
    low: float
    high: float = math.inf
    open_low: bool = False
    open_high: bool = False

    def problem(self, flag, value):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and (value > self.low if self.open_low else value >= self.low) \
            and (value < self.high if self.open_high else value <= self.high)
        if ok:
            return None
        span = f"{'(' if self.open_low else '['}{self.low:g}, {self.high:g}{')' if self.open_high else ']'}"
        return f"{flag} must be a finite number in {span}, got {value}"


@dataclass(frozen=True)
class Whole:
    """A whole number >= low (and <= high); `or_all` also admits -1, meaning 'all'."""
    low: int
    high: Optional[int] = None
    or_all: bool = False

    def problem(self, flag, value):
        if self.or_all and value == -1:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= self.low \
                and (self.high is None or value <= self.high):
            return None
        bound = f"in [{self.low}, {self.high}]" if self.high is not None else f"at least {self.low}"
        return f"{flag} must be {'-1 (all) or ' if self.or_all else ''}a whole number {bound}, got {value}"


LR = Number(0, 1, open_low=True)          # every script's --lr: a step of more than the weights' size is a typo
SEED = Whole(0, MAX_SEED)                 # every script's --seed
PROPORTION = Number(0, 1, open_high=True)  # warmup share of the steps


def check(*flags):
    """Raise one PipelineError listing every (flag, value, rule) whose rule finds a problem."""
    problems = [p for p in (rule.problem(flag, value) for flag, value, rule in flags) if p]
    if problems:
        raise PipelineError("; ".join(problems))


def flag(default, help, rule=None, forward=False, record=False, group=None):
    """One Step 5 flag. forward: run_all.py takes it too and passes it on; record: it goes into the run
    record's flags (check_step5 compares them, --resume refuses a checkpoint made with others);
    group: flags of one group exclude each other."""
    return field(default=default, metadata=dict(help=help, rule=rule, forward=forward, record=record, group=group))


@dataclass
class TrainArgs:
    """Step 5's flags (pipeline/Step5/{pt,pd}_train.py); run_all.py forwards those marked forward."""
    data_dir: Optional[Path] = flag(None, "folder with GLUE SST-2 train.tsv and dev.tsv (this workplace: "
                                    "../shared/data/SST-2); without it the hub loader is tried", forward=True)
    demo: bool = flag(False, "smoke run: train and evaluate on Step 2's demo.tsv (no SST-2 needed; proves "
                      "the scripts run, not that training aligns)")
    epochs: int = flag(1, "passes over the training rows", Whole(1), forward=True, record=True)
    max_steps: int = flag(-1, "stop after this many optimizer steps (-1: all)", Whole(1, or_all=True),
                          forward=True, record=True)
    train_limit: int = flag(0, "train on the first N rows only (0: all)", Whole(0), forward=True, record=True)
    lr: float = flag(hparams.LEARNING_RATE, "peak learning rate", LR, forward=True, record=True)
    warmup_proportion: float = flag(hparams.WARMUP_PROPORTION, "share of the steps with a linear warmup",
                                    PROPORTION, record=True)
    batch_size: int = flag(hparams.BATCH_SIZE, "sentences per optimizer step", Whole(1), record=True)
    seed: int = flag(hparams.SEED, "seed of the data order and of every per-step draw", SEED, record=True)
    deterministic: bool = flag(False, "train in eval mode (no dropout): both frameworks then follow the same "
                               "loss curve step for step, which separates data-order and code bugs from "
                               "dropout noise", forward=True, group="dropout")
    shared_dropout: bool = flag(False, "dropout on, with masks from one seeded numpy stream both frameworks "
                                "draw identically: training as usual, yet the loss curves stay comparable "
                                "step for step", forward=True, group="dropout")
    group_by_length: bool = flag(False, "batches of similar length (as Hugging Face's TrainingArguments): each "
                                 "epoch's shuffled order cut into chunks of "
                                 f"{data.GROUP_CHUNK_BATCHES} batches, each sorted by length, batches "
                                 "shuffled again; about 3x less padding on SST-2", forward=True, record=True)
    eval_steps: int = flag(0, "also evaluate on the whole dev set every N steps, at the same steps on both "
                           "sides (0: per epoch only)", Whole(0), forward=True, record=True)
    save_steps: int = flag(0, "also checkpoint every N steps (0: per epoch only)", Whole(0))
    output_dir: Optional[Path] = flag(None, "checkpoints (default pipeline/Step5/output/<framework>)")
    resume: bool = flag(False, "continue from the last checkpoint in --output_dir (refused if it was made "
                        "with other settings)")
    overwrite: bool = flag(False, "allow a fresh run in a non-empty --output_dir that is not a Step 5 output "
                           "folder (only its checkpoint-* entries are replaced)")
    log_every: int = flag(20, "print a progress line every N steps", Whole(1))

    @classmethod
    def add_arguments(cls, ap, forwarded_only=False):
        """Add the flags to an argparse parser. forwarded_only (run_all.py): only those run_all passes on,
        with no default of their own, so that an absent one leaves Step 5's default in force."""
        groups = {}
        for f in fields(cls):
            meta = f.metadata
            if forwarded_only and not meta["forward"]:
                continue
            target = ap
            if meta["group"]:
                if meta["group"] not in groups:
                    groups[meta["group"]] = ap.add_mutually_exclusive_group()
                target = groups[meta["group"]]
            kind = f.type if f.type in (bool, int, float) else Path  # the rest are Optional[Path]
            if kind is bool:
                target.add_argument(f"--{f.name}", action="store_true", help=meta["help"])
                continue
            help_text = meta["help"] + ("" if f.default is None or forwarded_only else f" (default {f.default})")
            target.add_argument(f"--{f.name}", type=kind, default=None if forwarded_only else f.default,
                                help=help_text)

    @classmethod
    def parser(cls, framework: str) -> argparse.ArgumentParser:
        ap = argparse.ArgumentParser(description=f"Step 5: fine-tune BERT on SST-2 with {framework}",
                                     allow_abbrev=False)
        cls.add_arguments(ap)
        return ap

    @classmethod
    def from_namespace(cls, ns, **overrides):
        """The flags an argparse namespace holds (None: the field's default), then `overrides`."""
        given = {f.name: getattr(ns, f.name) for f in fields(cls)
                 if getattr(ns, f.name, None) is not None and getattr(ns, f.name) is not False}
        return cls(**{**given, **overrides})

    def problems(self) -> list:
        """Every rule broken by these values, and the flags that exclude each other (no file is read)."""
        out = [f.metadata["rule"].problem(f"--{f.name}", getattr(self, f.name)) for f in fields(self)
               if f.metadata["rule"] is not None]
        if self.demo and self.data_dir:
            out.append("--demo and --data_dir exclude each other")
        if self.deterministic and self.shared_dropout:
            out.append("--deterministic and --shared_dropout exclude each other")
        return [p for p in out if p]

    def to_argv(self, forwarded_only=False) -> list:
        """The arguments that give these flags to a Step 5 script: every value that is not the default."""
        argv = []
        for f in fields(self):
            value = getattr(self, f.name)
            if (forwarded_only and not f.metadata["forward"] and f.name != "demo") or value == f.default:
                continue
            argv += [f"--{f.name}"] if value is True else [f"--{f.name}={value}"]
        return argv

    def record_flags(self) -> dict:
        """The flags the run record holds (settings()['flags'] in twins/train.py), by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata["record"]}


def smoke_run(run_record) -> tuple:
    """From a Step 5 run record (or None): (trained and evaluated on the same sentences (--demo): the scripts ran,
    nothing is shown about alignment; and with each framework's own dropout masks, so the trained weights differ
    by chance)."""
    depends = (run_record or {}).get("depends", {})
    smoke = "train_rows" in depends and depends["train_rows"] == depends.get("dev_rows")
    return smoke, smoke and depends.get("flags", {}).get("dropout") == "dropout on"  # twins.train.mode_name
