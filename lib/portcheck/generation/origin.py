"""Positions numbered from another origin: on a left-padded row one library counts a token's position from the first
real token (transformers' generate), the other from the sequence's start, the padding included (paddlenlp's generate,
a model counting from its cache's length). A rotary position enters attention by the difference of two positions
alone, so every logit agrees while the cached keys, rotated by their own position, differ: not a bug of the port.
Where every step's logits agree and only cached tensors part on a left-padded batch, torch decodes again with its
positions numbered from each other origin; the origin under which the whole decoding holds is kept and said. May
import core, mapping and forward."""
import numpy as np

from portcheck.generation.decode import ORIGINS


def only_the_cache_parts(steps: list) -> bool:
    """The first parting step decoded, its logits and choices within their rule: some cached tensor alone out of it."""
    first = next((s for s in steps if not s.passed), None)
    return first is not None and not first.stopped and first.logits is not None and first.logits.passed and \
        all(c.tie for c in first.choices)


def numbered_otherwise(steps: list, mask, fed_from: str, again) -> tuple:
    """(what again(origin) gave, the line saying so) for the first other origin under which torch's decoding holds
    longer (the first parting step later, or none, or at that step fewer rows red), or None. fed_from: the origin
    torch's positions were fed from (None: not fed, each tried); again(origin): (the steps judged with torch decoding
    again, its float64 twin too, positions fed from that origin, ...; whether that decoding's caches are torch's own,
    bit for bit: torch's own origin, where it was not fed one)."""
    if mask is None or not (np.asarray(mask) == 0).any() or not only_the_cache_parts(steps):
        return None
    parts = lambda judged: next((s.step for s in judged if not s.passed), len(steps) + 1)
    red = lambda judged, step: {r.name for r in judged[step - 1].rows if not r.passed} if step <= len(judged) \
        else set()
    first = parts(steps)
    # holds longer: parts later, or at the same step with fewer of its rows red (a plant in one layer's cache, the
    # origin's rotation in every layer's keys)
    longer = lambda judged: parts(judged) > first or (parts(judged) == first and
                                                      red(judged, first) < red(steps, first))
    own = fed_from
    for origin in ORIGINS:
        if origin == fed_from:
            continue
        made = again(origin)
        judged, same = made[0], made[-1]
        own = origin if same and own is None else own
        if not same and len(judged) == len(steps) and longer(judged):
            said = ORIGINS[own] if own else "otherwise"
            return made, (f"positions: paddle numbers them {ORIGINS[origin]}, torch {said}: another origin, not a bug "
                          "of the port (a rotary position enters attention by a difference alone, and the logits "
                          "agree); the caches are judged against torch fed positions numbered "
                          f"{ORIGINS[origin]}")
    return None
