"""The two runs' configuration compared before any number (`python -m portcheck run`): each difference one line.

Each side's recorder (portcheck.hooks_torch, hooks_paddle) writes its configuration in torch's conventions
(BatchNorm's momentum as torch's: Paddle's 0.9 is torch's 0.1; GELU's approximation as "none" or "tanh"), so a
difference here is a difference of the runs, never of the frameworks' spellings. Modules are paired as the
forward is (portcheck.pairing), parameters as judge_backward pairs them.
"""
import math

from portcheck.backward import BY_DESIGN, RMSPROP, _counterpart, _cycled
from portcheck.pairing import ROOT

CONVENTION = {"momentum": " (Paddle's BatchNorm momentum m is torch's 1 - m: torch's 0.1 is Paddle's 0.9)"}


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
    line = accumulation(torch_config, paddle_config)
    if line:
        out.append(line)
    tl, pl = torch_config.get("loss") or {}, paddle_config.get("loss") or {}
    for key in ("function", "reduction", "label_smoothing", "ignore_index", "weight"):
        if tl and pl and not _same(tl.get(key), pl.get(key)):
            out.append(f"loss: {key} torch {_said(tl.get(key))} vs paddle {_said(pl.get(key))}")
    if lrs is not None and not _same(list(lrs[0]), list(lrs[1])):
        out.append(f"scheduler: lr over the {len(lrs[0])} steps torch {[float(f'{x:.6g}') for x in lrs[0]]} vs "
                   f"paddle {[float(f'{x:.6g}') for x in lrs[1]]}")
    # the torch recorder names such a scheduler under record_backward's key (recorder.Run.scheduler): its one line
    out += [f"scheduler: {line}" for line in _cycled(torch_config)]
    return out


def accumulation(torch_config: dict, paddle_config: dict):
    """The line saying the two sides call backward() a different number of times per optimizer step (one side
    accumulates gradients over micro-batches, or over another count), or None."""
    t, p = ((c.get("accumulation") or {}).get("backward") for c in (torch_config, paddle_config))
    if not t or not p or t == p:
        return None
    if len(set(t)) == len(set(p)) == 1:
        return f"gradient accumulation: torch {t[0]} backward() per optimizer step vs paddle {p[0]}"
    return f"gradient accumulation: backward() per optimizer step torch {t} vs paddle {p}"


def notes(torch_config: dict, paddle_config: dict) -> list:
    """Lines shown, not judged: seeds (each framework draws its own stream; the run syncs weights and batches)
    and library versions."""
    ts, ps = torch_config.get("seeds", {}), paddle_config.get("seeds", {})
    seeds = f"seeds: torch {', '.join(f'{k}({v})' for k, v in ts.items()) or 'none set'}; paddle " \
            f"{', '.join(f'{k}({v})' for k, v in ps.items()) or 'none set'}"
    versions = lambda c: ", ".join(f"{k} {v}" for k, v in c.get("versions", {}).items())
    return [seeds, f"versions: torch side {versions(torch_config)}; paddle side {versions(paddle_config)}"]
