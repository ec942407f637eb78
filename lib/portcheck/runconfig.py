"""The two runs' configuration compared before any number (`python -m portcheck run`): each difference one line.

Each side's recorder (portcheck.hooks_torch, hooks_paddle) writes its configuration in torch's conventions
(BatchNorm's momentum as torch's: Paddle's 0.9 is torch's 0.1; GELU's approximation as "none" or "tanh"), so a
difference here is a difference of the runs, never of the frameworks' spellings. Modules are paired as the
forward is (portcheck.pairing), parameters as judge_backward pairs them.
"""
import json
import math
import os
from pathlib import Path

from portcheck.backward import BY_DESIGN, RMSPROP, _counterpart, _cycled
from portcheck.pairing import ROOT

CONVENTION = {"momentum": " (Paddle's BatchNorm momentum m is torch's 1 - m: torch's 0.1 is Paddle's 0.9)"}


# What a transformers or paddlenlp Trainer does beside its optimizer's settings, which the recorders read from the
# Trainer as it trains (hooks_torch.trainer_config, hooks_paddle.trainer_config): {key: what it is, how to set it}.
# The Trainers' other defaults reach the optimizer, clipping and schedule, compared above as any script's are.
TRAINER = {
    "label_smoothing": "the label smoothing the Trainer applies to the model's logits: transformers' "
                       "label_smoothing_factor; paddlenlp's Trainer applies none whatever it is given",
    "max_steps": "the optimizer steps in all (num_train_epochs x the steps per epoch, or max_steps), the length of "
                 "the lr schedule: paddlenlp's num_train_epochs defaults to 1, transformers' to 3",
    "gradient_accumulation_steps": "the batches per optimizer step",
    "dataloader_drop_last": "whether an epoch's last, smaller batch is dropped",
    "lr_scheduler_type": "the lr schedule's kind",
    "warmup_steps": "the warmup's steps: warmup_steps, else warmup_ratio x the steps, which transformers rounds up "
                    "and paddlenlp down: give warmup_steps",
}


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _said(v) -> str:
    return "none" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def differences(torch_config: dict, paddle_config: dict, modules: dict, renamed: dict, lrs=None) -> list:
    """[one line per difference] between the two sides' configurations. modules: {torch module: Paddle module}
    (the forward's pairing, the models as ROOT); renamed: {torch key: its Paddle tensor name} (the torch record's);
    lrs: (torch's, Paddle's) lr of each recorded step."""
    out = []
    pm = paddle_config.get("modules", {})
    for name, conf in torch_config.get("modules", {}).items():
        target = modules.get(name or ROOT)
        other = pm.get("" if target == ROOT else target) if target else None
        if other is None:
            continue
        for key, value in conf.items():
            if key != "type" and key in other and not _same(value, other[key]):
                out.append(f"{name or ROOT} ({conf['type']}): {key} torch {_said(value)} vs paddle "
                           f"{_said(other[key])}{CONVENTION.get(key, '') if 'Norm' in conf['type'] else ''}")
    t, p = torch_config.get("optimizer") or {}, paddle_config.get("optimizer") or {}
    rmsprop = t.get("family") == p.get("family") == "rmsprop"
    if rmsprop:  # no Paddle epsilon is torch's eps: the rule said, and Paddle's against the closest, eps squared
        eps, closest = p.get("eps"), (t.get("eps") or 0.0) ** 2
        out.append(f"optimizer: {BY_DESIGN[RMSPROP][0]}" + ("" if _same(eps, closest) else
                   f"; paddle's epsilon {_said(eps)} is not torch's eps squared ({closest:g}), the closest"))
    elif t.get("family") == p.get("family"):  # another pair of one name that no setting makes the same
        out += [f"optimizer: {rule}" for pair, (rule, _) in BY_DESIGN.items()
                if pair[0].rsplit(".", 1)[-1].lower() == t.get("family") == pair[1].rsplit(".", 1)[-1].lower()]
    for key in ("family", "lr", "betas", "eps", "momentum", "nesterov", "amsgrad"):
        if (key in t or key in p) and not _same(t.get(key), p.get(key)) and not (rmsprop and key == "eps"):
            out.append(f"optimizer: {key} torch {_said(t.get(key))} vs paddle {_said(p.get(key))}")
    decay = []
    for key, (value, kind) in (t.get("weight_decay") or {}).items():
        target = _counterpart(f"w/{key}", modules, renamed).partition("/")[2]
        other = (p.get("weight_decay") or {}).get(target)
        if other is None:
            continue
        if not _same(value, other[0]) or (value and kind != other[1]):
            decay.append(f"{key} torch {value:g} ({kind}) vs paddle {other[0]:g} ({other[1]})")
    if decay:
        out.append(f"optimizer: weight decay of {decay[0]}" + (f" (and {len(decay) - 1} more parameter(s))"
                                                                 if len(decay) > 1 else ""))
    tc, pc = torch_config.get("clip"), paddle_config.get("clip")
    if not _same(tc, pc):
        shown = lambda c: f"{c['kind']} {c['bound']:g}" if c else "none"
        out.append(f"gradient clipping: torch {shown(tc)} vs paddle {shown(pc)}")
    tl, pl = torch_config.get("loss") or {}, paddle_config.get("loss") or {}
    for key in ("function", "reduction", "label_smoothing", "ignore_index", "weight"):
        if tl and pl and not _same(tl.get(key), pl.get(key)):
            out.append(f"loss: {key} torch {_said(tl.get(key))} vs paddle {_said(pl.get(key))}")
    tt, pt = torch_config.get("trainer"), paddle_config.get("trainer")
    for key, what in TRAINER.items() if tt and pt else ():
        if not _same(tt.get(key), pt.get(key)):
            out.append(f"trainer: {key} torch {_said(tt.get(key))} vs paddle {_said(pt.get(key))} ({what})")
    tk, pk = torch_config.get("kept") or {}, paddle_config.get("kept") or {}  # recorder's Run.keep, paired by name
    out += [f"kept beside the model: torch {name} ({kind}) vs paddle none"
            for name, kind in tk.items() if name not in pk]
    out += [f"kept beside the model: torch none vs paddle {name} ({kind})"
            for name, kind in pk.items() if name not in tk]
    if lrs is not None and not _same(list(lrs[0]), list(lrs[1])):
        out.append(f"scheduler: lr over the {len(lrs[0])} steps torch {[float(f'{x:.6g}') for x in lrs[0]]} vs "
                   f"paddle {[float(f'{x:.6g}') for x in lrs[1]]}")
    # the torch recorder names such a scheduler under record_backward's key (recorder.Run.scheduler): its one line
    out += [f"scheduler: {line}" for line in _cycled(torch_config)]
    return out


def notes(torch_config: dict, paddle_config: dict) -> list:
    """Lines shown, not judged: seeds (each framework draws its own stream; the run syncs weights and batches)
    and library versions."""
    ts, ps = torch_config.get("seeds", {}), paddle_config.get("seeds", {})
    seeds = f"seeds: torch {', '.join(f'{k}({v})' for k, v in ts.items()) or 'none set'}; paddle " \
            f"{', '.join(f'{k}({v})' for k, v in ps.items()) or 'none set'}"
    versions = lambda c: ", ".join(f"{k} {v}" for k, v in c.get("versions", {}).items())
    return [seeds, f"versions: torch side {versions(torch_config)}; paddle side {versions(paddle_config)}"]


# The hand-in's configuration entry (`portcheck run` writes it, `portcheck check` judges it): each side's configuration
# record as run judged it, DIAGNOSTICS/config_<side>.json with its run record; json only, each read bounded
CONFIG = "config"
CONFIG_BYTES = 8 << 20


def _config_file(below, side: str) -> Path:
    return Path(below) / f"{CONFIG}_{side}.json"


def hand_in(below, configs: dict, modules: dict, renamed: dict, lrs, depends: dict, script: str):
    """configs: {side: its recorder's configuration}; modules, renamed, lrs: what differences() was given, kept in
    the torch side's file (lrs: each side's in its own); depends: {side: what its pairs' run records depend on}.
    Each file's run record binds it (its sha256) to the run's weights and batches, as the pairs' records do."""
    import hashlib
    import time
    from portcheck import record
    from portcheck.fileio import atomic_write, writable
    texts = {side: json.dumps({"config": configs[side], "lrs": [float(x) for x in lrs[i]],
                               **({"modules": modules, "renamed": renamed} if side == "torch" else {})},
                              indent=1, default=str) + "\n"  # in its order: the first parameter named first
             for i, side in enumerate(("torch", "paddle"))}
    for side in texts:  # every target checked before the first is written
        writable(_config_file(below, side)), writable(record.path_for(_config_file(below, side)))
    for side, text in texts.items():
        path = _config_file(below, side)
        atomic_write(path, lambda tmp, text=text: Path(tmp).write_text(text))
        record.write(record.path_for(path), {"framework": side, "script": script, "file": path.name,
                                             "written": time.strftime("%Y-%m-%d %H:%M:%S"), "depends": depends[side],
                                             "result": hashlib.sha256(text.encode()).hexdigest()})


def from_folder(below):
    """(the configuration lines re-derived from a hand-in's DIAGNOSTICS/config_<side>.json, or None when it holds
    none, a problem that makes the entry red, or "")."""
    import hashlib
    from portcheck import record
    from portcheck.errors import PipelineError
    from portcheck.fileio import open_regular
    files = {side: _config_file(below, side) for side in ("torch", "paddle")}
    if not any(os.path.lexists(f) for f in files.values()):
        return None, ""
    read = {}
    for side, path in files.items():
        try:
            with open_regular(path, follow=False) as f:
                raw = f.read(CONFIG_BYTES + 1)
            if len(raw) > CONFIG_BYTES:
                raise ValueError(f"more than {CONFIG_BYTES} bytes")
            rec = record.load(None, record.path_for(path))
            if rec is None or rec.get("result") != hashlib.sha256(raw).hexdigest() or rec.get("framework") != side:
                return [], (f"{path.name} is not the file its run record ({record.path_for(path).name}) describes: "
                            "rerun portcheck run")
            read[side] = json.loads(raw)
            if not isinstance(read[side], dict) or not isinstance(read[side].get("config"), dict):
                raise ValueError("no 'config' object")
        except (OSError, ValueError, UnicodeDecodeError, RecursionError, PipelineError) as e:
            why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            return [], f"{path.name} is not a configuration record ({why}): rerun portcheck run"
    t, p = read["torch"], read["paddle"]
    try:
        lines = differences(t["config"], p["config"], dict(t.get("modules") or {}), dict(t.get("renamed") or {}),
                            (list(t.get("lrs") or []), list(p.get("lrs") or [])))
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
        return [], f"{CONFIG}_torch.json / {CONFIG}_paddle.json do not read as configuration records ({e})"
    return lines, ""
