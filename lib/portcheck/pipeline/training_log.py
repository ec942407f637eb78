"""Each side's training log (Step 5): TrainingLog, one call per optimizer step and per evaluation in the side's own
loop, saved as train_align_<framework>.npy (the last evaluation, the guide's pair) and train_log_<framework>.npy (the
curves), each with its run record (run_depends), and read back only where that record binds them to the pair (logs);
and what a step logs of the model: its weight norm and gradients' (parameter_norms), its dropout/BatchNorm modes, the
batch's fingerprint. torch_running_var gives a Paddle model torch's BatchNorm running variance. The judge of two
logs is portcheck.pipeline.training.

Imports core and pipeline's data and handin (save_side writes the pair); never training or own_runs, which import it.
"""
from pathlib import Path

import numpy as np

from portcheck.core import record
from portcheck.pipeline import handin
from portcheck.pipeline.data import order_fingerprint, to_numpy
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy, save_npy

PAIR = "train_align"
LOG = "train_log"
METRIC = "metric/"


def _modules(model):
    if hasattr(model, "named_sublayers"):  # Paddle
        return [m for _, m in model.named_sublayers(include_self=True)]
    return list(model.modules())


NAMES = "param_names"  # a log's parameter names, "\n"-joined, as uint8: the columns of param_norm and grad_norm

# Each evaluation's modes (TrainingLog.evaluate(model=)): active dropout modules, BatchNorm modules in train mode
EVAL_MODES = ("eval_dropout_on", "eval_batchnorm_train")


def modes(model) -> tuple:
    """(dropout modules active, BatchNorm modules in train mode): what the guide asks to check first when
    training does not align. Found by class name, the same in both frameworks (Dropout*, *BatchNorm*)."""
    dropout = batchnorm = 0
    for m in _modules(model):
        name, training = type(m).__name__, bool(getattr(m, "training", False))
        if "Dropout" in name and training and float(getattr(m, "p", 0) or 0) > 0:
            dropout += 1
        elif "BatchNorm" in name and training and not getattr(m, "_use_global_stats", False):
            batchnorm += 1
    return dropout, batchnorm


def _trainable(model) -> list:
    """(name, parameter) of the trainable weights, in the model's order (Paddle's BatchNorm statistics are
    parameters that do not train: left out, as torch's buffers are)."""
    named = model.named_parameters() if hasattr(model, "named_parameters") else \
        ((str(i), p) for i, p in enumerate(model.parameters()))
    return [(name, p) for name, p in named
            if not getattr(p, "stop_gradient", False) and getattr(p, "requires_grad", True)]


def _squares(x, what: str) -> float:
    x = to_numpy(x, what).ravel().astype(np.float64)
    # numpy's own pairwise sum, not np.dot: BLAS splits a dot product by its thread count, so the same weights
    # gave another last bit on one core (a Step 5 run side by side, pinned) than on two, and a rerun's log differed
    return float(np.add.reduce(np.square(x, out=x)))


def parameter_norms(model) -> tuple:
    """([each trainable weight's squared L2 norm], [its gradient's, NaN where it has none], [names]), float64."""
    weights, grads, names = [], [], []
    for name, p in _trainable(model):
        names.append(name)
        weights.append(_squares(p, "a weight"))
        g = getattr(p, "grad", None)
        grads.append(_squares(g, "a gradient") if g is not None else float("nan"))
    return weights, grads, names


def weight_norm(model) -> float:
    """The L2 norm of the trainable weights, summed in float64."""
    total = 0.0
    for square in parameter_norms(model)[0]:
        total += square
    return float(np.sqrt(total))


def weight_norms(model) -> np.ndarray:
    """Every trainable weight's L2 norm, sorted: a digest of the weights that needs no names (the two frameworks
    name and order their parameters otherwise). Sorting moves no value further than the two sides differ, so two
    aligned trainings stay as close here as in their weights; a weight whose update differs shows in its norm."""
    return np.sort(np.sqrt(np.array(list(_squares(model)), dtype=np.float64)))


CHANNELS_LAST = ("NLC", "NHWC", "NDHWC")  # Paddle's data formats whose channels are the last axis


def torch_running_var(paddle_model) -> list:
    """Torch's rule for BatchNorm's running variance, on a Paddle model: call it once on the Paddle side of
    Step 5, before training. torch updates running_var with the unbiased batch variance (n/(n-1), n values per
    channel), Paddle with the biased one, and has no option for the other (Step 4 applies the rule when it
    judges). Evaluation uses the running statistics, so without it two aligned trainings judge the same weights
    through statistics 1/(n-1) apart (3% at n = 32), and a final accuracy can differ by a sample. Hooks on every
    Paddle BatchNorm (1D, 2D, 3D, Sync, paddle.nn.BatchNorm; channels first or last) redo each train-mode update
    by torch's rule: new = m * old + (Paddle's new - m * old) * n / (n - 1). Returns the hooks' handles
    (handle.remove() takes one off); none for a model without BatchNorm."""
    import paddle
    from paddle.nn.layer.norm import _BatchNormBase
    old, handles = {}, []

    def before(layer, inputs):
        if layer.training:
            old[id(layer)] = layer._variance.clone()

    def after(layer, inputs, output):
        start = old.pop(id(layer), None)
        if start is None or not layer.training or getattr(layer, "_use_global_stats", None) is True:
            return
        x = inputs[0]
        layout = getattr(layer, "_data_format", None) or getattr(layer, "_data_layout", None)
        n = int(np.prod(x.shape)) // int(x.shape[-1] if layout in CHANNELS_LAST and len(x.shape) > 2 else x.shape[1])
        if n > 1:
            m = layer._momentum
            with paddle.no_grad():
                layer._variance.set_value(m * start + (layer._variance - m * start) * (n / (n - 1)))
    for layer in paddle_model.sublayers(include_self=True):
        if isinstance(layer, (_BatchNormBase, paddle.nn.BatchNorm)):
            handles += [layer.register_forward_pre_hook(before), layer.register_forward_post_hook(after)]
    return handles


def batch_fingerprint(batch) -> int:
    """A batch (arrays or tensors, in a tuple, list or dict) as one int64: equal batches, equal numbers."""
    leaves = []

    def walk(value, key):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}/{k}")
        elif isinstance(value, (tuple, list)) and value and not all(isinstance(v, (int, float)) for v in value):
            for i, v in enumerate(value):
                walk(v, f"{key}/{i}")
        else:
            leaves.append((key, to_numpy(value, "log.step(batch=)")))
    walk(batch, "batch")
    return int(record.fingerprint(leaves)[:15], 16)


def _number(value, what: str) -> float:
    array = to_numpy(value, what)
    if array.size != 1:
        raise PipelineError(f"{what}: {array.size} values; pass one number [PC700]")
    return float(array.reshape(()))


class TrainingLog:
    """One side's training, as the judge reads it: step() once per optimizer step, evaluate() once per
    evaluation, save() at the end."""

    def __init__(self):
        self.curves = {"loss": [], "lr": []}
        self.evals, self.eval_steps, self.eval_modes = {}, [], {}
        self.names = []  # the trainable parameters' (log.step(model=)), the columns of param_norm and grad_norm

    def step(self, loss, lr, model=None, batch=None):
        """loss: this step's loss (a tensor or number); lr: the lr this step used; model: logs the weight
        norm and the dropout/BatchNorm modes; batch: logs the data (its fingerprint), e.g. the labels or ids."""
        n = len(self.curves["loss"])
        extra = {}
        if model is not None:
            squares, grads, names = parameter_norms(model)
            if names and all(not g for g in np.nan_to_num(grads)):  # None (NaN here) or zero everywhere
                raise PipelineError(f"log.step(model=) at step {n}: no trainable weight has a gradient (each is None "
                                    "or zero): call it after backward() and before the gradients are cleared "
                                    "(zero_grad / clear_grad), since it logs each gradient's norm [PC711]")
            total = 0.0
            for square in squares:  # weight_norm's sum, in its order
                total += square
            extra["weight_norm"] = float(np.sqrt(total))
            extra["param_norm"], extra["grad_norm"] = np.sqrt(squares), np.sqrt(grads)
            extra["dropout_on"], extra["batchnorm_train"] = modes(model)
            if not n:
                self.names = names
        if batch is not None:
            extra["batch"] = batch_fingerprint(batch)
        optional = set(self.curves) - {"loss", "lr"}
        if n and set(extra) != optional:
            raise PipelineError(f"log.step at step {n}: model= and batch= must be given at every step or never "
                                f"(step 0 logged {', '.join(sorted(optional)) or 'neither'}) [PC701]")
        self.curves["loss"].append(_number(loss, "log.step(loss=)"))
        self.curves["lr"].append(_number(lr, "log.step(lr=)"))
        for k, v in extra.items():
            self.curves.setdefault(k, []).append(v)

    def evaluate(self, metric, step: int = None, model=None):
        """metric: a number or {name: number} (accuracy, F1, ...), evaluated after `step` steps (default:
        the steps logged so far). The last evaluation is the training's outcome. model: the model as it was
        evaluated, so that its dropout/BatchNorm modes are logged (dropout left on at evaluation on one side is
        then named as such); given at every evaluation or never."""
        values = metric if isinstance(metric, dict) else {"metric": metric}
        values = {str(k): _number(v, f"log.evaluate({k}=)") for k, v in values.items()}
        if self.eval_steps and set(values) != set(self.evals):
            raise PipelineError(f"log.evaluate: metrics {sorted(values)} differ from the first evaluation's "
                                f"{sorted(self.evals)}; log the same names every time [PC702]")
        if self.eval_steps and (model is not None) != (EVAL_MODES[0] in self.eval_modes):
            raise PipelineError(f"log.evaluate at evaluation {len(self.eval_steps)}: model= must be given at every "
                                "evaluation or never [PC703]")
        if model is not None:
            for key, value in zip(EVAL_MODES, modes(model)):
                self.eval_modes.setdefault(key, []).append(value)
        self.eval_steps.append(len(self.curves["loss"]) if step is None else int(step))
        for k, v in values.items():
            self.evals.setdefault(k, []).append(v)

    def arrays(self) -> dict:
        out = {k: np.asarray(v, dtype=np.int64 if k in ("batch", "dropout_on", "batchnorm_train") else np.float64)
               for k, v in self.curves.items()}
        if self.names:  # the parameters' names, as bytes: a record holds numbers only
            out[NAMES] = np.frombuffer("\n".join(self.names).encode(), dtype=np.uint8).copy()
        out["eval_step"] = np.asarray(self.eval_steps, dtype=np.int64)
        out.update({k: np.asarray(v, dtype=np.int64) for k, v in self.eval_modes.items()})
        out.update({f"{METRIC}{k}": np.asarray(v, dtype=np.float64) for k, v in self.evals.items()})
        return out

    def final(self) -> dict:
        if not self.eval_steps:
            raise PipelineError("log.evaluate was never called: evaluate at least once, after the last step [PC704]")
        return {k: np.asarray(v[-1], dtype=np.float64) for k, v in self.evals.items()}

    def save(self, folder, framework: str, depends: dict, script: str) -> Path:
        """train_align_<framework>.npy (the last evaluation) and train_log_<framework>.npy (the curves) in
        folder, each with its run record (depends: run_depends)."""
        if framework not in ("torch", "paddle"):
            raise PipelineError(f"framework={framework!r}: give 'torch' or 'paddle' [PC705]")
        if not self.curves["loss"]:
            raise PipelineError("log.step was never called: log every optimizer step [PC706]")
        final = self.final()
        folder = Path(folder)
        log = folder / f"{LOG}_{framework}.npy"
        save_npy(log, self.arrays())
        record.save(log, framework, script, depends)
        return handin.save_side(folder, PAIR, framework, final, depends, script)


def run_depends(weights: str, order, seeds: dict, flags: dict, **more) -> dict:
    """What a training's run record binds, the guide's causes when training does not align: the initial
    weights' fingerprint (record.model_fingerprint, taken before the first step), the data order (a
    fingerprint, or the sample indices of each epoch as both samplers take them), the seeds and the flags
    (every setting both sides must share: lr, schedule, weight decay, batch size, epochs...)."""
    if not isinstance(order, str):
        order = order_fingerprint(*order)
    return {"weights": weights, "data_order": order, "seeds": dict(seeds), "flags": dict(flags), **more}


def curves_of(t: dict, p: dict) -> list:
    """Both sides' loss, lr and metric curves, as a page draws them ([{"name", "x", "torch", "paddle"}]), each over
    the steps both logged (a metric over its evaluations' steps)."""
    out = []
    for key, x in [("loss", None), ("lr", None)] + [(k, "eval_step") for k in t if k.startswith(METRIC)]:
        if key in t and key in p:
            n = min(len(t[key]), len(p[key]))
            steps = list(range(n)) if x is None else [float(s) for s in t.get(x, range(n))[:n]]
            out.append({"name": key, "x": steps, "torch": np.asarray(t[key])[:n].tolist(),
                        "paddle": np.asarray(p[key])[:n].tolist()})
    return out


def logs(folder, pair_records=(None, None)) -> tuple:
    """(torch log, paddle log, [their run records]) from train_log_<framework>.npy in folder. Each record must
    describe its log and side, and depend on what the side's train_align record depends on (pair_records:
    their paths), so the curves judged are the outcome's own training."""
    folder = Path(folder)
    paths = [folder / f"{LOG}_{side}.npy" for side in ("torch", "paddle")]
    loaded = [load_npy(path) for path in paths]
    records = [record.load(path) for path in paths]
    for side, path, rec, pair_rec in zip(("torch", "paddle"), paths, records, pair_records):
        if rec is None:
            raise PipelineError(f"{path.name} has no run record: write it with "
                                "portcheck.pipeline.training.TrainingLog.save "
                                "[PC709]")
        problem = record.bound(side, path, rec)
        pair_rec = record.load(path, pair_rec) if pair_rec is not None else None
        if not problem and pair_rec is not None and record.differences(rec, pair_rec):
            problem = f"its run record differs from the {side} {PAIR} record's: not that training's curves"
        if problem:
            raise PipelineError(f"{path.name}: {problem}; re-run both sides [PC710]")
    return loaded[0], loaded[1], records
