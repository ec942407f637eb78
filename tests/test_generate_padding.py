"""compare_generate on a left-padded batch of GPT-2 (transformers' GPT2LMHeadModel against paddlenlp's GPTForCausalLM,
tiny, weights by portcheck.convert), each model handed the same arguments (feeding.plain_step: paddlenlp's own
preparation hands its GPT no padding mask, tests/test_generate_families.py): what no real token reads is never judged. A
padding query attends to nothing, each library fills that row its own way, and layer 0's output there is layer 1's
cached keys at the padding: the correct port is green, the values left out said in one line with their count. A plant
that makes a real token read the padding is red, and a plant in layer 1 is named at its step and module. Each model
comes back exactly as it was given."""
import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_generate  # noqa: E402
from portcheck.generation.feeding import plain_step  # noqa: E402
from tools.zoo.generating import MASK, PROMPT, build  # noqa: E402


@pytest.fixture(scope="module")
def gpt():
    return build("gpt")


@contextlib.contextmanager
def patched(layer, wrap):
    original = layer.forward
    object.__setattr__(layer, "forward", wrap(original))  # object's setattr: paddlenlp shims a function set as forward
    try:
        yield
    finally:
        object.__delattr__(layer, "forward")


def test_a_left_padded_batch_is_green_and_the_padding_left_out_is_said_with_its_count(gpt):
    report = compare_generate(*gpt, PROMPT, max_new_tokens=3, attention_mask=MASK, step=plain_step)
    assert report.passed, report.table()
    said = [line for line in report.lines() if line.startswith("left out of the rule")]
    # 2 layers' keys and values, 2 padded positions of one row, 4 heads of 8: 2 * 2 * 2 * 32 values a step
    assert said == ["left out of the rule, read by no real token: 768 cached keys' and values' entries at "
                    "left-padded positions over 3 steps; a real token that reads the padding is judged at its own "
                    "values"], report.lines()
    assert report.own["paddle"].yardstick == "the Paddle model in float64" and report.own["paddle"].passed


def test_a_real_token_reading_the_padding_is_red_at_step_2_in_the_first_attention(gpt):
    pt, pd = gpt

    def unmasked(forward):
        def run(*args, **kwargs):
            if kwargs.get("past_key_values") is not None:
                kwargs["attention_mask"] = None
            return forward(*args, **kwargs)
        return run
    with patched(pd.gpt, unmasked):
        report = compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, step=plain_step,
                                  against_itself=False)
    assert report.first_step == 2 and report.steps[0].passed, report.table()
    assert report.first_diverging.startswith("transformer.h.0.attn"), report.table()


def test_a_plant_in_layer_1_is_named_at_step_1_and_its_module_not_at_the_padding(gpt):
    pt, pd = gpt
    weight = dict(pd.named_sublayers())["gpt.decoder.layers.1.linear2"].weight
    kept = weight.numpy().copy()
    weight.set_value(kept * 1.01)
    try:
        report = compare_generate(pt, pd, PROMPT, max_new_tokens=1, attention_mask=MASK, step=plain_step,
                                  against_itself=False)
    finally:
        weight.set_value(kept)
    assert report.first_step == 1 and report.first_diverging == "transformer.h.1.mlp.c_proj", report.table()
    assert report.first_diverging.paddle == "gpt.decoder.layers.1.linear2"
    assert "values of step 1's call there" in report.padding_line()[0]


def test_each_model_comes_back_exactly_as_it_was_given(gpt):
    """Every parameter's and buffer's dtype and value, on both sides: paddlenlp's GPT keeps its causal mask in int64
    (gpt.bias), which a cast of the whole model to float64 and back would hand back in float32 (its next left-padded
    batch then raises in the model)."""
    pt, pd = gpt
    held = lambda pairs: {n: (str(t.dtype), np.array(t.detach().cpu().numpy() if hasattr(t, "detach") and
                                                        hasattr(t, "cpu") else t.numpy())) for n, t in pairs}
    sides = lambda: (held([*pt.named_parameters(), *pt.named_buffers()]),
                     held([*pd.named_parameters(), *pd.named_buffers()]))
    before = sides()
    assert before[1]["gpt.bias"][0] == "paddle.int64"
    assert compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, step=plain_step).passed
    for was, now in zip(before, sides()):
        assert was.keys() == now.keys()
        assert [n for n in was if was[n][0] != now[n][0] or not np.array_equal(was[n][1], now[n][1])] == []
    assert compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, step=plain_step).passed
