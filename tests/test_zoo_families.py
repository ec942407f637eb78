"""The zoo of every architecture both libraries ship, its fast part: each family of docs/zoo_families.json run as
`python -m tools.zoo.families --fast` runs it (tools.zoo.families.judge_one, fast: convert with no map, compare_forward
cumulative, the first of its plants), in this process, its verdict asserted to be its row's. A row that says green
is green here with its plant red; a row that says red on the correct port is red here at the same module; a refusal
or a family that cannot be built says here the one line its row says. So the table and the suite agree: a change of
either library, or of portcheck, that moves a family's verdict is red here until the table is run again
(`python -m tools.zoo.families --only FAMILY --write`).

What the zoo finds in the ports (docs/zoo.md) is pinned below by strict xfails: each passes the day that library
changes, and its entry must go."""
import functools
import gc
import importlib.util
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("paddle")
pytest.importorskip("paddlenlp")
pytest.importorskip("transformers")

from bert_sst2.paths import ROOT  # noqa: E402 (after the skips)
from tools.zoo import families  # noqa: E402

ROWS = {r["family"]: r for r in json.loads((ROOT / "docs" / "zoo_families.json").read_text())["results"]}


@functools.lru_cache(maxsize=None)  # the module's: a finding below reads its family's run, not a second one
def fast(family: str) -> dict:
    try:
        return families.judge_one(family, dict(families.families())[family], fast=True)
    finally:
        gc.collect()  # the family's two models, held in cycles: ~51 families in one process


@pytest.mark.parametrize("family", list(ROWS))
def test_the_familys_fast_run_says_what_its_row_says(family):
    row = ROWS[family]
    if row["outcome"] == "not judged":
        pytest.skip(f"{family}: not judged in the zoo's whole run ({row['said']})")
    got = fast(family)
    if "forward" not in row:  # refused, raises in its own library, not built: its one line
        assert (got["outcome"], got["said"]) == (row["outcome"], row["said"])
        return
    assert "forward" in got, f"{got['outcome']}: {got.get('said')}"
    # a row red only where isolate=True looked is green cumulative
    assert got["forward"] == (row["forward"] or row["forward_said"].startswith("isolated:")), got["forward_said"]
    assert got["forward_said"] == ("" if got["forward"] else row["forward_said"])
    assert bool(got["plants"]) == bool(row["plants"])
    if row["plants"]:  # the same plant, red as its row says; where the row names its module, named here too
        first, held = got["plants"][0], row["plants"][0]
        assert (first["plant"], first["red"]) == (held["plant"], held["red"]), first["at"]
        assert first.get("named") or not held.get("named"), (first["at"], held["at"])
    if row["outcome"].startswith("green, every plant red"):
        assert got["forward"] and got["plants"][0]["red"], got


def test_every_family_both_libraries_ship_has_its_row():
    """The table holds every family the tool finds, and its header says how many it judged and the whole run's
    time (the tool writes both)."""
    found = [f for f, _ in families.families()]
    assert sorted(ROWS) == sorted(found), sorted(set(found) ^ set(ROWS))
    text = (ROOT / "docs" / "zoo.md").read_text(encoding="utf-8")
    seconds = json.loads((ROOT / "docs" / "zoo_families.json").read_text())["seconds"]
    assert f"all {len(found)} families, {seconds} s on this machine" in text


def test_layoutlmv2_says_it_needs_detectron2():
    """transformers' LayoutLMv2Model builds its visual backbone with detectron2, which is not installable here: the
    family's one line names it, not the library's ImportError."""
    if importlib.util.find_spec("detectron2") is not None:
        pytest.skip("detectron2 is installed: layoutlmv2 is built")
    got = fast("layoutlmv2")
    assert got["outcome"] == "not built" and got["said"].startswith("needs detectron2 (transformers' LayoutLMv2Model")


FINDING = "a difference of paddlenlp 2.8.1's port (docs/zoo.md, What the zoo finds in the ports): "


@pytest.mark.xfail(strict=True, reason=FINDING + "BLIP's vision tower applies post_layernorm to its pooled output "
                   "once, transformers' twice")
def test_paddlenlp_blip_pools_as_transformers():
    """transformers' BlipVisionModel normalizes the [CLS] row by post_layernorm, then again; paddlenlp's once: the
    family's run is red at vision_model:pooler_output, its last_hidden_state green."""
    assert fast("blip")["forward"], fast("blip")["forward_said"]


@pytest.mark.xfail(strict=True, reason=FINDING + "BlipVisionConfig's layer_norm_eps defaults to 1e-6, transformers' "
                   "to 1e-5")
def test_paddlenlp_blip_vision_config_defaults_as_transformers():
    from paddlenlp.transformers.blip.configuration import BlipVisionConfig as PaddleConfig
    from transformers import BlipVisionConfig
    assert PaddleConfig().layer_norm_eps == BlipVisionConfig().layer_norm_eps


@pytest.mark.xfail(strict=True, reason=FINDING + "ProphetNet's predicting streams read their relative-position "
                   "embeddings in another order than transformers'")
def test_paddlenlp_prophetnet_predicting_streams_as_transformers():
    """The decoder's ngram self-attention: its main stream agrees, its predicting streams (out_proj's second call)
    do not; the family's run is red at decoder.layers.0.self_attn[0] with its input within."""
    assert fast("prophetnet")["forward"], fast("prophetnet")["forward_said"]


@pytest.mark.xfail(strict=True, raises=AttributeError, reason=FINDING + "FunnelModel raises on its own default "
                   "return_dict=False")
def test_paddlenlp_funnel_runs_on_its_default_return_dict():
    """paddlenlp's FunnelModel.forward reads encoder_outputs.last_hidden_state, a tuple's when return_dict is False
    (its default): AttributeError. The zoo gives it return_dict=True (tools.zoo.families.INPUTS)."""
    import paddle
    pt, pd, x = families.build("funnel", "funnel")
    pd(input_ids=paddle.to_tensor(x["input_ids"]))


@pytest.mark.xfail(strict=True, reason=FINDING + "CLAP's audio batch_norm keeps 0.1 of its running statistics a step, "
                   "transformers' 0.9")
def test_paddlenlp_clap_batch_norm_momentum_as_transformers():
    """paddlenlp's ClapAudioEncoder builds BatchNorm2D(num_mel_bins, momentum=0.1): Paddle's momentum is the share
    of the running statistics kept, torch's (transformers' default 0.1) the share of the batch's taken."""
    from paddlenlp.transformers.clap.modeling import ClapAudioEncoder
    from paddlenlp.transformers.clap.configuration import ClapAudioConfig
    encoder = ClapAudioEncoder(ClapAudioConfig(**families.OVERRIDES["clap"]["audio_config"]))
    assert encoder.batch_norm._momentum == 0.9


@pytest.mark.xfail(strict=True, reason=FINDING + "AlbertConfig's hidden_act defaults to gelu, transformers' to "
                   "gelu_new")
def test_paddlenlp_albert_config_defaults_as_transformers():
    from paddlenlp.transformers import AlbertConfig as PaddleConfig
    from transformers import AlbertConfig
    assert PaddleConfig().hidden_act == AlbertConfig().hidden_act


@pytest.mark.xfail(strict=True, reason=FINDING + "SpeechT5's decoder mask hides every position (masked_fill's result "
                   "dropped), transformers' is causal")
def test_paddlenlp_speecht5_causal_mask_as_transformers():
    import paddle
    from paddlenlp.transformers.speecht5.modeling import _make_causal_mask
    mask = _make_causal_mask((1, 4), paddle.float32)[0, 0].numpy()
    assert (mask[mask.shape[0] - 1] == 0).all()  # the last position sees every one


@functools.lru_cache(maxsize=None)
def paddle_blip_2():
    """paddlenlp's Blip2Model of the zoo's tiny config, alone, and its inputs."""
    cls = families.classes("blip_2", "blip_2")[0]
    settings = {**families.TINY, **families.OVERRIDES["blip_2"]}
    return cls(cls.config_class(**settings)).eval(), families.given("blip_2", settings)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=FINDING + "Blip2Model's logits on its default "
                   "return_dict=False are the first sample's alone")
def test_paddlenlp_blip_2_returns_every_samples_logits_on_its_default_return_dict():
    """paddlenlp's Blip2Model takes `logits = outputs[0]` of its OPT's output, which on return_dict=False (its
    default) is the logits tensor itself: [0] is the first sample's [seq, vocab]. The zoo gives return_dict=True."""
    import paddle
    pd, x = paddle_blip_2()
    logits = pd(pixel_values=paddle.to_tensor(x["pixel_values"]), input_ids=paddle.to_tensor(x["input_ids"]))[0]
    assert list(logits.shape) == [2, 16, 100]  # 4 query tokens and 12 ids, a batch of 2


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=FINDING + "Blip2Model's OPT holds its lm_head apart "
                   "from its word embeddings, transformers' ties them")
def test_paddlenlp_blip_2_ties_its_lm_head_to_the_word_embeddings_as_transformers():
    """transformers' Blip2Model ties its OPTForCausalLM's lm_head.weight to embed_tokens.weight (text_config's
    tie_word_embeddings, True): one weight, trained by both; paddlenlp's OPTLMHead creates decoder_weight of its own
    (OPTForCausalLM has no get_output_embeddings to tie by): two weights trained apart."""
    lm = paddle_blip_2()[0].language_model
    assert lm.lm_head.decoder_weight is lm.opt.embeddings.word_embeddings.weight
