"""compare_generate's default step on the zoo's families (tools/zoo/generating.py: transformers 4.45.2 against
paddlenlp 2.8.1, tiny, weights by portcheck.convert), a batch of two prompts, the first left-padded: each model fed as
its own library's generate feeds it (its prepare_inputs_for_generation), no family's arguments assumed. OPT's forward
takes no position_ids, paddlenlp's BLOOM and CodeGen take their cache as `cache=`, BLOOM builds its alibi from the
mask, CTRL keeps each layer's keys and values stacked in one tensor and its port's head is paddlenlp's own Linear
(torch's [out, in]): each green, the arguments the two sides pass otherwise said in one line, and a cache plant red at
its step and layer. paddlenlp's own GPT loop hands its model no padding mask: red, said as the arguments it is handed
otherwise.
Families paddlenlp 2.8.1 lacks (GPT-NeoX, Qwen2) and one it cannot run (Mixtral) are held on transformers' side alone
(check_cache, the same default step)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import check_cache, compare_generate  # noqa: E402
from tools.zoo.generating import MASK, PROMPT, build, keys_swapped_between_rows, paddle_lm  # noqa: E402

STEPS = 3


@pytest.mark.parametrize("family", ["opt", "bloom", "codegen", "t5", "ctrl"])
def test_each_family_fed_by_its_own_library_is_green_and_a_cache_plant_red_at_its_step_and_layer(family):
    pt, pd = build(family)
    report = compare_generate(pt, pd, PROMPT, max_new_tokens=STEPS, attention_mask=MASK)
    assert report.passed, report.table()
    assert len(report.steps) == STEPS and all(s.cache for s in report.steps)
    said = [n for n in report.notes if n.startswith("arguments: the two sides' model calls differ")]
    assert len(said) <= 1
    planted = compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK,
                               step=(None, keys_swapped_between_rows(1)), against_itself=False)
    assert planted.first_step == 1, planted.table()
    assert planted.steps[0].first_red.name.startswith("step 1: layer 1 "), planted.lines()
    assert not planted.steps[1].passed


def test_opt_and_bloom_are_fed_as_their_libraries_feed_them():
    """OPT's forward takes no position_ids; paddlenlp's BLOOM takes its cache as cache= (the arguments line)."""
    pt, pd = build("bloom")
    report = compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, against_itself=False)
    assert report.passed, report.table()
    said = [n for n in report.notes if n.startswith("arguments:")]
    assert len(said) == 1 and "paddle's alone are handed cache" in said[0], report.notes
    pt, pd = build("opt")
    report = compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, against_itself=False)
    assert report.passed and all("position_ids" not in (c.kwargs if c else {}) for c in report_calls(pt, pd))


def report_calls(pt, pd) -> list:
    kept = {}
    compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, against_itself=False, kept=kept)
    return kept["torch"].calls + kept["paddle"].calls


def test_paddlenlps_own_gpt_loop_hands_its_model_no_padding_mask_red_and_said():
    """paddlenlp 2.8.1's GPTForCausalLM.prepare_inputs_for_generation returns attention_mask=None whatever it is
    given (and no positions but the cache's length): its generate reads a left-padded row's padding. Red at step 1,
    the headline naming what the two models are handed otherwise."""
    pt, pd = build("gpt")
    report = compare_generate(pt, pd, PROMPT, max_new_tokens=1, attention_mask=MASK, against_itself=False)
    assert report.first_step == 1 and not report.steps[0].logits.passed, report.table()
    assert report.handed == ["attention_mask", "position_ids"]
    assert "where the two models are handed attention_mask, position_ids otherwise" in report.headline()


@pytest.mark.parametrize("name, extra", [
    ("GPTNeoX", dict(rotary_pct=0.5)),
    ("Qwen2", dict(num_key_value_heads=2)),
    ("Mixtral", dict(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
])
def test_families_paddlenlp_lacks_are_held_on_transformers_side_by_the_same_default_step(name, extra):
    import transformers
    config = getattr(transformers, f"{name}Config")(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, attn_implementation="eager", **extra)
    torch.manual_seed(0)
    model = getattr(transformers, f"{name}ForCausalLM")(config).eval()
    report = check_cache(model, PROMPT, max_new_tokens=STEPS, attention_mask=MASK)
    assert report.passed and len(report.rows) == STEPS, report.lines()
    assert np.isfinite([r.max for r in report.rows]).all()


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1's port (docs/zoo.md, "
                   "Generation): its BlenderbotSmall encoder reads attention_mask as 1 at the padding")
def test_paddlenlp_blenderbot_small_reads_its_attention_mask_as_transformers():
    """paddlenlp's BlenderbotSmallEncoder adds `attention_mask.unsqueeze([1, 2]) * -1e4` to its scores: a mask of 1 at
    the tokens (transformers' and paddlenlp's own generate's convention) masks the tokens. On a left-padded batch
    the encoder's output parts at step 1. Fails (xpass) the day it reads the mask as transformers does."""
    pt, pd = build("blenderbot_small")
    report = compare_generate(pt, pd, PROMPT, max_new_tokens=1, attention_mask=MASK, against_itself=False)
    assert report.steps[0].encoder.passed, report.lines()


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1's port (docs/zoo.md, "
                   "Generation): its RobertaForCausalLM masks no future token")
def test_paddlenlp_roberta_causal_lm_masks_its_future_tokens_as_transformers():
    """transformers' RobertaForCausalLM (is_decoder=True) adds a causal mask; paddlenlp's RobertaModel builds the
    padding mask alone, so each prompt token reads the ones after it. Changing the prompt's last token leaves
    torch's logits at the first position as they were, and moves Paddle's. Fails (xpass) the day it masks them."""
    pt, pd = build("roberta")
    changed = PROMPT[1:].copy()
    changed[0, -1] = changed[0, -1] % 90 + 5
    torch_first = [pt(torch.from_numpy(ids)).logits.detach().numpy()[0, 0] for ids in (PROMPT[1:], changed)]
    if not np.array_equal(*torch_first):  # transformers' own: another error than the xfail's
        raise RuntimeError("transformers' RobertaForCausalLM reads a future token")
    paddle_first = [pd(paddle.to_tensor(ids)).numpy()[0, 0] for ids in (PROMPT[1:], changed)]  # the logits alone
    assert np.array_equal(*paddle_first)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1's port (docs/zoo.md, "
                   "Generation): its Blenderbot loop hands the cross-attention the 2-D mask as it is")
def test_paddlenlp_blenderbot_masks_its_cross_attention_in_its_loop_as_in_its_forward():
    """paddlenlp's BlenderbotModel scales the padding mask to -1e4 for its cross-attention when given input_ids, and
    hands the 2-D attention_mask on as it is when given encoder_output (input_ids=None: its generate's every step).
    The same prompt, mask (its own convention: 1 at the padding) and first decoder token, both ways: Paddle's own
    logits part. Fails (xpass) the day the two calls agree."""
    pd = paddle_lm("blenderbot")  # Paddle's own two calls: its weights need not be torch's
    ids, mask = paddle.to_tensor(PROMPT), paddle.to_tensor(1 - MASK).astype("float32")
    first = paddle.zeros([len(PROMPT), 1], "int64")
    direct = pd(input_ids=ids, attention_mask=mask, decoder_input_ids=first)
    encoded = pd.get_encoder()(input_ids=ids, attention_mask=mask)
    looped = pd(input_ids=None, attention_mask=mask, decoder_input_ids=first, encoder_output=encoded, use_cache=True)
    direct, looped = (np.asarray((x[0] if isinstance(x, (tuple, list)) else x).numpy()) for x in (direct, looped))
    assert np.abs(direct - looped).max() < 1e-5


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1 (docs/zoo.md, "
                   "Generation): its XLNet generate feeds the sequence as it is, transformers' a masked dummy token")
def test_paddlenlp_xlnet_is_fed_its_step_as_transformers_feeds_it():
    """transformers' XLNetLMHeadModel.prepare_inputs_for_generation appends a dummy token, hides it from the others
    by perm_mask and predicts it through target_mapping; paddlenlp's XLNetLMHeadModel has no preparation of its own
    and is handed the sequence as it is. The two part at step 1, said as the arguments they are handed otherwise.
    Fails (xpass) the day they are fed alike."""
    pt, pd = build("xlnet")
    report = compare_generate(pt, pd, PROMPT, max_new_tokens=1, attention_mask=MASK, against_itself=False)
    if report.handed != ["input_ids"]:  # another difference than the xfail's
        raise RuntimeError(report.headline())
    assert report.passed


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1's port (docs/zoo.md, "
                   "Generation): its RoFormerForCausalLM reads its prompt's future tokens")
def test_paddlenlp_roformer_causal_lm_masks_its_future_tokens_as_transformers():
    """transformers' RoFormerForCausalLM (is_decoder=True) adds a causal mask; paddlenlp's RoFormerModel builds the
    padding mask alone (its generate masks by token_type_ids, a prefix each token of the prompt reads whole). The
    unpadded prompt's first position's logits part (6.3e-03 on the tiny pair); handed a causal mask of its own, the
    port is torch's model (under 1e-6). Fails (xpass) the day it masks them."""
    pt, pd = build("roformer")
    ids = PROMPT[1:]
    mine = pt(torch.from_numpy(ids)).logits.detach().numpy()[0]
    causal = paddle.to_tensor(((1 - np.tril(np.ones((6, 6), "float32"))) * -1e4)[None, None])
    theirs = [np.asarray(pd(paddle.to_tensor(ids), attention_mask=mask, return_dict=True).logits.numpy()[0])
              for mask in (None, causal)]
    if np.abs(theirs[1] - mine).max() > 1e-6:  # another difference than the xfail's
        raise RuntimeError("paddlenlp's RoFormer given a causal mask is not transformers' model")
    assert np.abs(theirs[0] - mine).max() < 1e-6


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1's port (docs/zoo.md, "
                   "Generation): its RoFormer loop reads token_type_ids its generate builds none of")
def test_paddlenlp_roformer_decodes_by_its_own_loop_with_no_token_type_ids():
    """paddlenlp's RoFormerForCausalLM.update_model_kwargs_for_generation reads model_kwargs["token_type_ids"], which
    its generate neither builds nor is handed unless its caller passes them: its own loop raises KeyError after the
    prompt. Fails (xpass) the day it decodes without them."""
    pt, pd = build("roformer")
    report = compare_generate(pt, pd, PROMPT, max_new_tokens=1, attention_mask=MASK, against_itself=False)
    if "token_type_ids" not in report.steps[0].stopped.get("paddle", "token_type_ids"):  # another error
        raise RuntimeError(report.steps[0].line())
    assert not report.steps[0].stopped, report.steps[0].line()
