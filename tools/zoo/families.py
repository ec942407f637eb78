"""Every architecture both libraries ship: paddlenlp's base model classes with a transformers counterpart of the same
name, each built from one tiny random config (offline), converted with no map and judged through portcheck's public
API: compare_forward (cumulative and isolated), compare_backward (3 steps), and three plants chosen from the
family's own parts (its first norm's epsilon, its first attention query's weight or, in a network of convolutions,
its first kernel flipped, its word embedding's rows).

    python -m tools.zoo.families                 # every family; writes docs/bench/zoo_families.json, both pages
    python -m tools.zoo.families --only bert     # some families (paddlenlp's directory names); writes nothing
    python -m tools.zoo.families --only bert clip --write   # writes the rows of those alone
    python -m tools.zoo.families --list          # the families found, paddlenlp's class against transformers'
    python -m tools.zoo.families --only bert --fast   # the suite's part (forward cumulative, one plant); writes nothing

Each family runs in a process of its own (a model that raises or hangs in its own library is that family's
result, said in one line), at most --timeout seconds.
"""
import argparse
import importlib
import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch, Paddle)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from portcheck.core.errors import PipelineError, first_line, run_main
from portcheck.core.keys import ROOT

REPO = Path(__file__).resolve().parents[2]

# paddlenlp's directory against transformers' where the two spell it otherwise
ALIASES = {"bigbird": "big_bird", "chineseclip": "chinese_clip", "megatronbert": "megatron_bert", "gpt": "gpt2"}
# the base class where a directory's name is not its class's stem (paddlenlp's, transformers')
CLASSES = {"gpt": ("GPTModel", "GPT2Model"), "chineseclip": ("ChineseCLIPModel", "ChineseCLIPModel")}

# one tiny config, given to both sides' config classes (each takes the names it knows; the rest are attributes
# neither reads): dropout off everywhere (a family's own drops too: no_drops), no cache
TINY = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, classifier_dropout=0.0, d_model=32,
            encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, n_embd=32, n_layer=2, n_head=4, n_positions=64, n_ctx=64,
            num_key_value_heads=4, use_cache=False, d_ff=64, d_kv=8, num_layers=2, num_heads=4, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, hidden_dropout=0.0, ffn_dim=64, word_embed_proj_dim=32,
            embedding_size=32, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=0,
            rotary_dim=4, emb_dim=32, n_layers=2, n_heads=4, dim=32, hidden_dim=64, dropout_rate=0.0)
OVERRIDES = {"funnel": dict(block_sizes=[1, 1], num_decoder_layers=1, d_head=8, d_inner=64),
             "xlnet": dict(d_inner=64, n_layer=2), "mobilebert": dict(embedding_size=32, intra_bottleneck_size=32,
                                                                      true_hidden_size=32, classifier_activation=True),
             "blenderbot": dict(num_encoder_layers=2, num_decoder_layers=2, scale_embedding=True),
             "blenderbot_small": dict(num_encoder_layers=2, num_decoder_layers=2, scale_embedding=True),
             "deberta": dict(position_biased_input=False, relative_attention=True, pos_att_type=["c2p", "p2c"],
                             max_relative_positions=-1, output_hidden_states=False),
             # a training step needs the axial shape's product to be the sequence's length, a multiple of the chunks'
             "gpt": dict(n_inner=64),
             # paddlenlp's feed-forward reads `activation` (one of paddle's functionals), transformers' hidden_act
             "bigbird": dict(hidden_act="gelu", activation="gelu", attn_dropout=0.0, act_dropout=0.0),
             "reformer": dict(axial_pos_shape=[3, 4], axial_pos_embds_dim=[16, 16], attn_layers=["local", "local"],
                              max_position_embeddings=12, attention_head_size=8, feed_forward_size=64,
                              local_attn_chunk_length=4, lsh_attn_chunk_length=4, num_hashes=1, is_decoder=False),
             # settings whose defaults differ between the two config classes, as the released checkpoints set them
             # (facebook/mbart-large-cc25, google/pegasus-large, microsoft/mpnet-base: its positions count from its
             # pad token, 1, which transformers fixes and paddlenlp reads); LUKE's port fixes its norms' epsilon at
             # 1e-6 whatever its config says (studio-ousia/luke-base's is 1e-12)
             "mbart": dict(scale_embedding=True), "pegasus": dict(scale_embedding=True, activation_function="relu"),
             "mpnet": dict(layer_norm_eps=1e-5, pad_token_id=1), "luke": dict(layer_norm_eps=1e-6)}
# one setting the two config classes spell otherwise (transformers', paddlenlp's): BigBird's full attention
SPELLED = {"bigbird": (dict(attention_type="original_full"), dict(attention_type="default_attention"))}
# why a family is not judged green, in one line, each held by a test of tests/test_zoo_reasons.py: the
# pair is not the same model, or it raises in its own library. The run still runs; its row says the reason first
REASONS = {
    "blenderbot": "not the same model: paddlenlp's BlenderbotModel builds its encoder's and decoder's embed_tokens "
                  "apart from shared (BlenderbotEncoder(config), no embed_tokens=self.shared): three embeddings "
                  "trained apart where transformers' trains one",
    "roformer": "not the same model: paddlenlp's RoFormerModel ends in a pooler (pooler.dense, tanh) that "
                "transformers' RoFormerModel does not have",
    "convbert": "not the same model: paddlenlp's ConvBertModel ends in a pooler (pooler.dense, tanh) that "
                "transformers' ConvBertModel does not have",
    "reformer": "raises in its own library: paddlenlp's ReformerModel's backward raises on Paddle 3.3.1 (its "
                "_ReversibleFunction's PyLayer.backward returns 2 gradients for 1 input)",
    # differences of paddlenlp's port held by strict xfails of tests/test_zoo.py (docs/zoo.md, What the zoo finds)
    "deberta_v2": "not the same model: its encoder returns its own input as its first output "
                  "(test_paddlenlp_deberta_v2_encoders_first_output_is_its_last_layers_as_transformers)",
    "fnet": "not the same model: its Fourier transform, paddle.fft.fftn on every axis, mixes the batch's samples "
            "(test_paddlenlp_fnets_fourier_transform_keeps_each_sample_to_itself_as_transformers)",
    "codegen": "raises in its own library: its forward raises on Paddle 3: paddle.where reads a float causal mask "
               "(test_paddlenlp_codegen_forward_runs_on_the_current_paddle)",
    "gptj": "raises in its own library: its forward raises on Paddle 3: paddle.where reads a float causal mask "
            "(test_paddlenlp_gptj_forward_runs_on_the_current_paddle)",
    "rembert": "raises in its own library: its forward raises on every input: RemBertAttention hands its "
               "self-attention's (output, probs) tuple to a Linear (test_paddlenlp_rembert_forward_runs)",
    "mixtral": "raises in its own library: its MoE block's paddle.where gives 1-D indices on Paddle 3.3.1, so the "
               "routing weights broadcast against the rows (tests/test_moe.py: "
               "test_paddlenlps_own_mixtral_raises_on_paddle_3_and_is_said_so)",
    "blip": "not the same model: transformers' vision tower applies post_layernorm to its pooled output twice, "
            "paddlenlp's once (test_paddlenlp_blip_pools_as_transformers)",
    "prophetnet": "not the same model: its predicting streams read their relative-position embeddings in another "
                  "order (test_paddlenlp_prophetnet_predicting_streams_as_transformers)",
    "clap": "not the same model: its audio BatchNorm2D keeps 0.1 of its running statistics a step, transformers' 0.9 "
            "(test_paddlenlp_clap_batch_norm_momentum_as_transformers)",
    "blip_2": "not the same model: its OPT's lm_head holds a decoder_weight of its own, transformers' is tied to the "
              "word embeddings: two weights trained apart where transformers' trains one "
              "(test_paddlenlp_blip_2_ties_its_lm_head_to_the_word_embeddings_as_transformers)",
    "speecht5": "not the same model: its decoder's causal mask hides every position, masked_fill's result dropped "
                "(test_paddlenlp_speecht5_causal_mask_as_transformers)",
}
# two towers: each tower's own tiny config, images 32 x 32 in patches of 8
TOWER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, hidden_act="gelu",
             dropout=0.0, attention_dropout=0.0)
for _two in ("clip", "chineseclip"):
    OVERRIDES[_two] = dict(projection_dim=16, text_config=dict(TOWER, vocab_size=100, max_position_embeddings=64,
                                                               type_vocab_size=2, hidden_dropout_prob=0.0,
                                                               attention_probs_dropout_prob=0.0),
                           vision_config=dict(TOWER, image_size=32, patch_size=8, num_channels=3))
# the model outputs compared, {transformers' field: paddlenlp's position}, where paddlenlp's tuple holds more than
# transformers' ModelOutput (a None for outputs not asked, the attention mask it built): the rest is left out;
# paddlenlp's ChineseCLIPModel returns text_model_output's pooler_output (its first token's hidden state), transformers'
# None
OUTPUTS = {"luke": {"last_hidden_state": 0, "pooler_output": 2},
           "pegasus": {"last_hidden_state": 0, "encoder_last_hidden_state": 2},
           "blenderbot_small": ["last_hidden_state"],  # paddlenlp's returns the decoder's output alone
           # transformers' OPT returns its past_key_values in language_model_outputs also where no cache is asked
           "blip_2": ["logits", "vision_outputs", "qformer_outputs"],
           "chineseclip": ["logits_per_image", "logits_per_text", "text_embeds", "image_embeds",
                           "vision_model_output"]}
# vision and audio families: their own tiny sizes, images 32 x 32 in patches of 8 (a ViT's), a CNN of two stages
OVERRIDES["bit"] = dict(hidden_sizes=[16, 32], depths=[1, 1], num_groups=8)
OVERRIDES["dpt"] = dict(image_size=32, patch_size=8, backbone_out_indices=[0, 1])
OVERRIDES["blip"] = dict(projection_dim=16, text_config=dict(TOWER, vocab_size=100, max_position_embeddings=64,
                                                             encoder_hidden_size=32, hidden_dropout_prob=0.0,
                                                             attention_probs_dropout_prob=0.0),
                         vision_config=dict(TOWER, image_size=32, patch_size=8, initializer_range=0.02,
                                            layer_norm_eps=1e-5))
# (BLIP's vision initializer_range default of 1e-10 leaves its activations near 1e-15, where a LayerNorm's epsilon is
# all there is; its layer_norm_eps given: the two libraries' defaults differ, docs/zoo.md "What the zoo finds")
OVERRIDES["clipseg"] = dict(OVERRIDES["clip"], extract_layers=[1, 2])
# an HTSAT (Swin) audio tower: 16 mel bins x 64 frames make its 32 x 32 spectrogram image exactly (no resizing),
# 8 x 8 patches of 4, windows of 4 over two stages (widths 16, 32)
OVERRIDES["clap"] = dict(projection_dim=16, text_config=dict(OVERRIDES["blip"]["text_config"], type_vocab_size=1,
                                                             projection_dim=16),
                         audio_config=dict(num_mel_bins=16, spec_size=32, patch_size=4, patch_stride=[4, 4],
                                           window_size=4, depths=[1, 1], num_attention_heads=[2, 4],
                                           patch_embeds_hidden_size=16, hidden_size=32, projection_dim=16,
                                           num_classes=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                           enable_fusion=False))
# a vision tower, a Q-Former of 4 queries crossing it at every layer, an OPT reading them before the ids (the defaults
# build a 2.7-billion-parameter OPT: over 9 GB); the vision tower's layer_norm_eps (paddlenlp's default 1e-5,
# transformers' 1e-6), the OPT's width and dropout (paddlenlp's reads intermediate_size and hidden_dropout_prob,
# transformers' ffn_dim and dropout) given on both
OVERRIDES["blip_2"] = dict(num_query_tokens=4, vision_config=dict(TOWER, image_size=32, patch_size=8,
                                                                   initializer_range=0.02, layer_norm_eps=1e-6),
                           qformer_config=dict(TOWER, vocab_size=100, cross_attention_frequency=1,
                                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                           text_config=dict(model_type="opt", vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                            ffn_dim=64, intermediate_size=64, num_attention_heads=4,
                                            word_embed_proj_dim=32,
                                            max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                            pad_token_id=1, bos_token_id=2, eos_token_id=2))
# ALBERT's activation given: paddlenlp's AlbertConfig defaults to "gelu", transformers' to "gelu_new" (docs/zoo.md
# "What the zoo finds")
OVERRIDES["albert"] = dict(hidden_act="gelu_new")
OVERRIDES["prophetnet"] = dict(num_encoder_layers=2, num_decoder_layers=2, num_encoder_attention_heads=4,
                               num_decoder_attention_heads=4)
# TINY's keys a family's config refuses to be given (a property it computes: funnel's and prophetnet's layers from
# block_sizes or each stack's, xlnet's sequence length, which it has no limit of), and funnel's pad_token_id:
# transformers' FunnelPreTrainedModel._init_weights reads FunnelEmbeddings.padding_idx, which it has not, and raises
# on any pad token (the ids given are past it: the rows that differ by it are never read)
WITHOUT = {"funnel": ("num_hidden_layers", "pad_token_id"), "prophetnet": ("num_hidden_layers",),
           "xlnet": ("max_position_embeddings",)}
# the modules of a family that hold a parameter of their own of more than one axis (a ViT's class token and position
# table, relative attention's biases), the same on both sides: their layout declared as a user declares it
LAYOUTS = {"dpt": {"DPTViTEmbeddings": "same"}, "blip": {"BlipVisionEmbeddings": "same"},
           "funnel": {"FunnelRelMultiheadAttention": "same"},
           "xlnet": {"XLNetModel": "same", "XLNetRelativeAttention": "same"},
           "clap": {"ClapTextEmbeddings": "same", "ClapAudioSelfAttention": "same"},
           "blip_2": {"Blip2Model": "same", "Blip2VisionEmbeddings": "same"}}
# parameters a library initializes to one constant that hides a part from every check: BLIP-2's query tokens, zeros,
# make the Q-former's 4 queries one, its first self-attention the same whatever its query and key weights (a released
# checkpoint's are learned); drawn from a standard normal on the torch side, converted as every weight
DRAWN = {"blip_2": ("query_tokens",)}
# a family one side builds only with a package not installable here: (the module, why), said as it is
NEEDS = {"layoutlmv2": ("detectron2", "transformers' LayoutLMv2Model builds its visual backbone with it; it is not on "
                                      "PyPI, only built from source against one torch")}
ENCODER_DECODER = {"bart", "mbart", "pegasus", "blenderbot", "blenderbot_small", "t5", "mt5", "prophetnet"}
# the inputs of a family whose forward takes more or other than token ids, by the names its forward gives them: ids
# below vocab_size or values of a standard normal, of that shape (two towers: both towers' inputs)
IDS, IMAGE = ("ids", (2, 12)), ("values", (2, 3, 32, 32))
INPUTS = {"bit": dict(pixel_values=IMAGE), "dpt": dict(pixel_values=IMAGE),
          "blip": dict(input_ids=IDS, pixel_values=IMAGE),
          # paddlenlp's Blip2Model returns its language model's output [0] as its logits: on its own default
          # return_dict=False, the first sample's logits alone (docs/zoo.md "What the zoo finds")
          "blip_2": dict(pixel_values=IMAGE, input_ids=IDS, return_dict=True),
          "clipseg": dict(input_ids=IDS, pixel_values=IMAGE),
          "clap": dict(input_ids=IDS, input_features=("values", (2, 1, 64, 16))),
          # SpeechT5Model with no pre- or post-nets: it takes hidden states, the encoder's and the decoder's
          "speecht5": dict(input_values=("values", (2, 12, 32)), decoder_input_values=("values", (2, 7, 32))),
          # paddlenlp's FunnelModel raises on its own default return_dict=False (docs/zoo.md "What the zoo finds")
          "funnel": dict(input_ids=IDS, return_dict=True)}
SEEDS = ("input_ids", "decoder_input_ids", "pixel_values", "input_features", "input_values", "decoder_input_values")


def families() -> list:
    """[(paddlenlp directory, transformers directory)] of every architecture both libraries ship."""
    from importlib.util import find_spec  # their folders, read without importing either library (~10 s)
    where = lambda package: Path(find_spec(package).submodule_search_locations[0])
    pd_dirs = sorted(p.name for p in (where("paddlenlp") / "transformers").iterdir() if (p / "modeling.py").exists())
    hf_dirs = {p.name for p in (where("transformers") / "models").iterdir() if p.is_dir()}
    return [(d, ALIASES.get(d, d)) for d in pd_dirs if ALIASES.get(d, d) in hf_dirs and d != "auto"]


def classes(family: str, hf_dir: str) -> tuple:
    """(paddlenlp's base model class, transformers'), or a one-line reason there is no such pair."""
    pd_mod = importlib.import_module(f"paddlenlp.transformers.{family}.modeling")
    hf_mod = importlib.import_module(f"transformers.models.{hf_dir}.modeling_{hf_dir}")
    if family in CLASSES:
        names = CLASSES[family]
    else:
        pd_names = {n.lower(): n for n in dir(pd_mod) if n.endswith("Model") and "Pretrained" not in n
                    and "PreTrained" not in n and n.lower().startswith(family.replace("_", ""))}
        hf_names = {n.lower(): n for n in dir(hf_mod) if n.endswith("Model") and "PreTrained" not in n}
        common = sorted(set(pd_names) & set(hf_names), key=len)
        if not common:
            raise LookupError(f"no base model class of one name on both sides (paddlenlp {sorted(pd_names.values())},"
                              f" transformers {sorted(hf_names.values())[:4]})")
        names = pd_names[common[0]], hf_names[common[0]]
    return getattr(pd_mod, names[0]), getattr(hf_mod, names[1])


def build(family: str, hf_dir: str):
    """(torch model, Paddle model, inputs): both from the tiny config, seeded."""
    import paddle
    import torch
    pd_cls, hf_cls = classes(family, hf_dir)
    settings = {k: v for k, v in {**TINY, **OVERRIDES.get(family, {})}.items() if k not in WITHOUT.get(family, ())}
    torch.manual_seed(0)
    paddle.seed(0)
    hf_own, pd_own = SPELLED.get(family, ({}, {}))
    hf_config = no_drops(hf_cls.config_class(**settings, **hf_own))
    if hasattr(hf_config, "_attn_implementation"):
        hf_config._attn_implementation = "eager"
    pt = hf_cls(hf_config).eval()
    with torch.no_grad():
        for name in DRAWN.get(family, ()):
            pt.get_parameter(name).normal_()
    pd = pd_cls(no_drops(pd_cls.config_class(**settings, **pd_own)))
    pd.eval()
    return pt, pd, given(family, settings)


def no_drops(config):
    """A config with every random drop it sets at 0, its towers' too: each setting whose name says drop (a dropout,
    a LayerDrop, a drop path), of any name a family gives it. Each framework draws its own masks and skips (paddlenlp's
    SpeechT5 draws its LayerDrop from numpy's and Python's global generators, unseeded, transformers' from torch's):
    left on, compare_backward's train-mode runs differ by chance, a layer one side skips red or refused in one run
    and not the next. TINY names the common ones; this catches a family's own (speecht5's encoder_layerdrop,
    positional_dropout)."""
    items = config.items() if isinstance(config, dict) else vars(config).items()
    for name, value in list(items):
        dropping = isinstance(name, str) and "drop" in name.lower() and isinstance(value, float) and value > 0
        if dropping and isinstance(config, dict):
            config[name] = 0.0
        elif dropping:
            setattr(config, name, 0.0)
        elif isinstance(value, dict) or type(value).__name__.endswith("Config"):
            no_drops(value)
    return config


def given(family: str, settings: dict) -> dict:
    """The family's inputs: INPUTS' entry, or token ids (and an encoder-decoder's decoder ids, a two-tower model's
    image), each seeded by its name's place in SEEDS (one name's values the same in every family)."""
    import numpy as np
    spec = INPUTS.get(family)
    if spec is None:
        spec = {"input_ids": IDS}
        if family in ENCODER_DECODER:
            spec["decoder_input_ids"] = ("ids", (2, 7))
        if "vision_config" in settings:
            spec["pixel_values"] = IMAGE
    made = {name: flag for name, flag in spec.items() if isinstance(flag, bool)}  # a flag, passed as it is
    for name, (kind, shape) in ((n, v) for n, v in spec.items() if n not in made):
        rng = np.random.RandomState(SEEDS.index(name))
        made[name] = rng.randint(3, TINY["vocab_size"], shape).astype("int64") if kind == "ids" else \
            rng.randn(*shape).astype("float32")  # ids past pad, bos and eos
    return made


def _first(out):
    import paddle
    import torch
    if isinstance(out, (torch.Tensor, paddle.Tensor)):
        return out
    if isinstance(out, dict) or hasattr(out, "to_tuple"):
        return next(v for v in out.values() if isinstance(v, (torch.Tensor, paddle.Tensor)))
    return next(v for v in out if isinstance(v, (torch.Tensor, paddle.Tensor)))


def plants(pd) -> list:
    """Three one-line porting bugs in the converted Paddle model's own parts: (name, module, edit)."""
    import numpy as np
    import paddle
    layers = dict(pd.named_sublayers())
    out = []
    others = (paddle.nn.GroupNorm, paddle.nn.layer.norm._BatchNormBase)  # where no LayerNorm is
    norm = next((n for n, m in layers.items() if hasattr(m, "_epsilon") and isinstance(m, paddle.nn.LayerNorm)), None) \
        or next((n for n, m in layers.items() if hasattr(m, "_epsilon") and isinstance(m, others)), None)
    if norm:  # a LayerNorm's: Paddle's default where the model's is another (BERT's 1e-12), else BERT's, a value read
        # from the wrong side's default (Paddle's LayerNorm raises above 1e-3, a port no one would hand in); a
        # GroupNorm's or BatchNorm's: 1e-3, Keras' default, where 1e-12 against 1e-5 moves no value a rounding
        eps = 1e-3 if not isinstance(layers[norm], paddle.nn.LayerNorm) else \
            1e-12 if abs(layers[norm]._epsilon - 1e-5) < 1e-9 else 1e-5
        out.append((f"{norm}'s epsilon {eps:g}", norm, lambda: setattr(layers[norm], "_epsilon", eps)))
    query = next((n for n, m in layers.items() if isinstance(m, paddle.nn.Linear)
                  and n.rpartition(".")[2] in ("q_proj", "query", "q", "q_lin", "qkv_proj", "query_key_value",
                                                               "q_head")), None)
    if query:
        w = layers[query].weight

        def transposed_or_scaled(w=w):
            v = w.numpy()
            w.set_value(v.T.copy() if v.shape[0] == v.shape[1] else v * 1.01)
        out.append((f"{query}'s weight read [out, in]", query, transposed_or_scaled))
    else:  # a network of convolutions: its first kernel wider than 1, flipped (a correlation read as a convolution)
        conv = next((n for n, m in layers.items() if isinstance(m, paddle.nn.Conv2D) and min(m.weight.shape[2:]) > 1),
                    None)
        if conv:
            w = layers[conv].weight
            out.append((f"{conv}'s kernel flipped", conv, lambda w=w: w.set_value(w.numpy()[:, :, ::-1, ::-1].copy())))
    words = ("word", "embed_tokens", "wte", "shared", "token_embedding")
    emb = next((n for n, m in layers.items() if isinstance(m, paddle.nn.Embedding) and any(w in n for w in words)),
               None) or \
        next((n for n, m in layers.items() if isinstance(m, paddle.nn.Embedding)), None)
    if emb:
        w = layers[emb].weight
        out.append((f"{emb}'s rows one off", emb, lambda w=w: w.set_value(np.roll(w.numpy(), 1, axis=0))))
    return out


def judge_one(family: str, hf_dir: str, fast: bool = False) -> dict:
    """The family's results: convert, forward, backward, each plant; a step that raised said in one line; a family
    not green with a reason (REASONS) says it as its outcome. fast (the suite's, tests/test_zoo_families.py): the
    forward cumulative only, no backward, the first plant."""
    result = _judge_one(family, hf_dir, fast)
    if family in REASONS and not result["outcome"].startswith("green"):
        result["outcome"], result["reason"] = REASONS[family].partition(":")[0], REASONS[family]
    return result


def _judge_one(family: str, hf_dir: str, fast: bool) -> dict:
    from portcheck import compare_forward
    result = {"family": family, "classes": None}
    if family in NEEDS and importlib.util.find_spec(NEEDS[family][0]) is None:
        return {**result, "outcome": "not built", "said": f"needs {NEEDS[family][0]} ({NEEDS[family][1]})"}
    try:
        pt, pd, x = build(family, hf_dir)
    except Exception as e:  # noqa: BLE001 (a library's own failure is the family's result)
        return {**result, "outcome": "not built", "said": first_line(e)}
    result["classes"] = f"{type(pd).__name__} / {type(pt).__name__}"
    try:
        state = _converted(family, pt, pd, x, result)
    except PipelineError as e:
        return {**result, "outcome": "refused", "said": f"portcheck: {e}"}
    except Exception as e:  # noqa: BLE001
        return {**result, "outcome": "raises", "said": first_line(e)}
    pd.set_state_dict(state)
    # the family's LAYOUTS and the fused modules convert's pairing declared (GPT-2's c_attn), as a user hands layouts=
    layouts = {**(result.get("layouts") or {}), **(getattr(state, "fused_found", None) or {})} or None
    before = {k: v.numpy().copy() for k, v in pd.state_dict().items()}
    try:
        forward = compare_forward(pt.eval(), pd.eval(), x, isolate=not fast, outputs=OUTPUTS.get(family),
                                  layouts=layouts)
    except Exception as e:  # noqa: BLE001
        return {**result, "outcome": "raises", "said": f"compare_forward: {first_line(e)}"}
    if "paddle" in forward.stopped:  # its own library's forward raises on this batch: nothing of it is judged
        return {**result, "outcome": "raises", "said": f"compare_forward: the Paddle model stopped: "
                                                       f"{forward.stopped['paddle']}"}
    result["forward"] = forward.passed
    result["forward_said"] = "" if forward.passed else _red(forward)
    if not fast:
        _backward(family, pt, pd, x, layouts, before, result)
    result["plants"] = []
    # the correct port's pairing, pinned as a user's map pins it: a plant's values do not settle the pairing again
    pinned = {t: p for t, p in forward.pairing.modules().items() if ROOT not in (t, p)}
    for name, module, edit in plants(pd)[:1 if fast else None]:
        pd.set_state_dict(before)
        keep = {n: getattr(m, "_epsilon", None) for n, m in pd.named_sublayers()}
        edit()
        try:
            report = compare_forward(pt.eval(), pd.eval(), x, pinned, outputs=OUTPUTS.get(family),
                                     layouts=layouts)
            red = [report.both(r.name) for r in report.paired if not r.passed]
            result["plants"].append({"plant": name, "module": module, "red": not report.passed,
                                     "at": red[0] if red else "", "named": any(module in r for r in red[:1])})
        except PipelineError as e:  # refused, not judged green: its pairing moved with the plant
            result["plants"].append({"plant": name, "module": module, "red": True, "at": f"refused: {e}"[:200]})
        except Exception as e:  # noqa: BLE001
            result["plants"].append({"plant": name, "module": module, "red": None, "at": first_line(e)[:200]})
        for n, m in pd.named_sublayers():
            if keep.get(n) is not None:
                m._epsilon = keep[n]
    clean = result["forward"] and (fast or result["backward"])
    caught = bool(result["plants"]) and all(p["red"] for p in result["plants"])  # no plant: nothing was caught
    named = all(p.get("named") for p in result["plants"])
    result["outcome"] = ("green, every plant red at its module" if named else "green, every plant red") \
        if clean and caught else "green, a plant green" if clean and result["plants"] else \
        "green, no part to plant in" if clean else "red on the correct port"
    return result


def _backward(family: str, pt, pd, x, layouts, before: dict, result: dict):
    """compare_backward, 3 steps of SGD on a mean squared error of the first output; both models back as they were
    (the plants start from the converted weights, also where the steps raised)."""
    import numpy as np
    import paddle
    import torch
    from portcheck import compare_backward
    start = {k: v.detach().clone() for k, v in pt.state_dict().items()}
    try:
        with torch.no_grad():
            shape = tuple(_first(pt(**{k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                                       for k, v in x.items()})).shape)
        target = np.random.RandomState(1).randn(*shape).astype("float32")
        loss = (lambda o, y: ((_first(o) - y) ** 2).mean(),) * 2
        sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01), lambda ps: paddle.optimizer.SGD(0.01, parameters=ps))
        backward = compare_backward(pt.train(), pd.train(), x, target, loss=loss, optimizer=sgd, steps=3,
                                    outputs=OUTPUTS.get(family), layouts=layouts)
        result["backward"] = backward.passed
        first = backward.forward  # its first forward red: said at its row, not by the steps' last line
        result["backward_said"] = "" if backward.passed else f"its first forward: {_red(first)}" \
            if first is not None and not first.passed else backward.table().splitlines()[-1][:300]
    except Exception as e:  # noqa: BLE001
        result["backward"], result["backward_said"] = None, first_line(e)[:300]
    pt.load_state_dict(start)
    pd.set_state_dict(before)


def _converted(family: str, pt, pd, x, result: dict) -> dict:
    """convert with no map (a family's LAYOUTS declared); a refusal whose fix is a keep= (a buffer paddlenlp saves
    and transformers computes) is pasted, as a user pastes it, and kept in result (the row says so); any other
    refusal is the family's result."""
    from portcheck import convert
    if family in LAYOUTS:
        result["layouts"] = LAYOUTS[family]
    try:
        return convert(pt, pd, inputs=x, layouts=LAYOUTS.get(family))
    except PipelineError as e:
        keep = re.findall(r"pass keep=\['([^']+)'\]", str(e))
        if not keep:
            raise
        result["keep"] = keep
        return convert(pt, pd, inputs=x, keep=keep, layouts=LAYOUTS.get(family))


def _red(report) -> str:
    if report.stopped:  # the outputs it did not return are red after it: the stop is what to say
        return "; ".join(f"the {side} model stopped: {e}" for side, e in report.stopped.items())[:300]
    red = [r for r in report.paired if not r.passed]
    if red:
        r = red[0]
        said = r.problem or (f"{r.max:.3g} against {r.allowed:.3g}" if not r.max_ok else r.why)
        return f"{r.name}: {said}"[:300]
    return "isolated: " + ", ".join(d.both for d in report.differing)[:300]


def cells(r: dict) -> list:
    """A family's row: [family, its two classes, its outcome, what the library said]."""
    reason = f"{r['reason']}; " if r.get("reason") else ""
    if "forward" not in r:
        return [r["family"], r.get("classes") or "", r["outcome"], reason + r["said"][:300]]
    plants = "; ".join(f"{p['plant']}: {'red at ' + p['at'] if p['red'] else 'GREEN' if p['red'] is False else p['at']}"
                       for p in r["plants"])
    said = [f"layouts={r['layouts']} declared"] if r.get("layouts") else []
    said += [f"the refusal's keep={r['keep']} pasted"] if r.get("keep") else []
    said += [f"forward {'green' if r['forward'] else 'RED ' + r['forward_said']}"]
    said += [f"backward (3 steps) {'green' if r['backward'] else 'RED ' + str(r['backward_said'])}"] \
        if "backward" in r else ["backward not run (--fast)"]
    said += [plants]
    return [r["family"], r["classes"], r["outcome"], reason + "; ".join(said)]


def row(r: dict) -> str:
    return "| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells(r)) + " |"


def write(results: list, seconds: float, run: dict = None):
    """docs/bench/zoo_families.json, then both of the zoo's pages again (tools/zoo/page.py): the families of this
    run over those of the runs before (--only), in the families' order; the time, their sum. Each row keeps the
    facts of the run that judged it (tools/bench_doc.py: command, date, CPU, load), the JSON's run lists each once
    (a row from before they were recorded: {}, "not recorded")."""
    from tools.zoo import page
    held = page.BENCH.parent / page.FAMILIES_JSON
    if run:
        results = [{**r, "measured": run} for r in results]
    if held.exists():
        mine = {r["family"] for r in results}
        before = [r for r in json.loads(held.read_text(encoding="utf-8"))["results"] if r["family"] not in mine]
        order = [f for f, _ in families()]
        results = sorted(before + results, key=lambda r: order.index(r["family"]) if r["family"] in order else 0)
        seconds = sum(r.get("seconds", 0) for r in results)
    runs = []
    for r in results:
        if r.get("measured", {}) not in runs:
            runs.append(r.get("measured", {}))
    page.bench_doc.write(held, json.dumps({"seconds": round(seconds), page.bench_doc.RUN: runs, "results": results},
                                          indent=1) + "\n")
    page.write()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--only", nargs="+", metavar="FAMILY", help="paddlenlp directory names; writes nothing")
    ap.add_argument("--write", action="store_true", help="with --only: write the rows of those families alone")
    ap.add_argument("--fast", action="store_true", help="the suite's subset: forward cumulative, the first plant, no "
                    "backward; writes nothing")
    ap.add_argument("--list", action="store_true", help="list the families and their classes, run nothing")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one family may take (default 600)")
    ap.add_argument("--one", metavar="FAMILY", help=argparse.SUPPRESS)  # one family, in this process: its JSON line
    args = ap.parse_args()
    if args.fast and args.write:
        ap.error("--fast writes nothing: the table holds whole runs (run without --fast to write)")
    found = dict(families())
    if args.one:
        print(json.dumps(judge_one(args.one, found[args.one], args.fast)), flush=True)
        return
    unknown = sorted(set(args.only or ()) - set(found))
    if unknown:
        raise PipelineError(f"--only {' '.join(unknown)}: not a family both libraries ship; the families: "
                            f"{' '.join(found)}")
    if args.list:
        for family, hf_dir in found.items():
            try:
                pd_cls, hf_cls = classes(family, hf_dir)
                print(f"{family}: {pd_cls.__name__} / {hf_cls.__name__}")
            except Exception as e:  # noqa: BLE001
                print(f"{family}: {first_line(e)}")
        return
    start, results = time.time(), []
    from tools.zoo import page
    run = page.facts("tools.zoo.families", sys.argv)
    for family in args.only or found:
        began = time.time()
        try:
            proc = subprocess.run([sys.executable, "-m", "tools.zoo.families", "--one", family,
                                   *["--fast"] * args.fast], cwd=REPO,
                                  capture_output=True, text=True, timeout=args.timeout)
            line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith("{")), None)
            r = json.loads(line) if line else {"family": family, "outcome": "raises",
                                               "said": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
        except subprocess.TimeoutExpired:
            r = {"family": family, "outcome": "not judged", "said": f"over {args.timeout:.0f} s"}
        r["seconds"] = round(time.time() - began, 1)
        results.append(r)
        print(f"{family} ({r['seconds']} s): {row(r)}", flush=True)
        if args.write:  # after each family: a run stopped early keeps what it judged
            write(results, time.time() - start, page.bench_doc.finish(run))
    seconds = time.time() - start
    print(f"{len(results)} families, {seconds:.0f} s")
    if (not args.only or args.write) and not args.fast:
        write(results, seconds, page.bench_doc.finish(run))
        print("wrote docs/bench/zoo_families.json, docs/zoo.md and docs/bench/zoo.md")


if __name__ == "__main__":
    run_main(main)
