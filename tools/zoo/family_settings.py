"""What each family of tools/zoo/families.py is given: the tiny config both sides' config classes read, a family's own
settings and inputs, the outputs compared, the layouts declared, and why a family is not judged green (REASONS).
Read by families.py, which builds and judges them."""

# paddlenlp's directory against transformers' where the two spell it otherwise
ALIASES = {"bigbird": "big_bird", "chineseclip": "chinese_clip", "megatronbert": "megatron_bert", "gpt": "gpt2",
           "rw": "falcon"}
# the base class where a directory's name is not its class's stem (paddlenlp's, transformers')
CLASSES = {"gpt": ("GPTModel", "GPT2Model"), "chineseclip": ("ChineseCLIPModel", "ChineseCLIPModel"),
           "rw": ("RWModel", "FalconModel")}

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
             # 1e-6 whatever its config says (studio-ousia/luke-base's is 1e-12); its entity vocabulary, which token
             # ids alone never read, tiny too (both config classes' default, 500000 rows, took 8 s to draw)
             "mbart": dict(scale_embedding=True), "pegasus": dict(scale_embedding=True, activation_function="relu"),
             "mpnet": dict(layer_norm_eps=1e-5, pad_token_id=1),
             "luke": dict(layer_norm_eps=1e-6, entity_vocab_size=64)}
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
# the outputs compared in the cache pass with use_cache on, where paddlenlp's output changes form with it:
# BlenderbotSmallModel returns (output, cache), its output alone otherwise (each layer's cache is judged at its
# attention)
OUTPUTS_CACHED = {"blenderbot_small": {"last_hidden_state": 0}}
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
# Falcon as paddlenlp's rw ports it (tiiuae/falcon-rw-1b's layout): ALiBi, one key and value per head, attention then
# MLP, biases; transformers' defaults are Falcon-7B's (rotary, multi-query, parallel attention)
OVERRIDES["rw"] = dict(alibi=True, multi_query=False, parallel_attn=False, bias=True, new_decoder_architecture=False)
# settings as the released checkpoints set them where one side's default or reading differs: paddlenlp's
# NeZhaConfig sets no use_relative_position (its checkpoints' configs do, True; transformers' NeZha has no absolute
# positions); paddlenlp's ErnieMModel builds its feed-forward 4 x hidden_size wide whatever intermediate_size says
# (ernie-m-base: 3072 = 4 x 768)
OVERRIDES["nezha"] = dict(use_relative_position=True)
OVERRIDES["ernie_m"] = dict(intermediate_size=4 * TINY["hidden_size"])
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
# transformers' attention implementation where eager (the zoo's choice elsewhere: every probability a module's
# output) is not the model: Falcon's eager attention adds ALiBi twice, once in the mask _update_causal_mask builds and
# again in FalconAttention.forward; sdpa adds it once, as paddlenlp's rw and falcon-rw-1b's own code do
# (test_transformers_falcon_eager_adds_alibi_once_as_its_sdpa)
ATTENTION = {"rw": "sdpa"}
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
# the cache pass of a family whose two forwards take use_cache (families.cached): forward with it off and on, every
# token input as long as a head is wide, so the key and value states an attention returns (transformers' OPTAttention
# returns them with use_cache off too) have the shape of the attention weights beside them: no output of a module is
# paired with another of the other side by its shape alone and passes unseen
HEAD = TINY["hidden_size"] // TINY["num_attention_heads"]
SEEDS = ("input_ids", "decoder_input_ids", "pixel_values", "input_features", "input_values", "decoder_input_values")
