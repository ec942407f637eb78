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
    """Every step decoded, its logits and choices within their rule, and some cached tensor out of it."""
    return bool(steps) and all(not s.stopped and s.logits is not None and s.logits.passed and
                               all(c.tie for c in s.choices) for s in steps) and not all(s.passed for s in steps)


def numbered_otherwise(steps: list, mask, fed_from: str, again) -> tuple:
    """(the steps judged again, the line saying so) under the first other origin torch's decoding holds under, or
    None. fed_from: the origin torch's positions were fed from (None: not fed, each tried); again(origin): (the
    steps judged with torch decoding again, its float64 twin too, positions fed from that origin; whether that
    decoding's caches are torch's own, bit for bit: torch's own origin, where it was not fed one)."""
    if mask is None or not (np.asarray(mask) == 0).any() or not only_the_cache_parts(steps):
        return None
    own = fed_from
    for origin in ORIGINS:
        if origin == fed_from:
            continue
        judged, same = again(origin)
        own = origin if same and own is None else own
        if judged and all(s.passed for s in judged) and len(judged) == len(steps) and not same:
            said = ORIGINS[own] if own else "otherwise"
            return judged, (f"positions: paddle numbers them {ORIGINS[origin]}, torch {said}: another origin, not a "
                            "bug of the port (a rotary position enters attention by a difference alone, and every "
                            f"step's logits agree); the caches are judged against torch fed positions numbered "
                            f"{ORIGINS[origin]}")
    return None
