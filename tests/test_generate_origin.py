"""Positions numbered from another origin (generation/origin.py) on a tiny GPT-J pair (transformers' GPTJForCausalLM
against paddlenlp's, weights by portcheck.convert; paddlenlp's causal mask made boolean, as a port that runs on Paddle 3
holds it: tools/zoo/generating.py). paddlenlp's GPT-J reads no position_ids: its attention counts rotary positions from
its cache's length, the padding included, where torch is fed them from the first real token. On the left-padded row the
cached keys differ while every logit agrees (a rotary position enters attention by a difference alone). The report says
so, and is green; a cache plant is still red at its layer."""
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_generate  # noqa: E402
from portcheck.generation.feeding import OwnStep  # noqa: E402
from tools.zoo.generating import MASK, PROMPT, build  # noqa: E402


@pytest.fixture(scope="module")
def gptj():
    return build("gptj")


def test_positions_counted_from_the_padding_are_another_origin_said_so_and_green(gptj):
    report = compare_generate(*gptj, PROMPT, max_new_tokens=3, attention_mask=MASK)
    assert report.passed, report.table()
    said = [n for n in report.notes if n.startswith("positions: paddle numbers them")]
    assert said == ["positions: paddle numbers them from the sequence's start, the padding included, torch from the "
                    "first real token: another origin, not a bug of the port (a rotary position enters attention by "
                    "a difference alone, and the logits agree); the caches are judged against torch fed positions "
                    "numbered from the sequence's start, the padding included"], report.notes
    alone = compare_generate(*gptj, PROMPT[1:], max_new_tokens=2, against_itself=False)  # no padding: one origin
    assert alone.passed and not any(n.startswith("positions: paddle numbers") for n in alone.notes), alone.notes


def test_a_cache_plant_under_another_origin_is_red_at_its_layer(gptj):
    """Layer 0's keys one position off after the prompt: red at step 1, at layer 0's keys alone (the origin said,
    every other cached tensor within its rule under it), and the next step's logits red."""
    own = OwnStep()

    def rolled(model, input_ids, past_key_values, **kwargs):
        logits, past = own(model, input_ids, past_key_values, **kwargs)
        if past_key_values is None:  # after the prompt: layer 0's keys one position off
            past = ((paddle.roll(past[0][0], 1, axis=1), past[0][1]), *past[1:])
        return logits, past
    report = compare_generate(*gptj, PROMPT, max_new_tokens=2, attention_mask=MASK, step=(None, rolled),
                              against_itself=False)
    assert report.first_step == 1, report.table()
    assert [r.name for r in report.steps[0].rows if not r.passed] == ["step 1: layer 0 keys"], report.lines()
    assert not report.steps[1].logits.passed
    assert any(n.startswith("positions: paddle numbers them from the sequence's start") for n in report.notes)
