"""compare_generate on encoder-decoders (tiny T5, transformers' T5ForConditionalGeneration against paddlenlp's,
weights by portcheck.convert), a batch of two prompts, the first left-padded. A loop of one's own (the encoder run once,
its output handed to every decoder step) is green, each side against itself through that same step; a plant in the
decoder is named at its step and module, the recorded call made again with transformers' encoder output as it was
(a ModelOutput, read by its place)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_generate  # noqa: E402
from portcheck.mapping.trace import framework_of  # noqa: E402
from tools.zoo.generating import MASK, PROMPT, build  # noqa: E402


@pytest.fixture(scope="module")
def t5():
    return build("t5")


def encoder_once():
    """A user's step: the encoder run at the first step (no cache yet), its output handed to each decoder call."""
    encoded = {}

    def step(model, input_ids, past_key_values, attention_mask=None, decoder_input_ids=None, **_):
        side = framework_of(model)
        if past_key_values is None:
            encoder = model.get_encoder()
            encoded[side] = encoder(input_ids=input_ids, attention_mask=attention_mask,
                                    **({"return_dict": True} if side == "torch" else {}))
        kwargs = dict(attention_mask=attention_mask, decoder_input_ids=decoder_input_ids, use_cache=True)
        if side == "torch":
            out = model(encoder_outputs=encoded[side], past_key_values=past_key_values, **kwargs)
        else:
            out = model(encoder_output=encoded[side], cache=past_key_values, return_dict=True, **kwargs)
        return out.logits[:, -1], out.past_key_values
    return step


def test_a_loop_of_ones_own_is_green_and_each_side_against_itself_through_that_step(t5):
    report = compare_generate(*t5, PROMPT, max_new_tokens=3, attention_mask=MASK, step=encoder_once())
    assert report.passed, report.table()
    assert report.own["torch"].passed and report.own["paddle"].passed
    assert report.own["paddle"].yardstick == "the Paddle model in float64"


def test_a_decoder_plant_is_named_at_its_step_and_module_through_the_encoders_output(t5):
    pt, pd = t5
    weight = dict(pd.named_sublayers())["t5.decoder.block.1.layer.2.DenseReluDense.wo"].weight
    kept = weight.numpy().copy()
    weight.set_value(kept * 1.01)
    try:
        report = compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, step=encoder_once(),
                                  against_itself=False)
    finally:
        weight.set_value(kept)
    assert report.first_step == 1, report.table()
    assert report.first_diverging == "decoder.block.1.layer.2.DenseReluDense.wo", report.table()
    assert report.first_diverging.paddle == "t5.decoder.block.1.layer.2.DenseReluDense.wo"
