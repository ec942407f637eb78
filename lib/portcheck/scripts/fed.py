"""What each side of a `portcheck run` fed its model, as the data pair compares it: the batches and targets a side's
record holds (FED: batches), those both sides made where one accumulates gradients and the other does not
(common_batches), the Paddle script's arguments computed in its own framework's convention put in torch's
(in_torchs_convention, convention_lines), each framework sampler's order as it became (order_lines), and the first
batch a side's run record binds (first_input).

May import portcheck.core, scripts.recorder's record keys, scripts.runconfig and scripts.arguments.
"""
import re

import numpy as np

from portcheck.scripts import runconfig
from portcheck.scripts.recorder import BATCH, TARGET


FED = re.compile(f"^({re.escape(BATCH)}|{re.escape(TARGET)})(\\d+)")  # root call c's batch, loss call j's target


def batches(rec: dict, calls: dict = None) -> dict:
    """The batches and targets a side fed, as the data pair holds them; calls: {BATCH: c, TARGET: j}, those of the
    first c root calls and j loss calls only."""
    return {k: v for k, v in rec.items() if (m := FED.match(k)) and (calls is None or int(m[2]) < calls[m[1]])}


def common_batches(t: dict, p: dict, statuses: dict) -> tuple:
    """The two sides' batches; where one side accumulates gradients and the other does not (or over another count:
    its one configuration line, runconfig.accumulation) the calls both made, not a data difference."""
    if not runconfig.accumulation(statuses["torch"]["config"], statuses["paddle"]["config"]):
        return batches(t), batches(p)
    made = lambda rec: {kind: 1 + max((int(m[2]) for m in map(FED.match, rec) if m and m[1] == kind), default=-1)
                        for kind in (BATCH, TARGET)}
    both = {kind: min(a, b) for (kind, a), b in zip(made(t).items(), made(p).values())}
    return batches(t, both), batches(p, both)


CONVENTION_SAID = {"negated": "a mask True where torch's is False: Paddle's attn_mask True at the tokens to attend, "
                              "torch's key_padding_mask True at the pads",
                   "transposed": "its last two axes swapped"}


def in_torchs_convention(fed: dict, conventions: dict) -> dict:
    """The Paddle script's own batches, each argument it computes in its framework's convention (recorder's
    first_call.conventions: fed as computed) put in torch's, as the data pair compares them."""
    from portcheck.scripts.arguments import as_torchs
    out = {}
    for key, value in fed.items():
        m = FED.match(key)
        kind = conventions.get(key[m.end() + 1:]) if m and m[1] == BATCH else None
        axes = 2 if kind and "transposed" in kind else 1
        out[key] = as_torchs(value, kind) if kind and value.dtype == np.bool_ and value.ndim >= axes else value
    return out


def convention_lines(conventions: dict) -> list:
    """One line per argument the Paddle script computes in its own convention: what it is, and what was done."""
    return [f"{arg}: the Paddle script computes it as torch's {kind}, its framework's convention ("
            f"{'; '.join(CONVENTION_SAID[k] for k in kind.split(', '))}): fed as the script computed it, the data pair "
            f"compares it {kind} back" for arg, kind in conventions.items()]


def order_lines(torch_config: dict, paddle_config: dict, steps: int) -> list:
    """What each framework sampler's order became (recorder.Run.order): one line each, the same said once."""
    t, p = torch_config.get("orders") or [], paddle_config.get("orders") or []
    lines = [f"Paddle's {s['sampler']} given torch's {s['torch']} order for the {steps} step(s)" if s.get("torch")
             else f"Paddle's {s['sampler']} drew its own order: {s.get('kept')}" for s in p]
    lines += [f"torch's {s['sampler']} order given to no Paddle sampler: the Paddle script draws its order without "
              "paddle.io's samplers (its own shuffle is judged as it is)" for s in t[len(p):]]
    return list(dict.fromkeys(lines))


def first_input(rec: dict, t: dict) -> list:
    """The first batch a side's model computed on, as its run record binds it, by each argument's name
    (input/batch_0/<args/i or kwargs/name>): torch's own; the Paddle run's torch's value at every name torch's batch
    holds (it was fed them, or computes it as torch's in its own convention: recorder's conventions), its own at any
    other. By name, not by place: two Trainers' collators putting the same arguments in another order (labels first
    from a `label` column) bind the same inputs."""
    prefix = f"{BATCH}0/"
    return [(k, t.get(k, v)) for k, v in rec.items() if k.startswith(prefix)]
