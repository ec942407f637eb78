"""compare_generate: a torch model that generates and its Paddle port decoding with their own caches, step by step,
fed the same tokens (torch's greedy choice), each step's logits and each layer's cached keys and values (an
encoder-decoder's encoder output once, its cross-attention caches too) held to the measured rule with torch's float64
twin decoding the same tokens with its own cache as the yardstick; the first step where the two part, and inside it
the module (that step's call made again on both sides and compared by compare_forward, cumulative and isolated).
check_cache: one side alone, its cached decoding against recomputing the prefix with no cache. May import core,
mapping and forward."""
import numpy as np

from portcheck.core import calibrated, unread
from portcheck.core.errors import PipelineError, first_line
from portcheck.forward.compare import compare_forward
from portcheck.forward.twin import float64_run
from portcheck.generation import own
from portcheck.generation.decode import FIRST, PROBE, Call, decode, feed_of, generated, replaying
from portcheck.generation.origin import numbered_otherwise
from portcheck.generation.steps import (arguments_differing, arguments_line, handed_otherwise, judged_steps,
                                       padded_at)
from portcheck.generation.verdict import GenerateReport
from portcheck.mapping.trace import check_models, framework_of

OWN_STEP = ("step: each library's own, the arguments of each model call built by the model's own "
            "prepare_inputs_for_generation and carried from step to step as its generate carries them (positions and "
            "masks as each computes them)")
POSITIONS = ("position_ids: handed to each side's step at every step (the count of real tokens before each); with "
             "position_ids=False none are, and a model that restarts them at 0 when a cache is given (paddlenlp's "
             "Llama does, transformers' continues from the cache's length) parts from step 2 at its attention")
ENCODER = ("step: a loop's own, handed the prompt and its mask (its encoder's input) and the decoder's new tokens "
           "(decoder_input_ids) at every step")
GENERATE = "generate"  # step=: each library's own generate, greedy
OWN_GENERATE = ("step=\"generate\": each library's own greedy generate, each side feeding its own choice (a tie that "
                "splits them parts every step after it); positions and masks as each computes them")


def compare_generate(torch_model, paddle_model, input_ids, max_new_tokens: int = 8, attention_mask=None,
                     position_ids: bool = True, step=None, against_itself: bool = True,
                     isolate: bool = True, kept: dict = None) -> GenerateReport:
    """Both models (eval mode is the caller's) decode `max_new_tokens` steps from input_ids [batch, length] (numpy
    integers; an encoder-decoder's prompt, read by its encoder once), each with its own cache, both fed torch's
    greedy choice at every step (one near-tie never ends the comparison). Every step's next-token logits and each
    layer's cached keys and values after it (an encoder-decoder's cross-attention ones too, and its encoder output
    at step 1) are held to the measured rule, torch's float64 twin decoding the same tokens with its own cache the
    yardstick; the values at left-padded positions, which no real token reads, are left out and counted. The tokens
    each side would choose are compared, a differing choice whose logits are within their rule said as a tie. At
    the first step where the two part, that step's model call (an encoder-decoder's with its encoder run inside it)
    is made again on both sides and compared module by module (compare_forward, isolate=True: cumulative and each
    module on torch's values): report.first_diverging. Positions numbered from another origin are said, not judged
    a bug (origin).
    attention_mask: [batch, length] for a batch of prompts with left padding (extended by one at each step).
    step: the default feeds each model as its own library's generate does (feeding.OwnStep: its
    prepare_inputs_for_generation); a function per side, (torch's, Paddle's) or one for both, (model, input_ids,
    past_key_values, position_ids=, attention_mask=) -> (the next token's logits [batch, vocab], the cache), for a
    loop of one's own (an encoder-decoder's: (model, input_ids, past_key_values, attention_mask=,
    decoder_input_ids=)); "generate": each library's own greedy generate (transformers' do_sample=False,
    paddlenlp's decode_strategy="greedy_search"), each call it makes to the model a step.
    position_ids: a loop of one's own is handed them at every step (True), or not (False: POSITIONS).
    against_itself: each side's cached decoding also held to its own recomputation of the prefix with no cache,
    through the same step (check_cache): a cache bug said as that side's. kept: a dict given is filled with each
    side's decoding ("torch", "paddle", "twin": torch's float64 one; decode.Decoded), what a hand-in saves. Returns
    a GenerateReport."""
    check_models(torch_model, paddle_model)
    ids, mask, n = checked(input_ids, max_new_tokens, attention_mask)
    own_generate = isinstance(step, str) and step == GENERATE
    torch_step, paddle_step = (None, None) if own_generate else steps_of(step)
    # the library's own step computes its own positions; a loop's own is handed them
    fed_positions = {side: bool(position_ids) and s is not None for side, s in (("torch", torch_step),
                                                                                ("paddle", paddle_step))}
    run = (lambda model, fed, fn, side: generated(model, ids, n, mask)) if own_generate else \
        (lambda model, fed, fn, side: decode(model, ids, n, fed=fed, step=fn, feed_positions=fed_positions[side],
                                             attention_mask=mask))
    mine = run(torch_model, None, torch_step, "torch")
    fed = mine.chosen
    theirs = run(paddle_model, fed, paddle_step, "paddle")
    twin = float64_run(torch_model, lambda: run(torch_model, fed, torch_step, "torch"),
                       lambda d: bool(d.stopped) or any(calibrated.overflowed(a, w)
                                                        for a, w in zip(mine.logits, d.logits)),
                       whole_first=True)  # a module called at every step: its weights cast once
    if kept is not None:
        kept.update(torch=mine, paddle=theirs, twin=twin)
    feed = feed_of(torch_model, ids, mask)
    report = GenerateReport(tokens={"fed": [f.tolist() for f in fed], "paddle": [c.tolist() for c in theirs.chosen]})
    report.steps = judged_steps(feed, n, mine, theirs, twin)

    def numbered_from(origin):  # torch decoding again, its positions fed from that origin, judged
        again = lambda: decode(torch_model, ids, n, fed=fed, step=torch_step, attention_mask=mask, origin=origin)
        alt = again()
        alt_twin = float64_run(torch_model, again, lambda d: bool(d.stopped), whole_first=True)
        same = len(alt.caches) == len(mine.caches) and all(
            len(x) == len(y) and all(np.array_equal(u, v) for p, q in zip(x, y) for u, v in zip(p, q))
            for x, y in zip(alt.caches, mine.caches))
        return judged_steps(feed, n, alt, theirs, alt_twin), alt, alt_twin, same
    otherwise = None if feed.start is not None else numbered_otherwise(
        report.steps, mask, FIRST if fed_positions["torch"] else None, numbered_from)
    judged = mine, twin  # the torch decoding the steps are judged against, and the parting step's call is of
    if otherwise is not None:  # torch's decoding under paddle's origin
        (report.steps, *judged, _), said = otherwise
        report.notes.append(said)
    report.notes.append(OWN_GENERATE if own_generate else OWN_STEP if torch_step is None and paddle_step is None else
                        ENCODER if feed.start is not None else POSITIONS if any(fed_positions.values()) else
                        "position_ids=False: " + POSITIONS.split("; with position_ids=False ")[1])
    report.notes += arguments_line(mine, theirs)
    parting(report, torch_model, paddle_model, (*judged, theirs), feed, isolate)
    if against_itself:
        report.own = itself(torch_model, paddle_model, (mine, twin, theirs), feed, n,
                            GENERATE if own_generate else (torch_step, paddle_step), fed_positions)
    return report


def parting(report, torch_model, paddle_model, decoded: tuple, feed, isolate: bool):
    """At the first parting step, its call made again on both sides and compared module by module (an
    encoder-decoder's with the prompt in place of its encoder's output, so the encoder is compared too):
    report.step_report, and the arguments the two calls are handed otherwise (report.handed); a step that raised is
    named where it raised."""
    first = report.first_step
    mine, twin, theirs = decoded
    if first is None or report.steps[first - 1].stopped or \
            first > min(len(mine.calls), len(theirs.calls), len(twin.calls)):
        return
    calls = mine.calls[first - 1], twin.calls[first - 1], theirs.calls[first - 1]
    if None in calls:
        return
    report.notes += arguments_differing(first, calls[0], calls[2])
    report.handed = handed_otherwise(calls[0], calls[2])
    if feed.start is not None:  # its encoder run inside the call again: every module of the model compared
        calls = tuple(with_encoder_run(c, feed, m) for c, m in zip(calls, (torch_model, torch_model, paddle_model)))
        report.step_called = f"step {first}'s call, its encoder run on the prompt again"
    length = feed.prompt.shape[1] if feed.start is not None else feed.prompt.shape[1] + first - 1
    try:
        with replaying(torch_model, calls[0], calls[1]), replaying(paddle_model, calls[2]), \
                unread.padding([padded_at(feed.mask, length)]) as held:
            report.step_report = compare_forward(torch_model, paddle_model, {PROBE: np.zeros((), np.float32)},
                                                 isolate=isolate)
        report.step_left_out = held.left_out
    except Exception as e:  # noqa: BLE001 - the steps' verdict stands; the module is not named, said why
        report.notes.append(f"step {first}'s call was not compared module by module: {first_line(e, 300)}")


ENCODER_OUTPUTS = ("encoder_outputs", "encoder_output")  # the name each library hands its decoder the encoder's by


def with_encoder_run(call, feed, model=None):
    """An encoder-decoder's recorded call handed the prompt (and its mask) in place of the encoder's output: the
    same call, its encoder run inside it, so the module comparison reaches the encoder as well. Arguments the call
    handed by place (a model written by hand, called model(ids, decoder_ids, ...)) are named by its forward's
    signature first, so the prompt replaces its own."""
    call = named_by_place(call, model)
    kwargs = {k: v for k, v in call.kwargs.items() if k not in ENCODER_OUTPUTS}
    kwargs["input_ids"] = feed.prompt
    if feed.mask is not None:
        kwargs["attention_mask"] = feed.mask
    return Call(call.args, kwargs)


def named_by_place(call, model):
    """The call with its positional arguments named by the model's forward (those it cannot name stay by place)."""
    if model is None or not call.args:
        return call
    import inspect
    try:
        bound = inspect.signature(model.forward).bind_partial(*call.args, **call.kwargs)
    except (TypeError, ValueError):
        return call
    if any(p.kind is p.VAR_POSITIONAL for p in bound.signature.parameters.values() if p.name in bound.arguments):
        return call
    return Call((), dict(bound.arguments))


def itself(torch_model, paddle_model, decoded: tuple, feed, n: int, steps, fed_positions: dict) -> dict:
    """Each side's cached decoding against its own recomputation of the prefix with no cache, through the step the
    comparison used: each side fed torch's tokens; under each library's generate, its own tokens through the
    library's own preparation (feeding.OwnStep)."""
    mine, twin, theirs = decoded
    ids, mask = feed.prompt, feed.mask
    torch_step, paddle_step = (None, None) if steps == GENERATE else steps
    torch_fed = mine.chosen
    paddle_fed = theirs.chosen if steps == GENERATE else torch_fed
    return {"torch": own.judged("torch", mine, twin, own.recomputed(torch_model, ids, torch_fed, mask, torch_step,
                                                                    fed_positions["torch"])),
            "paddle": own.check_cache(paddle_model, ids, n, fed=paddle_fed, attention_mask=mask,
                                      position_ids=fed_positions["paddle"], step=paddle_step, decoded=theirs)}


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
    return own.check_cache(model, ids, n, attention_mask=mask, position_ids=bool(position_ids) and step is not None,
                           step=step)
