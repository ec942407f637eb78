"""Each side against itself: its cached decoding against recomputing the whole prefix with no cache at every step,
by the measured rule, the side's own float64 run the yardstick (torch's float64 twin; Paddle's model cast to float64
for the run and back, exactly). May import core, mapping and forward."""
import contextlib
import types

import numpy as np

from portcheck.core import calibrated
from portcheck.core.errors import first_line
from portcheck.forward.twin import float64_run
from portcheck.generation.decode import Decoded, decode, feed_of, tensor_tools
from portcheck.generation.feeding import OwnStep
from portcheck.generation.verdict import OwnReport
from portcheck.mapping.trace import framework_of, values


def recomputed(model, ids, fed: list, mask, step=None, feed_positions=True) -> list:
    """The next token's logits of every step from the whole prefix with no cache (recompute), or the error it raised
    in one line."""
    try:
        return recompute(model, ids, fed[:-1], mask, step, feed_positions)
    except Exception as e:  # noqa: BLE001 - the model's own error, said as its side's
        return first_line(e, 300)


def recompute(model, prompt: np.ndarray, tokens: list, attention_mask=None, step=None, feed_positions=True) -> list:
    """The next token's logits [batch, vocab] of each step from the whole prefix with no cache (the prompt, then the
    tokens fed before that step): what cached decoding must equal, through the step the decoding used. The default's
    (feeding.OwnStep, the library's own preparation) in one call over the prompt and every token fed, each step's
    logits read at its position (a causal model's logits at a position see only the tokens up to it: each prefix
    recomputed at the cost of one forward; a model that lets a position see later tokens is red); a loop's own step
    handed each prefix with no cache, a call a step."""
    side = framework_of(model)
    to_tensor, grad = tensor_tools(side)
    feed = feed_of(model, prompt, attention_mask, feed_positions)
    fed = [np.asarray(t).reshape(-1, 1).astype(np.int64) for t in tokens]
    whole = np.concatenate([feed.first(), *fed], axis=1)
    if step is None or isinstance(step, OwnStep):
        first, kwargs = feed.arguments(whole, whole.shape[1], to_tensor)
        with grad():
            logits = OwnStep.whole(model, first, kwargs["attention_mask"], kwargs.get("position_ids"),
                                   kwargs.get("decoder_input_ids"))
        at = 0 if feed.start is not None else feed.prompt.shape[1] - 1
        return [logits[:, at + s] for s in range(len(fed) + 1)]
    out = []
    with grad():
        for s in range(len(fed) + 1):
            prefix = whole[:, :whole.shape[1] - len(fed) + s]
            first, kwargs = feed.arguments(prefix, prefix.shape[1], to_tensor)
            logits, _ = step(model, first, None, **kwargs)
            out.append(np.array(values(logits), copy=True))
    return out


def judged(side: str, cached, wide, again, yardstick: str = "", of_recomputed: bool = False) -> OwnReport:
    """cached (its float32 decoding, a decode.Decoded), wide (its float64 one), again (recomputed's) judged step by
    step: the cached logits against the recomputed ones, cached - float64 the side's own fp32 error; of_recomputed:
    wide is the prefix recomputed in float64, the recomputed logits the reference and their - float64 the error
    (the float64 run must be of the path whose float32 error it measures: of the other, a bug's difference would
    be taken for rounding)."""
    said = yardstick or ("torch's float64 twin" if side == "torch" else "the Paddle model in float64")
    report = OwnReport(side, yardstick=said)
    if isinstance(again, str):
        report.stopped = f"recomputing the prefix with no cache raised: {again}"
        return report
    if cached.stopped:
        report.stopped = f"its cached decoding raised at step {cached.stopped_at}: {cached.stopped}"
        return report
    same = wide is not None and not wide.stopped and len(wide.logits) == len(cached.logits)
    if not same:
        report.yardstick = "none (its float64 run did not run): the floor alone"
    for s, (a, b) in enumerate(zip(cached.logits, again)):
        ref = wide.logits[s] if same else None
        report.rows.append(calibrated.measure(f"{side} step {s + 1}: cached against recomputed",
                                              *((b, ref, a) if of_recomputed else (a, ref, b))))
    return report


@contextlib.contextmanager
def paddle_float64(model):
    """The Paddle model's floating weights and buffers in float64 for the block, Paddle's default dtype float64, and
    paddle.finfo(float64)'s min and max float32's, as torch's twin (portcheck.forward.twin.float32_bounds):
    paddlenlp's Llama fills its mask with finfo(dtype).min, and scores plus float64's min overflow to -inf, NaN on a
    left-padded row's masked positions. Afterwards the model is exactly as it was given: each weight cast back to
    its own dtype (float32 -> float64 -> float32 is exact), each buffer the tensor it held, each layer's dtype its
    own; an integer or boolean tensor is never cast (paddlenlp's GPT keeps its causal mask in int64, and a model
    handed back with it in float32 raises on its next left-padded batch)."""
    import paddle
    before, real = paddle.get_default_dtype(), paddle.finfo
    bounds = real(paddle.float32)

    def finfo(dtype):
        info = real(dtype)
        if "float64" not in str(getattr(info, "dtype", dtype)):
            return info
        return types.SimpleNamespace(**{k: getattr(info, k) for k in ("bits", "dtype", "eps", "resolution", "tiny",
                                                                       "smallest_normal") if hasattr(info, k)},
                                     min=bounds.min, max=bounds.max)
    layers = model.sublayers(include_self=True)
    dtypes = [(layer, layer.__dict__.get("_dtype")) for layer in layers]
    buffers = [(layer, dict(layer._buffers)) for layer in layers]
    weights, seen = [], set()
    for layer in layers:
        for p in layer._parameters.values():
            if p is not None and p.is_floating_point() and id(p) not in seen:
                seen.add(id(p))
                weights.append((layer, p, p.dtype))
    try:
        for layer, p, _ in weights:
            layer._transform(p, None, paddle.float64, None)  # in place: the parameter object stays the model's
        for layer, held in buffers:
            for name, b in held.items():
                if b is not None and b.is_floating_point():
                    layer._buffers[name] = b.astype("float64")
        paddle.set_default_dtype("float64")
        paddle.finfo = finfo
        yield model
    finally:
        paddle.finfo = real
        paddle.set_default_dtype(before)
        for layer, p, dtype in weights:
            layer._transform(p, None, dtype, None)
        for layer, held in buffers:
            layer._buffers.clear()
            layer._buffers.update(held)
        for layer, dtype in dtypes:
            if dtype is not None:
                layer._dtype = dtype


def check_cache(model, ids, n: int, fed=None, attention_mask=None, position_ids=True, step=None,
                decoded=None) -> OwnReport:
    """One side's OwnReport: decoded (its float32 decoding, made here without it) fed `fed` (its own greedy
    tokens without), its float64 run (torch's twin decoding; Paddle's model in float64 recomputing the prefix, one
    call), and the prefix recomputed with no cache."""
    side = framework_of(model)
    feed = dict(feed_positions=position_ids, attention_mask=attention_mask, step=step)
    cached = decoded if decoded is not None else decode(model, ids, n, fed=fed, **feed)
    tokens = fed if fed is not None else cached.chosen
    again = recomputed(model, ids, tokens, attention_mask, step, position_ids)
    if side == "torch":
        wide = float64_run(model, lambda: decode(model, ids, n, fed=tokens, **feed), lambda d: bool(d.stopped),
                           whole_first=True)
        return judged(side, cached, wide, again)
    try:  # the recomputed logits' float64 run, one call: the yardstick of the reference
        with paddle_float64(model):
            wide = Decoded(side, logits=recompute(model, ids, tokens[:-1], attention_mask, step, position_ids))
    except Exception as e:  # noqa: BLE001 - a model that cannot be cast: judged on the floor, said
        return judged(side, cached, None, again, f"none ({first_line(e)}): the floor alone")
    return judged(side, cached, wide, again, of_recomputed=True)
