"""Ready name maps for pairs of library models (transformers' to paddlenlp's): each is a name_map any
portcheck function takes. A map names only what differs; the rest keeps its name.

    from portcheck.mapping.recipes import PADDLENLP_BERT
    paddle_model.set_state_dict(portcheck.mapping.convert(hf_bert, paddlenlp_bert, PADDLENLP_BERT))

PADDLENLP_BERT also serves transformers' Electra against paddlenlp's (the same encoder names).

Layouts for fused modules (portcheck.Fused) are `layouts` entries any of convert, compare_forward and
compare_backward takes, with no name map:

    layouts = paddlenlp_gpt(heads=config.n_head, fused=True)
    portcheck.mapping.convert(hf_gpt2, paddlenlp_gpt, inputs=ids, layouts=layouts)
    portcheck.compare_backward(hf_gpt2, paddlenlp_gpt, ..., layouts=layouts)
"""
from portcheck.mapping.fused import Fused


# transformers' BERT module names -> paddlenlp's (paddlenlp builds its encoder from paddle.nn.TransformerEncoderLayer):
# a ready name map for porting a transformers BertModel to paddlenlp's (give paddlenlp's config type_vocab_size=2,
# transformers' default; paddlenlp's is 16)
PADDLENLP_BERT = [(rf"^encoder\.layer\.(\d+)\.{hf}$", rf"encoder.layers.\1.{pd}") for hf, pd in (
    ("attention\\.self\\.query", "self_attn.q_proj"), ("attention\\.self\\.key", "self_attn.k_proj"),
    ("attention\\.self\\.value", "self_attn.v_proj"), ("attention\\.output\\.dense", "self_attn.out_proj"),
    ("attention\\.output\\.LayerNorm", "norm1"), ("intermediate\\.dense", "linear1"), ("output\\.dense", "linear2"),
    ("output\\.LayerNorm", "norm2"))] + [(r"^encoder\.layer\.(\d+)$", r"encoder.layers.\1"),
                                        (r"^embeddings\.LayerNorm$", "embeddings.layer_norm")]


def paddlenlp_gpt(heads: int, fused: bool = False) -> dict:
    """layouts for transformers' GPT2Model against paddlenlp's GPTModel: GPT-2's c_attn is one Conv1D computing
    [q | k | v]; paddlenlp's attention computes them in q_proj, k_proj and v_proj, or with fuse_attention_qkv in
    one qkv_proj whose columns go per head (head 0's q, k, v, then head 1's: its forward reshapes the output to
    [batch, seq, heads, 3 * head_dim] and splits the last axis). heads: the models' attention heads."""
    out = {"c_attn": Fused(("q", "k", "v"))}
    if fused:
        out["qkv_proj"] = Fused(("q", "k", "v"), heads=heads)
    return out


def paddlenlp_llama(fused_qkv: bool = False, fused_ffn: bool = False, num_attention_heads: int = 0,
                    num_key_value_heads: int = 0) -> dict:
    """layouts for transformers' Llama against paddlenlp's built with fuse_attention_qkv or fuse_attention_ffn:
    paddlenlp's qkv_proj goes per key-value group, [q of the group's query heads | k | v] repeated per group (its
    forward reshapes the output to [batch, seq, kv heads, (group + 2) * head size]), so fused_qkv needs the config's
    num_attention_heads and num_key_value_heads; its gate_up_fused_proj is [gate | up], against transformers'
    separate projections; and its LlamaLMHead holds a Linear's weight, [in, out]."""
    out = {"LlamaLMHead": "transpose"}
    if fused_qkv:
        if num_attention_heads <= 0 or num_key_value_heads <= 0 or num_attention_heads % num_key_value_heads:
            raise ValueError("paddlenlp_llama(fused_qkv=True) needs the config's num_attention_heads and "
                             "num_key_value_heads (a multiple of it): its qkv_proj goes per key-value group")
        group = num_attention_heads // num_key_value_heads
        out["qkv_proj"] = Fused(("q_proj", "k_proj", "v_proj"), heads=num_key_value_heads,
                                 widths=(group, 1, 1) if group > 1 else ())
    if fused_ffn:
        out["gate_up_fused_proj"] = Fused(("gate_proj", "up_proj"))
    return out


# torch's nn.MultiheadAttention (nn.TransformerEncoderLayer's self_attn) against Paddle's nn.MultiHeadAttention: torch
# packs q, k and v along the first axis of in_proj_weight [3E, E] and in_proj_bias [3E], which its forward reads
# itself; Paddle computes them in its Linears q_proj, k_proj and v_proj. Each part pairs with the Paddle Linear of its
# name: convert fills it (transposed, as a Linear), compare_backward judges its gradient and weights
TORCH_ATTENTION = {"MultiheadAttention": Fused(("q_proj", "k_proj", "v_proj"), output=False)}


def paddleformers(num_attention_heads: int, num_key_value_heads: int) -> dict:
    """layouts for transformers' Llama-family attention and MLP (Qwen2/3, ERNIE 4.5, Gemma 3, their MoE's shared and
    per-expert MLPs) against paddleformers': its qkv_proj goes per key-value group, [q of the group's query heads |
    k | v] repeated per group (its forward reshapes the output to [batch, seq, kv heads, (group + 2) * head size]
    and splits the last axis), parts of unequal width where a group holds several query heads; its up_gate_proj is
    [gate | up]. The heads: the config's num_attention_heads and num_key_value_heads."""
    group = num_attention_heads // num_key_value_heads
    return {"qkv_proj": Fused(("q_proj", "k_proj", "v_proj"), heads=num_key_value_heads, widths=(group, 1, 1)),
            "up_gate_proj": Fused(("gate_proj", "up_proj"))}
