"""One side's cached decoding, step by step: the tokens fed (torch's greedy choice, or the side's own), the logits
each step gives for the next token, each layer's cached keys and values after the step, and the model call each
step made, kept frozen (its tensors as arrays, its cache object copied) so that call can be made again, module by
module (replayed). A step is a function (`step`: the default, feeding.OwnStep, feeds the model as its own library's
generate does; a user's own loop gives its own). May import core, mapping and forward."""
import contextlib
import copy
import functools
from dataclasses import dataclass, field

import numpy as np

from portcheck.core.errors import PipelineError, first_line
from portcheck.generation.caches import cache_layers, cache_tensors
from portcheck.generation.feeding import OwnStep
from portcheck.mapping.trace import framework_of, is_tensor, values

PROBE = "__portcheck_float64__"  # a float32 scalar handed to a replayed call: float64 inside torch's twin run


@dataclass
class Call:
    """A model call, frozen: its tensors as numpy arrays (in the tuples, lists and dicts they were in), any other
    object (a transformers Cache) a deep copy. thawed() gives it back as the framework takes it."""
    args: tuple
    kwargs: dict


def frozen(value):
    """value with each tensor a numpy array, in the containers it was in (a ModelOutput, a named tuple kept as its
    type: a model reads transformers' encoder output by its fields and by its place)."""
    if is_tensor(value):
        return np.array(values(value), copy=True)
    if isinstance(value, (dict, tuple, list)):
        return rebuilt(value, frozen)
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an object no copy reaches is handed on as it is
        return value


def thawed(value, to_tensor):
    if isinstance(value, np.ndarray):
        return to_tensor(np.array(value))
    if isinstance(value, (dict, tuple, list)):
        return rebuilt(value, lambda v: thawed(v, to_tensor))
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001
        return value


def rebuilt(value, each):
    """A container of value's own type holding each(item) of its items: a dict (a ModelOutput built from its
    fields), a named tuple (paddle's MultiHeadAttention.Cache, from its fields), a tuple or list; a type that cannot
    be built so becomes its plain dict or tuple."""
    if isinstance(value, dict):
        items = {k: each(v) for k, v in value.items()}
        try:
            return type(value)(**items)
        except Exception:  # noqa: BLE001 - a dict type of its own building: its items
            return items
    items = [each(v) for v in value]
    try:
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    except Exception:  # noqa: BLE001
        return tuple(items) if isinstance(value, tuple) else items


class Watched:
    """The model as a step function sees it: calling it calls the model and keeps the call, frozen, as the step's
    (the first call of each step); anything else (its config, generate) is the model's own."""

    def __init__(self, model):
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "calls", [])

    def __call__(self, *args, **kwargs):
        self.calls.append(Call(frozen(args), frozen(kwargs)))
        return self._model(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


@dataclass
class Decoded:
    """One side's decoding: per step, the next token's logits [batch, vocab] (float32, or float64 in torch's
    twin), each layer's (keys, values) after it, and the first model call it made (a Call, None: none)."""
    side: str
    logits: list = field(default_factory=list)
    caches: list = field(default_factory=list)
    calls: list = field(default_factory=list)
    stopped: str = ""      # the error the step raised, said in one line
    stopped_at: int = 0    # the step (1-based) it raised at
    raised_in: str = ""    # the innermost module of the model whose forward the error came through
    encoded: object = None  # an encoder-decoder's encoder output (its first tensor), at its first call

    @property
    def chosen(self) -> list:
        """The greedy choice of each step: [batch] token ids."""
        return [np.asarray(x).argmax(-1) for x in self.logits]


# where positions are counted from on a left-padded row: transformers' generate counts from the first real token,
# paddlenlp's (and a model that counts from its cache's length) from the sequence's start
FIRST, START = "first", "start"
ORIGINS = {FIRST: "from the first real token", START: "from the sequence's start, the padding included"}


def positions(mask: np.ndarray, width: int, origin: str = FIRST) -> np.ndarray:
    """The position of each of the last `width` tokens of a sequence whose attention mask is `mask` [batch, length]:
    FIRST, the count of real tokens before it (left padding is no position), as transformers' generate computes
    them; START, its index in the sequence."""
    if origin == START:
        return np.broadcast_to(np.arange(mask.shape[1], dtype=np.int64), mask.shape)[:, -width:].copy()
    pos = np.cumsum(mask, axis=-1) - 1
    return np.where(mask == 0, 1, pos)[:, -width:].astype(np.int64)


@dataclass
class Feed:
    """What each step of a decoding is handed: the prompt [batch, length], its mask (None: none given), positions fed
    or not and from which origin; for an encoder-decoder, the decoder's start token (None: a decoder alone)."""
    prompt: np.ndarray
    mask: np.ndarray = None
    feed_positions: bool = True
    origin: str = FIRST
    start: int = None

    def first(self) -> np.ndarray:
        """The tokens of step 1: the prompt, or the decoder's start token for each row."""
        if self.start is None:
            return self.prompt
        return np.full((self.prompt.shape[0], 1), self.start, np.int64)

    def arguments(self, new: np.ndarray, length: int, to_tensor) -> tuple:
        """(input_ids, keyword arguments) of a step whose `new` tokens [batch, width] end a sequence `length` long:
        a decoder alone, the new tokens with their positions and the mask of the whole sequence (each token after
        the prompt real); an encoder-decoder, the prompt with its mask and the new tokens as decoder_input_ids."""
        if self.start is not None:
            return to_tensor(self.prompt), {"attention_mask": None if self.mask is None else to_tensor(self.mask),
                                            "decoder_input_ids": to_tensor(new)}
        held = np.ones(self.prompt.shape, np.int64) if self.mask is None else self.mask
        full = np.concatenate([held, np.ones((held.shape[0], length - held.shape[1]), np.int64)], axis=1)
        return to_tensor(new), {
            "position_ids": to_tensor(positions(full, new.shape[1], self.origin)) if self.feed_positions else None,
            "attention_mask": None if self.mask is None else to_tensor(full)}


def encoder_decoder(model) -> bool:
    """An encoder-decoder, by its config or by its build (encoder_of)."""
    return encoder_of(model)[0]


def encoder_of(model) -> tuple:
    """(whether the model is an encoder-decoder, its encoder: get_encoder's, asked once; None where it has none). One
    by its config or by its build (paddlenlp's BlenderbotSmallConfig says it is none: its model has an encoder all
    the same). transformers 5 gives every model a get_encoder, returning the model itself or its base model where it
    has no encoder: an encoder is a module other than those."""
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return True, (model.get_encoder() if hasattr(model, "get_encoder") else None)
    get = getattr(model, "get_encoder", None)
    if not callable(get):
        return False, None
    encoder = get()
    return encoder is not None and encoder is not model and encoder is not getattr(model, "base_model", None), encoder


def decoder_start(model) -> int:
    """An encoder-decoder's first decoder token, as its own config says (decoder_start_token_id, else bos)."""
    config = getattr(model, "config", None)  # a model written by hand may hold none
    start = getattr(config, "decoder_start_token_id", None)
    start = getattr(config, "bos_token_id", None) if start is None else start
    if start is None:
        raise PipelineError(f"{type(model).__name__}'s config names no decoder_start_token_id nor bos_token_id: set "
                            "the token its decoder starts from (model.config.decoder_start_token_id) [PC665]")
    return int(start)


def feed_of(model, prompt, attention_mask=None, feed_positions=True, origin=FIRST) -> Feed:
    mask = None if attention_mask is None else np.asarray(attention_mask).astype(np.int64)
    return Feed(np.asarray(prompt).astype(np.int64), mask, feed_positions, origin,
                decoder_start(model) if encoder_decoder(model) else None)


def decode(model, prompt: np.ndarray, new_tokens: int, fed=None, step=None, feed_positions=True,
           attention_mask=None, origin: str = FIRST) -> Decoded:
    """The model decoding `new_tokens` steps from `prompt` [batch, length] with its own cache: step 1 the whole
    prompt (an encoder-decoder: the prompt in its encoder, its start token in its decoder), each later step one
    token, fed[s] ([batch] ids: torch's choice) or, without fed, its own greedy choice (Feed.arguments: what each
    step is handed). feed_positions: each step's position_ids given, counted from `origin` (positions);
    attention_mask [batch, length] (left padding): given, extended by one at each step. Without gradients. A step
    that raises ends the decoding, said as Decoded.stopped."""
    side = framework_of(model)
    to_tensor, grad = tensor_tools(side)
    watched, out, past = Watched(model), Decoded(side), None
    feed = feed_of(model, prompt, attention_mask, feed_positions, origin)
    ids = feed.first()
    length = ids.shape[1]
    step = step or OwnStep()
    with grad(), encoder_seen(model, out):
        for s in range(new_tokens):
            before = len(watched.calls)
            try:
                first, kwargs = feed.arguments(ids, length, to_tensor)
                logits, past = step(watched, first, past, **kwargs)
                logits = np.array(values(logits), copy=True)
            except PipelineError:
                raise
            except Exception as e:  # noqa: BLE001 - the step's own error ends this side's decoding, said
                out.stopped, out.stopped_at, out.raised_in = first_line(e, 300), s + 1, raised_in(model, e)
                out.calls.append(watched.calls[before] if len(watched.calls) > before else None)
                break
            if logits.ndim != 2 or logits.shape[0] != ids.shape[0]:
                raise PipelineError(f"the {side} step returned logits of shape {list(logits.shape)}: give the next "
                                    f"token's logits [batch, vocab], batch {ids.shape[0]} [PC650]")
            out.logits.append(logits)
            out.caches.append(cache_layers(past))
            out.calls.append(watched.calls[before] if len(watched.calls) > before else None)
            choice = logits.argmax(-1) if fed is None or s >= len(fed) else np.asarray(fed[s])
            ids = choice.reshape(-1, 1).astype(np.int64)
            length += 1
    return out


@contextlib.contextmanager
def encoder_seen(model, out: Decoded):
    """An encoder-decoder's encoder, for the block, keeping its first output's first tensor in `out`: the encoder
    compared once, wherever a step calls it."""
    one, encoder = encoder_of(model)
    if not one or encoder is None:
        yield
        return
    if not callable(getattr(encoder, "forward", None)):
        raise PipelineError(f"{type(model).__name__}.get_encoder() returned a {type(encoder).__name__}, not a module: "
                            "return the encoder module its forward calls [PC671]")
    original = encoder.forward

    def forward(*args, **kwargs):
        result = original(*args, **kwargs)
        if out.encoded is None:
            out.encoded = np.array(values(result if is_tensor(result) else result[0]), copy=True)
        return result
    with forward_set(encoder, forward):
        yield


@contextlib.contextmanager
def forward_set(layer, forward):
    """layer.forward is `forward` for the block, what it was afterwards (object's own setattr: paddlenlp wraps a
    function set as forward in a shim of its own)."""
    held = layer.__dict__.get("forward")
    object.__setattr__(layer, "forward", forward)
    try:
        yield layer
    finally:
        if held is None:
            object.__delattr__(layer, "forward")
        else:
            object.__setattr__(layer, "forward", held)


def generated(model, prompt: np.ndarray, new_tokens: int, attention_mask=None) -> Decoded:
    """The model's own library's generate, greedy, `new_tokens` tokens from `prompt`: each call it makes to the model
    kept as decode's steps are (its arguments frozen before the call, the next token's logits and the cache after
    it). transformers' generate(do_sample=False); paddlenlp's generate(decode_strategy="greedy_search"), always given
    an attention_mask (Paddle 3.3.1 raises in its mask's paddle.where without one). Each side feeds its own choice."""
    side = framework_of(model)
    to_tensor, grad = tensor_tools(side)
    ids = np.asarray(prompt).astype(np.int64)
    mask = np.ones(ids.shape, np.int64) if attention_mask is None else np.asarray(attention_mask).astype(np.int64)
    out = Decoded(side)
    original = model.forward

    @functools.wraps(original)  # its signature: transformers' generate reads what the forward takes (logits_to_keep)
    def forward(*args, **kwargs):
        out.calls.append(Call(frozen(args), frozen(kwargs)))
        result = original(*args, **kwargs)
        logits = result.logits if hasattr(result, "logits") else result[0]
        past = result.past_key_values if hasattr(result, "past_key_values") else result[1]
        if len(logits.shape) != 3:  # the generate's own call: its next-token logits cannot be read, said as its stop
            raise ValueError(f"its generate's model call returned logits of shape {list(logits.shape)}, not "
                             "[batch, length, vocab]")
        out.logits.append(np.array(values(logits[:, -1]), copy=True))
        out.caches.append(cache_layers(past))
        return result
    try:
        with grad(), forward_set(model, forward), encoder_seen(model, out):
            if side == "torch":
                pad = getattr(model.config, "pad_token_id", None)
                model.generate(to_tensor(ids), attention_mask=to_tensor(mask), max_new_tokens=new_tokens,
                               do_sample=False, pad_token_id=0 if pad is None else pad)
            else:
                model.generate(input_ids=to_tensor(ids), attention_mask=to_tensor(mask), max_new_tokens=new_tokens,
                               decode_strategy="greedy_search")
    except PipelineError:
        raise
    except Exception as e:  # noqa: BLE001 - said as the step it ended at
        out.stopped, out.stopped_at, out.raised_in = first_line(e, 300), len(out.logits) + 1, raised_in(model, e)
    return out


def raised_in(model, error: BaseException) -> str:
    """The innermost module of `model` whose forward `error` came through (its name as the model names it, ROOT's
    "(model)" for the model itself), read from the traceback's frames; "" when none is the model's."""
    from portcheck.mapping.pairing import ROOT
    named = model.named_modules() if hasattr(model, "named_modules") else model.named_sublayers(include_self=True)
    names = {id(m): name or ROOT for name, m in named}
    found, tb = "", error.__traceback__
    while tb is not None:
        this = tb.tb_frame.f_locals.get("self")
        if this is not None and id(this) in names:
            found = names[id(this)]
        tb = tb.tb_next
    return found


def tensor_tools(side: str):
    """(numpy array -> the side's tensor, the side's no_grad)."""
    if side == "torch":
        import torch
        return (lambda a: torch.from_numpy(np.array(a))), torch.no_grad
    import paddle
    return paddle.to_tensor, paddle.no_grad


@contextlib.contextmanager
def replaying(model, call: Call, twin_call: Call = None):
    """The model, for the block, answering any call with `call` made again (its cache a fresh copy each time), its
    logits and cache alone returned, in one form on both sides; torch's, with twin_call in its float64 run (the
    scalar PROBE it is handed is float64 there): compare_forward records, judges and isolates the step's call module
    by module with its own machinery."""
    side = framework_of(model)
    to_tensor, _ = tensor_tools(side)
    original = model.forward

    def forward(*args, **kwargs):
        probe = kwargs.pop(PROBE, None)
        made = twin_call if twin_call is not None and probe is not None and "float64" in str(probe.dtype) else call
        result = original(*thawed(made.args, to_tensor), **thawed(made.kwargs, to_tensor))
        if is_tensor(result):
            return result
        # the logits and the cache, in one form on both sides (one side's output a ModelOutput, the other's a tuple;
        # transformers' cache an object, paddlenlp's tuples of its own): each layer's cached tensors in order
        logits = result.logits if hasattr(result, "logits") else result[0]
        past = result.past_key_values if hasattr(result, "past_key_values") else \
            result[1] if isinstance(result, (tuple, list)) and len(result) > 1 and not is_tensor(result[1]) else None
        layers = cache_tensors(past)
        return {"logits": logits, "past_key_values": layers} if layers else {"logits": logits}
    with forward_set(model, forward):
        yield model
