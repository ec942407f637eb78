"""The zoo's families with a generation head: each family's causal or conditional LM on both sides, built from the
families' tiny config (tools/zoo/family_settings.py) with its cache on, weights by portcheck.convert, and the batch
every family decodes: two prompts, the first left-padded. Read by tools/zoo/families.py's generation column and by
the suite's generation tests (tests/test_generate_families.py)."""
import importlib

import numpy as np

# family (paddlenlp's directory): (paddlenlp's class, transformers' directory, transformers' class)
LM = {"gpt": ("GPTForCausalLM", "gpt2", "GPT2LMHeadModel"),
      "opt": ("OPTForCausalLM", "opt", "OPTForCausalLM"),
      "bloom": ("BloomForCausalLM", "bloom", "BloomForCausalLM"),
      "codegen": ("CodeGenForCausalLM", "codegen", "CodeGenForCausalLM"),
      "gptj": ("GPTJForCausalLM", "gptj", "GPTJForCausalLM"),
      "llama": ("LlamaForCausalLM", "llama", "LlamaForCausalLM"),
      "mixtral": ("MixtralForCausalLM", "mixtral", "MixtralForCausalLM"),
      "rw": ("RWForCausalLM", "falcon", "FalconForCausalLM"),
      "ctrl": ("CTRLLMHeadModel", "ctrl", "CTRLLMHeadModel"),
      "bart": ("BartForConditionalGeneration", "bart", "BartForConditionalGeneration"),
      "mbart": ("MBartForConditionalGeneration", "mbart", "MBartForConditionalGeneration"),
      "pegasus": ("PegasusForConditionalGeneration", "pegasus", "PegasusForConditionalGeneration"),
      "blenderbot": ("BlenderbotForConditionalGeneration", "blenderbot", "BlenderbotForConditionalGeneration"),
      "blenderbot_small": ("BlenderbotSmallForConditionalGeneration", "blenderbot_small",
                           "BlenderbotSmallForConditionalGeneration"),
      "t5": ("T5ForConditionalGeneration", "t5", "T5ForConditionalGeneration"),
      "mt5": ("MT5ForConditionalGeneration", "mt5", "MT5ForConditionalGeneration")}
# the LM head's layout where paddlenlp keeps it as a weight of its own [hidden, vocab] or [vocab, hidden]
HEADS = {"llama": {"LlamaLMHead": "transpose"}, "mixtral": {"MixtralLMHead": "transpose"},
         "rw": {"CausalLMHead": "same"}, "ctrl": {"TransposedLinear": "same"}}
# settings a family's LM is built with on both sides: mT5's head tied to its word embeddings (paddlenlp's default
# ties them, transformers' does not: given, the two build one model)
LM_SETTINGS = {"mt5": dict(tie_word_embeddings=True)}

# two prompts of 6 tokens, the first left-padded by 2 (ids past pad, bos and eos)
PROMPT = np.random.RandomState(0).randint(3, 100, (2, 6)).astype("int64")
PROMPT[0, :2] = 0
MASK = (np.arange(6)[None] >= np.array([[2], [0]])).astype("int64")


# paddlenlp's CodeGen and GPT-J keep their causal mask in float32 and hand it to paddle.where as its condition: on
# Paddle 3 their forward raises on any input (tools/zoo/family_settings.py REASONS). A port that runs holds it boolean:
# each attention's mask (CodeGen's an attribute, GPT-J's a buffer) made so, as its user would
BOOLEAN_MASK = {"codegen": "causal_mask", "gptj": "bias"}


def runs_on_paddle_3(family: str, pd):
    """The Paddle model with its float causal mask made boolean (BOOLEAN_MASK), where its family needs it."""
    name = BOOLEAN_MASK.get(family)
    for layer in pd.sublayers() if name else ():
        held = layer._buffers if name in layer._buffers else layer.__dict__ if name in layer.__dict__ else None
        if held is not None and held[name] is not None:
            held[name] = held[name].astype("bool")
    return pd


def lm_classes(family: str) -> tuple:
    """(paddlenlp's LM class, transformers')."""
    pd_name, hf_dir, hf_name = LM[family]
    pd_cls = getattr(importlib.import_module(f"paddlenlp.transformers.{family}.modeling"), pd_name)
    hf_cls = getattr(importlib.import_module(f"transformers.models.{hf_dir}.modeling_{hf_dir}"), hf_name)
    return pd_cls, hf_cls


def build(family: str, **settings) -> tuple:
    """(torch model, Paddle model), eval mode, the family's tiny config with its cache on (settings: more of it),
    Paddle's weights converted from torch's with no map (a refusal whose fix is a keep= pasted, as a user pastes
    it; traced on the family's inputs: an encoder-decoder's decoder ids pair its decoder's attentions), its causal
    mask boolean where paddlenlp's is not (runs_on_paddle_3)."""
    import re

    import paddle
    import torch

    from portcheck import convert
    from portcheck.core.errors import PipelineError
    from tools.zoo.families import given, no_drops, settings_of
    from tools.zoo.family_settings import ATTENTION, LAYOUTS, SPELLED
    pd_cls, hf_cls = lm_classes(family)
    config = {**settings_of(family), "use_cache": True, **LM_SETTINGS.get(family, {}), **settings}
    torch.manual_seed(0)
    paddle.seed(0)
    hf_own, pd_own = SPELLED.get(family, ({}, {}))
    hf_config = no_drops(hf_cls.config_class(**config, **hf_own))
    hf_config._attn_implementation = ATTENTION.get(family, "eager")
    pt = hf_cls(hf_config).eval()
    pd = pd_cls(no_drops(pd_cls.config_class(**config, **pd_own)))
    pd.eval()
    layouts = {**LAYOUTS.get(family, {}), **HEADS.get(family, {})} or None
    inputs = given(family, settings_of(family))  # the family's own (an encoder-decoder's decoder ids too)
    try:
        state = convert(pt, pd, inputs=inputs, layouts=layouts)
    except PipelineError as e:
        keep = re.findall(r"pass keep=\['([^']+)'\]", str(e))
        if not keep:
            raise
        state = convert(pt, pd, inputs=inputs, layouts=layouts, keep=keep)
    pd.set_state_dict(state)
    return pt, runs_on_paddle_3(family, pd)
