"""Step 5 for any model: each side's own training loop writes a training log, one small call per step and
per evaluation; the judge holds the two logs to the task's threshold on the final metric, compares the
curves step by step, draws them, and names the guide's cause when the runs differ.

    from portcheck.pipeline import data, training

    log = training.TrainingLog()
    for epoch in range(epochs):
        for images, labels in data.each_batch(loader):   # a Paddle loader's reader shut down at a break
            ...; loss.backward(); optimizer.step(); scheduler.step()
            log.step(loss, lr, model=model, batch=labels)     # model: weight norm and modes; batch: the data order
            optimizer.zero_grad()                             # after log.step: it logs the gradients' norms
        log.evaluate({"accuracy": accuracy})
    log.save(out, "torch", training.run_depends(weights, order, seeds, flags), script)

    verdict = training.judge_and_log(out, top="log_reprod")   # after both sides saved; verdict.passed

A Paddle model with BatchNorm: torch_running_var(model) before training, so that evaluation sees the running
variance torch's BatchNorm keeps (torch's unbiased update, not Paddle's biased one).

Files: train_align_<framework>.npy, the guide's pair (the last evaluation's metrics: an outcome, judged at the
task's threshold, the guide's 0.15% unless the caller gives its own), and train_log_<framework>.npy, the
curves (handed in under diagnostics/), each with its run record. The run record binds what the guide names
when training does not align: the initial weights, the data order, the seeds and the flags.

The judge's rows (every one a condition, each can fail):
  final metric  |torch - paddle| <= the threshold, for every metric of the last evaluation;
  steps         the same number of steps and the same evaluation steps;
  lr            every step's lr equal (an off-by-one schedule is named);
  data order    every step's batch equal (its fingerprint), when logged on both sides;
  modes         every step, the same number of active dropout modules and of BatchNorm modules in train mode;
  first step's loss  while the runs are deterministic (modes logged, equal, no dropout: a model drawing shared
                dropout masks itself is one): within FIRST_LOSS_RTOL of torch's (the same weights on the same
                batch, one forward);
  weight norm   the L2 norm of the trainable weights, relative: within NORM_RTOL_ALIGNED while the runs are
                deterministic and their loss curves have not parted (beyond LOSS_PARTS), said after; within
                NORM_RTOL at every step when the runs are not shown deterministic;
  loss finite   no NaN or Inf on either side. Where the loss curves part is said, not judged.
The run records' `depends` must be equal; a difference is named as the guide's cause.

This module is the judge. Each side's log, written and read back, is portcheck.pipeline.training_log (TrainingLog,
run_depends and torch_running_var are named here too); the judge's report and verdict as data,
portcheck.pipeline.training_report; torch's own runs as the yardstick, and their file, portcheck.pipeline.own_runs
(torch_kernels, named here too: one of them under other kernels).
Imports core and pipeline's handin, training_log, training_report and own_runs.
"""
import math
from pathlib import Path

import numpy as np

from portcheck.core import record, report, tolerances
from portcheck.pipeline import handin
from portcheck.pipeline.own_runs import DIAGNOSTICS_OWN, OWN, OWN_MULTIPLE, OWN_PARTS, kept_norm, own_spread, save_own
from portcheck.pipeline.own_runs import torch_kernels  # noqa: F401 (documented here: own runs under other kernels)
from portcheck.pipeline.training_log import EVAL_MODES, LOG, METRIC, NAMES, PAIR, logs
from portcheck.pipeline.training_log import TrainingLog, run_depends, torch_running_var  # noqa: F401 (documented here)
from portcheck.pipeline.training_report import Row, TrainingReport, TrainingVerdict
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import atomic_write, writable

PLOT = "train_align.png"
# Where the loss curves part: the guide's bound on losses after optimizer steps (bp_align's). Two correct runs of
# a network trained from scratch with BatchNorm part beyond it within a few steps: fp32 rounding, amplified by
# training (the ResNet-18 example: at steps 2 to 6 over seven runs of three settings, as torch's float32 run parts
# from its own float64 one); a model fine-tuned without BatchNorm can stay within 1e-5 over thousands of steps.
# Until they part, the runs are still one computation and are held tightly; after, only what rounding cannot move.
LOSS_PARTS = tolerances.GUIDE["bp_align"].threshold
# The L2 norm of the trainable weights, relative, every step. Before the loss curves part: clean runs at most
# 9.2e-8 (the seven ResNet-18 runs), while a weight decay missing on one side moves it by lr x weight decay at
# every step (1.5e-6 at lr 0.003 and 5e-4). After, in runs not shown deterministic: a norm over millions of
# weights averages rounding out, clean runs at most 1.3e-4 over whole trainings; anything past 1e-3 is an update
# of another size. Deterministic runs that part are not held to it: the ResNet-18 example's digits training
# (lr 0.05, BatchNorm over 64 values per channel) reaches 1.2e-3 torch against itself, 9.5e-4 torch against Paddle.
NORM_RTOL_ALIGNED, NORM_RTOL = 1e-6, 1e-3
# The first step's loss of deterministic runs, relative: the same weights on the same batch, one forward, so the two
# differ by its rounding alone. Clean runs at most 1.1e-7 (the zoo's three deterministic trainings, shared dropout
# masks among them; the ResNet-18 example's 0), while shared masks left unscaled on one side part by 6.4e-3 there,
# which the bp_align bound the curves part at (1e-2) let through. 1e-4, a thousand float32 ulps: room for a deeper
# forward's rounding, 64 times under that plant.
FIRST_LOSS_RTOL = 1e-4
FIRST_LOSS = "first step's loss"

# A gradient that is rounding noise: at most this share of the step's largest parameter gradient (L2 norms). A conv
# bias feeding a BatchNorm, which subtracts it again, has exactly 0 in exact arithmetic and fp32 leaves ~1e-7 of the
# weights' (1.5e-8 against 0.14 in a digits CNN); Adam divides it by its own root mean square, so its update is
# +-lr with a sign rounding picks, differently in each framework. Measured on examples/digits_pair.py's digits CNN (30
# steps, momentum SGD and AdamW): that bias at most 3.9e-7 of the step's largest, every other parameter at least 0.08
# (docs/bench/rules.md): 1.5e-5 is 40 times the one, 5,000 times below the other.
NOISE = 2.0 ** -16


# A run record's field, said as the guide's cause of training that does not align
CAUSES = {"weights": "different initial weights", "data_order": "different data order", "seeds": "different seeds",
          "flags": "different flags"}


def record_causes(torch_record: dict, paddle_record: dict) -> list:
    out = []
    for field, t, p in record.differences(torch_record, paddle_record):
        top = field.split(".", 1)[0]
        out.append(f"{CAUSES.get(top, 'different ' + record.shown(top))} ({record.shown(field)}: torch "
                   f"{record.shown(record._short(t), 40)} vs paddle {record.shown(record._short(p), 40)})")
    return out


def _first(mask) -> int:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else -1


def _lr_row(t, p, other: str = "paddle") -> Row:
    """Every step's lr equal within tolerances.ULPS of the schedule's largest (the lr pair's rule, and
    judge_backward's): a closed form against a recursive one rounds differently, a step more or less does not."""
    n = min(len(t), len(p))
    allowed = tolerances.rounding([t[:n]], tolerances.ULPS).get(np.dtype(np.float64), 0.0)
    apart = lambda a, b: ~(np.abs(a - b) <= allowed)  # NaN apart
    k = _first(apart(t[:n], p[:n]))
    if k < 0:
        gap = float(np.max(np.abs(t[:n] - p[:n]), initial=0.0))
        return Row("lr", True, f"every step's lr equal ({n} steps)" if gap == 0 else
                   f"every step's lr equal within {tolerances.ULPS} ulps of the largest ({n} steps; largest gap "
                   f"{gap:.3g} of {allowed:.3g} allowed: two correct ports round a schedule's closed and recursive "
                   "forms differently)")
    shift, whose = "", "the Paddle" if other == "paddle" else f"{other}'s"
    if n - k > 1 and not apart(p[k:n - 1], t[k + 1:n]).any():
        shift = f": {whose} schedule runs one step ahead (stepped once too often, or before the first step)"
    elif n - k > 1 and not apart(p[k + 1:n], t[k:n - 1]).any():
        shift = f": {whose} schedule runs one step behind (stepped once too few, or after the lr was read)"
    return Row("lr", False, f"differs from step {k}: torch {float(t[k])!r} vs {other} {float(p[k])!r}, beyond the "
                            f"{tolerances.ULPS} ulps of the largest lr rounding allows{shift}")


def _mode_causes(t: dict, p: dict, other: str = "paddle") -> list:
    """The steps at which one side's BatchNorm is in eval mode, or its dropout on, and the other's not."""
    out = []
    for key in ("batchnorm_train", "dropout_on"):
        if key not in t or key not in p:
            continue
        n = min(len(t[key]), len(p[key]))
        k = _first(t[key][:n] != p[key][:n])
        if k < 0:
            continue
        counts = f"torch {int(t[key][k])} vs {other} {int(p[key][k])}"
        if key == "batchnorm_train":
            side = other if p[key][k] < t[key][k] else "torch"
            out.append(f"BatchNorm in eval mode on the {side} side from step {k} (modules in train mode: {counts}; "
                       "model.train() missing after an evaluation?)")
        else:
            side = other if p[key][k] > t[key][k] else "torch"
            out.append(f"dropout left on on the {side} side from step {k} (active dropout modules: {counts})")
    return out


def _eval_mode_causes(t: dict, p: dict, other: str = "paddle") -> list:
    """The evaluations at which one side's model was not in eval mode as the other's was (dropout left on,
    BatchNorm normalising by the test batch's own statistics)."""
    out = []
    for key, what in zip(EVAL_MODES, ("dropout left on", "BatchNorm in train mode")):
        n = min(len(t[key]), len(p[key]))
        k = _first(t[key][:n] != p[key][:n])
        if k < 0:
            continue
        side = other if p[key][k] > t[key][k] else "torch"
        out.append(f"{what} at evaluation on the {side} side, from the evaluation after step {int(t['eval_step'][k])} "
                   f"({'active dropout' if 'dropout' in key else 'train-mode BatchNorm'} modules: torch "
                   f"{int(t[key][k])} vs {other} {int(p[key][k])}; model.eval() missing before evaluating?)")
    return out


def _names(log: dict) -> list:
    return bytes(log[NAMES]).decode().split("\n") if NAMES in log else []


def _noise(grads) -> np.ndarray:
    """Each column of one side's gradient norms [steps, parameters]: rounding noise at every step (NOISE of the
    step's largest). NaN (no gradient) is not noise."""
    return np.all(grads <= NOISE * np.nanmax(grads, axis=1, keepdims=True), axis=0)


def noise_parameters(t: dict, p: dict, n: int) -> list:
    """[(column, name, (its largest gradient, the largest of any parameter))] of the parameters whose gradient is
    rounding noise on both sides at every logged step (NOISE of the step's largest): their updates are rounding's
    too, and the weight norm is judged without them. [] when a side logs no parameter norms or gradients, or the
    two logs hold different parameters (their count or sizes)."""
    if any(k not in log for log in (t, p) for k in ("param_norm", "grad_norm")):
        return []
    gt, gp = t["grad_norm"][:n], p["grad_norm"][:n]
    if gt.shape != gp.shape or gt.ndim != 2 or not gt.size or np.isnan(gt).all():
        return []
    names = _names(t) or [f"parameter {i}" for i in range(gt.shape[1])]
    noise = _noise(gt) & _noise(gp)
    if noise.all():
        return []
    top = float(np.nanmax(gt))
    return [(int(i), names[i], (float(np.nanmax(gt[:, i])), top)) for i in np.flatnonzero(noise)]


def own_runs(torch_log: dict, own) -> dict:
    """`own`, torch's other runs of the same training on this machine (training logs, TrainingLog.arrays), its
    kernels perturbed (threads, oneDNN off, weights moved one ulp) or, with dropout, its masks drawn from another
    seed, reduced to what judges a port against them: {each metric: [runs] final values, "weight_norm": [runs,
    steps], NaN past a run's end; where torch's log shows parameters whose gradient is rounding noise, their columns
    "noise_columns" and norms "param_norm": [runs, steps, those parameters]}, the file OWN a hand-in
    carries. Each must be the same training, only rounding (or masks) apart: every row of judge_training but
    OWN_PARTS green against this run, else a PipelineError naming it."""
    names = sorted(k for k in torch_log if k.startswith(METRIC))
    steps = max((len(log["weight_norm"]) for log in own if "weight_norm" in log), default=0)
    out = {n: np.full(len(own), np.nan) for n in names}
    out["weight_norm"] = np.full((len(own), steps), np.nan)
    # the parameters the weight norm may be judged without (noise on torch's side: noise_parameters needs both), the
    # only norms kept of each run: the rest is weight_norm (ResNet-18's 62 parameters over 264 steps, 7 runs: 0.9 MB)
    grads, columns = torch_log.get("grad_norm"), np.shape(torch_log.get("param_norm"))[1:]
    noisy = np.flatnonzero(_noise(grads)) if np.ndim(grads) == 2 and np.size(grads) and \
        np.shape(grads)[1:] == columns else np.zeros(0, np.int64)
    if noisy.size and all(np.shape(log.get("param_norm"))[1:] == columns for log in own):
        out["noise_columns"] = noisy
        out["param_norm"] = np.full((len(own), steps, noisy.size), np.nan)
    for i, log in enumerate(own):
        # on what both logged: a run logged before parameter norms or evaluation modes were is still a yardstick
        other = judge_training({k: v for k, v in torch_log.items() if k in log}, log, threshold=math.inf,
                               other=f"own[{i}]")
        failed = [r for r in other.rows if not r.passed and r.name not in OWN_PARTS]
        if failed:
            raise PipelineError(f"own[{i}], torch's own run, is not the same training as this one ({failed[0].name}: "
                                f"{failed[0].detail}); give torch's run of this training with only its kernels or "
                                "masks changed [PC707]")
        for n in names:
            out[n][i] = float(log[n][-1]) if n in log else np.nan
        if "weight_norm" in log:
            out["weight_norm"][i, :len(log["weight_norm"])] = log["weight_norm"]
        if "param_norm" in out:
            out["param_norm"][i, :len(log["param_norm"])] = log["param_norm"][:, out["noise_columns"]]
    return out


def below_own_spread(result: TrainingReport, task: float) -> str:
    """Said where a reviewer's threshold `task` fails a final metric that torch's own runs (a hand-in's OWN) show
    within torch's own spread on the machine that made it: the threshold decides, and no port can meet it there."""
    final = next((r for r in result.rows if r.name == "final metric"), None)
    if final is None or not final.passed or not result.spread:
        return ""
    runs = len(result.own["weight_norm"])
    return (f"the final metric is beyond the task's {task:g} but within torch's own spread where the hand-in was made "
            f"({runs} torch run(s) of the same training in {DIAGNOSTICS_OWN} end up to {result.spread:.3g} from its "
            f"torch run): no port can meet {task:g} on that machine; the reviewer's threshold decides")


HERE = "on this machine"  # where torch's own runs were made, as judge_training says it in-process


def judge_training(torch_log: dict, paddle_log: dict, threshold: float = None, records=(None, None),
                   own=(), where: str = HERE, other: str = "paddle") -> TrainingReport:
    """Two train_log records (TrainingLog.arrays) and, when known, their run records. own: torch's other runs of
    this training on this machine, their logs or own_runs' reduction of them (a hand-in's OWN file): the final
    metric's threshold is widened by how far they end from this run (own_spread), and the weight norm is held to
    OWN_MULTIPLE times their gap at each step (or the fixed figures, the larger), torch's own spread on the
    user's machine. where: how the rows name that machine (a hand-in checker: the one that made the hand-in).
    other: how the rows name the second log's run (own_runs: torch's own run, not Paddle's)."""
    threshold = tolerances.guide_threshold(PAIR) if threshold is None else threshold
    task = threshold
    if own is not None and not isinstance(own, dict):
        own = own_runs(torch_log, own) if len(own) else None
    moved, own_said, own_norm = own_spread(torch_log, own) if own is not None else (0.0, "", None)
    threshold = task + moved
    t, p, rows, causes = torch_log, paddle_log, [], []
    for side, log in (("torch", t), (other, p)):
        missing = [k for k in ("loss", "lr", "eval_step") if k not in log]
        if missing:
            raise PipelineError(f"the {side} training log holds no {', '.join(missing)}: write it with "
                                "portcheck.pipeline.training.TrainingLog [PC708]")

    names = sorted(k for k in t if k.startswith(METRIC))
    same_metrics = bool(names) and names == sorted(k for k in p if k.startswith(METRIC))
    if not same_metrics:
        rows.append(Row("final metric", False, f"metrics differ: torch {[n[len(METRIC):] for n in names]} vs {other} "
                                               f"{sorted(k[len(METRIC):] for k in p if k.startswith(METRIC))}"))
    else:
        parts, ok = [], True
        for n in names:
            a, b = float(t[n][-1]), float(p[n][-1])
            gap = abs(a - b)
            ok &= gap <= threshold  # NaN fails
            parts.append(f"{n[len(METRIC):]} torch {a:.6g} vs {other} {b:.6g}, diff {gap:.3g}")
        rule = (tolerances.task_rule(threshold, moved, f"({own_said} {where}, against this run's)") if own else
                f"{threshold:g}")
        rows.append(Row("final metric", ok, "; ".join(parts) + f" ({'<=' if ok else 'not <='} the threshold {rule})"))

    st, sp = len(t["loss"]), len(p["loss"])
    same_evals = np.array_equal(t["eval_step"], p["eval_step"])
    rows.append(Row("steps", st == sp and same_evals and st > 0,
                    f"{st} steps, evaluated after steps {t['eval_step'].tolist()[:6]}{' ...' if len(t['eval_step']) > 6 else ''}"
                    if st == sp and same_evals else
                    f"torch {st} steps (evaluated after {t['eval_step'].tolist()[:6]}), {other} {sp} "
                    f"(after {p['eval_step'].tolist()[:6]})"))
    n = min(st, sp)
    rows.append(_lr_row(t["lr"], p["lr"], other))
    if rows[-1].passed is False:
        causes.append(f"a different lr schedule ({rows[-1].detail})")

    if "batch" in t and "batch" in p:
        k = _first(t["batch"][:n] != p["batch"][:n])
        rows.append(Row("data order", k < 0, f"every step's batch equal ({n} steps)" if k < 0 else
                        f"the batch of step {k} differs (first of {int((t['batch'][:n] != p['batch'][:n]).sum())} steps)"))
        if k >= 0:
            causes.append(f"different data order (the batches logged differ from step {k})")
    elif "batch" in t or "batch" in p:
        rows.append(Row("data order", False, "logged on one side only: pass batch= to log.step on both"))
    else:
        rows.append(Row("data order", True, "not logged (pass batch= to log.step); the run records' data_order only"))

    evaluated = [all(k in log for k in EVAL_MODES) for log in (t, p)]
    eval_causes = _eval_mode_causes(t, p, other) if all(evaluated) and same_evals else []
    if any(evaluated) and not all(evaluated):
        rows.append(Row("evaluation modes", False, "logged on one side only: pass model= to log.evaluate on both"))
    elif all(evaluated):
        rows.append(Row("evaluation modes", not eval_causes, "; ".join(eval_causes) if eval_causes else
                        f"the same at every evaluation (dropout active in {int(t[EVAL_MODES[0]].max(initial=0))} "
                        f"module(s), BatchNorm training in {int(t[EVAL_MODES[1]].max(initial=0))})"))
        causes += eval_causes
    if all(k in log for log in (t, p) for k in ("dropout_on", "batchnorm_train")):
        mode_causes = _mode_causes(t, p, other)
        rows.append(Row("modes", not mode_causes, "; ".join(mode_causes) if mode_causes else
                        f"the same at every step (dropout active in {int(t['dropout_on'].max())} module(s), "
                        f"BatchNorm training in {int(t['batchnorm_train'].max())})"))
        causes += mode_causes
        deterministic = not mode_causes and int(t["dropout_on"].max()) == 0
        two_samples = not mode_causes and int(t["dropout_on"].max()) > 0
    else:
        rows.append(Row("modes", "weight_norm" not in t and "weight_norm" not in p,
                        "not logged (pass model= to log.step)" if "weight_norm" not in t and "weight_norm" not in p
                        else "logged on one side only: pass model= to log.step on both"))
        deterministic = two_samples = False

    gap = np.abs(t["loss"][:n] - p["loss"][:n])
    parts = _first(~(gap <= LOSS_PARTS))
    aligned = n if parts < 0 else parts  # the steps before the loss curves part
    if deterministic and n:
        rel0 = gap[0] / max(abs(float(t["loss"][0])), np.finfo(np.float64).tiny)  # NaN fails
        rows.append(Row(FIRST_LOSS, bool(rel0 <= FIRST_LOSS_RTOL),
                        f"torch {t['loss'][0]:.7g} vs {other} {p['loss'][0]:.7g} (relative {rel0:.3g}"
                        f"{' <=' if rel0 <= FIRST_LOSS_RTOL else ' >'} {FIRST_LOSS_RTOL:g}): the same weights on the "
                        "same batch, one forward"))
    if "weight_norm" in t and "weight_norm" in p:
        a, b = t["weight_norm"][:n], p["weight_norm"][:n]
        noise = noise_parameters(t, p, n)
        if noise:  # judged on the other weights: their norms, summed as weight_norm sums them
            keep = np.ones(t["param_norm"].shape[1], bool)
            keep[[i for i, _, _ in noise]] = False
            a, b = (kept_norm(log["param_norm"][:n], keep) for log in (t, p))
            if own is not None:  # torch's own gap on the same weights
                own_norm = own_spread(torch_log, own, [i for i, _, _ in noise])[2]
        rel = np.abs(a - b) / np.maximum(np.abs(a), np.finfo(np.float64).tiny)
        # Deterministic runs: held while one computation, said after the loss curves part (rounding amplified by
        # training then moves the norm as it moves the loss: the ResNet-18 example's torch against itself at one
        # thread and at two, 1.2e-3 relative by the end)
        bound = np.full(n, np.inf if deterministic or two_samples else NORM_RTOL)
        bound[:aligned if deterministic else 0] = NORM_RTOL_ALIGNED
        # with dropout's own masks torch parts from itself by as much as from a port missing its weight decay
        # (docs/rules.md): a yardstick for deterministic runs only
        yardstick = own_norm is not None and len(own_norm) >= n and not two_samples
        if yardstick:  # torch against itself on this machine, step by step: what rounding (or masks) does
            bound = np.maximum(np.where(np.isinf(bound), NORM_RTOL_ALIGNED, bound), OWN_MULTIPLE * own_norm[:n])
        k = _first(~(rel <= bound))
        within = (f"within {NORM_RTOL_ALIGNED:g} relative through step {aligned - 1} (largest "
                  f"{rel[:aligned].max():.3g})" if deterministic and aligned else "")
        after = (f"{', ' if within else ''}within {OWN_MULTIPLE:g} x torch's own gap {where} at every step "
                 f"(largest {np.nanmax(rel):.3g}, torch's own {np.nanmax(own_norm[:n]):.3g})" if yardstick else
                 f"{', ' if within else ''}after the loss curves part, said, not judged (largest {np.nanmax(rel[aligned:]):.3g})"
                 if deterministic and aligned < n else "" if deterministic else
                 f"said, not judged: dropout draws its own masks on each side, two samples of the training, whose "
                 f"norms part as far as a missing weight decay moves them (largest {np.nanmax(rel):.3g}; docs/rules.md)"
                 if two_samples
                 else f"{', ' if within else ''}within {NORM_RTOL:g} at every step (largest {np.nanmax(rel):.3g})")
        left_out = ""
        if noise:
            left_out = ("; judged without " + ", ".join(f"{name} (gradient {g:.2g} against {top:.2g} for the largest)"
                                                        for _, name, (g, top) in noise)
                        + ": rounding noise, as a bias before a normalization has (the normalization subtracts it "
                          "again): its update is rounding's too (under Adam, +-lr with a sign rounding picks, "
                          "differently in each framework)")
        rows.append(Row("weight norm", k < 0, (within + after if k < 0 else f"parts at step {k}: torch {a[k]:.10g} vs {other} {b[k]:.10g} (relative {rel[k]:.3g} "
                        f"> {bound[k]:g}{', the loss curves not yet parted' if k < aligned and deterministic else ''})") + left_out))

    finite = [s for s, log in (("torch", t), (other, p)) if not np.isfinite(log["loss"]).all()]
    rows.append(Row("loss finite", not finite, "every step's loss finite on both sides" if not finite else
                    "; ".join(f"{s}'s loss not finite from step {_first(~np.isfinite(log['loss']))}"
                              for s, log in (("torch", t), (other, p)) if s in finite)))
    loss = (f"{'deterministic (the same order and modes, no dropout)' if deterministic else 'not shown deterministic'}; "
            + (f"within {LOSS_PARTS:g} at every step" if parts < 0 else
               f"part beyond {LOSS_PARTS:g} at the first step (gap {gap[0]:.3g})" if parts == 0 else
               f"within {LOSS_PARTS:g} through step {parts - 1}, part at step {parts} (gap {gap[parts]:.3g})")
            + (f"; first steps' gaps {', '.join(f'{g:.1e}' for g in gap[:4])}" if n else ""))

    if records[0] is not None and records[1] is not None:
        found = record_causes(records[0], records[1])
        rows.append(Row("run records", not found, "the same initial weights, data order, seeds and flags" if not found
                        else "; ".join(found)))
        if any(c.startswith(CAUSES["data_order"]) for c in found):  # said once, the record's figures first
            causes = [c for c in causes if not c.startswith(CAUSES["data_order"])]
        causes = found + causes
    first = next((r for r in rows if r.name == FIRST_LOSS), None)
    if first is not None and not first.passed and not causes:
        causes.append(f"the first step's loss differs on the same weights, batch and modes: the forward or the loss "
                      f"itself (Step 1's forward and Step 3's loss pair pin it down; {first.detail})")
    wn = next((r for r in rows if r.name == "weight norm"), None)
    if wn is not None and not wn.passed and not causes:
        causes.append(f"the update differs while weights, order, modes and lr are the same: weight decay, momentum "
                      f"or gradient clipping (the weight norm {wn.detail})")
    # The guide judges the final metric alone; the earlier evaluations are said, so that runs which meet at the end
    # after parting on the way (the curves of a chaotic recipe) show it
    earlier = []
    if same_metrics and same_evals and len(t["eval_step"]) > 1:
        for name in names:
            gaps = np.abs(np.asarray(t[name][:-1], np.float64) - np.asarray(p[name][:-1], np.float64))
            k = int(np.nanargmax(gaps)) if np.isfinite(gaps).any() else 0
            earlier.append(f"{name[len(METRIC):]} largest gap {gaps[k]:.3g} after step {int(t['eval_step'][k])} "
                           f"(torch {float(t[name][k]):.6g} vs {other} {float(p[name][k]):.6g})")
    return TrainingReport(rows, causes, loss, "; ".join(earlier), threshold, moved, own, (t, p))


def plot(torch_log: dict, paddle_log: dict, out) -> str:
    """Both loss curves, their difference, both lr curves and both metrics per evaluation in one PNG; a line
    saying why not when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install matplotlib)"
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    colors = {"torch": "tab:orange", "paddle": "tab:blue"}
    for side, log in (("torch", torch_log), ("paddle", paddle_log)):
        style = "-" if side == "torch" else "--"
        steps = np.arange(len(log["loss"]))
        ax[0, 0].plot(steps, log["loss"], style, color=colors[side], lw=0.8, label=side)
        ax[1, 0].plot(steps, log["lr"], style, color=colors[side], label=side)
        for k in (k for k in log if k.startswith(METRIC)):
            ax[1, 1].plot(log["eval_step"], log[k], "o" + style, color=colors[side], ms=3,
                          label=f"{side} {k[len(METRIC):]} {log[k][-1]:.4f}" if len(log[k]) else side)
    n = min(len(torch_log["loss"]), len(paddle_log["loss"]))
    gap = np.abs(torch_log["loss"][:n] - paddle_log["loss"][:n])
    ax[0, 1].semilogy(np.arange(n), np.maximum(gap, 1e-12), color="tab:green", lw=0.8, label="|torch - paddle| loss")
    if "weight_norm" in torch_log and "weight_norm" in paddle_log:
        a, b = torch_log["weight_norm"][:n], paddle_log["weight_norm"][:n]
        ax[0, 1].semilogy(np.arange(n), np.maximum(np.abs(a - b) / np.maximum(a, 1e-300), 1e-16), color="tab:purple",
                          lw=0.8, label="weight norm, relative")
        ax[0, 1].axhline(NORM_RTOL, color="tab:purple", ls=":", label=f"weight norm bound {NORM_RTOL:g}")
    ax[0, 1].axhline(LOSS_PARTS, color="tab:red", ls="--", label=f"loss: where curves part, {LOSS_PARTS:g}")
    titles = {(0, 0): "training loss", (0, 1): "difference, torch vs paddle", (1, 0): "learning rate",
              (1, 1): "metric per evaluation"}
    for (i, j), title in titles.items():
        ax[i, j].set_title(title)
        ax[i, j].set_xlabel("step")
        ax[i, j].legend(fontsize=8)
    fig.tight_layout()
    atomic_write(out, lambda tmp: fig.savefig(tmp, format="png", dpi=72, metadata={"Software": None}))
    plt.close(fig)
    return f"plot: {Path(out).name}"


def judge_and_log(folder, threshold: float = None, top=None, draw: bool = True, own=()) -> TrainingVerdict:
    """Judge a training from folder's train_align and train_log files (both sides saved by TrainingLog.save):
    the pair as an outcome at the threshold (default: the guide's 0.15%), the curves by judge_training, one
    verdict of both; write train_align_diff.log with the curves' rows after the verdict, and the plot; hand all in
    to `top` (the curves and the plot under diagnostics/). own: torch's other runs of this training on this machine
    (judge_training's): the pair is judged at the threshold they widen it to, which its diff log states, and
    they are written as OWN beside the logs and handed in with them, so the hand-in checker judges as this did.
    Returns a TrainingVerdict: `.passed` is red when the final metric or any curve is."""
    folder = Path(folder)
    kept = folder / f"{OWN}_torch.npy"
    if len(own):
        writable(kept)
        writable(record.path_for(kept))
    if top is not None:
        report.hand_in_folder(top, diagnostics=[kept] if len(own) else [])
    torch_log, paddle_log, records = logs(folder, [record.path_for(folder / f"{PAIR}_{side}.npy")
                                                   for side in ("torch", "paddle")])
    result = judge_training(torch_log, paddle_log, threshold, records, own)
    if result.own is not None:
        save_own(folder, result.own)
    lines = result.lines()
    drawn = plot(torch_log, paddle_log, folder / PLOT) if draw else None
    failed = [r.name for r in result.rows if not r.passed and r.name != "final metric"]  # the pair judges that one
    task = tolerances.guide_threshold(PAIR) if threshold is None else threshold
    verdict = handin.judge_and_log(folder, PAIR, task, tables=lines + ([drawn] if drawn else []), kind="outcome",
                                   spread=result.spread, also=[(
        "training curves", not failed, f"failed: {', '.join(failed)}" if failed else
        "every row green: " + ", ".join(r.name for r in result.rows if r.name != "final metric"))])
    for line in lines:
        print(report.one_line(line))
    if drawn:  # where the picture is once handed in (the diff log, beside it, names it alone)
        print(report.one_line(f"plot: {Path(top) / report.DIAGNOSTICS / PLOT if top is not None else folder / PLOT}"))
    if top is not None:
        extra = [folder / f"{LOG}_{side}.npy" for side in ("torch", "paddle")] + ([kept] if len(own) else []) + \
                ([folder / PLOT] if (folder / PLOT).is_file() and draw else [])
        report.hand_in(folder / f"{PAIR}_torch.npy", folder / f"{PAIR}_paddle.npy", folder / f"{PAIR}_diff.log",
                       top=top, diagnostics=extra)
    return TrainingVerdict(verdict, result)
