"""The two runs' configuration compared before any number (`python -m portcheck run`): each difference one line.

Each side's recorder (portcheck.scripts.hooks_torch, hooks_paddle) writes its configuration in torch's conventions
(BatchNorm's momentum as torch's: Paddle's 0.9 is torch's 0.1; GELU's approximation as "none" or "tanh"), so a
difference here is a difference of the runs, never of the frameworks' spellings. Modules are paired as the
forward is (portcheck.mapping.pairing), parameters as judge_backward pairs them.
"""
import json
import math
import os
from pathlib import Path

from portcheck.gradients.backward import _counterpart
from portcheck.gradients.optimizers import BY_DESIGN, RMSPROP, cycled_momentum
from portcheck.core.keys import ROOT

CONVENTION = {"momentum": " (Paddle's BatchNorm momentum m is torch's 1 - m: torch's 0.1 is Paddle's 0.9)",
              "frozen": " (frozen: it normalizes with its running statistics as the model trains, as .eval() on the "
                        "layer or Paddle's use_global_stats=True make it)"}
# the settings whose whole effect the recorded steps show (judge_run.measured): judged by the numbers, not as a
# difference
MEASURED = ("padding_idx",)
LOSS_CONVENTION = {"scale": " (torch's huber_loss(delta) is delta x smooth_l1_loss(beta=delta); Paddle's "
                            "smooth_l1_loss and SmoothL1Loss are huber_loss unless is_huber=False)"}


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


# an optimizer's settings, in torch's names (recorders' optimizer_config; Rprop's step_sizes: Paddle's
# learning_rate_range)
SETTINGS = ("family", "lr", "betas", "eps", "momentum", "nesterov", "amsgrad", "etas", "step_sizes")


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
    grouped = len(t.get("groups") or ()) > 1  # each group's lr said by groups()
    for key in SETTINGS:
        if key == "lr" and grouped:
            continue
        if (key in t or key in p) and not _same(t.get(key), p.get(key)) and not (rmsprop and key == "eps"):
            out.append(f"optimizer: {key} torch {_said(t.get(key))} vs paddle {_said(p.get(key))}")
    # several optimizers, each over a part of the model (recorder's Run.before_step): each compared in the order
    # they step, every parameter's weight decay from the one holding it
    ts, ps = torch_config.get("optimizers") or [t], paddle_config.get("optimizers") or [p]
    if len(ts) != len(ps):
        out.append(f"optimizers: torch {len(ts)} vs paddle {len(ps)} stepping the model's parameters each step")
    for i, (a, b) in enumerate(zip(ts[1:], ps[1:]), 2):
        out += [f"optimizer {i} (in the order they step): {key} torch {_said(a.get(key))} vs paddle "
                f"{_said(b.get(key))}" for key in SETTINGS
                if (key in a or key in b) and not _same(a.get(key), b.get(key))]
    decays = lambda held: {k: v for o in held for k, v in (o.get("weight_decay") or {}).items()}
    out += groups(ts, ps, modules, renamed, decays)
    tc, pc = torch_config.get("clip"), paddle_config.get("clip")
    if not _same(tc, pc):
        shown = lambda c: f"{c['kind']} {c['bound']:g}" if c else "none"
        out.append(f"gradient clipping: torch {shown(tc)} vs paddle {shown(pc)}")
    line = clip_scope(torch_config, paddle_config, modules, renamed, decays(ts), decays(ps)) if tc and pc else None
    if line:
        out.append(line)
    line = clip_groups(torch_config, paddle_config, modules, renamed) if tc and pc and _same(tc, pc) else None
    if line:
        out.append(line)
    line = accumulation(torch_config, paddle_config)
    if line:
        out.append(line)
    tls, pls = losses(torch_config), losses(paddle_config)
    if tls and pls and len(tls) != len(pls):
        named = lambda ls: ", ".join(str(loss.get("function")) for loss in ls)
        out.append(f"loss: torch calls {len(tls)} loss(es) ({named(tls)}) vs paddle {len(pls)} ({named(pls)})")
    for i, (tl, pl) in enumerate(zip(tls, pls) if len(tls) == len(pls) else ()):
        if not (_compared(tl) and _compared(pl)):
            continue
        which = "loss" if len(tls) == 1 else f"loss {i + 1} of {len(tls)}"
        if tl["function"] != pl["function"]:
            out.append(f"{which}: torch {tl['function']} vs paddle {pl['function']}")
        else:
            which += "" if len(tls) == 1 else f" ({tl['function']})"
            out += [f"{which}: {key} torch {_said(tl.get(key))} vs paddle {_said(pl.get(key))}"
                    f"{LOSS_CONVENTION.get(key, '')}" for key in tl
                    if key != "function" and not _same(tl.get(key), pl.get(key))]
    out += _dropouts(torch_config, paddle_config, modules)
    out += _attention_dropouts(torch_config, paddle_config, modules)
    out += [f"tied weights: torch's {alias} is its {tie}, paddle holds them apart ({p_alias} and {p_tie}): the head is "
            "untied on paddle's side" for alias, tie, p_alias, p_tie in
            (paddle_config.get("one_sided") or {}).get("untied", ())]
    out += [f"tied weights: paddle's {p_tie} is also its head (a matmul with it: nothing paddle holds takes torch's "
            f"{alias}), torch holds them apart ({alias} and {tie}): the head is untied on torch's side"
            for alias, tie, p_tie in (paddle_config.get("one_sided") or {}).get("untied_torch", ())]
    if not _same(torch_config.get("autocast"), paddle_config.get("autocast")):
        out.append(f"autocast: the first forward computes in torch {_said(torch_config.get('autocast'))} vs paddle "
                   f"{_said(paddle_config.get('autocast'))}")
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
    else:  # the run's lrs agree: where the schedules part is past them
        out += ahead(torch_config.get("ahead"), paddle_config.get("ahead"))
    # the torch recorder names such a scheduler under record_backward's key (recorder.Run.scheduler): its one line
    out += [f"scheduler: {line}" for line in cycled_momentum(torch_config)]
    return out


IGNORED_LR = ("paddle's parameter group gives \"lr\" {given:g}, which paddle.optimizer ignores: a group's lr there is "
              "\"learning_rate\", a multiple of the optimizer's ({multiple:g} here)")


def groups(ts: list, ps: list, modules: dict, renamed: dict, decays) -> list:
    """The lines of each torch parameter group (each optimizer's, recorder's optimizer_config "groups"; one group
    where none are recorded) whose lr or weight decay differs from Paddle's for its parameters, paired as the weights
    are: the lr of its first parameter that differs (a Paddle group's "lr", which Paddle ignores, named), the weight
    decay of its first that differs and how many more. Named by group where torch has several."""
    out, p_lrs, p_ignored = [], {}, {}
    for o in ps:
        p_lrs.update(o.get("lrs") or {})
        p_ignored.update(o.get("ignored_lr") or {})
    p_decay, t_decay = decays(ps), decays(ts)
    p_base = ps[0].get("lr") if ps else None
    target = lambda key: _counterpart(f"w/{key}", modules, renamed).partition("/")[2]
    for o in ts:
        held = o.get("groups") or [list((o.get("weight_decay") or {}))]
        for i, names in enumerate(held, 1):
            which = f"torch's parameter group {i} of {len(held)} ({', '.join(names[:3])}" + \
                (f" and {len(names) - 3} more)" if len(names) > 3 else ")") if len(held) > 1 else ""
            lrs = o.get("lrs") or {}
            parted = next((k for k in names if k in lrs and target(k) in p_lrs
                           and not _same(lrs[k], p_lrs[target(k)])), None) if len(held) > 1 else None
            if parted is not None:
                given = p_ignored.get(target(parted))
                why = "" if given is None or not p_base else \
                    f" ({IGNORED_LR.format(given=given, multiple=p_lrs[target(parted)] / p_base)})"
                out.append(f"optimizer: lr of {which} torch {lrs[parted]:g} vs paddle {p_lrs[target(parted)]:g}{why}")
            decay = []
            for key in names:
                if key not in t_decay or target(key) not in p_decay:
                    continue
                (value, kind), other = t_decay[key], p_decay[target(key)]
                if not _same(value, other[0]) or (value and kind != other[1]):
                    decay.append(f"{key} torch {value:g} ({kind}) vs paddle {other[0]:g} ({other[1]})")
            if decay:
                more = f"{len(decay) - 1} more parameter(s)" if len(decay) > 1 else ""
                out.append(f"optimizer: weight decay of {decay[0]}" + (
                    f" ({which}{'; and ' + more if more else ''})" if which else f" (and {more})" if more else ""))
    return out


def ahead(torch_lrs, paddle_lrs) -> list:
    """[a line per optimizer whose schedules part past the run]: each side's copy stepped on (recorder.AHEAD steps,
    the lr after each, fewer where the schedule ends), compared as the run's lrs are over the steps both took; a
    schedule stepped on a metric is said only against one that is not."""
    out = []
    for i, (t, p) in enumerate(zip(torch_lrs or (), paddle_lrs or ())):
        which = f"optimizer {i + 1}'s " if len(torch_lrs) > 1 else ""
        if isinstance(t, str) or isinstance(p, str):
            if t != p:
                said = [x if isinstance(x, str) else "stepped on its own" for x in (t, p)]
                out.append(f"scheduler: {which}schedule torch {said[0]} vs paddle {said[1]}")
            continue
        k = next((k for k, (a, b) in enumerate(zip(t, p)) if not _same(a, b)), None)
        if k is not None:  # over the steps both took: a schedule with an end (OneCycleLR) stops its copy there
            a, b = f"{float(t[k]):.6g}", f"{float(p[k]):.6g}"
            if a == b:  # apart by more than rounding, alike in six digits
                a, b = repr(float(t[k])), repr(float(p[k]))
            out.append(f"scheduler: {which}lr {k + 1} scheduler step(s) past the run torch {a} vs paddle {b} (a "
                       "copy of each side's schedule stepped on: its settings differ)")
    return out


def _compared(loss: dict) -> bool:
    return bool(loss) and loss.get("known") is not False


def losses(config: dict) -> list:
    """The losses of one micro-batch, in the order called: the recorder's "losses" (every loss call of the first
    step, the model's own too) cut to the first micro-batch's where the step repeats it per backward(); a record
    without them (an older hand-in) its first loss alone."""
    calls = config.get("losses")
    if not isinstance(calls, list) or not calls:
        return [config["loss"]] if config.get("loss") else []
    k = ((config.get("accumulation") or {}).get("backward") or [1])[0]
    n = len(calls) // k if isinstance(k, int) and k > 0 and len(calls) % k == 0 else len(calls)
    return calls[:n] if calls[:n] * (len(calls) // n) == calls else calls


def not_compared(torch_config: dict, paddle_config: dict) -> list:
    """Lines for a loss the configuration cannot compare: one portcheck does not know, or none it saw (a loss
    computed by hand); never said to be the same. The loss pair still judges its values."""
    out = []
    for side, config in (("torch", torch_config), ("paddle", paddle_config)):
        found = losses(config)
        out += [f"loss: {side}'s {loss['function']} is not one portcheck knows: not compared"
                for loss in found if not _compared(loss)]
        if not found:
            out.append(f"loss: the {side} script calls no loss function or class portcheck knows (a loss computed "
                       "by hand?): not compared")
    return list(dict.fromkeys(out))


def measurable(torch_config: dict, paddle_config: dict, modules: dict) -> list:
    """[(torch module, its type, Paddle module, setting, torch's value, Paddle's)] for each MEASURED setting that
    differs between paired modules: judge_run.measured judges each by the steps' numbers."""
    pm, out = paddle_config.get("modules", {}), []
    for name, conf in torch_config.get("modules", {}).items():
        target = modules.get(name or ROOT)
        other = pm.get("" if target == ROOT else target) if target else None
        for key in MEASURED:
            if other is not None and key in conf and key in other and not _same(conf[key], other[key]):
                out.append((name, conf["type"], "" if target == ROOT else target, key, conf[key], other[key]))
    return out


def measured_line(setting, said: dict) -> tuple:
    """(the line, whether the steps' numbers clear it) of a measurable setting (measurable's tuple) from what the steps
    showed of it (judge_run.measurement: {"gap", "largest", "passed"}, gap None where they could not show it); `check`
    says it from the same data handed in (from_folder)."""
    name, kind, _, key, tv, pv = setting
    line = f"{name or ROOT} ({kind}): {key} torch {_said(tv)} vs paddle {_said(pv)}"
    rows = sorted({int(v) for v in (tv, pv) if v is not None})
    if said.get("gap") is None:
        return f"{line}; not measured here: no pad token {rows} in the first batch, whose steps would show it", False
    ok = said["passed"]
    return (f"{line}; measured here: the pad row's gradient differs by {said['gap']:.3g} (torch's "
            f"{said['largest'][0]:.3g}, paddle's {said['largest'][1]:.3g}), it and the weights "
            f"{'within' if ok else 'outside'} the rule: {'green' if ok else 'red'} on these batches"), ok


def _measurement(setting, said) -> dict:
    """The measurement of setting as hand_in wrote it (judge_run.measurement), else ValueError: read from a file."""
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    measured = lambda: number(said["gap"]) and isinstance(said.get("passed"), bool) and \
        isinstance(said.get("largest"), list) and len(said["largest"]) == 2 and all(map(number, said["largest"]))
    if not isinstance(said, dict) or said.get("module") != setting[0] or not (said.get("gap") is None or measured()):
        raise ValueError(f"the measurement of {setting[0] or ROOT}'s {setting[3]} is not one run writes")
    return said


def one_sided(paddle_config: dict) -> list:
    """Lines for the tensors one side alone holds, kept at that side's own value (paddle_start.start_from_torch):
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
        own = {p for p in (config.get("dropouts") or {}).get(name, {}).get("p", []) if p}  # 0: as no dropout
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


def _attention_dropouts(torch_config: dict, paddle_config: dict, modules: dict) -> list:
    """A line per paired module whose attention dropouts differ where the module dropping the attention's
    probabilities is paired with none on the other side (transformers' BertSelfAttention, its nn.Dropout or its
    dropout_p, against paddlenlp's nn.MultiHeadAttention taking attention_probs_dropout_prob as a float): each side's
    attention dropouts (recorder: first_call.dropout_site) gathered at their nearest paired ancestor, their non-zero
    p compared (a dropout of 0 is never called on Paddle's side). _dropouts says the paired ones."""
    to_paddle = {("" if t == ROOT else t): ("" if p == ROOT else p) for t, p in modules.items()}
    to_torch = {p: t for t, p in to_paddle.items()}

    def gathered(config: dict, paired: dict) -> dict:  # {torch's name of the ancestor: [(site, type, p)]}
        sites = [(n, d["type"], p) for n, d in (config.get("dropouts") or {}).items() if d.get("attention")
                 for p in d.get("p", ())]
        sites += [(n, d["type"], d["p"]) for n, d in (config.get("attention_dropouts") or {}).items()]
        out = {}
        for name, kind, p in sites:
            if name in paired and float(p):  # _dropouts compares it; a 0 there is said here, as no dropout is not
                continue
            up = name
            while up and up not in paired:
                up = up.rpartition(".")[0]
            if up in paired:
                out.setdefault(paired[up], []).append((name[len(up):].lstrip(".") or name, kind, float(p)))
        return out
    t, p = gathered(torch_config, {n: n for n in to_paddle}), gathered(paddle_config, to_torch)
    said = lambda s: ", ".join(f"{v:g}" for _, _, v in s) or "none"
    where = lambda side, s: ", ".join(f"{side}'s {n} ({k})" for n, k, _ in dict.fromkeys(s)) or f"{side}'s none"
    out = []
    for name in sorted({*t, *p}):
        ts, ps = t.get(name, []), p.get(name, [])
        covered = any((torch_config.get("dropouts") or {}).get(name, {}).get("p", ())) or \
            any((paddle_config.get("dropouts") or {}).get(to_paddle[name], {}).get("p", ()))  # a 0: no dropout there
        if covered or sorted(v for *_, v in ts if v) == sorted(v for *_, v in ps if v):
            continue
        out.append(f"{name or ROOT}: attention dropout p torch {said(ts)} vs paddle {said(ps)} ({where('torch', ts)}; "
                   f"{where('paddle', ps)}; off for the steps, so compared here)")
    return out


def clip_scope(torch_config: dict, paddle_config: dict, modules: dict, renamed: dict, t_held: dict, p_held: dict):
    """The line saying the two clippings take different parameters into their norm (torch's clip_grad_norm_ given a
    part of the model, Paddle's optimizer clipping every parameter it holds but those need_clip=False), or None. Each
    parameter both optimizers hold (t_held, p_held: their weight decays' keys), paired as the weights are."""
    ts, ps = torch_config.get("clip_scope"), paddle_config.get("clip_scope")
    if not isinstance(ts, list) or not isinstance(ps, list):
        return None
    ts, ps = set(ts), set(ps)
    both = [(k, pk) for k in t_held if (pk := _counterpart(f"w/{k}", modules, renamed).partition("/")[2]) in p_held]
    only = {"torch": [k for k, pk in both if k in ts and pk not in ps],
            "paddle": [pk for k, pk in both if pk in ps and k not in ts]}
    if not any(only.values()):
        return None
    said = lambda names: ", ".join(names[:3]) + (f" (and {len(names) - 3} more)" if len(names) > 3 else "")
    return ("gradient clipping: the parameters in the norm differ: " +
            "; ".join(f"{said(names)} clipped on {side}'s side only" for side, names in only.items() if names) +
            " (torch's clip_grad_norm_ is given the parameters, Paddle's grad_clip takes its optimizer's but "
            "need_clip=False)")


GROUP_CLIP = ("paddle.optimizer's grad_clip clips each parameter group of its optimizer by a norm of its own, "
              "torch's clip_grad_norm_ takes one norm over the parameters it is given")


def clip_groups(torch_config: dict, paddle_config: dict, modules: dict, renamed: dict):
    """The line saying the two global-norm clippings of one bound take their norms over other sets of parameters
    (recorder's clip_groups: Paddle's grad_clip on an optimizer with parameter groups clips each group by its own
    norm; torch's clip_grad_norm_, and Paddle's, one norm over the parameters given), or None. Parameters paired as
    the weights are; those one side alone clips are clip_scope's line."""
    def parts(config):
        groups = config.get("clip_groups")
        scope = config.get("clip_scope")
        found = groups if isinstance(groups, list) else [scope] if isinstance(scope, list) else None
        return None if found is None else [set(g) for g in found if isinstance(g, list)]
    if (torch_config.get("clip") or {}).get("kind") != "global_norm":
        return None
    t, p = parts(torch_config), parts(paddle_config)
    if not t or not p:
        return None
    to_torch = {_counterpart(f"w/{k}", modules, renamed).partition("/")[2]: k for g in t for k in g}
    p = [{to_torch.get(n, n) for n in g} for g in p]
    both = set().union(*t) & set().union(*p)
    cut = lambda groups: sorted(sorted(g & both) for g in groups if g & both)
    if cut(t) == cut(p):
        return None
    said = lambda side, groups: f"{side} clips " + ("them by one norm" if len(cut(groups)) == 1 else
                                                     f"{len(cut(groups))} groups of them each by a norm of its own")
    bound = torch_config["clip"]["bound"]
    fix = f": clip with paddle.nn.utils.clip_grad_norm_(model.parameters(), {bound:g}) before the optimizer's step, " \
        "as torch's script does, and no grad_clip" if len(cut(t)) == 1 else ""
    return f"gradient clipping: {said('torch', t)}, {said('paddle', p)} ({GROUP_CLIP}){fix}"


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


# The hand-in's configuration entry (`portcheck run` writes it, `portcheck check` judges it): each side's configuration
# record as run judged it, DIAGNOSTICS/config_<side>.json with its run record; json only, each read bounded
CONFIG = "config"
CONFIG_BYTES = 8 << 20
SCRIPT = "python -m portcheck run"  # the `script` of every run record `portcheck run` writes


def _config_file(below, side: str) -> Path:
    return Path(below) / f"{CONFIG}_{side}.json"


def hand_in(below, configs: dict, modules: dict, renamed: dict, lrs, depends: dict, script: str, measured=()):
    """configs: {side: its recorder's configuration}; modules, renamed, lrs: what differences() was given, kept in
    the torch side's file (lrs: each side's in its own), with measured: what the steps showed of each measurable
    setting, in measurable's order (judge_run.measurement); depends: {side: what its pairs' run records depend on}.
    Each file's run record binds it (its sha256) to the run's weights and batches, as the pairs' records do."""
    import hashlib
    import time
    from portcheck.core import record
    from portcheck.core.fileio import atomic_write, writable
    texts = {side: json.dumps({"config": configs[side], "lrs": [float(x) for x in lrs[i]],
                               **({"modules": modules, "renamed": renamed, "measured": list(measured)}
                                  if side == "torch" else {})},
                              indent=1, default=str) + "\n"  # in its order: the first parameter named first
             for i, side in enumerate(("torch", "paddle"))}
    for side in texts:  # every target checked before the first is written
        writable(_config_file(below, side)), writable(record.path_for(_config_file(below, side)))
    writable(Path(below) / record.MANIFEST)
    for side, text in texts.items():
        path = _config_file(below, side)
        atomic_write(path, lambda tmp, text=text: Path(tmp).write_text(text))
        record.write(record.path_for(path), record.sealed({
            "framework": side, "script": script, "file": path.name, "written": time.strftime("%Y-%m-%d %H:%M:%S"),
            "depends": depends[side]}, hashlib.sha256(text.encode()).hexdigest()))
    made = [f for side in texts for f in (_config_file(below, side), record.path_for(_config_file(below, side)))]
    record.list_handed(Path(below).parent, below, made)


def pair_records(below) -> dict:
    """{side: {record's file name: its depends}} of the pairs in a hand-in's `below` that `portcheck run` wrote (its
    SCRIPT), each side's configuration entry tied to them."""
    from portcheck.core import record
    from portcheck.core.errors import PipelineError
    from portcheck.scripts.folders import PAIRS
    out = {}
    for pair in PAIRS:
        for side in ("torch", "paddle"):
            try:
                rec = record.load(None, Path(below) / f"{pair}_{side}{record.SUFFIX}")
            except PipelineError:  # the pair's own line says so
                continue
            if rec is not None and rec.get("script") == SCRIPT:
                out.setdefault(side, {})[f"{pair}_{side}{record.SUFFIX}"] = rec["depends"]
    return out


def kept_named(name: str, torch_config: dict, paddle_config: dict) -> str:
    """A module kept beside the model as each script holds it (first_call.keep's kept_as): its name, the object
    holding it and the decay that object was given (model_ema.module (ModelEmaV2, decay 0.999)); both sides' where
    they differ."""
    def said(config):
        e = (config.get("kept_as") or {}).get(name) or {}
        decay = f", decay {e['decay']:g}" if isinstance(e.get("decay"), (int, float)) else ""
        return str(e.get("as") or name) + (f" ({e['by']}{decay})" if e.get("by") else "")
    t, p = said(torch_config), said(paddle_config)
    return t if t == p else f"torch {t} vs paddle {p}"


def kept_lines(torch_config: dict, paddle_config: dict) -> list:
    """The modules both scripts keep beside the model, named as run names them (kept_named): what bp_align's
    kept_<i> digest (their change over step i, no names in it)."""
    both = [n for n in (torch_config.get("kept") or {}) if n in (paddle_config.get("kept") or {})]
    return [f"bp_align's kept_<i>, the change over step i of what the script keeps beside the model: "
            f"{'; '.join(kept_named(n, torch_config, paddle_config) for n in both)}"] if both else []


def from_folder(below):
    """(the red configuration lines re-derived from a hand-in's DIAGNOSTICS/config_<side>.json, or None when it holds
    none; a problem that makes the entry red, or ""; [(label, line)] of the lines run said beside them that are not
    red: a measured difference the steps cleared, a loss not compared, a tensor one side alone holds), as run said
    them: each from the two records, a measured one from what run handed in of its steps (measured_line)."""
    import hashlib
    from portcheck.core import record
    from portcheck.core.errors import PipelineError
    from portcheck.core.fileio import open_regular, parse_json
    files = {side: _config_file(below, side) for side in ("torch", "paddle")}
    pairs = pair_records(below)
    if not any(os.path.lexists(f) for f in files.values()):
        if pairs:  # the pairs `portcheck run` wrote are handed in with their configuration, red without it
            return [], (f"{CONFIG}_torch.json / {CONFIG}_paddle.json missing: `portcheck run` hands its pairs in with "
                        "the configuration it judged; rerun portcheck run"), []
        return None, "", []
    read = {}
    for side, path in files.items():
        try:
            with open_regular(path, follow=False) as f:
                raw = f.read(CONFIG_BYTES + 1)
            if len(raw) > CONFIG_BYTES:
                raise ValueError(f"more than {CONFIG_BYTES} bytes")
            rec = record.load(None, record.path_for(path))
            if rec is None or rec.get("framework") != side or rec.get("file") != path.name or \
                    record.binds(rec, hashlib.sha256(raw).hexdigest()) != "sealed":
                return [], (f"{path.name} is not the file its run record ({record.path_for(path).name}) describes, "
                            "for its side and run: rerun portcheck run"), []
            other = next(((name, theirs) for name, theirs in pairs.get(side, {}).items()
                          if theirs != rec["depends"]), None)
            if other:  # each side's configuration of the run its pairs are: the same weights, batches, steps
                field = record.differences({"depends": rec["depends"]}, {"depends": other[1]})[0][0]
                return [], (f"{path.name} is of another run than {other[0]} ({record.shown(field)} differs): a "
                            "configuration entry handed in with other pairs; rerun portcheck run"), []
            read[side] = parse_json(raw, constants=True)  # no recursion into nesting, no number beyond a float's
            if not isinstance(read[side], dict) or not isinstance(read[side].get("config"), dict):
                raise ValueError("no 'config' object")
        except (OSError, ValueError, UnicodeDecodeError, RecursionError, PipelineError) as e:
            why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            return [], f"{path.name} is not a configuration record ({why}): rerun portcheck run", []
    t, p = read["torch"], read["paddle"]
    try:
        modules = dict(t.get("modules") or {})
        lines = differences(t["config"], p["config"], modules, dict(t.get("renamed") or {}),
                            (list(t.get("lrs") or []), list(p.get("lrs") or [])))
        settings = measurable(t["config"], p["config"], modules)
        said = list(t.get("measured") or [])
        if len(said) != len(settings):  # each measurable difference run judged by its steps, in that order
            raise ValueError(f"{len(settings)} measurable difference(s), {len(said)} measurement(s) handed in")
        settled = [measured_line(m, _measurement(m, s)) for m, s in zip(settings, said)]
        shown = [*(("DIFFERS", line) for line, ok in settled if ok),
                 *(("NOT COMPARED", line) for line in not_compared(t["config"], p["config"])),
                 *(("ONE-SIDED", line) for line in one_sided(p["config"])),
                 *(("KEPT", line) for line in kept_lines(t["config"], p["config"]))]
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
        return [], f"{CONFIG}_torch.json / {CONFIG}_paddle.json do not read as configuration records ({e})", []
    return [*lines, *(line for line, ok in settled if not ok)], "", shown
