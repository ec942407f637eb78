"""Real differences of paddleformers 1.2.0's ports from the transformers 5.3.0 they install with (docs/zoo.md,
What the zoo finds in the PaddleFormers ports), each as the smallest code that shows it. Each is a strict xfail: the
day paddleformers changes, it fails, and the finding must go."""
import numpy as np
import paddle
import pytest
import torch
import transformers

FINDING = "a difference of paddleformers 1.2.0's port (docs/zoo.md, What the zoo finds in the PaddleFormers ports): "


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason=FINDING + "Gemma 3 gives its sliding-window layers the full layers' RoPE base")
def test_paddleformers_gemma3_gives_sliding_layers_their_own_rope_base_as_transformers():
    """transformers' Gemma3RotaryEmbedding holds one inverse frequency per layer type, the sliding-window layers'
    from `rope_local_base_freq` (10000 by default) and the full layers' from `rope_theta` (1e6); paddleformers' holds
    one, from `rope_theta`, for every layer (its source: "TODO: apply different RoPE settings based on 'layer_type'").
    Its cos equals transformers' full-attention one, not the sliding one."""
    from paddleformers.transformers.gemma3_text.configuration import Gemma3TextConfig
    from paddleformers.transformers.gemma3_text.modeling import Gemma3TextModel
    tiny = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=8, layer_types=["sliding_attention", "full_attention"],
                sliding_window=4)
    pd = Gemma3TextModel(Gemma3TextConfig(**tiny, fuse_rms_norm=False))
    pt = transformers.Gemma3TextModel(transformers.Gemma3TextConfig(**tiny))
    x, positions = np.zeros((1, 6, 32), "float32"), np.arange(6)[None]
    cos = pd.rotary_emb(paddle.to_tensor(x), paddle.to_tensor(positions))[0].numpy()
    full, sliding = (pt.rotary_emb(torch.tensor(x), torch.tensor(positions), kind)[0].numpy()
                     for kind in ("full_attention", "sliding_attention"))
    np.testing.assert_allclose(cos, full, atol=1e-6)
    np.testing.assert_allclose(cos, sliding, atol=1e-6)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason=FINDING + "ERNIE 4.5's rope_theta defaults to 10000, transformers' to 500000")
@pytest.mark.parametrize("family", ["Ernie4_5", "Ernie4_5_Moe"])
def test_paddleformers_ernie4_5_rope_theta_defaults_as_transformers(family):
    """A config that leaves `rope_theta` out gives paddleformers' ERNIE 4.5 (dense and MoE) a RoPE base of 10000,
    transformers' 500000: every attention's rotary embedding differs (a checkpoint's config.json that gives it
    does not)."""
    module = "ernie4_5" if family == "Ernie4_5" else "ernie4_5_moe"
    config = getattr(__import__(f"paddleformers.transformers.{module}.configuration", fromlist=["_"]),
                     f"{family}Config")
    assert config().rope_parameters["rope_theta"] == getattr(transformers, f"{family}Config")().rope_parameters[
        "rope_theta"]


@pytest.mark.xfail(strict=True, raises=KeyError,
                   reason=FINDING + "DeepSeek-V3's attention raises KeyError 'factor' on a default RoPE config")
def test_paddleformers_deepseek_v3_attention_builds_on_a_default_rope_config():
    """DeepseekV3Attention reads `rope_parameters["factor"]` whenever rope_parameters is set, which a config always
    has; transformers' reads it only for a RoPE type other than "default". A config with the default RoPE (a dense
    tiny one, or any without YaRN) raises KeyError: 'factor' where the attention is built."""
    from paddleformers.transformers.deepseek_v3.configuration import DeepseekV3Config
    from paddleformers.transformers.deepseek_v3.modeling import DeepseekV3Attention
    tiny = dict(vocab_size=100, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=1,
                num_attention_heads=4, num_key_value_heads=4, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4,
                qk_nope_head_dim=4, v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1)
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention as TorchAttention
    TorchAttention(transformers.DeepseekV3Config(**tiny), 0)
    DeepseekV3Attention(DeepseekV3Config(**tiny), 0)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason=FINDING + "DeepSeek-V3's routed_scaling_factor and norm_topk_prob default otherwise")
def test_paddleformers_deepseek_v3_routing_defaults_as_transformers():
    """A config that leaves them out gives paddleformers' DeepSeek-V3 routed_scaling_factor 1.0 and norm_topk_prob
    False, transformers' 2.5 and True: every routed expert's weight differs, each MoE block's output (a checkpoint's
    config.json that gives them does not)."""
    from paddleformers.transformers.deepseek_v3.configuration import DeepseekV3Config
    ours, theirs = DeepseekV3Config(), transformers.DeepseekV3Config()
    assert (ours.routed_scaling_factor, ours.norm_topk_prob) == (theirs.routed_scaling_factor, theirs.norm_topk_prob)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason=FINDING + "GPT-OSS's default YaRN settings leave out original_max_position_embeddings")
def test_paddleformers_gpt_oss_default_yarn_keeps_the_pre_yarn_length_as_transformers():
    """transformers' GptOssConfig gives its default YaRN RoPE `original_max_position_embeddings` 4096; paddleformers'
    leaves it out, and its YaRN then takes `max_position_embeddings` as the pre-YaRN length: a config that leaves it
    out (a tiny one) rotates by other frequencies (a checkpoint's config.json that gives it does not)."""
    from paddleformers.transformers.gpt_oss.configuration import GptOssConfig
    ours = GptOssConfig().rope_parameters.get("original_max_position_embeddings")
    assert ours == transformers.GptOssConfig().rope_parameters["original_max_position_embeddings"]


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason=FINDING + "Qwen3-VL's text config drops a given rope_parameters")
def test_paddleformers_qwen3_vl_text_config_keeps_a_given_rope_parameters_as_transformers():
    """paddleformers' Qwen3VLTextConfig sets its rope_parameters from rope_scaling alone: a rope_parameters given
    (its base, its 3-D RoPE's sections) is dropped for the defaults (rope_theta 1e6, no mrope_section), where
    transformers' keeps it. A config.json written by transformers (rope_parameters) builds another rotation (the zoo
    gives paddleformers' side rope_theta and rope_scaling instead)."""
    from paddleformers.transformers.qwen3_vl.configuration import Qwen3VLTextConfig
    given = dict(rope_type="default", rope_theta=10000.0, mrope_section=[2, 3, 3])
    assert Qwen3VLTextConfig(rope_parameters=given).rope_parameters == \
        transformers.Qwen3VLTextConfig(rope_parameters=given).rope_parameters


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason=FINDING + "Qwen3-Next's full-attention layers are not causal under its default eager "
                                    "attention")
def test_paddleformers_qwen3_next_full_attention_is_causal_as_transformers():
    """paddleformers' Qwen3NextModel hands its full-attention layers no mask (`causal_mask = None`), and its default
    attention, eager, then masks nothing: each token attends to the later ones. transformers' builds a causal mask.
    A token's output moves when a later token changes (on the zoo's tiny pair, `layers.1.self_attn` is 0.0376 apart
    where 2.23e-07 is allowed); under `_attn_implementation="sdpa"` it does not (test below)."""
    assert _qwen3_next_first_token_moved("eager") <= CAUSAL


def test_paddleformers_qwen3_next_full_attention_is_causal_under_sdpa():
    """The same model under sdpa, which is causal where no mask is given: the finding is the eager attention's."""
    assert _qwen3_next_first_token_moved("sdpa") <= CAUSAL


# how far a causal model's first token may move when a later one changes: float32's rounding of the kernels' other
# blocking (2.5e-07 measured under sdpa; the eager attention's 0.65)
CAUSAL = 1e-5


def _qwen3_next_first_token_moved(attention: str) -> float:
    """How far the first token's output moves when the last token changes, in a one-layer Qwen3NextModel whose layer
    is a full attention, under `attention`."""
    from paddleformers.transformers.qwen3_next.configuration import Qwen3NextConfig
    from paddleformers.transformers.qwen3_next.modeling import Qwen3NextModel
    tiny = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                num_key_value_heads=2, head_dim=8, moe_intermediate_size=16, num_experts=2, num_experts_per_tok=1,
                shared_expert_intermediate_size=16, layer_types=["full_attention"])
    paddle.seed(0)
    config = Qwen3NextConfig(**tiny, fuse_rms_norm=False)
    config._attn_implementation = attention
    model = Qwen3NextModel(config)
    model.eval()
    ids = np.arange(3, 9)[None]
    later = ids.copy()
    later[0, -1] = 50
    with paddle.no_grad():
        first, moved = (model(input_ids=paddle.to_tensor(i)).last_hidden_state.numpy()[0, 0] for i in (ids, later))
    return float(np.abs(first - moved).max())
