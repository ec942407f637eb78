"""A sliding window (transformers' Mistral, eager attention, window 4) held by each side's check against itself: the
clean model's cached decoding equals recomputing the prefix; a mask that drops the window once a cache is given is
red at step 2, the first step whose cache (the 6-token prompt) is longer than the window. paddlenlp 2.8.1 has no
Mistral: the torch side alone (check_cache)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from portcheck import check_cache  # noqa: E402

IDS = np.random.RandomState(0).randint(1, 128, (1, 6)).astype("int64")


@pytest.fixture(scope="module")
def mistral():
    from transformers import MistralConfig, MistralForCausalLM
    torch.manual_seed(0)
    return MistralForCausalLM(MistralConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, sliding_window=4, attn_implementation="eager")).eval()


def test_a_sliding_window_kept_is_green_and_one_dropped_once_the_cache_is_longer_is_red_at_step_2(mistral):
    assert check_cache(mistral, IDS, max_new_tokens=4).passed
    inner, original = mistral.model, mistral.model._update_causal_mask

    def window_dropped(*args, **kwargs):  # the causal mask made as if no window, once a cache is given
        past = args[3] if len(args) > 3 else kwargs.get("past_key_values")
        if past is None or past.get_seq_length() == 0:
            return original(*args, **kwargs)
        window, inner.config.sliding_window = inner.config.sliding_window, None
        try:
            return original(*args, **kwargs)
        finally:
            inner.config.sliding_window = window
    inner._update_causal_mask = window_dropped
    try:
        report = check_cache(mistral, IDS, max_new_tokens=4)
    finally:
        del inner._update_causal_mask
    assert not report.passed and report.first_step == 2, report.lines()
    assert "a bug of the torch side's cached decoding" in report.lines()[0]
