"""compare_generate: a torch causal LM and its Paddle port decoding with their own caches, step by step, fed the
same tokens (torch's greedy choice), each step's logits and each layer's cached keys and values held to the measured
rule with torch's float64 twin decoding the same tokens with its own cache as the yardstick; the first step where
the two part, and inside it the module (that step's call made again on both sides and compared by compare_forward,
cumulative and isolated). check_cache: one side alone, its cached decoding against recomputing the prefix with no
cache. May import core, mapping and forward."""
import numpy as np

from portcheck.core import calibrated, unread
from portcheck.core.errors import PipelineError, first_line
from portcheck.forward.compare import compare_forward
from portcheck.forward.judging import judge_one
from portcheck.generation.caches import cache_rows
from portcheck.forward.twin import float64_run
from portcheck.generation import own
from portcheck.generation.decode import FIRST, PROBE, decode, generated, replaying
from portcheck.generation.origin import numbered_otherwise
from portcheck.generation.verdict import Choice, GenerateReport, Step
from portcheck.mapping.trace import check_models, framework_of

POSITIONS = ("position_ids: fed to both sides at every step (the count of real tokens before each); with "
             "position_ids=False none are, and a model that restarts them at 0 when a cache is given (paddlenlp's "
             "Llama does, transformers' continues from the cache's length) parts from step 2 at its attention")


GENERATE = "generate"  # step=: each library's own generate, greedy
OWN_GENERATE = ("step=\"generate\": each library's own greedy generate, each side feeding its own choice (a tie that "
                "splits them parts every step after it); positions and masks as each computes them")


def compare_generate(torch_model, paddle_model, input_ids, max_new_tokens: int = 8, attention_mask=None,
                     position_ids: bool = True, step=None, against_itself: bool = True,
                     isolate: bool = True, kept: dict = None) -> GenerateReport:
    """Both models (eval mode is the caller's) decode `max_new_tokens` steps from input_ids [batch, length] (numpy
    integers), each with its own cache, both fed torch's greedy choice at every step (one near-tie never ends the
    comparison). Every step's next-token logits and each layer's cached keys and values after it are held to the
    measured rule, torch's float64 twin decoding the same tokens with its own cache the yardstick; the tokens each
    side would choose are compared, a differing choice whose logits are within their rule said as a tie. At the
    first step where the two part, that step's model call is made again on both sides and compared module by module
    (compare_forward, isolate=True: cumulative and each module on torch's values): report.first_diverging.
    attention_mask: [batch, length] for a batch of prompts with left padding (extended by one at each step);
    position_ids: fed at every step (True), or not (False: each model computes its own, POSITIONS).
    step: a function per side, (torch's, Paddle's) or one for both, (model, input_ids, past_key_values,
    position_ids=, attention_mask=) -> (the next token's logits [batch, vocab], the cache): a loop of one's own;
    the default calls model(input_ids=..., past_key_values=..., use_cache=True, ...); "generate": each library's
    own greedy generate (transformers' do_sample=False, paddlenlp's decode_strategy="greedy_search"), each call it
    makes to the model a step.
    against_itself: each side's cached decoding also held to its own recomputation of the prefix with no cache
    (check_cache): a cache bug said as that side's. kept: a dict given is filled with each side's decoding
    ("torch", "paddle", "twin": torch's float64 one; decode.Decoded), what a hand-in saves. Returns a
    GenerateReport."""
    check_models(torch_model, paddle_model)
    ids, mask, n = checked(input_ids, max_new_tokens, attention_mask)
    own_generate = isinstance(step, str) and step == GENERATE
    torch_step, paddle_step = (None, None) if own_generate else steps_of(step)
    run = (lambda model, fed, fn: generated(model, ids, n, mask)) if own_generate else \
        (lambda model, fed, fn: decode(model, ids, n, fed=fed, step=fn, feed_positions=position_ids,
                                       attention_mask=mask))
    mine = run(torch_model, None, torch_step)
    fed = mine.chosen
    theirs = run(paddle_model, fed, paddle_step)
    twin = float64_run(torch_model, lambda: run(torch_model, fed, torch_step),
                       lambda d: bool(d.stopped) or any(calibrated.overflowed(a, w)
                                                        for a, w in zip(mine.logits, d.logits)),
                       whole_first=True)  # a module called at every step: its weights cast once
    if kept is not None:
        kept.update(torch=mine, paddle=theirs, twin=twin)
    report = GenerateReport(tokens={"fed": [f.tolist() for f in fed], "paddle": [c.tolist() for c in theirs.chosen]})
    report.steps = judged_steps(ids.shape[1], n, mine, theirs, twin, mask)

    def numbered_from(origin):  # torch decoding again, its positions fed from that origin, judged
        again = lambda: decode(torch_model, ids, n, fed=fed, step=torch_step, attention_mask=mask, origin=origin)
        alt = again()
        alt_twin = float64_run(torch_model, again, lambda d: bool(d.stopped), whole_first=True)
        same = len(alt.caches) == len(mine.caches) and all(
            len(x) == len(y) and all(np.array_equal(u, v) for p, q in zip(x, y) for u, v in zip(p, q))
            for x, y in zip(alt.caches, mine.caches))
        return judged_steps(ids.shape[1], n, alt, theirs, alt_twin, mask), same
    otherwise = numbered_otherwise(report.steps, mask, None if own_generate or not position_ids else FIRST,
                                   numbered_from)
    if otherwise is not None:
        report.steps = otherwise[0]
        report.notes.append(otherwise[1])
    report.notes.append(OWN_GENERATE if own_generate else POSITIONS if position_ids else
                        "position_ids=False: " + POSITIONS.split("; with position_ids=False ")[1])
    first = report.first_step
    if first is not None and first <= min(len(mine.calls), len(theirs.calls), len(twin.calls)) and \
            not report.steps[first - 1].stopped:  # a step that raised is named where it raised
        calls = mine.calls[first - 1], twin.calls[first - 1], theirs.calls[first - 1]
        if None not in calls:
            report.notes += arguments_differing(first, calls[0], calls[2])
            try:
                with replaying(torch_model, calls[0], calls[1]), replaying(paddle_model, calls[2]), \
                        unread.padding([padded_at(mask, ids.shape[1] + first - 1)]) as held:
                    report.step_report = compare_forward(torch_model, paddle_model,
                                                         {PROBE: np.zeros((), np.float32)}, isolate=isolate)
                report.step_left_out = held.left_out
            except Exception as e:  # noqa: BLE001 - the steps' verdict stands; the module is not named, said why
                report.notes.append(f"step {first}'s call was not compared module by module: {first_line(e, 300)}")
    if against_itself and not own_generate:
        report.own = {"torch": own.judged("torch", mine, twin, own.recomputed(torch_model, ids, fed, mask, torch_step,
                                                                               position_ids)),
                      "paddle": own.check_cache(paddle_model, ids, n, fed=fed, attention_mask=mask,
                                                position_ids=position_ids, step=paddle_step, decoded=theirs)}
    return report


def judged_steps(length: int, n: int, mine, theirs, twin, mask=None) -> list:
    """Each step's rows: the logits and each layer's keys and values, torch (its twin the yardstick) against
    Paddle; where a side stopped, the step it stopped at says so and the rest are not made. mask: the prompt's
    [batch, length] (0 at left padding): the cache's values there, which no real token reads, left out."""
    out = []
    for s in range(n):
        row = Step(step=s + 1, position=length - 1 + s, fed=mine.chosen[s].tolist() if s < len(mine.logits) else [])
        for d in (mine, theirs, twin):
            if d.stopped and d.stopped_at == s + 1:
                said = "torch's float64 twin" if d is twin else d.side
                row.stopped[said] = d.stopped
                row.raised_in[said] = d.raised_in
        if row.stopped or s >= min(len(mine.logits), len(theirs.logits), len(twin.logits)):
            if row.stopped:
                out.append(row)
            break
        row.logits = judge_one(f"step {s + 1}: logits", mine.logits[s], twin.logits[s], theirs.logits[s])
        row.cache, row.left_out = cache_rows(s + 1, mine.caches[s], twin.caches[s], theirs.caches[s],
                                             padded_at(mask, length + s))
        row.choices = choices(mine.logits[s], theirs.logits[s], row.logits)
        out.append(row)
    return out


def padded_at(mask, length: int):
    """[batch, length] True at the left padding of a sequence `length` long whose first tokens `mask` holds (the
    prompt's; each token after it real), or None: no padding."""
    if mask is None or not (np.asarray(mask) == 0).any():
        return None
    mask = np.asarray(mask)
    return np.concatenate([mask == 0, np.zeros((mask.shape[0], max(0, length - mask.shape[1])), bool)],
                          axis=1)[:, :length]


def arguments_differing(step: int, mine, theirs) -> list:
    """A line per integer argument both calls of the step pass by the same name (position_ids, attention_mask,
    input_ids) with other values: what the two loops hand their models differently."""
    out = []
    for name in sorted(set(mine.kwargs) & set(theirs.kwargs)):
        a, b = mine.kwargs[name], theirs.kwargs[name]
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype.kind in "biu" and \
                b.dtype.kind in "biu" and a.size and (a.shape != b.shape or not np.array_equal(a, b)):
            said = lambda x: np.array2string(x.reshape(x.shape[0], -1)[:2, -8:], separator=", ").replace("\n", "")
            out.append(f"step {step}: the two calls' {name} differ: torch's {list(a.shape)} {said(a)}, paddle's "
                       f"{list(b.shape)} {said(b)} (the last 8 of the first rows)")
    return out


def choices(a: np.ndarray, b: np.ndarray, logits) -> list:
    """Where the greedy choices differ, row by row: a tie when the logits are within their rule (each side's value
    then lies within the allowance of the other's, so torch's top two do too), a differing choice otherwise."""
    out = []
    for row, (x, y) in enumerate(zip(np.asarray(a), np.asarray(b))):
        t, p = int(x.argmax()), int(y.argmax())
        if t != p:
            out.append(Choice(row, t, p, float(x[t] - x[p]), float(logits.allowed), logits.passed))
    return out


def checked(input_ids, max_new_tokens, attention_mask) -> tuple:
    """(ids [batch, length] int64, mask or None, steps), each argument a caller can get wrong refused in one line."""
    ids = np.asarray(input_ids) if not hasattr(input_ids, "numpy") else np.asarray(input_ids.numpy())
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.dtype.kind not in "iu" or not ids.size:
        raise PipelineError(f"input_ids of {ids.dtype}{list(ids.shape)}: give the prompt's token ids as an integer "
                            "array [batch, length] [PC651]")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
        raise PipelineError(f"max_new_tokens={max_new_tokens!r}: give the number of steps to decode, an integer "
                            ">= 1 [PC652]")
    mask = None
    if attention_mask is not None:
        mask = np.asarray(attention_mask.numpy() if hasattr(attention_mask, "numpy") else attention_mask)
        if mask.shape != ids.shape or not np.isin(mask, (0, 1)).all() or (mask[:, -1] == 0).any():
            raise PipelineError(f"attention_mask of {mask.dtype}{list(mask.shape)}: give 1 at each prompt token and "
                                f"0 at its left padding, shaped as input_ids {list(ids.shape)} [PC653]")
    return ids.astype(np.int64), mask, int(max_new_tokens)


def steps_of(step) -> tuple:
    """(torch's step function, Paddle's): step= is one function for both, a pair, or None (the default's)."""
    pair = step if isinstance(step, (tuple, list)) else (step, step)
    if len(pair) != 2 or not all(s is None or callable(s) for s in pair):
        raise PipelineError(f"step={step!r}: give a function (model, input_ids, past_key_values, position_ids=, "
                            "attention_mask=) -> (logits [batch, vocab], cache), or (torch's, Paddle's) [PC654]")
    return tuple(pair)


def check_cache(model, input_ids, max_new_tokens: int = 8, attention_mask=None, position_ids: bool = True,
                step=None) -> "own.OwnReport":
    """One model alone, torch or Paddle: its cached decoding (its own greedy tokens) against recomputing the whole
    prefix with no cache at every step, by the measured rule, its own float64 run the yardstick (torch's twin, or
    the Paddle model cast to float64). A cache bug is found where the other framework is not at hand, said as that
    side's. Returns an OwnReport: .passed, .first_step, .lines()."""
    framework_of(model)
    ids, mask, n = checked(input_ids, max_new_tokens, attention_mask)
    return own.check_cache(model, ids, n, attention_mask=mask, position_ids=position_ids, step=step)
