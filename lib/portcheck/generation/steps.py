"""Each decoding step judged, torch's against Paddle's with torch's float64 twin the yardstick: an encoder-decoder's
encoder output (once, at step 1), the next token's logits, each layer's cached tensors (the values at left-padded
positions, which no real token reads, left out), the tokens each side would choose; and what the two sides' model
calls are handed differently, said in one line; the hand-in's generate pair's tokens judged as these choices are
(handed_choices: a near-tie chosen apart is a tie). May import core, mapping and forward."""
import numpy as np

from portcheck.forward.judging import judge_one
from portcheck.generation.caches import cache_rows
from portcheck.generation.decode import PROBE
from portcheck.generation.verdict import Choice, Step


def judged_steps(feed, n: int, mine, theirs, twin) -> list:
    """Each step's rows, torch (its twin the yardstick) against Paddle; where a side stopped, the step it stopped at
    says so and the rest are not made. feed (decode.Feed): the prompt, its mask, and whether an encoder reads it."""
    out, seq2seq, length = [], feed.start is not None, feed.prompt.shape[1]
    for s in range(n):
        row = Step(step=s + 1, position=s if seq2seq else length - 1 + s,
                   fed=mine.chosen[s].tolist() if s < len(mine.logits) else [])
        for d in (mine, theirs, twin):
            if d.stopped and d.stopped_at == s + 1:
                said = "torch's float64 twin" if d is twin else d.side
                row.stopped[said] = d.stopped
                row.raised_in[said] = d.raised_in
        if row.stopped or s >= min(len(mine.logits), len(theirs.logits), len(twin.logits)):
            if row.stopped:
                out.append(row)
            break
        if s == 0 and seq2seq:
            row.encoder = encoder_row(feed, mine, theirs, twin)
        row.logits = judge_one(f"step {s + 1}: logits", mine.logits[s], twin.logits[s], theirs.logits[s])
        # a decoder's own cache holds its tokens alone (none padding), its cross-attention cache the prompt's
        self_padded = None if seq2seq else padded_at(feed.mask, length + s)
        row.cache, row.left_out = cache_rows(s + 1, mine.caches[s], twin.caches[s], theirs.caches[s], self_padded,
                                             padded_at(feed.mask, length) if seq2seq else None)
        row.choices = choices(mine.logits[s], theirs.logits[s], row.logits)
        out.append(row)
    return out


def encoder_row(feed, mine, theirs, twin):
    """The encoder's output, torch's against Paddle's, its padded positions left out; said where a side has none."""
    from portcheck.core import calibrated, unread
    if mine.encoded is None or theirs.encoded is None or twin.encoded is None:
        missing = [d.side if d is not twin else "torch's float64 twin" for d in (mine, theirs, twin)
                   if d.encoded is None]
        return calibrated.unjudged("step 1: encoder output", (), f"no encoder call seen on {', '.join(missing)}")
    with unread.padding([padded_at(feed.mask, feed.prompt.shape[1])]):
        return judge_one("step 1: encoder output", mine.encoded, twin.encoded, theirs.encoded)


def padded_at(mask, length: int):
    """[batch, length] True at the left padding of a sequence `length` long whose first tokens `mask` holds (the
    prompt's; each token after it real), or None: no padding."""
    if mask is None or not (np.asarray(mask) == 0).any():
        return None
    mask = np.asarray(mask)
    return np.concatenate([mask == 0, np.zeros((mask.shape[0], max(0, length - mask.shape[1])), bool)],
                          axis=1)[:, :length]


def choices(a: np.ndarray, b: np.ndarray, logits) -> list:
    """Where the greedy choices differ, row by row: a tie when the logits are within their rule (each side's value
    then lies within the allowance of the other's, so torch's top two do too), a differing choice otherwise."""
    out = []
    for row, (x, y) in enumerate(zip(np.asarray(a), np.asarray(b))):
        t, p = int(x.argmax()), int(y.argmax())
        if t != p:
            out.append(Choice(row, t, p, float(x[t] - x[p]), float(logits.allowed), logits.passed))
    return out


HOW = ("return_dict",)  # how a model is asked to return its output: no argument of the computation


def given(value) -> bool:
    """An argument handed: not None, nor an empty cache (transformers' generate hands its first step one)."""
    return value is not None and not (hasattr(value, "get_seq_length") and value.get_seq_length() == 0)


def passed_names(call) -> set:
    """The arguments a recorded call hands its model."""
    return {k for k, v in call.kwargs.items() if given(v) and k != PROBE and k not in HOW} | \
        {f"argument {i}" for i, v in enumerate(call.args) if given(v)}


def handed_otherwise(mine, theirs) -> list:
    """The arguments both calls name, handed to one model and not the other or, integers, with other values: where
    two calls of one step are not the same call."""
    one_sided = [k for k in set(mine.kwargs) & set(theirs.kwargs)
                 if given(mine.kwargs[k]) != given(theirs.kwargs[k]) and k not in HOW]
    return sorted(set(one_sided) | {name for name, _, _ in integers_differing(mine, theirs)})


def integers_differing(mine, theirs) -> list:
    """[(name, torch's, Paddle's)] for each integer argument both calls hand their model by one name with other
    values (position_ids, attention_mask, input_ids). Values at the left padding torch's attention_mask marks are
    read by no real token and left out (transformers numbers a padded position 0, paddleformers 1)."""
    out = []
    for name in sorted(set(mine.kwargs) & set(theirs.kwargs)):
        a, b = mine.kwargs[name], theirs.kwargs[name]
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype.kind in "biu" and
                b.dtype.kind in "biu" and a.size):
            continue
        real = None if name == MASK_NAME or a.shape != b.shape else _real(mine, a.shape)
        if a.shape != b.shape or not np.array_equal(a if real is None else a[real], b if real is None else b[real]):
            out.append((name, a, b))
    return out


MASK_NAME = "attention_mask"


def _real(call, shape) -> np.ndarray:
    """Where a call's [batch, length] argument of this shape sits at a real token, by its attention_mask (its last
    positions); None where the call hands no such mask."""
    mask = call.kwargs.get(MASK_NAME)
    if not (isinstance(mask, np.ndarray) and mask.ndim == 2 and len(shape) == 2 and mask.shape[0] == shape[0] and
            mask.shape[1] >= shape[1]):
        return None
    return mask[:, mask.shape[1] - shape[1]:] != 0


def said(x: np.ndarray) -> str:
    return f"{list(x.shape)} " + np.array2string(x.reshape(x.shape[0], -1)[:2, -8:], separator=", ").replace("\n", "")


def arguments_line(mine, theirs) -> list:
    """One line saying what the two sides' model calls are handed differently at their first two steps (the prompt's
    and the first with a cache): the arguments one side alone hands, and the integer ones both hand with other
    values (the last 8 of the first rows); none when they are handed alike."""
    pairs = [(s + 1, a, b) for s, (a, b) in enumerate(zip(mine.calls, theirs.calls))
             if a is not None and b is not None][:2]
    if not pairs:
        return []
    only = {side: sorted(set().union(*((passed_names(a) - passed_names(b)) if side == "torch" else
                                       (passed_names(b) - passed_names(a)) for _, a, b in pairs)))
            for side in ("torch", "paddle")}
    parts = [f"{side}'s alone are handed {', '.join(names)}" for side, names in only.items() if names]
    for step, a, b in pairs:
        for name, x, y in integers_differing(a, b):
            if not any(p.startswith(f"{name} ") for p in parts):
                parts.append(f"{name} differ from step {step} (torch's {said(x)}, paddle's {said(y)})")
    return ["arguments: the two sides' model calls differ: " + "; ".join(parts)] if parts else []


def arguments_differing(step: int, mine, theirs) -> list:
    """A line per integer argument both calls of the parting step hand their model with other values."""
    return [f"step {step}: the two calls' {name} differ: torch's {said(a)}, paddle's {said(b)} (the last 8 of the "
            "first rows)" for name, a, b in integers_differing(mine, theirs)]


TOKENS, LOGITS = "tokens", "logits"  # the hand-in's generate pair: [steps, batch] choices, [steps, batch, vocab]


def handed_choices(t: dict, p: dict, e: dict) -> tuple:
    """The hand-in's generate pair judged as compare_generate judges its choices: (Paddle's arrays, each token that
    is a tie taken as torch's; [(tokens, passed, the choice's line)]). A row's tokens that differ at a step are a
    tie where that step's logits are within their rule (torch's float64 twin's the yardstick) and each side's token
    is its own logits' greedy choice; otherwise a differing choice, red, and Paddle's token stays as handed in."""
    if not all(TOKENS in d and LOGITS in d for d in (t, p)) or LOGITS not in e:
        return p, []
    tokens, logits = (np.asarray(d[TOKENS]) for d in (t, p)), (np.asarray(d[LOGITS]) for d in (t, p, e))
    (mine, theirs), (a, b, ref) = tokens, logits
    if not (mine.shape == theirs.shape == a.shape[:2] == b.shape[:2] == ref.shape[:2] and a.shape == b.shape
            and a.ndim == 3 and mine.dtype.kind in "iu" and theirs.dtype.kind in "iu"):
        return p, []  # shapes that differ are red by the pair's own rules
    taken, said = theirs.copy(), []
    for s in np.flatnonzero((mine != theirs).any(axis=1)):
        logits = judge_one(f"step {s + 1}: logits", a[s], ref[s], b[s])
        for r in np.flatnonzero(mine[s] != theirs[s]):
            x, y = int(mine[s, r]), int(theirs[s, r])
            if not (0 <= min(x, y) and max(x, y) < a.shape[2]) or int(a[s, r].argmax()) != x or \
                    int(b[s, r].argmax()) != y:
                said.append((TOKENS, False, f"step {s + 1}, row {r}: torch handed in {x}, paddle {y}, a token its own "
                                            "logits do not choose"))
                continue
            c = Choice(int(r), x, y, float(a[s, r, x] - a[s, r, y]), float(logits.allowed), logits.passed)
            said.append((TOKENS, c.tie, f"step {s + 1}, {c.line()}"))
            if c.tie:
                taken[s, r] = x
    return {**p, TOKENS: taken}, said
