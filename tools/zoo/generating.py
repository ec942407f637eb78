"""The zoo's generation column: every family both libraries ship with a generation head, its causal or conditional
LM on both sides built from the families' tiny config (tools/zoo/family_settings.py) with its cache on, weights by
portcheck.convert, decoded 8 steps on a batch of two prompts (the first left-padded) by each library's own loop
(compare_generate's default step); the correct pair judged, and a cache plant (one layer's keys swapped between the
batch's rows after the prompt) expected red at step 1, at that layer.

    python -m tools.zoo.generating                  # every family; writes docs/bench/zoo_generation.json, both pages
    python -m tools.zoo.generating --only bart gpt  # some families; writes nothing
    python -m tools.zoo.generating --only bart --write   # writes the rows of those alone

Each family runs in a process of its own, at most --timeout seconds. The suite's generation tests build their pairs
here (tests/test_generate_families.py)."""
import argparse
import importlib
import json
import sys
import time

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch, Paddle)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

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
      "mt5": ("MT5ForConditionalGeneration", "mt5", "MT5ForConditionalGeneration"),
      "prophetnet": ("ProphetNetForConditionalGeneration", "prophetnet", "ProphetNetForConditionalGeneration"),
      "roberta": ("RobertaForCausalLM", "roberta", "RobertaForCausalLM"),
      "roformer": ("RoFormerForCausalLM", "roformer", "RoFormerForCausalLM"),
      "xlnet": ("XLNetLMHeadModel", "xlnet", "XLNetLMHeadModel"),
      "reformer": ("ReformerModelWithLMHead", "reformer", "ReformerModelWithLMHead")}
STEPS, PLANTED_LAYER = 8, 1
# the LM head's layout where paddlenlp keeps it as a weight of its own [hidden, vocab] or [vocab, hidden]
HEADS = {"llama": {"LlamaLMHead": "transpose"}, "mixtral": {"MixtralLMHead": "transpose"},
         "rw": {"CausalLMHead": "same"}}
# settings a family's LM is built with on both sides: mT5's head tied to its word embeddings (paddlenlp's default
# ties them, transformers' does not: given, the two build one model); Reformer's, RoBERTa's and RoFormer's causal
# LMs a decoder, as transformers asks (is_decoder=True: its causal mask and its cache)
LM_SETTINGS = {"mt5": dict(tie_word_embeddings=True), "reformer": dict(is_decoder=True),
               "roberta": dict(is_decoder=True), "roformer": dict(is_decoder=True)}
# Paddle tensors of a module paddlenlp's LM runs and never reads, which transformers' LM does not hold: kept at
# Paddle's own value (convert's keep=), its user's choice: RoFormerModel's pooler, whose output its causal LM drops
UNREAD = {"roformer": ["roformer.pooler.dense.weight", "roformer.pooler.dense.bias"]}

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
    import ast
    import re

    import torch

    from portcheck import convert
    from portcheck.core.errors import PipelineError
    from tools.zoo.families import given, no_drops, settings_of
    from tools.zoo.family_settings import ATTENTION, LAYOUTS, SPELLED
    hf_cls = lm_classes(family)[1]
    torch.manual_seed(0)
    hf_config = no_drops(hf_cls.config_class(**lm_config(family, settings), **SPELLED.get(family, ({}, {}))[0]))
    hf_config._attn_implementation = ATTENTION.get(family, "eager")
    pt = hf_cls(hf_config).eval()
    pd = paddle_lm(family, **settings)
    layouts = {**LAYOUTS.get(family, {}), **HEADS.get(family, {})} or None
    inputs = given(family, settings_of(family))  # the family's own (an encoder-decoder's decoder ids too)
    pasted = {"keep": UNREAD[family]} if family in UNREAD else {}
    for _ in range(3):  # each refusal whose fix is pasted as a user pastes it: keep=, or a name_map= of one entry
        try:
            state = convert(pt, pd, inputs=inputs, layouts=layouts, **pasted)
            break
        except PipelineError as e:
            keep = re.findall(r"pass keep=\['([^']+)'\]", str(e))
            named = re.search(r"name_map=(\{[^{}]*\}|\[.*\]) \[PC316\]", str(e))
            if keep and not set(keep) <= set(pasted.get("keep", ())):
                pasted["keep"] = [*pasted.get("keep", ()), *keep]
            elif named and "name_map" not in pasted:
                pasted["name_map"] = ast.literal_eval(named.group(1))
            else:
                raise
    pd.set_state_dict(state)
    return pt, runs_on_paddle_3(family, pd)


def lm_config(family: str, settings: dict) -> dict:
    """The family's tiny config with its cache on, both sides' (settings: more of it)."""
    from tools.zoo.families import settings_of
    return {**settings_of(family), "use_cache": True, **LM_SETTINGS.get(family, {}), **settings}


def paddle_lm(family: str, **settings):
    """The Paddle side of build before its conversion (its own random weights, eval mode): what a finding about
    paddlenlp's own calls alone needs, with no torch model built or converted."""
    import paddle

    from tools.zoo.families import no_drops
    from tools.zoo.family_settings import SPELLED
    pd_cls = lm_classes(family)[0]
    paddle.seed(0)
    pd = pd_cls(no_drops(pd_cls.config_class(**lm_config(family, settings), **SPELLED.get(family, ({}, {}))[1])))
    pd.eval()
    return pd


def keys_swapped_between_rows(layer: int):
    """Paddle's own step (feeding.OwnStep), its cache after the prompt handed on with one layer's keys (its first
    cached tensor) swapped between the batch's two rows: the cache plant, the next step reads another prompt's keys."""
    import paddle

    from portcheck.generation.feeding import OwnStep
    own = OwnStep()

    def first_rolled(value, done):
        if hasattr(value, "shape"):
            if done:
                return value
            done.append(True)
            return paddle.roll(value, 1, axis=0)
        items = [first_rolled(v, done) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)

    def step(model, input_ids, past_key_values, **kwargs):
        logits, past = own(model, input_ids, past_key_values, **kwargs)
        if past_key_values is None and hasattr(past, "key_cache"):  # a Cache object (paddleformers'): in place
            past.key_cache[layer] = paddle.roll(past.key_cache[layer], 1, axis=0)
        elif past_key_values is None and hasattr(past, "layers"):
            past.layers[layer].keys = paddle.roll(past.layers[layer].keys, 1, axis=0)
        elif past_key_values is None:
            past = type(past)(first_rolled(x, []) if i == layer else x for i, x in enumerate(past))
        return logits, past
    return step


def judge_one(family: str) -> dict:
    """The family's row: its LM classes, the correct pair's verdict over STEPS steps (what the report said where it
    is red), and the cache plant's (red at step 1, at PLANTED_LAYER's keys, or where it was first red)."""
    from portcheck.core.errors import first_line
    row = {"family": family}
    try:
        pd_cls, hf_cls = lm_classes(family)
        row["classes"] = f"{pd_cls.__name__} / {hf_cls.__name__}"
        pt, pd = build(family)
    except Exception as e:  # noqa: BLE001 - the family's result, said in one line
        return {**row, "outcome": "not built", "said": first_line(e, 300)}
    return judged(row, pt, pd)


def judged(row: dict, pt, pd) -> dict:
    """A built pair's row: the correct pair decoded STEPS steps by the library's own loop (what the report said
    where it is red), and the cache plant's verdict (red at step 1, at PLANTED_LAYER's keys, or where it was first
    red). PaddleFormers' column judges its pairs here too (tools/zoo/formers_generating.py)."""
    from portcheck import compare_generate
    from portcheck.core.errors import first_line
    kept = {}
    try:
        report = compare_generate(pt, pd, PROMPT, max_new_tokens=STEPS, attention_mask=MASK, kept=kept)
    except Exception as e:  # noqa: BLE001
        return {**row, "outcome": "raises", "said": first_line(e, 300)}
    notes = [n for n in report.notes if n.startswith(("arguments:", "positions:"))]
    row.update(notes=notes, left_out=sum(s.left_out for s in report.steps))
    if not report.passed:  # the first parting step says which: a step that raised, or one that parts
        first = report.steps[report.first_step - 1] if report.first_step else None
        raised = first is not None and bool(first.stopped)
        return {**row, "outcome": "raises in its own library" if raised else "red on the correct pair",
                "said": first.line() if raised else report.headline(),
                **({} if raised or first is None else {"figure": rows_apart(first, kept)})}
    try:
        planted = compare_generate(pt, pd, PROMPT, max_new_tokens=2, attention_mask=MASK, against_itself=False,
                                   step=(None, keys_swapped_between_rows(PLANTED_LAYER)))
    except Exception as e:  # noqa: BLE001
        return {**row, "outcome": "green, the plant raised", "said": first_line(e, 300)}
    red = planted.steps[planted.first_step - 1].first_red if planted.first_step else None
    where = f"step {planted.first_step}: {red.name.split(': ', 1)[1]}" if red is not None else "green"
    caught = planted.first_step == 1 and red is not None and red.name.startswith(f"step 1: layer {PLANTED_LAYER} ")
    return {**row, "outcome": "green, the cache plant red at its step and layer" if caught else
            "green, the cache plant red elsewhere" if red is not None else "green, the cache plant green",
            "plant": where}


def rows_apart(step, kept: dict) -> str:
    """The parting step's next-token logits, each batch row's largest difference against the rule's allowance: which
    rows part (the left-padded one alone, or every row)."""
    a, b = (np.asarray(kept[side].logits[step.step - 1]) for side in ("torch", "paddle"))
    padded = {int(r) for r in np.flatnonzero((MASK == 0).any(axis=1))}
    return f"step {step.step}'s logits, max diff " + ", ".join(
        f"row {r}{' (left-padded)' if r in padded else ''} {d:.2e}" for r, d in
        enumerate(np.abs(a.astype(np.float64) - b).reshape(len(a), -1).max(axis=1))) + \
        f" (allowed {step.logits.allowed:.2e})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--only", nargs="+", metavar="FAMILY", help="paddlenlp directory names; writes nothing")
    ap.add_argument("--write", action="store_true", help="with --only: write the rows of those families alone")
    ap.add_argument("--timeout", type=float, default=900, help="seconds one family may take (default 900)")
    ap.add_argument("--one", metavar="FAMILY", help=argparse.SUPPRESS)  # one family, in this process: its JSON line
    args = ap.parse_args()
    from portcheck.core.errors import PipelineError
    if args.one:
        print(json.dumps(judge_one(args.one)), flush=True)
        return
    unknown = sorted(set(args.only or ()) - set(LM))
    if unknown:
        raise PipelineError(f"--only {' '.join(unknown)}: no family with a generation head here; the families: "
                            f"{' '.join(LM)}")
    if args.write and not args.only:
        ap.error("--write goes with --only (a whole run writes its rows anyway)")
    from tools import bench_doc
    from tools.zoo import families, recorded
    run, start, results = recorded.facts("tools.zoo.generating", sys.argv), time.time(), []
    for family in args.only or LM:
        r = recorded.judged_alone("tools.zoo.generating", family, (), args.timeout, family=family)
        results.append(r)
        print(f"{family} ({r['seconds']} s): {r['outcome']}; {r.get('said') or r.get('plant', '')}", flush=True)
    print(f"{len(results)} families, {time.time() - start:.0f} s")
    if not args.only or args.write:
        recorded.written_over(recorded.GENERATION_JSON, results, time.time() - start, bench_doc.finish(run), list(LM))
        families.pages()  # the page reads these rows; this module never imports it
        print(f"wrote docs/bench/{recorded.GENERATION_JSON}, docs/zoo.md and docs/bench/zoo.md")


if __name__ == "__main__":
    from portcheck.core.errors import run_main
    run_main(main)
