"""docs/zoo.md's sections on paddleformers' ports (the PaddleFormers environment: requirements-formers.txt), which
tools/zoo/page.py writes after the paddlenlp ones: the PaddleFormers families by verdict (from the run
`python -m tools.zoo.formers` records, JSON beside the benchmark page) and what the zoo finds in those ports.
write_table writes the first again alone, where the paddlenlp zoo's runs cannot be read (the PaddleFormers
environment). zoo_cn.md says the same."""
import json
from collections import Counter
from pathlib import Path

from tools import bench_doc
from tools.zoo import recorded, tables

TITLE = "## The PaddleFormers families by verdict"
FINDINGS_LINK = "[What the zoo finds in the PaddleFormers ports](#what-the-zoo-finds-in-the-paddleformers-ports)"


def load(folder: Path) -> list:
    """The recorded run's rows (none yet: [])."""
    held = Path(folder) / recorded.FORMERS_JSON
    return json.loads(held.read_text(encoding="utf-8"))["results"] if held.exists() else []


def why(r: dict) -> str:
    """A row's why: the port's difference (with its finding's link), the line a refusal or a failure said, the
    fused layouts convert settled."""
    if r.get("reason"):  # with the figure the run measured it by, where the forward measured one
        said = [f"{r['reason'].partition(': ')[2]}; {FINDINGS_LINK}",
                r.get("forward_said") and f"compare_forward: {r['forward_said']}"]
    elif r["outcome"].startswith("green"):
        said = []
    else:
        said = [r.get("said") or (r.get("forward_said") and f"compare_forward: {r['forward_said']}")
                or f"compare_backward: {r.get('backward_said')}"]
    if r.get("layouts"):  # a layout declared where convert's run cannot settle it
        said.append(f"layouts given: {r['layouts']}")
    if r.get("settled"):  # the fused layouts convert settled by its run, no layouts given
        said.append(f"convert settled by a run: {r['settled']}")
    return "; ".join(filter(None, said))


def section(results: list) -> list:
    """The table's section, its rows in the verdicts' order (tables.READING), then by family."""
    rows = [[r["family"], r.get("classes") or "", tables.kind(r["outcome"]), why(r)]
            for r in sorted(results, key=lambda r: (tables.place(tables.kind(r["outcome"])), r["family"]))]
    kinds = Counter(tables.kind(r["outcome"]) for r in results)
    seconds = round(sum(r.get("seconds", 0) for r in results))
    return [TITLE, "",
            "The families paddleformers 1.2.0 and transformers 5.3.0 both ship, judged as the families above. They "
            f"run in the PaddleFormers environment (`requirements-formers.txt`) by `{recorded.FORMERS_COMMAND}` "
            f"({seconds} s, one family after another, each in a process of its own). Each family's base text model (a "
            "vision-language family's text tower) is:", "",
            "- built from one tiny random config (hidden 64, 2 layers, 4 experts, `fuse_rms_norm=False`);",
            "- converted with no map and no layouts. A fused module's layout (paddleformers' `qkv_proj`, "
            "`up_gate_proj`) is the candidate whose run on the input gives torch's values; the row says which. Where "
            "none does, the layout is given, said so;",
            "- judged by compare_forward cumulative and isolated and compare_backward over 3 steps;",
            "- planted three times in its own parts: its first RMS norm's epsilon, its first attention query's weight "
            "x 1.01, its word embedding's rows one off.", "",
            "A verdict reads as in How to read a row, a port's difference being paddleformers' "
            f"({FINDINGS_LINK}).", "",
            f"{len(results)} families: " + "; ".join(
                f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kn: tables.place(kn[0]))) + ".",
            "", *tables.table(["family", "paddleformers / transformers", "verdict", "why"], rows), ""]


def write_table(guide: Path = None, folder: Path = None) -> None:
    """The section in docs/zoo.md again, from the recorded run, where it stands (before the findings), without the
    paddlenlp zoo's runs: what tools/zoo/page.py writes there."""
    guide = Path(guide or recorded.GUIDE)
    lines = guide.read_text(encoding="utf-8").split("\n")
    start = lines.index(TITLE) if TITLE in lines else lines.index(FINDINGS[0])
    end = lines.index(FINDINGS[0])
    lines[start:end] = section(load(folder or recorded.BENCH.parent))
    bench_doc.write(guide, "\n".join(lines))


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
    "- **GPT-OSS, `GptOssConfig`**: the default YaRN RoPE gives `original_max_position_embeddings` 4096 in "
    "transformers and leaves it out in paddleformers, whose YaRN then takes `max_position_embeddings` as the pre-YaRN "
    "length. A model built from a config that leaves it out rotates by other frequencies at every attention (a "
    "checkpoint's config.json that gives it does not).", "",
    "  Smallest code: `GptOssConfig().rope_parameters.get('original_max_position_embeddings')` on each side. Pinned "
    "by `test_paddleformers_gpt_oss_default_yarn_keeps_the_pre_yarn_length_as_transformers`.", "",
    "- **DeepSeek-V3, `self_attn` (DeepseekV3Attention)**: paddleformers reads `rope_parameters['factor']` whenever "
    "the config has `rope_parameters`, which every config has; transformers reads it only for a RoPE type other than "
    "`default`. On a config with the default RoPE (no YaRN scaling) the attention raises `KeyError: 'factor'` where "
    "it is built.", "",
    "  Smallest code: `DeepseekV3Attention(DeepseekV3Config(**tiny), 0)`, which transformers builds from the same "
    "config. Pinned by `test_paddleformers_deepseek_v3_attention_builds_on_a_default_rope_config`.", "",
    "- **DeepSeek-V3, `DeepseekV3Config`**: `routed_scaling_factor` defaults to 1.0 and `norm_topk_prob` to False in "
    "paddleformers, 2.5 and True in transformers. A model built from a config that leaves them out weighs each routed "
    "expert otherwise, and every MoE block's output differs: on the zoo's tiny config, `layers.1.mlp` is 0.00586 apart "
    "where 1.02e-07 is allowed. A checkpoint's config.json that gives them does not.", "",
    "  Smallest code: `(DeepseekV3Config().routed_scaling_factor, DeepseekV3Config().norm_topk_prob)` on each side. "
    "Pinned by `test_paddleformers_deepseek_v3_routing_defaults_as_transformers`.", "",
    "- **Qwen3-Next, `self_attn` (Qwen3NextAttention)**: paddleformers' Qwen3NextModel hands its full-attention "
    "layers no mask (`causal_mask = None`), and its default attention, eager, then masks nothing: each token attends "
    "to the later ones, where transformers' attention is causal. Every full-attention layer's output differs: on the "
    "zoo's tiny pair, `layers.1.self_attn.o_proj` is 0.0376 apart where 2.23e-07 is allowed. Under "
    "`_attn_implementation=\"sdpa\"`, causal where no mask is given, it is the same model (the linear-attention "
    "layers, gated delta nets, are the same under either).", "",
    "  Smallest code: in a one-layer Qwen3NextModel whose layer is a full attention, the first token's output moves "
    "when the last token changes. Pinned by `test_paddleformers_qwen3_next_full_attention_is_causal_as_transformers`.",
    "",
    "- **Qwen3-VL, `Qwen3VLTextConfig`**: paddleformers sets the text config's `rope_parameters` from `rope_scaling` "
    "alone. A `rope_parameters` given (its base, its 3-D RoPE's sections) is dropped for the defaults (`rope_theta` "
    "1e6, no `mrope_section`); transformers keeps it. The zoo gives paddleformers' side `rope_theta` and "
    "`rope_scaling` instead.", "",
    "  Smallest code: `Qwen3VLTextConfig(rope_parameters={'rope_type': 'default', 'rope_theta': 10000.0, "
    "'mrope_section': [2, 3, 3]}).rope_parameters` on each side. Pinned by "
    "`test_paddleformers_qwen3_vl_text_config_keeps_a_given_rope_parameters_as_transformers`.", ""]
