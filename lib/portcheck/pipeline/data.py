"""Step 2 for any model: a data pipeline's batches and a metric, recorded on each side and judged exactly.

    from portcheck.pipeline import data, handin

    rec = data.record_batches(loader, batches=10, names=("images", "labels"))   # either framework
    handin.save_side(out, "data", "torch", rec, depends, script)
    report = data.judge_batches(torch_rec, paddle_rec)
    print(report.first)    # "batch 3, images[0, 0, 5, 7]: torch 0.1 vs paddle 0.2", or None when equal

    value = data.record_metric(accuracy, logits, labels, framework="paddle")   # {"accuracy": ...}

    for images, labels in data.each_batch(loader):   # Step 5's loop: a Paddle reader shut down at a break

A loader is a torch DataLoader, a paddle.io.DataLoader or any iterable of batches; a batch is an array or a
tensor of either framework, a tuple or list of them (named by `names`, else by position), or a dict of them,
nested at will. Its record is {"batch_<i>/<key>": array}: the guide's data pair, whose kind is exact (the same
samples, in the same order, through the same transforms: equal values, integers bit for bit, the same shape
and dtype). Only iteration is used, so the same call records both frameworks' loaders.
"""
import contextlib
import re
from typing import NamedTuple, Optional

import numpy as np

from portcheck.core import record, tolerances
from portcheck.core.errors import PipelineError, first_line, raised_by

BATCH = "batch_"
_BATCH_KEY = re.compile(r"^(.*?)batch_(\d+)/(.+)$")  # <prefix>batch_<i>/<key>


def to_numpy(value, what: str) -> np.ndarray:
    """A torch or Paddle tensor, a numpy array or a Python number as a numpy array (a copy: later steps of
    the loader or the model cannot change what was recorded)."""
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        if str(getattr(value, "dtype", "")).endswith("bfloat16"):
            # numpy has no bfloat16: torch's .numpy() raises, Paddle's returns the raw bits as uint16 integers
            raise PipelineError(f"{what}: a bfloat16 tensor, which numpy cannot hold; record it as float32 on both "
                                "sides (torch's .float(), Paddle's .astype('float32')) [PC176]")
        if hasattr(value, "detach"):
            value = value.detach()
        if hasattr(value, "cpu"):
            value = value.cpu()
        value = value.numpy()
    try:
        array = np.array(value)
    except (TypeError, ValueError) as e:
        raise PipelineError(f"{what}: {type(value).__name__} is not an array ({e}); yield arrays or tensors "
                            "[PC506]") from None
    if array.dtype.hasobject or array.dtype.kind not in "biuf":
        raise PipelineError(f"{what}: {array.dtype} values are not numbers; record numbers (token ids, not "
                            "strings) [PC500]")
    return array


def _leaves(value, prefix: str, names, out: dict, what: str):
    if isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, f"{prefix}/{k}", None, out, what)
    elif isinstance(value, (tuple, list)) and value and not all(isinstance(v, (int, float, bool)) for v in value):
        if names is not None and len(names) != len(value):
            raise PipelineError(f"names={tuple(names)}: {what} holds {len(value)} parts, not {len(names)}; "
                                "name each part, in order [PC510]")
        for i, v in enumerate(value):
            _leaves(v, f"{prefix}/{names[i] if names is not None else i}", None, out, what)
    else:
        if names is not None and len(names) != 1:
            raise PipelineError(f"names={tuple(names)}: {what} is one array, not {len(names)} [PC511]")
        key = f"{prefix}/{names[0]}" if names is not None else prefix
        out[key] = to_numpy(value, f"{what}, {key.split('/', 1)[1] if '/' in key else 'the batch'}")


def each_batch(loader):
    """The loader's batches, its reader shut down however the loop over them ends (a break at max_steps, an
    error): a paddle.io.DataLoader left part read keeps its reader thread alive, and killed at interpreter exit
    it aborted the process (SIGABRT, 'exception not rethrown') after its results were written, 1 run in 10.
    `for batch in each_batch(loader)` on both sides of a training script; a torch loader has nothing to shut down."""
    iterator = iter(loader)
    try:
        yield from iterator
    finally:
        stop = getattr(iterator, "_try_shutdown_all", None)
        if callable(stop):
            stop()


LOADER = "loader/"  # <prefix>loader/batches, <prefix>loader/left_out: what a loader yields in a whole epoch


def loader_length(loader) -> dict:
    """{"batches": its length, "left_out": the samples its last partial batch drops} of a torch or Paddle
    DataLoader (or any loader with a len), as int64 0-d arrays; {} for an iterable with no length. A drop_last on
    one side changes both, whichever batches are recorded."""
    try:
        n = len(loader)
    except TypeError:
        return {}
    out = {"batches": np.array(n, dtype=np.int64)}
    batch_sampler = getattr(loader, "batch_sampler", None)
    drop_last = getattr(loader, "drop_last", getattr(batch_sampler, "drop_last", None))
    size = getattr(loader, "batch_size", None) or getattr(batch_sampler, "batch_size", None)
    sampler = getattr(loader, "sampler", None) or getattr(batch_sampler, "sampler", None)
    samples = None
    for source in (sampler, getattr(loader, "dataset", None)):  # the epoch's samples: a sampler may take a subset
        try:
            samples = len(source)
            break
        except TypeError:
            continue
    if isinstance(drop_last, bool) and isinstance(size, int) and samples is not None:
        out["left_out"] = np.array(samples - n * size if drop_last else 0, dtype=np.int64)
    return out


def record_batches(loader, batches: int = None, names=None, prefix: str = "") -> dict:
    """{"<prefix>batch_<i>/<key>": array} of the loader's first `batches` batches (every batch when None), in
    the order it yields them, and {"<prefix>loader/batches", "<prefix>loader/left_out"}: its length and the samples
    its drop_last leaves out (loader_length; a loader with no len has none), so a loader that drops its last batch
    on one side only is red however few batches are recorded. names: the parts of a tuple or list batch, e.g.
    ("images", "labels"); prefix: tells several loaders apart in one record ("train/", "test/")."""
    if batches is not None and (isinstance(batches, bool) or not isinstance(batches, int) or batches < 1):
        raise PipelineError(f"batches={batches!r}: give a whole number >= 1, or None for every batch [PC501]")
    if names is not None and (isinstance(names, str) or not all(isinstance(n, str) and n for n in names)):
        raise PipelineError(f"names={names!r}: give a tuple of key names, e.g. ('images', 'labels') [PC502]")
    try:
        iterator = iter(loader)
    except TypeError:
        raise PipelineError(f"loader: a {type(loader).__name__} is not iterable; pass a DataLoader or an "
                            "iterable of batches [PC507]") from None
    out, i = {}, 0
    try:  # the loader's own error (its dataset, its collate function): one line naming the batch it stopped at
        with contextlib.closing(each_batch(iterator)) as batches_:
            for i, batch in enumerate(batches_):
                if batches is not None and i >= batches:
                    break
                _leaves(batch, f"{prefix}{BATCH}{i}", names, out, f"{prefix}batch {i}")
    except PipelineError:
        raise
    except Exception as e:  # noqa: BLE001 - any error of the user's loader, said in one line; Ctrl-C passes
        raise PipelineError(f"the loader raised at {prefix}batch {i + bool(out)}: {first_line(e)}; check its "
                            "dataset and collate function [PC508]") from None
    if not out:
        raise PipelineError("loader: it yielded no batch; check its dataset and batch size [PC503]")
    out.update({f"{prefix}{LOADER}{k}": v for k, v in loader_length(loader).items()})
    return out


LOADER_SAID = {"batches": "the loader's length (batches in an epoch: its drop_last, batch size or dataset differ)",
               "left_out": "the samples the loader leaves out of an epoch (drop_last on one side)"}


class Difference(NamedTuple):
    """The first place two exact records differ: a key, where in it, and what each side holds there. moved: of
    a differing batch's rows, (how many Paddle holds where torch fed them elsewhere, how many it holds)."""
    key: str
    detail: str
    moved: tuple = ()

    def describe(self) -> str:
        batch = _BATCH_KEY.match(self.key)
        prefix, _, what = self.key.rpartition(LOADER)
        if what in LOADER_SAID and (not prefix or prefix.endswith("/")):
            return f"{prefix}{LOADER_SAID[what]}: {self.detail}"
        if batch:
            return f"{batch.group(1)}batch {batch.group(2)}, key {batch.group(3)}: {self.detail}" + (
                f"; {self.moved[0]} of Paddle's {self.moved[1]} rows there are rows torch fed at another place: the "
                "samples come in another order (a sampler or a shuffle: each framework's shuffle draws its own order; give "
                "both loaders one order, a sampler of yours or shuffle off)" if self.moved else "")
        return f"{self.key}: {self.detail}"


def _moved(torch_data: dict, paddle_data: dict, key: str) -> tuple:
    """(n, rows): n of the rows Paddle's batch `key` holds are rows torch fed at another place (in any batch under
    the same name), none of them where Paddle holds it; () when none is, or the batch is not samples' rows of one
    shape (a batch of labels is not: any wrong label is a value torch fed elsewhere)."""
    batch = _BATCH_KEY.match(key)
    a, b = np.asarray(torch_data[key]), np.asarray(paddle_data[key])
    if not batch or a.ndim < 2 or a.shape != b.shape or a.dtype != b.dtype:
        return ()
    fed = {row.tobytes() for k, v in torch_data.items() if (m := _BATCH_KEY.match(k)) and m.group(1, 3) ==
           batch.group(1, 3) and np.shape(v)[1:] == a.shape[1:] and np.asarray(v).dtype == a.dtype
           for row in np.asarray(v)}
    n = sum(row.tobytes() in fed and row.tobytes() != own.tobytes() for row, own in zip(b, a))
    return (n, len(b)) if n else ()


def _value(x) -> str:
    return repr(x.item()) if hasattr(x, "item") else repr(x)


def key_difference(key: str, a: np.ndarray, b: np.ndarray, allowed: float = 0.0) -> Optional[Difference]:
    """None when a and b are the same values (integers bit for bit, floats within `allowed`, NaN never), the same
    shape and dtype: labels of another integer width (torch's int64, a Paddle dataset's int32) are another dtype,
    red as the guide's pairs are (its reprod_log arrays carry their dtype)."""
    if a.shape != b.shape:
        return Difference(key, f"shape torch {list(a.shape)} vs paddle {list(b.shape)}")
    if a.dtype != b.dtype:
        return Difference(key, f"dtype torch {a.dtype} vs paddle {b.dtype}")
    if a.dtype.kind == "f":
        nan = np.isnan(a) | np.isnan(b)
        if nan.any():
            where = tuple(int(i) for i in np.argwhere(nan)[0])
            return Difference(key, f"NaN at {list(where)}: torch {_value(a[where])} vs paddle {_value(b[where])}")
        differ = np.abs(a.astype(np.float64) - b.astype(np.float64)) > allowed if allowed else a != b
    else:
        differ = a.view(f"u{a.itemsize}") != b.view(f"u{b.itemsize}") if a.dtype.kind in "iu" else a != b
    if not differ.any():
        return None
    where = tuple(int(i) for i in np.argwhere(differ)[0])
    count = int(differ.sum())
    beyond = (f", {abs(float(a[where]) - float(b[where])):.3g} apart, beyond the {allowed:.3g} rounding allows"
              if allowed else "")
    return Difference(key, f"index {list(where)}: torch {_value(a[where])} vs paddle {_value(b[where])}{beyond}"
                      + (f" (and {count - 1} more value(s) differ)" if count > 1 else ""))


def first_difference(torch_data: dict, paddle_data: dict, ulps: int = 0) -> Optional[Difference]:
    """The first difference between two exact records, in the torch record's order (a data record: the
    first differing batch, key and index); a key on one side only is a difference. None when equal. ulps: floats
    equal within that many ulps of the torch record's largest value (tolerances.ULPS: an lr, a metric)."""
    allowed = tolerances.rounding(torch_data.values(), ulps)
    for key, a in torch_data.items():
        if key not in paddle_data:
            return Difference(key, _missing(key, torch_data, paddle_data, "paddle"))
        a = np.asarray(a)
        d = key_difference(key, a, np.asarray(paddle_data[key]), allowed.get(a.dtype, 0.0))
        if d is not None:
            return d._replace(moved=_moved(torch_data, paddle_data, key))
    extra = next((k for k in paddle_data if k not in torch_data), None)
    return Difference(extra, _missing(extra, paddle_data, torch_data, "torch")) if extra is not None else None


def _batches(data: dict) -> int:
    return len({m.group(1, 2) for m in map(_BATCH_KEY.match, data) if m})


def _missing(key, have: dict, lack: dict, side: str) -> str:
    if _BATCH_KEY.match(key) and _batches(have) != _batches(lack):
        return (f"not in the {side} record: its loader yielded {_batches(lack)} batch(es), the other "
                f"{_batches(have)} (a different dataset size, batch size or drop_last)")
    return f"not in the {side} record (it holds {', '.join(list(lack)[:3]) or 'nothing'}"\
           + (" ...)" if len(lack) > 3 else ")")


class DataReport(NamedTuple):
    batches: tuple       # (torch, paddle) batch counts
    keys: int
    first: Optional[Difference]

    @property
    def passed(self) -> bool:
        return self.first is None and self.keys > 0

    def line(self) -> str:
        if self.first is None:
            return (f"data: every value equal ({self.batches[0]} batches, {self.keys} arrays, each the same shape, "
                    "dtype and values)")
        return f"data: first difference at {self.first.describe()}"


def judge_batches(torch_record: dict, paddle_record: dict) -> DataReport:
    """Two record_batches records judged exactly: equal batch by batch, key by key, value by value."""
    return DataReport((_batches(torch_record), _batches(paddle_record)), sum(map(bool, map(_BATCH_KEY.match,
                                                                                          torch_record))),
                      first_difference(torch_record, paddle_record))


def record_metric(metric, predictions, labels, framework: str = None) -> dict:
    """{name: float64 0-d array}: metric(predictions, labels) on one side. predictions and labels are numpy
    arrays, the same on both sides (the guide: the same inputs give the same value); with framework
    ("torch" or "paddle") they are handed to the metric as that framework's tensors. The metric returns a
    number, a 0-d array or tensor, or a dict of them ({"accuracy": ..., "macro_f1": ...}); a lone number is
    named "metric". The pair is judged exactly, within a few ulps of the value (tolerances.ULPS; a float32 metric
    within ULPS_FLOAT32 of float32's): compute it as counts or in float64 where you can."""
    if framework not in (None, "torch", "paddle"):
        raise PipelineError(f"framework={framework!r}: give 'torch', 'paddle' or None (numpy arrays) [PC504]")
    p, y = to_numpy(predictions, "predictions"), to_numpy(labels, "labels")
    if len(p) != len(y):
        raise PipelineError(f"predictions hold {len(p)} rows, labels {len(y)}: pass one prediction per label [PC505]")
    if framework == "torch":
        import torch
        p, y = torch.from_numpy(p.copy()), torch.from_numpy(y.copy())
    elif framework == "paddle":
        import paddle
        p, y = paddle.to_tensor(p), paddle.to_tensor(y)
    with raised_by("the metric raised", "it is called as metric(predictions, labels)"):
        value = metric(p, y)
    values = value if isinstance(value, dict) else {"metric": value}
    out = {}
    for name, v in values.items():
        array = to_numpy(v, f"the metric's {name}")
        if array.size != 1:
            raise PipelineError(f"the metric's {name} holds {array.size} values: return one number per name [PC509]")
        # float32 kept: the pair's rounding is then float32's (tolerances.ULPS_FLOAT32), never float64's
        out[str(name)] = array.reshape(()).astype(np.float32 if array.dtype == np.float32 else np.float64)
    return out


def order_fingerprint(*orders) -> str:
    """The fingerprint of a data order (the sample indices of each epoch, as both sides' samplers take
    them): what a run record binds as the order both sides train in."""
    return record.fingerprint((f"order_{i}", np.asarray(o, dtype=np.int64)) for i, o in enumerate(orders))
