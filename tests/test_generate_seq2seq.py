"""compare_generate on encoder-decoders (tiny T5, transformers' T5ForConditionalGeneration against paddlenlp's,
weights by portcheck.convert), a batch of two prompts, the first left-padded. A loop of one's own (the encoder run once,
its output handed to every decoder step) is green, each side against itself through that same step; a plant in the
decoder is named at its step and module, the recorded call made again with transformers' encoder output as it was
(a ModelOutput, read by its place)."""
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


@pytest.fixture(scope="module")
def bart():
    return build("bart")


def test_bart_fed_by_its_own_library_compares_its_encoder_once_and_both_caches_at_every_step(bart):
    """The library's own loop (each model's prepare_inputs_for_generation, the encoder run once first): the encoder's
    output judged at step 1, each decoder step's self-attention and cross-attention caches after it, the prompt's
    padding left out of the cross-attention ones."""
    report = compare_generate(*bart, PROMPT, max_new_tokens=3, attention_mask=MASK)
    assert report.passed, report.table()
    first = report.steps[0]
    assert first.encoder is not None and first.encoder.passed and [s.position for s in report.steps] == [0, 1, 2]
    assert all(s.encoder is None for s in report.steps[1:])
    assert [r.name for r in first.cache[:4]] == [f"step 1: layer 0 {what}" for what in (
        "keys", "values", "cross-attention keys", "cross-attention values")]
    assert len(first.cache) == 8 and all(s.left_out == 2 * 2 * 4 * 8 * 2 for s in report.steps), report.lines()
    assert report.own["torch"].passed and report.own["paddle"].passed


def test_a_plant_in_the_cross_attention_cache_is_red_at_step_1_at_its_layer_and_module(bart):
    pt, pd = bart
    weight = dict(pd.named_sublayers())["bart.decoder.decoder.layers.1.cross_attn.k_proj"].weight
    kept = weight.numpy().copy()
    weight.set_value(kept * 1.01)
    try:
        report = compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, against_itself=False)
    finally:
        weight.set_value(kept)
    assert report.first_step == 1, report.table()
    assert [r.name for r in report.steps[0].rows if not r.passed][:1] == ["step 1: layer 1 cross-attention keys"]
    assert report.first_diverging == "model.decoder.layers.1.encoder_attn.k_proj", report.table()
    assert report.first_diverging.paddle == "bart.decoder.decoder.layers.1.cross_attn.k_proj"


def test_a_plant_in_the_encoder_is_red_at_step_1s_encoder_output_and_named_in_the_encoder(bart):
    pt, pd = bart
    weight = dict(pd.named_sublayers())["bart.encoder.encoder.layers.1.linear2"].weight
    kept = weight.numpy().copy()
    weight.set_value(kept * 1.01)
    try:
        report = compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, against_itself=False)
    finally:
        weight.set_value(kept)
    assert report.first_step == 1 and report.steps[0].first_red.name == "step 1: encoder output", report.table()
    assert report.first_diverging == "model.encoder.layers.1.fc2", report.table()


def test_an_encoder_decoder_whose_config_names_no_start_token_is_one_line(t5):
    from portcheck.core.errors import PipelineError
    pt, pd = t5
    held = pt.config.decoder_start_token_id, pt.config.bos_token_id
    pt.config.decoder_start_token_id = pt.config.bos_token_id = None
    try:
        with pytest.raises(PipelineError, match=r"T5ForConditionalGeneration's config names no "
                                                r"decoder_start_token_id nor bos_token_id.*\[PC665\]"):
            compare_generate(pt, pd, PROMPT, max_new_tokens=1)
    finally:
        pt.config.decoder_start_token_id, pt.config.bos_token_id = held


def test_each_librarys_own_generate_on_bart_compares_its_encoder_and_each_side_against_itself(bart):
    """step="generate": transformers' generate and paddlenlp's, each call a step, the encoder's output seen as each
    generate runs it; each side against itself on its own tokens, through its library's own preparation."""
    report = compare_generate(*bart, PROMPT, max_new_tokens=2, attention_mask=MASK, step="generate")
    assert report.passed and report.steps[0].encoder.passed, report.table()
    assert report.own["torch"].passed and report.own["paddle"].passed
