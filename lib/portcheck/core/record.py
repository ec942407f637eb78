"""What a result depends on, written beside it, so that a check can prove both sides are the same run.

Every pt_*/pd_* script saves <result>.run.json next to its .npy:

    {"framework": "torch", "script": "pipeline/Step1/pt_forward_bert.py", "written": "...",
     "file": "forward_torch.npy", "result": "<sha256>",
     "depends": {"weights": "<sha256>", "inputs": "<sha256>", "flags": {...}}}

`result` binds the record to the file it describes: the digest of its arrays' fingerprint together with every
other field but its time (seal: `framework` its side, `file` its pair and role, `depends` its run), so a record
relabelled (another side, another pair, torch's float64 run) or moved to another run no longer describes its file
(a hand-in that keeps some keys of a result, or a result's statistics, gets a record bound to those, save_derived).
A record written before seals holds the fingerprint alone, and is read as it was. A result copied over the other
side's, one file given as both sides, or a record beside a file it was not written for never passes.
Every file a hand-in's writers copy into it is listed with its sha256 in its manifest (diagnostics/manifest.json,
list_handed: one record of the run, itself sealed), which `check` holds the folder to (manifest_problems).

`depends` holds only what must be equal on both sides: fingerprints of the weights as loaded (in
torch's layout on both sides, so a converted Paddle model fingerprints like its source), of the input
arrays or data rows read, and the framework-independent flags. Every check compares the two records
before anything else and goes red naming the first field that differs: two results from different
weights, data or flags, or a stale one left by an earlier run, never pass. Results written by a
contestant's own scripts carry no record; the check then says so in one line and still judges the pair.
"""
import filecmp
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.core.tolerances import GUIDE
from portcheck.core.fileio import atomic_write, load_npy, open_regular, read_json, save_npy, writable
from portcheck.core import page

SUFFIX = ".run.json"
RECORD_BYTES = 1 << 20  # a record is a few hundred bytes; no more than this is read


def fingerprint(named_arrays) -> str:
    """sha256 over (name, dtype, shape, bytes) of every array, in name order, a float's -0.0 hashed as 0.0: one
    value, which two pipelines computing one number may give either sign (0.0 * -1, a normalisation's x - mean),
    so equal data fingerprint alike. Every other value's bytes are its own (x + 0.0 is x)."""
    h = hashlib.sha256()
    for name, array in sorted(named_arrays, key=lambda item: item[0]):
        array = np.ascontiguousarray(array)
        h.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        if array.dtype.kind != "f":
            h.update(array.tobytes())
            continue
        flat = array.reshape(-1)
        for lo in range(0, flat.size, ZEROS_BLOCK):  # block by block: no copy of a large weight
            h.update((flat[lo:lo + ZEROS_BLOCK] + array.dtype.type(0)).tobytes())  # -0.0 + 0.0 is 0.0
    return h.hexdigest()


ZEROS_BLOCK = 1 << 20


def state_fingerprint(state: dict) -> str:
    """The fingerprint of a state dict ({name: array or tensor}), as a run record's `weights` binds it."""
    return fingerprint((k, _numpy(v)) for k, v in state.items())


def model_fingerprint(model, port=None) -> str:
    """The weights a torch or Paddle model holds now, in torch's layout: a Paddle Linear's [in, out] weight is
    hashed as torch's [out, in], so a Paddle model whose module and tensor names are torch's (a twin port)
    fingerprints like the torch model it was converted from. The one weights fingerprint of the library.
    port: convert's State, for a port whose names are not torch's: either model is read under torch's names,
    over the tensors the port carries (not torch's num_batches_tracked), so each side fingerprints its own
    weights and the two are equal only when the Paddle model holds the torch model's."""
    if port is not None:
        carried, state = port.carried(), model.state_dict()
        paddle = hasattr(model, "named_sublayers")
        # a part of a torch tensor (a fused or packed module's: in_proj_weight's q rows), or several joined, is
        # hashed in Paddle's layout on both sides, made from the torch tensors it is cut from
        cut = {k: port.cut(k) for k in carried}
        missing = [n for k, (name, _) in carried.items() for n in ([k] if paddle else cut[k] or [name])
                   if n not in state]
        if missing:
            raise PipelineError(f"model_fingerprint: the {'Paddle' if paddle else 'torch'} model holds no "
                                f"{', '.join(missing[:3])}: pass the model the conversion `port` was made for [PC225]")
        if paddle:
            return fingerprint((name, state[k].numpy().T if transposed and not cut[k] else state[k].numpy())
                               for k, (name, transposed) in carried.items())
        return fingerprint((name, port.from_torch(k, lambda n: _numpy(state[n])) if cut[k] else _numpy(state[name]))
                           for k, (name, _) in carried.items())
    return fingerprint(_in_torch_layout(model))


def _in_torch_layout(model):
    """(name, array) of each tensor of the model's state dict, one at a time, in torch's layout (a Paddle Linear's
    [in, out] weight as [out, in])."""
    if not hasattr(model, "named_sublayers"):  # torch
        return ((k, _numpy(v)) for k, v in model.state_dict().items())
    linear = {f"{name}.weight" if name else "weight" for name, layer in model.named_sublayers(include_self=True)
              if _paddle_linear(layer)}
    return ((k, v.numpy().T if k in linear else v.numpy()) for k, v in model.state_dict().items())


def weights_fingerprint(model) -> str:
    """The floating-point tensors a torch or Paddle model holds now, whatever their names: each hashed alone in
    torch's layout (a Paddle Linear's [in, out] weight as [out, in]), the sorted hashes hashed. What a pt_ and a pd_
    script each fingerprint of their own model when no conversion map is at hand (portcheck.Side): equal when the
    Paddle model holds the torch model's tensors under any names. A tensor one side holds and the other not (a
    buffer only one saves, a q/k/v fused on one side) makes them differ: then fingerprint with
    model_fingerprint(model, port=)."""
    each = sorted(fingerprint([("", a)]) for _, a in _in_torch_layout(model) if a.dtype.kind == "f")
    return hashlib.sha256("|".join(each).encode()).hexdigest()


def _paddle_linear(layer) -> bool:
    """isinstance(layer, paddle.nn.Linear), asked of its classes: core imports no framework."""
    return any(c.__name__ == "Linear" and c.__module__.startswith("paddle.nn") for c in type(layer).__mro__)


def _numpy(v):
    if hasattr(v, "detach"):
        v = v.detach().cpu()
    return v.numpy() if hasattr(v, "numpy") and not isinstance(v, np.ndarray) else np.asarray(v)


def path_for(result) -> Path:
    result = Path(result)
    return result.with_name(result.stem + SUFFIX)


def result_fingerprint(result) -> str:
    """What a record binds: the fingerprint of every array in the .npy `result`."""
    return fingerprint(load_npy(result).items())


def seal(rec: dict, fingerprint: str) -> str:
    """The `result` a record written now keeps: the sha256 of its file's fingerprint together with every other
    field but its time, so that no field can be edited (a side relabelled, a pair renamed, a run's depends) without
    recomputing it."""
    fields = {k: v for k, v in rec.items() if k not in ("written", "result")}
    return hashlib.sha256(json.dumps([fingerprint, fields], sort_keys=True, default=str).encode()).hexdigest()


def binds(rec: dict, fingerprint: str) -> str:
    """How `rec` describes the file whose fingerprint is given: "sealed" (seal), "plain" (the fingerprint alone: a
    record written before seals), "" where it does not."""
    if not isinstance(rec.get("result"), str):
        return ""
    return "sealed" if rec["result"] == seal(rec, fingerprint) else "plain" if rec["result"] == fingerprint else ""


SEALED = 2  # a record's "format" where its result is its seal: the hand-in it is in has a manifest (MANIFEST)


def sealed(rec: dict, fingerprint: str) -> dict:
    """rec with its `result` the seal of it over the fingerprint (its format SEALED)."""
    rec = {**rec, "format": SEALED}
    return {**rec, "result": seal(rec, fingerprint)}


def save(result, framework: str, script: str, depends: dict, yardstick=None):
    """Write the record of `result`, the .npy it describes: call it once that file is written. yardstick: the keys
    the pair's float64 run holds of its own (a torch side's spread:* keys), which a yardstick put in its place must
    hold too."""
    rec = {"framework": framework, "script": script, "written": time.strftime("%Y-%m-%d %H:%M:%S"),
           "file": Path(result).name, "depends": depends, **({"yardstick": sorted(yardstick)} if yardstick else {})}
    write(path_for(result), sealed(rec, result_fingerprint(result)))


def save_results(results: dict, framework: str, script: str, depends: dict):
    """Write each .npy of `results` ({path: arrays}) and its record, every target checked first: a link at a
    record's path refuses the run before any result is replaced."""
    for path in results:
        writable(path), writable(path_for(path))
    for path, arrays in results.items():
        save_npy(path, arrays)
    for path in results:
        save(path, framework, script, depends)


def save_derived(source, derived, path=None, extra=None):
    """The record of `derived`, a .npy made from `source` (a hand-in of some of its keys, its statistics),
    written at `path` (default: beside `derived`): `source`'s record bound to `derived`, but only if it is
    bound to `source`, so nothing derived launders a result its record does not describe. extra: fields it adds
    (what else `derived` was made from)."""
    record = load(source)
    if record is not None:
        made = {**record, **(extra or {}), "file": Path(derived).name}
        write(path or path_for(derived), sealed(made, result_fingerprint(derived)) if binds(record, result_fingerprint(
            source)) else {**made, "result": "(source not bound)"})


def write(path, record: dict):
    """The record at path; one that differs from what is there only in its "written" time is left as it was:
    a reproduced result is not a change."""
    try:
        there = Path(path).read_text() if Path(path).is_file() and not Path(path).is_symlink() else None
    except (OSError, UnicodeDecodeError):
        there = None
    if same_but_written(there, record):
        return
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n"))


def same_but_written(a, b) -> bool:
    """Two run records (JSON text or dicts) that differ at most in their "written" time."""
    def parsed(x):
        try:
            x = json.loads(x) if isinstance(x, str) else x
        except (ValueError, RecursionError):
            return None
        return {**x, "written": None} if isinstance(x, dict) else None
    a, b = parsed(a), parsed(b)
    return a is not None and a == b


def load(result, path=None):
    """The record beside `result` (or at `path`), or None if there is none (a contestant's own file)."""
    path = Path(path) if path else path_for(result)
    if not path.is_file():
        return None
    try:
        record = read_json(path, RECORD_BYTES)
        if not isinstance(record, dict) or not isinstance(record.get("depends"), dict):
            raise ValueError("no 'depends' object")
    except (ValueError, UnicodeDecodeError, RecursionError, OSError) as e:
        raise PipelineError(f"{path} is not a run record ({e}); re-run the script that writes it [PC226]") from None
    return record


def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differences(torch_record, paddle_record) -> list:
    """The `depends` fields that differ: [(field, torch value, paddle value)], in field order."""
    t, p = _flatten(torch_record["depends"]), _flatten(paddle_record["depends"])
    return [(k, t.get(k, "(missing)"), p.get(k, "(missing)")) for k in sorted(set(t) | set(p)) if t.get(k) != p.get(k)]


def _short(v):
    return v[:12] if isinstance(v, str) and len(v) == 64 else v  # a sha256: its first 12 digits tell two apart


def shown(v, limit: int = 80) -> str:
    """A record's value as a log line may show it: a newline or other control character in a hand-edited
    record could otherwise forge lines of the log ("same run: passed", "diff check passed")."""
    text = v if isinstance(v, str) else json.dumps(v)
    text = text if text.isprintable() else json.dumps(text)[1:-1]
    return text if len(text) <= limit else text[:limit] + "..."


def bound(side: str, result, record: dict, fingerprint: str = None):
    """None if `record` describes `result` and was written by `side`'s framework, else the reason. fingerprint:
    result's, where the caller has it."""
    if record.get("framework") != side:
        return (f"the {side} result's run record says it was written by {shown(record.get('framework'))}: "
                "one framework's result passed as the other's; re-run both sides")
    if record.get("file", Path(result).name) != Path(result).name:  # older records name no file
        return (f"the {side} result {Path(result).name} has the run record of {shown(record['file'])}: one pair's "
                "files handed in as another's; re-run both sides")
    if "result" not in record:
        return f"the {side} result's run record does not fingerprint its result (an older record); re-run both sides"
    if not binds(record, fingerprint or result_fingerprint(result)):
        return (f"the {side} result is not the file its run record describes (the file, or the record's side, pair "
                "or run, was changed after it was written); re-run both sides")
    return None


def copied(torch_result, paddle_result, pair: str = None, record_paths=(None, None)) -> str:
    """Why the Paddle file cannot be Paddle's result, or "": it is the torch file (a link, hard or symbolic),
    or holds torch's values bit for bit (whatever the file's key order, memory order or .npy header version) while
    a computed pair of the guide's (forward, loss, bp_align) holds more than scalars and no run record proves it
    Paddle's: a deep model's floats from two frameworks agree to the bit in a lone loss, not in a tensor of them,
    but a small one's may (a two-layer MLP's logits, one matmul each), so where each side's sealed record binds its
    own file to its own framework the bits are that run's. Exact and outcome pairs (data, lr, a final accuracy) are
    equal by design, so a copy cannot be told there. pair: its name (default: the file's); record_paths: the two
    records where not beside the files."""
    try:
        if os.path.samefile(torch_result, paddle_result):
            return "the Paddle file is the torch file (a link to it): hand in each framework's own result"
    except OSError:
        return ""  # a missing or unreadable file is reported where it is loaded
    pair = pair or Path(torch_result).name.removesuffix(".npy").removesuffix("_torch")
    if pair not in GUIDE or GUIDE[pair].kind != "computed":  # data, lr, a final accuracy: equal by design
        return ""
    try:
        same_bytes = filecmp.cmp(torch_result, paddle_result, shallow=False)
        t, p = load_npy(torch_result), (None if same_bytes else load_npy(paddle_result))
    except (OSError, PipelineError):
        return ""
    if not same_bytes and not (t.keys() == p.keys() and all(
            t[k].dtype == p[k].dtype and t[k].shape == p[k].shape and t[k].tobytes() == p[k].tobytes() for k in t)):
        return ""
    floats = sum(v.size for v in t.values() if v.dtype.kind == "f" and v.size > 1)
    if floats and _each_its_own(torch_result, paddle_result, record_paths):
        return ""
    return ((f"the Paddle file {'is byte for byte' if same_bytes else 'holds every value of'} the torch file, "
             "computed floats included, bit for bit: a copy, not Paddle's result; hand in what the Paddle code wrote")
            if floats else "")


def _each_its_own(torch_result, paddle_result, record_paths) -> bool:
    """Each side's result bound by a sealed record to its own file and framework (a copy over the Paddle file leaves
    Paddle's record describing another file; a copied record says torch)."""
    try:
        records = [load(torch_result, record_paths[0]), load(paddle_result, record_paths[1])]
    except PipelineError:
        return False
    return None not in records and all(
        rec.get("format") == SEALED and bound(side, result, rec) is None
        for side, result, rec in zip(("torch", "paddle"), (torch_result, paddle_result), records))


def same_run(torch_result, paddle_result, record_paths=(None, None)):
    """(passed, detail) for the two results' records (beside them, or at record_paths); passed is None
    when neither side has one. Each record must describe its own result and framework (bound)."""
    if Path(torch_result).absolute() == Path(paddle_result).absolute():
        return False, "one file given as both sides"
    copy = copied(torch_result, paddle_result, record_paths=record_paths)
    if copy:
        return False, copy
    records = [load(torch_result, record_paths[0]), load(paddle_result, record_paths[1])]
    if records == [None, None]:
        return None, "no run records (results written outside this pipeline): same run not proven"
    if None in records:
        side = ("torch", "paddle")[records.index(None)]
        return False, f"the {side} result has no run record: re-run both sides"
    prints = [result_fingerprint(f) for f in (torch_result, paddle_result)]
    for side, result, rec, fp in zip(("torch", "paddle"), (torch_result, paddle_result), records, prints):
        problem = bound(side, result, rec, fp)
        if problem:
            return False, problem
    if len({binds(rec, fp) for rec, fp in zip(records, prints)}) > 1:
        return False, "one side's run record is sealed, the other's is of a record format before seals: not one run"
    diffs = differences(*records)
    if diffs:
        field, t, p = diffs[0]
        more = f" (and {len(diffs) - 1} more: {', '.join(shown(d[0]) for d in diffs[1:])})" if len(diffs) > 1 else ""
        return False, f"{shown(field)} differs: torch {shown(_short(t))} vs paddle {shown(_short(p))}{more}; re-run both sides"
    return True, f"both sides record the same {', '.join(shown(k) for k in sorted(records[0]['depends']))}"


def twin_problem(result, twin, record_paths=(None, None)):
    """None if `twin` (torch's float64 run of a torch result) was written by the same run: a torch record,
    bound to its file, depending on exactly what `result`'s record depends on (records beside the files, or
    at record_paths); else the reason."""
    mine, theirs = load(result, record_paths[0]), load(twin, record_paths[1])
    if mine is None or theirs is None:
        return "the float64 run or its torch result has no run record"
    problem = bound("torch", twin, theirs)
    own = [k for k in mine.get("yardstick") or () if k not in load_npy(twin)] if not problem else []
    if own:  # what torch's own float64 run holds beside the pair's keys (its spread against itself)
        problem = (f"the float64 run holds no {shown(own[0])}" + (f" (and {len(own) - 1} more)" if len(own) > 1 else "")
                   + ", which the torch result's run record says torch's float64 run holds: not torch's float64 run")
    differ = None if problem else differences(mine, theirs)
    return problem or (f"the float64 run's record differs from the torch result's at {shown(differ[0][0])}"
                       if differ else None)


# The hand-in's manifest: one record of what its writers handed in (report.hand_in, runconfig.hand_in), every file
# with its sha256, itself sealed; `check` holds the folder to it. No digest stops a forger who recomputes them all
# (docs/review.md): this one makes any edit of a file, a record or the list itself show unless it is recomputed.
MANIFEST = "manifest.json"  # in a hand-in's diagnostics/
RECORDS = "records"  # <folder>/records/<pair>_<side>.npy: each side's whole record behind a pair, with its run record
MANIFEST_BYTES = 1 << 22
# what a hand-in's writers always hand in, and so must be listed: the pairs and their logs at the top, every
# result, run record (a configuration record's too) and verdict in diagnostics/ (what else it holds is its own)
LISTED = {"top": ("_torch.npy", "_paddle.npy", "_diff.log"), "below": (".npy", SUFFIX, "_diff.json")}


def file_digest(path):
    """A regular file's sha256, None where there is none (a link, a FIFO put in its place, nothing)."""
    h = hashlib.sha256()
    try:
        with open_regular(path, follow=False) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def _manifest_seal(files: dict) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def read_manifest(below):
    """{path in the hand-in: sha256} of below/MANIFEST, None where there is none; one that is not the manifest the
    writers write (unreadable, or its list changed without its seal): PipelineError, one line."""
    path = Path(below) / MANIFEST
    if not os.path.lexists(path):
        return None
    try:
        data = read_json(path, MANIFEST_BYTES, follow=False)
        files = data.get("files") if isinstance(data, dict) else None
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise ValueError("no 'files' object of digests")
        if data.get("seal") != _manifest_seal(files):
            raise ValueError("its list of files was changed after it was written: its seal does not cover it")
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
        raise PipelineError(f"{path} is not a hand-in's manifest ({shown(str(e), 120)}): hand the folder in again "
                            "[PC251]") from None
    return files


def manifest_seal(below):
    """The seal of below/MANIFEST as it is now (what a page written into the hand-in is bound to: page.RUN), None
    where there is none or it is not the writers' manifest."""
    try:
        files = read_manifest(below)
    except PipelineError:
        return None
    return None if files is None else _manifest_seal(files)


def list_handed(top, below, files):
    """`files` (in the hand-in folder `top`) added to below/MANIFEST with their sha256 as they are now: each writer
    calls it once it has handed them in. The page this project left in below/ described the folder before this
    write: it goes, so no page beside the folder says another verdict (its writer writes it again, bound anew)."""
    top = Path(top)
    listed = read_manifest(below) or {}
    for f in map(Path, files):
        digest = file_digest(f)
        if digest is not None:
            listed[f.relative_to(top).as_posix()] = digest
    atomic_write(Path(below) / MANIFEST, lambda tmp: Path(tmp).write_text(
        json.dumps({"files": listed, "seal": _manifest_seal(listed)}, indent=1, sort_keys=True) + "\n"))
    if page.ours(Path(below) / page.NAME):
        (Path(below) / page.NAME).unlink()


def manifest_problems(top, below) -> list:
    """Why the hand-in `top` is not as its writers handed it in (below: its diagnostics/), one phrase each: a file
    its manifest lists missing or changed, a file they hand in that it does not list, the manifest gone where its
    records are sealed (written with one). [] for a folder as handed in, and for one written before manifests."""
    top, below = Path(top), Path(below)
    try:
        listed = read_manifest(below)
    except PipelineError as e:
        return [str(e).removesuffix(" [PC251]")]
    if listed is None:
        for path in sorted(below.glob(f"*{SUFFIX}")):
            try:
                rec = read_json(path, RECORD_BYTES, follow=False)
            except (OSError, ValueError, UnicodeDecodeError, RecursionError):
                continue
            if isinstance(rec, dict) and rec.get("format") == SEALED:
                return [f"{below.name}/{MANIFEST} missing, while {path.name} was written with one: a hand-in is "
                        "judged with the list of what its writers handed in"]
        return []
    out = []
    for name, digest in sorted(listed.items()):
        if Path(name).is_absolute() or ".." in Path(name).parts:
            out.append(f"{below.name}/{MANIFEST} lists {shown(name)}, outside the hand-in")
            continue
        now = file_digest(top / name)
        if now != digest:
            out.append(f"{shown(name)} " + ("is missing" if now is None else "was changed") + " since it was handed in")
    whole = below / RECORDS  # each side's whole record behind a pair, handed in as the rest
    there = [f for f in top.iterdir() if f.name.endswith(LISTED["top"])] + \
        [f for folder in (below, *([whole] if whole.is_dir() and not whole.is_symlink() else []))
         for f in folder.iterdir() if f.name.endswith(LISTED["below"])]
    out += [f"{shown(f.relative_to(top).as_posix())} is not in the list of what was handed in"
            for f in sorted(there) if f.relative_to(top).as_posix() not in listed]
    return out
