"""Positions numbered from another origin (generation/origin.py) on a tiny GPT-J pair (transformers' GPTJForCausalLM
against paddlenlp's, weights by portcheck.convert; paddlenlp's causal mask buffer made boolean, as a port that runs on
Paddle 3 holds it). paddlenlp's GPT-J reads no position_ids: its attention counts rotary positions from its cache's
length, the padding included, where torch is fed them from the first real token. On the left-padded row the cached
keys differ while every logit agrees (a rotary position enters attention by a difference alone). The report says so,
and is green; a cache plant is still red, and not said so."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_generate  # noqa: E402
from portcheck.generation.decode import default_step  # noqa: E402
from tools.zoo.generating import MASK, PROMPT, build  # noqa: E402


@pytest.fixture(scope="module")
def gptj():
    pt, pd = build("gptj")
    for layer in pd.transformer.h:  # paddle.where reads it as the condition: a boolean on Paddle 3
        layer.attn._buffers["bias"] = layer.attn.bias.astype("bool")
    return pt, pd


def test_positions_counted_from_the_padding_are_another_origin_said_so_and_green(gptj):
    report = compare_generate(*gptj, PROMPT, max_new_tokens=3, attention_mask=MASK)
    assert report.passed, report.table()
    said = [n for n in report.notes if n.startswith("positions: paddle numbers them")]
    assert said == ["positions: paddle numbers them from the sequence's start, the padding included, torch from the "
                    "first real token: another origin, not a bug of the port (a rotary position enters attention by "
                    "a difference alone, and every step's logits agree); the caches are judged against torch fed "
                    "positions numbered from the sequence's start, the padding included"], report.notes
    alone = compare_generate(*gptj, PROMPT[1:], max_new_tokens=2, against_itself=False)  # no padding: one origin
    assert alone.passed and not any(n.startswith("positions: paddle numbers") for n in alone.notes), alone.notes


def test_a_cache_plant_is_red_and_not_said_as_another_origin(gptj):
    def rolled(model, input_ids, past_key_values, **kwargs):
        logits, past = default_step(model, input_ids, past_key_values, **kwargs)
        if past_key_values is None:  # after the prompt: layer 0's keys one position off
            past = ((paddle.roll(past[0][0], 1, axis=1), past[0][1]), *past[1:])
        return logits, past
    report = compare_generate(*gptj, PROMPT, max_new_tokens=2, attention_mask=MASK, step=(None, rolled),
                              against_itself=False)
    assert report.first_step == 1 and report.steps[0].first_red.name == "step 1: layer 0 keys", report.table()
    assert not report.steps[1].logits.passed
    assert not any(n.startswith("positions: paddle numbers") for n in report.notes)
