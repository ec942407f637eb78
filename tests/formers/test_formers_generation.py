"""compare_generate on PaddleFormers' causal LMs against transformers 5's (tools/zoo/formers_generating.py): each
library's own loop as its generate feeds it. transformers 5's preparation slices the sequence by the
next_sequence_length its generate hands it, its generate numbers the prompt's positions from the mask before the
first step, and it keeps the last position's logits alone (logits_to_keep): fed so, the correct port is green
through the library's own loop and each library's own generate, and the cache plant is red at step 1, at its layer."""
import pytest

from tools.zoo.formers_generating import build
from tools.zoo.generating import MASK, PROMPT, keys_swapped_between_rows

pytest.importorskip("paddleformers")


@pytest.fixture(scope="module")
def llama():
    return build("llama")


def test_a_llama_port_decodes_green_by_each_librarys_loop_and_its_own_generate(llama):
    from portcheck import compare_generate
    report = compare_generate(*llama, PROMPT, max_new_tokens=3, attention_mask=MASK)
    assert report.passed, report.lines()
    assert report.own["torch"].passed and report.own["paddle"].passed
    assert not any(n.startswith("arguments:") and "position_ids differ" in n for n in report.notes), report.notes
    own = compare_generate(*llama, PROMPT, max_new_tokens=3, attention_mask=MASK, step="generate",
                           against_itself=False)
    assert own.passed, own.lines()


def test_a_cache_plant_in_paddleformers_cache_object_is_red_at_its_step_and_layer(llama):
    from portcheck import compare_generate
    planted = compare_generate(*llama, PROMPT, max_new_tokens=2, attention_mask=MASK, against_itself=False,
                               step=(None, keys_swapped_between_rows(1)))
    assert planted.first_step == 1 and planted.steps[0].first_red.name.startswith("step 1: layer 1 "), \
        planted.lines()
