"""Each library's own way of feeding its model a step, compare_generate's default: the arguments its generate builds
from the sequence so far, the cache and the mask (the model's own prepare_inputs_for_generation), carried from one
step to the next as its generate carries them (transformers' _update_model_kwargs_for_generation, paddlenlp's
update_model_kwargs_for_generation), an encoder-decoder's encoder run once first, as its generate runs it. No family's
arguments are assumed: OPT's forward takes no position_ids, paddlenlp's BLOOM and CodeGen take their cache as
`cache=`, BLOOM computes its alibi from the mask, each as its own library feeds it. May import core and mapping."""
import functools

import numpy as np

from portcheck.mapping.trace import framework_of, values

CACHE_NAMES = ("past_key_values", "cache")  # the names a library carries a cache under between steps


class OwnStep:
    """A decoding step (decode's signature) fed as the model's own library's generate feeds it. It holds one
    decoding: the sequence so far and the arguments the library carries between steps; a call with no cache begins
    another. position_ids given (decode's, counted from the first real token) are handed to the preparation, which
    passes them on where its model takes them; none given, the library computes its own."""

    def __init__(self):
        self.sequence, self.carried = None, None

    def __call__(self, model, input_ids, past_key_values, position_ids=None, attention_mask=None,
                 decoder_input_ids=None):
        new = input_ids if decoder_input_ids is None else decoder_input_ids
        if past_key_values is None:
            self.sequence = new
            self.carried = begun(model, input_ids, attention_mask, decoder_input_ids is not None, cached=True)
        else:
            self.sequence = joined(self.sequence, new)
            for name in CACHE_NAMES:
                if name in self.carried:
                    self.carried[name] = past_key_values
        if position_ids is not None:
            self.carried["position_ids"] = position_ids
        out = called(model, self.sequence, self.carried, None if past_key_values is None else new.shape[1])
        self.carried = carried_on(model, out, self.carried, decoder_input_ids is not None)
        logits = out.logits if hasattr(out, "logits") else out[0] if isinstance(out, (tuple, list)) else out
        return logits[:, -1], cache_of(out, self.carried)

    @staticmethod
    def whole(model, input_ids, attention_mask=None, position_ids=None, decoder_input_ids=None) -> np.ndarray:
        """The logits [batch, length, vocab] of the whole sequence in one call with no cache (the decoder's sequence,
        decoder_input_ids, for an encoder-decoder), its arguments built by the same preparation."""
        seq2seq = decoder_input_ids is not None
        carried = begun(model, input_ids, attention_mask, seq2seq, cached=False)
        if position_ids is not None:
            carried["position_ids"] = position_ids
        out = called(model, decoder_input_ids if seq2seq else input_ids, carried)
        logits = out.logits if hasattr(out, "logits") else out[0] if isinstance(out, (tuple, list)) else out
        return np.array(values(logits), copy=True)


def plain_step(model, input_ids, past_key_values, position_ids=None, attention_mask=None, decoder_input_ids=None):
    """A step handing both models the same arguments, each model called directly (a loop written once for both,
    where each library's own preparation would hand them other ones): the new tokens (an encoder-decoder's prompt and
    decoder tokens), the cache under the name the model's forward takes it by (past_key_values, or paddlenlp's
    cache=), position_ids and attention_mask where its forward takes them."""
    import inspect
    taken = inspect.signature(model.forward).parameters
    kwargs = {"input_ids": input_ids, "use_cache": True,
              "past_key_values" if "past_key_values" in taken else "cache": past_key_values}
    for name, value in (("position_ids", position_ids), ("attention_mask", attention_mask),
                        ("decoder_input_ids", decoder_input_ids), ("return_dict", True)):
        if value is not None and name in taken:
            kwargs[name] = value
    out = model(**kwargs)
    logits = out.logits if hasattr(out, "logits") else out[0]
    return logits[:, -1], out.past_key_values if hasattr(out, "past_key_values") else out[1]


def begun(model, input_ids, attention_mask, seq2seq: bool, cached: bool) -> dict:
    """The arguments the library's generate carries into its first step: the mask (ones where none is given: each
    generate builds one), the cache on, transformers' cache_position and the empty cache it makes for a model that
    takes a Cache object; an encoder-decoder's encoder output, from its encoder run on the prompt."""
    side = framework_of(model)
    mask = attention_mask
    if mask is None:
        mask = ones_like(input_ids)
    carried = {"attention_mask": mask, "use_cache": cached}
    if side == "paddle":
        if seq2seq:
            carried = model.prepare_encoder_decoder_kwargs_for_generation(input_ids, carried)
        return carried
    import torch
    inner = getattr(model, "_model", model)  # a watched model: the model's own class says what it takes
    width = 1 if seq2seq else input_ids.shape[1]
    carried["cache_position"] = torch.arange(width, dtype=torch.int64)
    if seq2seq:
        carried["encoder_outputs"] = model.get_encoder()(input_ids=input_ids, attention_mask=mask, return_dict=True)
    # transformers 5's generate numbers the prompt's positions from its mask before the first step, where the forward
    # takes them (its preparation no longer does)
    prepare_positions = getattr(inner, "_prepare_position_ids_for_generation", None)
    if prepare_positions is not None and not seq2seq and "position_ids" in _parameters(inner.forward):
        carried["position_ids"] = prepare_positions(input_ids, carried)
    # as its generate sets it (the last position's logits alone); all of them for the whole sequence's call. Phi-3's
    # preparation hands its forward logits_to_keep=None otherwise, which keeps a dimension more
    if getattr(inner, "_supports_logits_to_keep", lambda: False)():
        carried["logits_to_keep"] = 1 if cached else 0
    if cached and getattr(inner, "_supports_default_dynamic_cache", lambda: False)():
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache
        carried["past_key_values"] = EncoderDecoderCache(DynamicCache(), DynamicCache()) if seq2seq else \
            DynamicCache()
    return carried


def called(model, sequence, carried: dict, new: int = None):
    """The model called on the arguments its preparation builds from the sequence and what is carried; new: how many
    of the sequence's last tokens are new (None: all of them, the first call), handed as transformers 5's generate
    hands it (next_sequence_length: its preparation slices the sequence by it, no longer by the cache's length)."""
    if _takes(model, "prepare_inputs_for_generation", "next_sequence_length"):
        carried = {**carried, "next_sequence_length": new, "is_first_iteration": new is None}
    inputs = model.prepare_inputs_for_generation(sequence, **carried)
    if framework_of(model) == "torch":
        return model(**as_model_floats(model, inputs), return_dict=True)
    return model(**inputs)


def as_model_floats(model, inputs: dict) -> dict:
    """The preparation's own floating tensors in the torch model's floating dtype: XLNet's makes its perm_mask and
    target_mapping with dtype=torch.float, which its float64 twin (the yardstick) cannot multiply by its float64
    weights. In the float32 run the dtypes are equal and nothing is cast; a cache is left as it is."""
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    import torch
    return {k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() and dtype is not None and
            v.dtype != dtype else v for k, v in inputs.items()}


def carried_on(model, out, carried: dict, seq2seq: bool) -> dict:
    """What the library's generate carries into the next step after `out`."""
    if framework_of(model) == "torch":
        return model._update_model_kwargs_for_generation(out, carried, is_encoder_decoder=seq2seq)
    return model.update_model_kwargs_for_generation(out, carried, is_encoder_decoder=seq2seq)


def cache_of(out, carried: dict):
    """The cache a step leaves: the output's, or what the library's update carries."""
    if hasattr(out, "past_key_values") and getattr(out, "past_key_values", None) is not None:
        return out.past_key_values
    return next((carried[name] for name in CACHE_NAMES if carried.get(name) is not None), None)


def joined(sequence, new):
    """Two token tensors of one framework joined on their length."""
    if framework_of_tensor(sequence) == "torch":
        import torch
        return torch.cat([sequence, new], dim=1)
    import paddle
    return paddle.concat([sequence, new], axis=1)


def ones_like(ids):
    if framework_of_tensor(ids) == "torch":
        import torch
        return torch.ones_like(ids)
    import paddle
    return paddle.ones(ids.shape, dtype="int64")


def framework_of_tensor(tensor) -> str:
    return "torch" if type(tensor).__module__.startswith("torch") else "paddle"


def _takes(model, method: str, name: str) -> bool:
    """Whether the model's method, or one it hands its **kwargs on to (Phi-3's preparation calls its base's), takes
    that argument: asked at every step, read once per class."""
    return _class_takes(type(getattr(model, "_model", model)), method, name)


@functools.lru_cache(maxsize=None)
def _class_takes(kind: type, method: str, name: str) -> bool:
    return any(name in _parameters(getattr(c, method)) for c in kind.__mro__ if method in vars(c))


def _parameters(function) -> set:
    import inspect
    return set(inspect.signature(function).parameters)

