"""Ready name maps for pairs of library models (transformers' to paddlenlp's): each is a name_map any
portcheck function takes. A map names only what differs; the rest keeps its name.

    from portcheck.recipes import PADDLENLP_BERT
    paddle_model.set_state_dict(portcheck.convert(hf_bert, paddlenlp_bert, PADDLENLP_BERT))

PADDLENLP_BERT also serves transformers' Electra against paddlenlp's (the same encoder names).
"""


# transformers' BERT module names -> paddlenlp's (paddlenlp builds its encoder from paddle.nn.TransformerEncoderLayer):
# a ready name map for porting a transformers BertModel to paddlenlp's (give paddlenlp's config type_vocab_size=2,
# transformers' default; paddlenlp's is 16)
PADDLENLP_BERT = [(rf"^encoder\.layer\.(\d+)\.{hf}$", rf"encoder.layers.\1.{pd}") for hf, pd in (
    ("attention\\.self\\.query", "self_attn.q_proj"), ("attention\\.self\\.key", "self_attn.k_proj"),
    ("attention\\.self\\.value", "self_attn.v_proj"), ("attention\\.output\\.dense", "self_attn.out_proj"),
    ("attention\\.output\\.LayerNorm", "norm1"), ("intermediate\\.dense", "linear1"), ("output\\.dense", "linear2"),
    ("output\\.LayerNorm", "norm2"))] + [(r"^encoder\.layer\.(\d+)$", r"encoder.layers.\1"),
                                        (r"^embeddings\.LayerNorm$", "embeddings.layer_norm")]
