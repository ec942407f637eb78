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
# the settings whose whole effect the recorded steps show (run.measured): judged by the numbers, not as a difference
MEASURED = ("padding_idx",)
LOSS_CONVENTION = {"scale": " (torch's huber_loss(delta) is delta x smooth_l1_loss(beta=delta); Paddle's "
                            "smooth_l1_loss and SmoothL1Loss are huber_loss unless is_huber=False)"}


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
            if key != "type" and key not in MEASURED and key in other and not _same(value, other[key]):
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
    if _compared(tl) and _compared(pl):
        if tl["function"] != pl["function"]:
            out.append(f"loss: torch {tl['function']} vs paddle {pl['function']}")
        else:
            out += [f"loss: {key} torch {_said(tl.get(key))} vs paddle {_said(pl.get(key))}"
                    f"{LOSS_CONVENTION.get(key, '')}" for key in tl
                    if key != "function" and not _same(tl.get(key), pl.get(key))]
    out += _dropouts(torch_config, paddle_config, modules)
    out += [f"tied weights: torch's {alias} is its {tie}, paddle holds them apart ({p_alias} and {p_tie}): the head is "
            "untied on paddle's side" for alias, tie, p_alias, p_tie in
            (paddle_config.get("one_sided") or {}).get("untied", ())]
    if not _same(torch_config.get("autocast"), paddle_config.get("autocast")):
        out.append(f"autocast: the first forward computes in torch {_said(torch_config.get('autocast'))} vs paddle "
                   f"{_said(paddle_config.get('autocast'))}")
    if lrs is not None and not _same(list(lrs[0]), list(lrs[1])):
        out.append(f"scheduler: lr over the {len(lrs[0])} steps torch {[float(f'{x:.6g}') for x in lrs[0]]} vs "
                   f"paddle {[float(f'{x:.6g}') for x in lrs[1]]}")
    # the torch recorder names such a scheduler under record_backward's key (recorder.Run.scheduler): its one line
    out += [f"scheduler: {line}" for line in _cycled(torch_config)]
    return out


def _compared(loss: dict) -> bool:
    return bool(loss) and loss.get("known") is not False


def not_compared(torch_config: dict, paddle_config: dict) -> list:
    """Lines for a loss the configuration cannot compare: one portcheck does not know, or none it saw (a loss
    computed by hand); never said to be the same. The loss pair still judges its values."""
    out = []
    for side, config in (("torch", torch_config), ("paddle", paddle_config)):
        loss = config.get("loss")
        if loss and not _compared(loss):
            out.append(f"loss: {side}'s {loss['function']} is not one portcheck knows: not compared")
        elif not loss:
            out.append(f"loss: the {side} script calls no loss function or class portcheck knows (a loss computed "
                       "by hand?): not compared")
    return out


def measurable(torch_config: dict, paddle_config: dict, modules: dict) -> list:
    """[(torch module, its type, Paddle module, setting, torch's value, Paddle's)] for each MEASURED setting that
    differs between paired modules: run.measured judges each by the steps' numbers."""
    pm, out = paddle_config.get("modules", {}), []
    for name, conf in torch_config.get("modules", {}).items():
        target = modules.get(name or ROOT)
        other = pm.get("" if target == ROOT else target) if target else None
        for key in MEASURED:
            if other is not None and key in conf and key in other and not _same(conf[key], other[key]):
                out.append((name, conf["type"], "" if target == ROOT else target, key, conf[key], other[key]))
    return out


def one_sided(paddle_config: dict) -> list:
    """Lines for the tensors one side alone holds, kept at that side's own value (hooks_paddle.start_from_torch):
    shown, the comparison of what reads them deciding."""
    sides = paddle_config.get("one_sided") or {}
    said = lambda names: ", ".join(names[:6]) + (f" (and {len(names) - 6} more)" if len(names) > 6 else "")
    out = []
    if sides.get("paddle"):
        out.append(f"paddle's {said(sides['paddle'])}: no torch tensor; unused by its forward or filled by the model "
                   "itself: kept at paddle's own value, the comparison deciding")
    if sides.get("torch"):
        out.append(f"torch's {said(sides['torch'])}: no paddle tensor; unused by its forward or filled by the model "
                   "itself: kept at torch's own value, not judged")
    if sides.get("tied"):
        out.append(f"torch's {said(sides['tied'])}: tied to a tensor paddle holds once (its matmul with the "
                   "embedding's weight): filled and judged through it")
    return out


def _dropouts(torch_config: dict, paddle_config: dict, modules: dict) -> list:
    """A line per paired module whose dropouts given as numbers (a functional dropout's p, an attention's dropout_p,
    Paddle MultiHeadAttention's float dropout: recorder.Run.dropout_site) differ, its Dropout children counted with
    them (a Dropout module against a functional dropout is the same; two Dropout modules are compared as modules)."""
    def ps(config, name):
        own = set((config.get("dropouts") or {}).get(name, {}).get("p", []))
        children = {round(float(c["p"]), 7) for n, c in (config.get("modules") or {}).items()
                    if "p" in c and n and n.rpartition(".")[0] == name and c["p"]}
        return own, own | children
    to_paddle = {("" if t == ROOT else t): ("" if p == ROOT else p) for t, p in modules.items()}
    to_torch = {p: t for t, p in to_paddle.items()}
    names = {*(torch_config.get("dropouts") or {}), *(to_torch.get(n) for n in paddle_config.get("dropouts") or {})}
    out = []
    for name in sorted(n for n in names if n is not None and n in to_paddle):
        (t_own, t_all), (p_own, p_all) = ps(torch_config, name), ps(paddle_config, to_paddle[name])
        if t_all != p_all and t_own != p_own:
            kind = ((torch_config.get("dropouts") or {}).get(name) or
                    (paddle_config.get("dropouts") or {}).get(to_paddle[name]))["type"]
            shown = lambda s: ", ".join(f"{p:g}" for p in sorted(s)) or "none"
            out.append(f"{name or ROOT} ({kind}): dropout p torch {shown(t_all)} vs paddle {shown(p_all)} (a dropout "
                       "its forward gives as a number; off for the steps, so compared here)")
    return out


def notes(torch_config: dict, paddle_config: dict) -> list:
    """Lines shown, not judged: seeds (each framework draws its own stream; the run syncs weights and batches)
    and library versions."""
    ts, ps = torch_config.get("seeds", {}), paddle_config.get("seeds", {})
    seeds = f"seeds: torch {', '.join(f'{k}({v})' for k, v in ts.items()) or 'none set'}; paddle " \
            f"{', '.join(f'{k}({v})' for k, v in ps.items()) or 'none set'}"
    versions = lambda c: ", ".join(f"{k} {v}" for k, v in c.get("versions", {}).items())
    return [seeds, f"versions: torch side {versions(torch_config)}; paddle side {versions(paddle_config)}"]
