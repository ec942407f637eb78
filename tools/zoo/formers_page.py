"""docs/zoo.md's sections on paddleformers' ports (the PaddleFormers environment: requirements-formers.txt), which
tools/zoo/page.py writes after the paddlenlp ones. zoo_cn.md says the same."""

# What the checks found in paddleformers 1.2.0's ports themselves, each pinned by a test of
# tests/formers/test_formers_findings.py that stays a strict xfail until paddleformers changes. Each entry: what
# differs, then the smallest code that shows it and the test that pins it.
FINDINGS = [
    "## What the zoo finds in the PaddleFormers ports", "",
    "Differences between a paddleformers 1.2.0 port and its transformers 5.3.0 original, in the PaddleFormers "
    "environment (`requirements-formers.txt`, made by the README's Set up): results about the port, not the "
    "check's false reds.", "",
    "- **Gemma 3, `rotary_emb` (Gemma3RotaryEmbedding)**: transformers holds one RoPE base per layer type. The "
    "sliding-window layers' comes from `rope_local_base_freq` (10000 by default), the full layers' from `rope_theta` "
    "(1e6). paddleformers computes one rotary embedding from `rope_theta` and hands it to every layer (its source: "
    "`# TODO: apply different RoPE settings based on 'layer_type'`). Every sliding-window layer's attention "
    "differs.", "",
    "  Smallest code: on a tiny Gemma3TextModel (hidden 32, head_dim 8, one sliding and one full layer), "
    "`pd.rotary_emb(x, positions)[0]` equals transformers' `rotary_emb(x, positions, 'full_attention')[0]`, not "
    "its `'sliding_attention'` one. Pinned by "
    "`test_paddleformers_gemma3_gives_sliding_layers_their_own_rope_base_as_transformers`.", "",
    "- **ERNIE 4.5, `Ernie4_5Config` and `Ernie4_5_MoeConfig`**: `rope_theta` defaults to 10000 in paddleformers, "
    "500000 in transformers. A model built from a config that leaves it out differs at every attention's rotary "
    "embedding (a checkpoint's config.json that gives it does not).", "",
    "  Smallest code: `Ernie4_5Config().rope_parameters['rope_theta']` on each side. Pinned by "
    "`test_paddleformers_ernie4_5_rope_theta_defaults_as_transformers`.", "",
    "- **DeepSeek-V3, `self_attn` (DeepseekV3Attention)**: paddleformers reads `rope_parameters['factor']` whenever "
    "the config has `rope_parameters`, which every config has; transformers reads it only for a RoPE type other than "
    "`default`. On a config with the default RoPE (no YaRN scaling) the attention raises `KeyError: 'factor'` where "
    "it is built.", "",
    "  Smallest code: `DeepseekV3Attention(DeepseekV3Config(**tiny), 0)`, which transformers builds from the same "
    "config. Pinned by `test_paddleformers_deepseek_v3_attention_builds_on_a_default_rope_config`.", ""]
