"""The zoo's two pages, written from its recorded runs alone: docs/zoo.md, the user's (what the zoo is for, how to
run it and read a row, the verdicts by case group and by family, what it finds in paddlenlp's ports), and
docs/bench/zoo.md, the figures (per rule, per case, per family, with their seconds) and how they were taken (the
command, the date, the CPU and the load: tools/bench_doc.py's header). The runs it reads are the JSONs beside the
benchmark page (recorded.py), and the families' data (families.py): neither imports the page. A module, not a
command: `python -m tools.zoo.run --page` writes both pages again, running nothing, and so does each command that
records a run once it has.
"""
import json
import math
from collections import Counter
from pathlib import Path

from tools import bench_doc
from tools.zoo import (cases, families, formers_generating_page, formers_page, generating_page, paconvert, recorded,
                       tables, vision_page)


def said(result) -> str:
    """What the library said: each rule's verdict, red ones with where (and what it said there)."""
    if result["error"]:
        return result["error"]
    parts = []
    for j in result["judgements"]:
        parts.append(f"{j['rule']}: {'green' if j['passed'] else 'RED'} {figure(j['used'])}"
                     + (f" at {j['where']}" if not j["passed"] else "")
                     + (f" ({j['detail'][:400]})" if not j["passed"] and (j["rule"].startswith("training") or
                                                                      result.get("by_design")) else ""))
    return "; ".join(parts)


def figure(x) -> str:
    return "inf" if x == math.inf else f"{x:.3g}"


def other_kernels(folder: Path) -> list:
    """The section on the zoo's run under torch's scalar kernels, from tools/bench_zoo_kernels.py's record of it beside
    the benchmark page (none recorded: no section). zoo_cn.md says the same."""
    held = Path(folder) / recorded.KERNELS_JSON
    if not held.exists():
        return []
    run = json.loads(held.read_text(encoding="utf-8"))
    differing, ports = run["differing"], [f"**{p['case']}**" for p in run["ports"]]
    return ["## Under another CPU's kernels", "",
            "Under torch's scalar kernels (`ATEN_CPU_CAPABILITY=default`: another CPU's torch rounds otherwise), "
            + (f"every correct port is green and every plant red: none of its {run['verdicts']} verdicts differs "
               "from the table's." if not differing else
               f"{len(differing)} of its {run['verdicts']} verdicts differ from the table's.")
            + (f" {', '.join(ports[:-1]) + ' and ' + ports[-1] if len(ports) > 1 else ports[0]} "
               f"{'are' if len(ports) > 1 else 'is'} green there by the rules made for rounding (a ReLU kink judged "
               "on Paddle's branch, a training within torch's own runs)." if ports else "")
            + " The run, its margins and those ports' figures: [zoo_kernels.md](bench/zoo_kernels.md).", ""]


# transformers' Falcon, eager against sdpa on one model's weights: measured by tests/test_zoo_families.py's
# falcon_eager_against_sdpa, which holds this figure on both pages
FALCON_EAGER_SDPA = "0.188"
# What the checks found in paddlenlp's ports themselves on correct use (tools.zoo.families), each pinned by a test
# of tests/test_zoo.py or tests/test_zoo_families.py that stays a strict xfail until paddlenlp changes (zoo_cn.md
# says the same). Each entry: what differs, then how it shows and the test that pins it.
FINDINGS = [
    "## What the zoo finds in the ports", "",
    "Differences between a paddlenlp 2.8.1 port and its transformers 4.45.2 original that the checks show on correct "
    "use: results about the port, not the check's false reds; and one of transformers' own (Falcon, last).", "",
    "- **DeBERTa-v2, `encoder` (DebertaV2Encoder)**: with `return_dict=False` (paddlenlp's default) the encoder "
    "returns `tuple(v for v in [hidden_states, all_hidden_states, all_attentions])`. Its `hidden_states` there is its "
    "own input, the embeddings' output; transformers returns the last layer's output first.", "",
    "  Shown by any input on the zoo's tiny config (`python -m tools.zoo.families --only deberta_v2`): "
    "compare_forward red at `encoder:last_hidden_state`, 0.0653 against the 1.57e-05 allowed. Every "
    "`encoder:hidden_states[i]` and the model's own output are green (DebertaV2Model reads the hidden states, not "
    "the first output). Smallest code: `pd.encoder.register_forward_post_hook(lambda m, i, o: print((o[0] == "
    "i[0]).all()))` then `pd(input_ids=ids)` prints True.", "",
    "  Pinned by `test_paddlenlp_deberta_v2_encoders_first_output_is_its_last_layers_as_transformers`. The same "
    "return line is in paddlenlp's albert, dpt, nystromformer, speecht5 and squeezebert encoders (read in their "
    "source, not run here). deberta's and mobilebert's rebind `hidden_states` to each layer's output, "
    "and both are green in the table.", "",
    "- **FNet, `encoder.layer.N.fourier.fourier_transform` (FNetBasicFourierTransform)**: paddlenlp computes "
    "`paddle.fft.fftn(hidden_states).real()` with no axes, a transform over all three, the batch axis too. "
    "Transformers' `torch.fft.fftn(hidden_states, dim=(1, 2)).real` transforms each sample's sequence and hidden "
    "axes alone. A sample's output depends on the other samples of its batch.", "",
    "  Shown by any batch of two or more on the zoo's tiny config (`python -m tools.zoo.families --only fnet`, 2 x "
    "12 tokens): compare_forward red at `encoder.layer.0.fourier.self[0]`, 10.4 against the 2.98e-05 allowed. The "
    "isolated run names the two layers' `fourier_transform` alone; a batch of one (its first sample) is green at "
    "every module.", "",
    "  Smallest code: `x = np.random.RandomState(0).randn(2, 12, 32).astype('float32')`, then "
    "`paddle.fft.fftn(paddle.to_tensor(x)).real().numpy()` is 97.4 from `np.fft.fftn(x, axes=(1, 2)).real` "
    "(3.8e-06 with `axes=(1, 2)`). Pinned by "
    "`test_paddlenlp_fnets_fourier_transform_keeps_each_sample_to_itself_as_transformers`.", "",
    "- **Mixtral, `block_sparse_moe` (MixtralSparseMoeBlock)**: on Paddle 3.3.1 `paddle.where(mask)` gives 1-D "
    "indices (`paddle.where(paddle.to_tensor([[0, 1], [1, 0]]))[1].shape` is `[2]`). So `routing_weights[top_x, "
    "idx]` is `[n]`, not `[n, 1]`, and `expert_layer(current_state) * routing_weights[top_x, idx]` scales `[n, "
    "hidden]` rows by it.", "",
    "  On the zoo's tiny config (`python -m tools.zoo.families --only mixtral`) the Paddle model stops in its first "
    "expert: `ValueError: (InvalidArgument) Broadcast dimension mismatch`. Where n equals the hidden size it "
    "broadcasts instead, each column scaled by another token's weight. portcheck pairs the model with no map all "
    "the same (each expert by its index).", "",
    "  With that one line given `.unsqueeze(-1)`, the port is green forward, isolated and 3 steps of backward. Pinned "
    "by `test_paddlenlps_own_mixtral_raises_on_paddle_3_and_is_said_so` (tests/test_moe.py).", "",
    "- **Blenderbot, `BlenderbotModel`'s embeddings**: transformers' BlenderbotModel hands its `shared` embedding "
    "to its encoder and decoder (one weight, trained by both halves). paddlenlp's builds `BlenderbotEncoder(config)` "
    "and `BlenderbotDecoder(config)` without `embed_tokens=self.shared`. So `encoder.embed_tokens`, "
    "`decoder.embed_tokens` and an unused `shared` are three weights, trained apart (paddlenlp's "
    "BlenderbotSmallModel passes `shared`).", "",
    "  Shown by any input on the zoo's tiny config (`python -m tools.zoo.families --only blenderbot`): `convert` "
    "refuses, torch's `shared` running as 2 Paddle modules [PC316]. Smallest code: `pd = "
    "BlenderbotModel(BlenderbotConfig()); print(pd.encoder.embed_tokens is pd.shared)` prints False. Pinned by "
    "`test_paddlenlp_blenderbot_shares_one_embedding_as_transformers`.", "",
    "- **Reformer, `ReformerModel`'s backward on Paddle 3.3.1**: paddlenlp runs the layers through "
    "`_ReversibleFunction`, a `PyLayer` whose backward returns two gradients for its one input. Paddle 3.3.1 raises "
    "at the first backward: `ValueError: (InvalidArgument) GradNodePyLayer__ReversibleFunction : The number of "
    "outputs of PyLayer.backward should be 1, but received 2`.", "",
    "  The forward is green and every plant red at its module (`python -m tools.zoo.families --only reformer`); no "
    "training step runs. Smallest code: the zoo's tiny ReformerModel in train mode, `out = pd(input_ids=ids); "
    "out[0].mean().backward()`. Pinned by `test_paddlenlp_reformer_trains_on_the_current_paddle`.", "",
    "- **CodeGen and GPT-J, the attention (CodeGenAttention, GPTJAttention)**: the causal mask is built in "
    "`paddle.get_default_dtype()` (float32) and read by `paddle.where(causal_mask, attn_weights, mask_value)`. "
    "Paddle 3 takes a boolean condition only, so the forward raises `ValueError: The condition is expected to be a "
    "boolean Tensor, but got a Tensor with dtype paddle.float32` on any input. Transformers holds the mask as "
    "`torch.bool`.", "",
    "  Shown by the zoo's tiny config (`python -m tools.zoo.families --only codegen gptj`): compare_forward red, the "
    "Paddle run stopped at `h.0.attn`; compare_backward raises. Smallest code: `CodeGenModel(CodeGenConfig(n_embd=32, "
    "n_layer=2, n_head=4, rotary_dim=4))(input_ids=paddle.to_tensor([[5, 6, 7]]))` raises.", "",
    "  GPTJModel raises alike, given `pad_token_id=0`: without one its forward fails earlier, at `input_ids == None`. "
    "Pinned by `test_paddlenlp_codegen_forward_runs_on_the_current_paddle` and "
    "`test_paddlenlp_gptj_forward_runs_on_the_current_paddle`.", "",
    "- **RemBERT, `encoder.layer.N.attention` (RemBertAttention)**: RemBertSelfAttention returns `(context_layer, "
    "attention_probs)`, and RemBertAttention hands that tuple to RemBertSelfOutput. Its `dense` Linear raises "
    "`linear(): argument 'X' (position 0) must be Tensor, but got tuple`, on any input and any Paddle.", "",
    "  Shown by the zoo's tiny config (`python -m tools.zoo.families --only rembert`): compare_forward red, the "
    "Paddle run stopped at `encoder.layer.0.attention.output.dense`; compare_backward raises. Smallest code: "
    "`RemBertModel(RemBertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, "
    "intermediate_size=64))(input_ids=paddle.to_tensor([[5, 6, 7]]))` raises. Pinned by "
    "`test_paddlenlp_rembert_forward_runs`.", "",
    "- **BLIP, `vision_model` (BlipVisionModel)**: transformers normalizes the pooled [CLS] row by `post_layernorm` "
    "twice (`last_hidden_state = self.post_layernorm(...)`, then `pooled_output = "
    "self.post_layernorm(pooled_output)`), paddlenlp once.", "",
    "  Shown by any image on the zoo's tiny config (`python -m tools.zoo.families --only blip`): compare_forward red "
    "at `vision_model:pooler_output`, 0.0267 against the 1.21e-05 allowed, `vision_model:last_hidden_state` green. "
    "The image and text embeddings, and the logits, follow it.", "",
    "  Smallest code: `o = pd.vision_model(pixel_values, return_dict=True)`; `o.pooler_output` equals "
    "`pd.vision_model.post_layernorm(o.last_hidden_state[:, 0])`, not that normalized again. Pinned by "
    "`test_paddlenlp_blip_pools_as_transformers`.", "",
    "- **BLIP, `BlipVisionConfig`**: `layer_norm_eps` defaults to 1e-6 in paddlenlp, 1e-5 in transformers. A model "
    "built from the defaults on both sides (a config that leaves it out) differs at the first "
    "`vision_model.encoder.layers.0.layer_norm1`, 0.0184 against the 2.5e-05 allowed (its input green).", "",
    "  The zoo gives it. Smallest code: `BlipVisionConfig().layer_norm_eps` on each side. Pinned by "
    "`test_paddlenlp_blip_vision_config_defaults_as_transformers`.", "",
    "- **ProphetNet, the decoder's `self_attn` (ProphetNetNgramSelfAttention)**: its predicting streams' "
    "relative-position embeddings are gathered by buckets laid out [ngram, batch, head, position]. Before that, "
    "transformers lays them out [batch, position, ngram, head] (`permute(0, 2, 1, 4, 3)` of [batch, ngram, "
    "position, bucket, head]).", "",
    "  paddlenlp lays them out [ngram, batch, head, position] (`transpose((0, 1, 4, 2, 3))` of [ngram, batch, "
    "position, bucket, head]). So each position of a predicting stream reads another row's embeddings in one of "
    "them.", "",
    "  Shown by any input on the zoo's tiny config (`python -m tools.zoo.families --only prophetnet`), with one "
    "sequence or three. The main stream is green (`out_proj`'s first call), and `out_proj`'s second call red. "
    "`decoder.layers.0.self_attn[0]` is the first red with its input green, 3.46e-03 against the 1.61e-07 "
    "allowed.", "",
    "  `relative_pos_embeddings#2` before it is red too, 0.575: the same values, [batch, ngram, ...] against "
    "[ngram, batch, ...]. A batch of 2 and 2 streams give them one shape, and compare_forward does not pair by their "
    "axes yet. Pinned by `test_paddlenlp_prophetnet_predicting_streams_as_transformers`.", "",
    "- **Funnel, `FunnelModel.forward`**: with `return_dict=False` (paddlenlp's default) it raises `AttributeError: "
    "'tuple' object has no attribute 'last_hidden_state'`: it reads `encoder_outputs.last_hidden_state` of the "
    "encoder's tuple. The zoo calls it with `return_dict=True`. Smallest code: `pd(input_ids=ids)`. Pinned by "
    "`test_paddlenlp_funnel_runs_on_its_default_return_dict`.", "",
    "- **CLAP, `audio_model.audio_encoder.batch_norm` (BatchNorm2D)**: paddlenlp builds it with `momentum=0.1`, "
    "transformers' `nn.BatchNorm2d` with torch's default 0.1. Paddle's momentum is the share of the old running "
    "statistics that is kept (torch's, the share of the batch's that is taken). So in training paddlenlp's running "
    "mean and variance move 9 times as far toward each batch.", "",
    "  Shown by compare_backward on the zoo's tiny config (`python -m tools.zoo.families --only clap`): the forward "
    "green, the backward red at `audio_model.audio_encoder.batch_norm.running_mean` after 3 steps, 0.145 against "
    "the 2.14e-06 allowed. Smallest code: `pd.audio_model.audio_encoder.batch_norm._momentum` is 0.1 (torch's 0.1 "
    "is Paddle's 0.9). Pinned by `test_paddlenlp_clap_batch_norm_momentum_as_transformers`.", "",
    "- **ALBERT, `AlbertConfig`**: `hidden_act` defaults to \"gelu\" (erf) in paddlenlp, \"gelu_new\" (tanh) in "
    "transformers. A model built from the defaults on both sides differs at the first "
    "`encoder.albert_layer_groups.0.albert_layers.0.activation`, 5.98e-06 against the 1.61e-06 allowed (its input "
    "green).", "",
    "  The zoo gives it, and is green. Smallest code: `AlbertConfig().hidden_act` on each side. Pinned by "
    "`test_paddlenlp_albert_config_defaults_as_transformers`.", "",
    "- **SpeechT5, the decoder's causal mask (`_make_causal_mask`)**: paddlenlp's calls `masked_fill(mask, "
    "mask_cond < (mask_cond + 1).reshape(...), 0)` and drops what it returns (its `masked_fill` is `paddle.where`, "
    "not in place). The mask stays float32's lowest value everywhere, so each decoder position attends to every "
    "position alike, later ones included. Transformers' is causal.", "",
    "  Shown by any input on the zoo's tiny config (`python -m tools.zoo.families --only speecht5`, SpeechT5Model "
    "with no pre- or post-nets, given hidden states): compare_forward red at "
    "`decoder.wrapped_decoder.layers.0.self_attn.out_proj`, 0.0267 against the 1.92e-07 allowed, the encoder "
    "green.", "",
    "  Smallest code: `_make_causal_mask((1, 4), paddle.float32)[0, 0]` is -3.4e+38 in every place, its lower "
    "triangle included. Pinned by `test_paddlenlp_speecht5_causal_mask_as_transformers`.", "",
    "- **BLIP-2, `Blip2Model.forward`**: it takes `logits = outputs[0]` of its language model's output, which with "
    "`return_dict=False` (paddlenlp's default) is the logits tensor itself: `[0]` is the first sample's, [seq, vocab] "
    "where transformers returns [batch, seq, vocab].", "",
    "  Shown by any batch of two or more on the zoo's tiny config: its "
    "first output [16, 100] against torch's [2, 16, 100]; the zoo calls it with `return_dict=True`. Smallest code: "
    "`pd(pixel_values=pixels, input_ids=ids)[0].shape`. Pinned by "
    "`test_paddlenlp_blip_2_returns_every_samples_logits_on_its_default_return_dict`.", "",
    "- **BLIP-2, the language model's `lm_head` (OPTLMHead)**: transformers ties its OPTForCausalLM's `lm_head.weight` "
    "to `embed_tokens.weight` (the text config's `tie_word_embeddings`, True): one weight, trained by both. Paddlenlp's "
    "OPTLMHead creates a `decoder_weight` of its own (its OPTForCausalLM has no `get_output_embeddings` to tie by): "
    "two weights trained apart.", "",
    "  Shown by compare_backward on the zoo's tiny config (`python -m tools.zoo.families "
    "--only blip_2`): the forward green, `grad language_model.lm_head.weight` red, 0.0218 against the 9.08e-08 "
    "allowed (torch's is the sum of both uses). After step 1 it is `embed_tokens.weight`, 1.62e-04 against 5.89e-07; "
    "with the two tied by hand, the 3 steps are green.", "",
    "  Smallest code: `lm = pd.language_model; "
    "print(lm.lm_head.decoder_weight is lm.opt.embeddings.word_embeddings.weight)` prints False. Pinned by "
    "`test_paddlenlp_blip_2_ties_its_lm_head_to_the_word_embeddings_as_transformers`.", "",
    "- **RoBERTa, `embeddings.position_embeddings` (RobertaEmbeddings)**: transformers builds it with "
    "`padding_idx=pad_token_id`, paddlenlp with no `padding_idx`. Every pad token reads the pad row (position id "
    "`pad_token_id`), so on a padded batch paddlenlp trains that row and transformers does not.", "",
    "  Shown on a tiny RobertaModel (one layer, hidden 32), ids `[[0, 5, 6, 7, 2], [0, 5, 2, 1, 1]]` with their "
    "attention mask: the pad row's gradient is 140 at most, where transformers' is 0. Smallest code: "
    "`pd.embeddings.position_embeddings._padding_idx` is None. Pinned by "
    "`test_paddlenlp_roberta_keeps_the_position_pad_row_untrained_as_transformers`.", "",
    "- **T5, `encoder.block.0.layer.0.SelfAttention` (T5Attention)**: paddlenlp's `compute_bias` calls "
    "`_relative_position_bucket` without `max_distance`, so it is always 128. Transformers passes the config's "
    "`relative_attention_max_distance`. A config that gives another value differs in the first self-attention.", "",
    "  Shown with `relative_attention_max_distance=32` and 32 buckets, on 64 positions: 2970 of the 4096 buckets "
    "differ. Relative position 40 falls in bucket 28 in paddlenlp, 31 in transformers. Smallest code: "
    "`compute_bias(64, 64)` with each bucket's bias set to its index. Pinned by "
    "`test_paddlenlp_t5_reads_relative_attention_max_distance_as_transformers`.", "",
    "- **ELECTRA, `classifier` (ElectraClassificationHead)**: transformers' head applies gelu whatever the config "
    "says. Paddlenlp's applies `get_activation(config.hidden_act)`. With `hidden_act=\"relu\"` the model "
    "differs first at `classifier`.", "",
    "  Smallest code: `pd.classifier.act(paddle.to_tensor([-1.0]))` is 0 in paddlenlp, gelu's -0.159 in "
    "transformers. Pinned by `test_paddlenlp_electra_classification_head_applies_gelu_as_transformers`.", "",
    "- **BART, `BartForConditionalGeneration`'s LM head**: transformers ties `lm_head.weight` to `model.shared.weight` "
    "(`tie_word_embeddings`, True by default): one weight, trained by both. Paddlenlp creates an `lm_head_weight` "
    "of its own: two weights trained apart.", "",
    "  Smallest code: `pd.lm_head_weight is pd.bart.shared.weight` prints False. Pinned by "
    "`test_paddlenlp_bart_ties_its_lm_head_to_the_shared_embedding_as_transformers`.", "",
    "- **Falcon, transformers' own eager attention (FalconAttention) with ALiBi**: a difference of transformers "
    "4.45.2 itself, not of the port. FalconModel folds ALiBi into the causal mask it builds (`_update_causal_mask`: "
    "`alibi / sqrt(head_dim)`), and the eager FalconAttention adds ALiBi to the scores again before scaling them "
    "(`(attention_scores + alibi) * inv_norm_factor + attention_mask`). Its sdpa attention reads the mask alone: "
    "ALiBi once, as paddlenlp's rw does.", "",
    "  Shown on the zoo's tiny rw config (`alibi=True`), one model's weights loaded into both: the eager and sdpa "
    f"models' `last_hidden_state` differ by {FALCON_EAGER_SDPA}. With eager attention the correct rw port is red in "
    "its first attention, so the zoo builds transformers' side of the pair with sdpa (`ATTENTION` in "
    "tools/zoo/family_settings.py) and judges it green. Pinned by "
    "`test_transformers_falcon_eager_adds_alibi_once_as_its_sdpa`.", ""]


TORCHVISION_CPU = [
    "## torchvision beside CPU torch", "",
    "PyPI's torchvision wheel is built for CUDA torch. Beside the CPU torch of requirements.txt its import stops at "
    "`operator torchvision::nms does not exist` (its compiled detection ops did not load). The classification "
    "models need none of them.", "",
    "`tools/zoo/torchvision_cpu.py`'s `import_torchvision()` imports it with the registrations of those missing ops "
    "skipped, and puts torch's registration functions back at once. In your own script, copy its dozen lines, or "
    "install torchvision's CPU build from the PyTorch index where you can reach it.", "",
    "- Two pairs do not run. paddle.vision's googlenet is the original network without BatchNorm (torchvision's "
    "has one in every conv), and squeezenet1_1's first conv differs in shape (`portcheck.convert` says so).",
    "- paddle.vision's alexnet and inception_v3 build their Dropout in `downscale_in_infer` mode (x (1 - p) in "
    "eval). The correct port sets `upscale_in_train`, and the plant that leaves it is red at that Dropout.",
    "- Step 4 trains with every Dropout module in eval mode on both sides, as docs/own_model.md's Step 4 asks "
    "(each framework draws its own masks).",
    "- BatchNorm stays in train mode, its batch statistics over 8 values per channel in the last stage at 64 x 64. "
    "There the gradients are also allowed 4 x torch's own run from weights moved one ulp "
    "(`portcheck.gradients.backward.batch_statistics`).",
    "- An activation torch's forward applies outside any module is judged where paddle.vision holds it. "
    "densenet121's features.norm5 is judged through the F.relu of `DenseNet.forward`, which paddle.vision's "
    "`BatchNorm(act='relu')` computes.",
    "- inception_v3's BasicConv2d calls F.relu on its bn's output, where paddle.vision's ConvNormActivation runs a "
    "ReLU module. So the two bn outputs are judged as they are (`portcheck.mapping.pairing`).", ""]




# What the page is for, the shortest run and what it prints (one case's run: tests/test_docs_blocks.py runs it)
HEAD = [
    "The zoo judges real torch / Paddle pairs, each as its correct port and with bugs planted, to show that a correct "
    "port is green and a bug red where it is planted. Its cases are schedulers, optimizers, losses, metrics, loaders, "
    "vision models and trainings; its families, every architecture paddlenlp and transformers both ship, the models "
    "transformers keeps as deprecated included (NeZha, ErnieM; paddlenlp's rw is transformers' Falcon).", "",
    "```bash", "python -m tools.zoo.run --only StepLR", "```", "",
    "<!-- block: printed by the block above -->", "```text",
    "          ok  StepLR: (correct port); expected green; lr pair (exact): green 0.636; forward, every module "
    "(K=16): green ...",
    "          ok  StepLR: step_size off by one; expected red at step 4, lr_3 / lr after step 4; lr pair (exact): "
    "RED 4.05e+16 at lr_3: ...", "...", "2 verdicts, 0 differ from the table's (0 known), ... s", "```", "",
    "## Run it", "",
    "One family runs as `python -m tools.zoo.families --only bert`: it prints the family's verdict and what the "
    "library said, where. "
    f"The whole zoo is `{recorded.CASES_COMMAND}` for the cases, `{recorded.FAMILIES_COMMAND}` for the families and "
    f"`{recorded.GENERATION_COMMAND}` for their generation. Each writes this page and [the benchmark page]"
    f"(bench/zoo.md) again; `{recorded.PAGES_COMMAND}` writes both from the recorded runs, running nothing. "
    f"`{recorded.VISION_COMMAND}` judges timm's models against PaddleClas's ports (its optional extra, "
    "[below](#the-vision-pairs-by-verdict)) and writes its table here.", ""]

# How to read a row of the run and of the families' table
READ_A_LINE = [
    "## How to read a row", "",
    "Each line of the cases' run is one correct port or one plant: what the library said, where, and whether that is "
    "the table's verdict. `ok` is the table's verdict; `false red` a correct port red, `false green` a plant green, "
    "`wrong place` red but not where the bug is. The run exits 1 when a verdict differs from the table's and is not a "
    "known mismatch.", "",
    "A family's row says one of these:", ""]

def load(folder: Path) -> dict:
    """Both recorded runs (a missing families' run: none yet), their figures as numbers (numpy's were written as
    text)."""
    from portcheck.core.errors import require
    cases_run = json.loads(require(folder / recorded.CASES_JSON, recorded.CASES_COMMAND).read_text(encoding="utf-8"))
    number = lambda v: float(v) if isinstance(v, str) else v
    for row in cases_run["rules"]:
        row.update({k: number(row[k]) for k in ("clean_all", "clean", "planted", "margin")})
    for r in cases_run["results"]:
        for j in r["judgements"]:
            j["used"] = number(j["used"])
    held = folder / recorded.FAMILIES_JSON
    family_run = json.loads(held.read_text(encoding="utf-8")) if held.exists() else {"seconds": 0, "results": []}
    return {"cases": cases_run, "families": family_run, "folder": folder}


def case_groups(results: list) -> list:
    """The cases' verdicts by group: [group, cases, correct ports, plants], each a count per status."""
    groups = {}
    for r in results:
        g = groups.setdefault(r["group"], [set(), Counter(), Counter()])
        g[0].add(r["case"])
        g[1 if r["plant"] is None else 2][r["status"]] += 1
    word = lambda status, plant: {"ok": "red where planted" if plant else "green",
                                  "ok: red by design": "red by design, said so"}.get(status, status)
    said_as = lambda counts, plant: ", ".join(f"{n} {word(s, plant)}" for s, n in counts.most_common())
    return [[group, len(names), said_as(ports, False), said_as(plants, True)]
            for group, (names, ports, plants) in groups.items()]


def family_table(results: list) -> list:
    """The families by verdict: [family, classes, verdict, why], in the verdicts' order, then by name."""
    rows = []
    for r in sorted(results, key=lambda r: (tables.place(tables.kind(r["outcome"])), r["family"])):
        why = r["reason"].partition(": ")[2] if r.get("reason") else "" if r["outcome"].startswith("green") else \
            r.get("said", "")[:300]
        given = [f"`layouts={r['layouts']}` given" if r.get("layouts") else "",
                 f"`keep={r['keep']}` given" if r.get("keep") else ""]
        rows.append([r["family"], r.get("classes") or "", tables.kind(r["outcome"]),
                     "; ".join(filter(None, [why, *given]))])
    return rows



def guide(held: dict) -> str:
    """docs/zoo.md: the user's page."""
    results, fams = held["cases"]["results"], held["families"]["results"]
    differ = [r for r in results if r["got"] != "ok"]
    known = [r for r in differ if r["status"].startswith("known")]
    kinds = Counter(tables.kind(r["outcome"]) for r in fams)
    lines = ["English | [中文](zoo_cn.md)", "", "# The zoo of real pairs", "", *HEAD,
             f"Its last whole run took {held['cases']['seconds']} s for the cases and {held['families']['seconds']} s "
             "for the families; the figures per rule, per case and per family, and how they were taken, are on [the "
             "benchmark page](bench/zoo.md).", "",
             *READ_A_LINE, *[f"- **{k}**: {v}" for k, v in tables.READING.items()], "",
             "## The cases by verdict", "",
             f"{len(results)} verdicts of {len({r['case'] for r in results})} cases; "
             + (f"{len(differ)} differ from the table's ({len(known)} known, each with its issue: [Mismatches]"
                "(bench/zoo.md#mismatches))." if differ else "none differs from the table's."), "",
             *tables.table(["group", "cases", "correct ports", "plants"], case_groups(results)), "",
             "## The families by verdict", "",
             f"{len(fams)} families: " + "; ".join(f"{n} {k}" for k, n in sorted(
                 kinds.items(), key=lambda kn: tables.place(kn[0]))) + ".", "",
             *tables.table(["family", "paddlenlp / transformers", "verdict", "why"], family_table(fams)), "",
             *generating_page.section(generating_page.load(held["folder"])),
             *FINDINGS, *other_kernels(held["folder"]), *TORCHVISION_CPU,
             *paconvert.section(paconvert.load(held["folder"])),
             *vision_page.section(vision_page.load(held["folder"])),
             *formers_page.section(formers_page.load(held["folder"])), *formers_page.FINDINGS,
             *formers_generating_page.section(formers_generating_page.load(held["folder"]))]
    return "\n".join(lines).rstrip("\n") + "\n"


def bench(held: dict) -> str:
    """docs/bench/zoo.md: the figures of the last whole run, and how they were taken."""
    run, fam = held["cases"], held["families"]
    results, rules = run["results"], run["rules"]
    header = " ".join([bench_doc.header(run.get(bench_doc.RUN), recorded.CASES_COMMAND),
                       bench_doc.header(fam.get(bench_doc.RUN) or [], recorded.FAMILIES_COMMAND)])
    lines = ["# The zoo: the figures of its last whole run", "", header, "",
             "What the zoo is, how to run it and how to read a verdict: [zoo.md](../zoo.md). This page is written with "
             f"it by `{recorded.CASES_COMMAND}` and `{recorded.FAMILIES_COMMAND}`; `{recorded.PAGES_COMMAND}` writes "
             f"both again from {recorded.CASES_JSON} and {recorded.FAMILIES_JSON} beside this page, running nothing.",
             "",
             "## The cases", "",
             "Every case of `tools/zoo/cases.py`, its correct port and each planted bug, judged through portcheck's "
             f"public API: {len(results)} verdicts in {run['seconds']} s, one case after another.", "",
             "Ratios: a measured rule's max diff / its allowance (over 1: red); an exact rule's largest difference "
             "in units of the last place of the torch value (0: equal); training curves: the rows red. Clean, all: "
             "the largest ratio of any correct port; clean: leaving out the known false reds listed below and the "
             "reds by design; planted: the smallest of a plant the rule caught; margin: planted / clean.", "",
             "## Per rule", "",
             *tables.table(["rule", "correct ports", "false reds", "clean, all", "clean (largest)",
                            "planted (smallest)", "margin"],
                           [[r["rule"], r["cases"], r["false_red"], figure(r["clean_all"]),
                             f"{figure(r['clean'])} ({r['clean_case'] or '-'})",
                             f"{figure(r['planted'])} ({r['planted_case'] or '-'})", figure(r["margin"])]
                            for r in rules])]
    bad = [r for r in results if r["got"] != "ok"]
    lines += ["", "## Mismatches", "", f"{len(bad)} of the {len(results)} verdicts differ from the table's.", "",
              *tables.table(["case", "plant", "expected", "got", "known", "what the library said"],
                            [[r["case"], r["plant"] or "(correct port)", r["expected"], r["status"],
                              f"issue {r['known']['issue']}: {r['known']['why']}" if r["known"] else "", said(r)]
                             for r in bad])]
    by_name = cases.by_name()
    plant = lambda r: next((p for p in by_name[r["case"]]["plants"] if p["name"] == r["plant"]), None)
    lines += ["", "## Every case", "",
              *tables.table(["case", "group", "steps", "plant", "cause", "verdict", "what the library said"],
                            [[r["case"], r["group"], ", ".join(map(str, r["steps"])), r["plant"] or "(correct port)",
                              plant(r)["cause"] if plant(r) else "", r["status"], said(r)] for r in results])]
    skipped = [c for c in cases.CASES if c.get("skip")]
    if skipped:
        lines += ["", "## Not run", ""] + [f"- {c['name']}: {c['skip']}" for c in skipped]
    if fam["results"]:
        lines += ["", *family_section(fam["results"], fam["seconds"])]
    return "\n".join(lines).rstrip("\n") + "\n"


def family_section(results: list, seconds: float) -> list:
    found = len(families.families())
    judged = f"all {found} families" if len(results) == found else f"{len(results)} of the {found} families, the " \
        "rest not run yet"
    return ["## Every family both libraries ship", "",
            f"Run by `{recorded.FAMILIES_COMMAND}` ({judged}, {round(seconds)} s, one family after another, each in a "
            "process of its own): paddlenlp 2.8.1's base model classes with a transformers 4.45.2 class of the same "
            "name. Each family is:", "",
            "- built from one tiny random config (`tools.zoo.families.TINY`). A family's own sizes, and a setting "
            "whose default differs on the two sides given alike as the released checkpoint has it, are in "
            "`OVERRIDES`. Its own inputs are in `INPUTS` where its forward takes more than token ids (images, audio, "
            "two towers). A parameter its library sets to one constant that hides a part from every check is drawn at "
            "random (`DRAWN`);",
            "- converted with no map (`convert(inputs=)`; a family's `LAYOUTS` declared, a refusal's own keep= "
            "pasted, as the row says);",
            "- judged by compare_forward cumulative and isolated (the outputs both return: `OUTPUTS`), "
            "compare_backward over 3 steps of SGD, and up to three plants of its own parts (forward).", "",
            "A family red on its correct port for a difference of paddlenlp's port, or raising in its own library, "
            "says it (`REASONS`; [What the zoo finds in the ports](../zoo.md#what-the-zoo-finds-in-the-ports)). The "
            "suite's tests/test_zoo_families.py runs every family's fast part (`--fast`: forward cumulative, the first "
            "plant) and holds each row to it.", "",
            *tables.table(["family", "seconds", "paddlenlp / transformers", "outcome", "what the library said"],
                          [[c[0], r.get("seconds", ""), *c[1:]] for r in results for c in [families.cells(r)]])]


def render(folder: Path = None) -> tuple:
    """(docs/zoo.md, docs/bench/zoo.md) from the runs recorded in `folder` (docs/bench unless given)."""
    held = load(folder or recorded.BENCH.parent)
    return guide(held), bench(held)


def write(guide_path: Path = None, bench_path: Path = None) -> None:
    """Both pages (docs/zoo.md, docs/bench/zoo.md unless given), from the runs recorded beside the benchmark page."""
    guide_path, bench_path = guide_path or recorded.GUIDE, bench_path or recorded.BENCH
    texts = render(Path(bench_path).parent)
    for path, text in zip((guide_path, bench_path), texts):
        bench_doc.write(path, text)
