"""docs/zoo.md's generation column, which tools/zoo/page.py writes after the families by verdict: each family with a
generation head decoded by each library's own loop (the run `python -m tools.zoo.generating` records, JSON beside the
benchmark page), its verdict and why. It reads the run alone: it imports no page. zoo_cn.md says the same."""
import json
from pathlib import Path

from tools.zoo import recorded, tables
from tools.zoo.generating import PLANTED_LAYER, STEPS

TITLE = "## Generation, by each library's own loop"
# how to read a generation row's verdict (the run's outcomes; a new one fails tests/test_zoo_generation.py)
READING = {
    "green, the cache plant red at its step and layer": f"the two libraries' own loops decode {STEPS} steps within "
    "the measured rule, each side equal to its own recomputation. The cache plant is red at step 1, at layer "
    f"{PLANTED_LAYER}'s cached tensors.",
    "green, the cache plant red elsewhere": "green, but the cache plant is first red at another step or tensor: the "
    "row says where.",
    "green, the cache plant green": "green, but the cache plant was not caught: a gap of the checks.",
    "red on the correct pair": "the two loops part on the correct pair. The row gives the report's headline: the "
    "step, and the module or the arguments the two models are handed otherwise.",
    "raises in its own library": "a side's own loop raises before the decoding ends; the row gives the step's line.",
    "raises": "the run raised; the row gives the error's line.",
    "not built": "the pair is not built here: `convert` asks for a map of its LM head, or one side refuses its "
    "config; the row gives the line.",
    "not judged": "the family ran over its time (`--timeout`).",
}


def load(folder: Path) -> list:
    """The recorded run's rows (none yet: [])."""
    held = Path(folder) / recorded.GENERATION_JSON
    return json.loads(held.read_text(encoding="utf-8"))["results"] if held.exists() else []


def why(r: dict) -> str:
    """What a row's verdict rests on: the line the report or the run said; for a green one, where the plant was red
    and whether the two number positions from another origin (said so by the report)."""
    if not r["outcome"].startswith("green"):
        return "; ".join(filter(None, [r.get("figure", ""), r.get("said", "")[:300]]))
    origin = any(n.startswith("positions:") for n in r.get("notes", ()))
    return "; ".join(filter(None, ["positions numbered from another origin, said so" if origin else "",
                                   f"the plant red at {r['plant']}" if r.get("plant") else ""]))


def section(results: list) -> list:
    """The column's section: its rows in READING's order, then by family."""
    from collections import Counter
    order = list(READING)
    place = lambda k: order.index(k) if k in order else len(order)
    rows = [[r["family"], r.get("classes") or "", r["outcome"], why(r)]
            for r in sorted(results, key=lambda r: (place(r["outcome"]), r["family"]))]
    kinds = Counter(r["outcome"] for r in results)
    seconds = round(sum(r.get("seconds", 0) for r in results))
    if not results:
        return []
    return [TITLE, "",
            f"Every family above with a generation head, run by `{recorded.GENERATION_COMMAND}` ({seconds} s, one family after another, "
            "each in a process of its own). Each family's causal or conditional LM is built from the same tiny "
            "config with its cache on, and converted with no map.", "",
            "It is decoded by `compare_generate`'s default step: each model fed as its own library's `generate` feeds "
            f"it ([generation.md](generation.md)). The batch is two prompts of 6 tokens, the first left-padded by 2; "
            f"{STEPS} steps. The cache plant swaps layer {PLANTED_LAYER}'s keys between the batch's two rows after the "
            "prompt, on Paddle's side.", "",
            *[f"- **{k}**: {v}" for k, v in READING.items() if k in kinds], "",
            f"{len(results)} families: " + "; ".join(
                f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kn: place(kn[0]))) + ".", "",
            *tables.table(["family", "paddlenlp / transformers", "verdict", "why"], rows), "", *FINDINGS]


# what the column finds in the libraries' own loops, each held by the test it names
FINDINGS = [
    "What the rows that are not green rest on:", "",
    "- **GPT**: paddlenlp 2.8.1's `GPTForCausalLM.prepare_inputs_for_generation` hands its model "
    "`attention_mask=None` whatever it is given, and no positions but its cache's length: its own loop reads a "
    "left-padded row's padding. That row alone parts, the other within the rule (the row's figure; "
    "`test_paddlenlps_own_gpt_loop_hands_its_model_no_padding_mask_red_and_said`).",
    "- **BlenderbotSmall**: paddlenlp's encoder takes `attention_mask` as 1 at the padding (it adds `mask * -1e4`), "
    "transformers' as 1 at the tokens, as paddlenlp's own tokenizer returns it. The left-padded row alone parts, "
    "from its encoder's first attention; the other is within the rule (the row's figure; "
    "`test_paddlenlp_blenderbot_small_reads_its_attention_mask_as_transformers`).",
    "- **ProphetNet**: not the same model (its predicting streams, above): every row parts at step 1, from its "
    "encoder's first attention (the row's figure).",
    "- **RoBERTa**: paddlenlp's `RobertaForCausalLM` masks no future token: its `RobertaModel` builds the padding "
    "mask alone, where transformers' (`is_decoder=True`) adds the causal one. Every row parts at step 1, from the "
    "first attention's output (the row's figure; "
    "`test_paddlenlp_roberta_causal_lm_masks_its_future_tokens_as_transformers`).",
    "- **Mixtral, RW, Reformer**: paddlenlp's own code raises in the step the row names. Mixtral's experts raise as "
    "above. RW's `build_alibi_tensor` multiplies a bfloat16 slope by the int64 positions of the mask. Reformer's "
    "attention assigns into its cache's tuple at step 2.",
    "- **Blenderbot**: its encoder reads `attention_mask` as BlenderbotSmall's does. Its loop also calls the model "
    "with `encoder_output` and no `input_ids`, and `BlenderbotModel` then hands the 2-D mask to the cross-attention "
    "as it is, where a call with `input_ids` scales it to -1e4. With the mask in its own convention, the two calls' "
    "logits part by 2.4e-02 on Paddle's side alone "
    "(`test_paddlenlp_blenderbot_masks_its_cross_attention_in_its_loop_as_in_its_forward`). Its shared embedding "
    "runs as two Paddle modules (above): built with the `name_map` the refusal names.",
    "- **XLNet**: transformers' preparation appends a dummy token, hides it by `perm_mask` and predicts it through "
    "`target_mapping`. paddlenlp's `XLNetLMHeadModel` has no preparation of its own and is handed the sequence as it "
    "is. The two part at step 1, said as the `input_ids` they are handed otherwise "
    "(`test_paddlenlp_xlnet_is_fed_its_step_as_transformers_feeds_it`).",
    "- **RoFormer**: paddlenlp's `RoFormerForCausalLM.update_model_kwargs_for_generation` reads `token_type_ids`, "
    "which its generate builds none of: its own loop raises after the prompt "
    "(`test_paddlenlp_roformer_decodes_by_its_own_loop_with_no_token_type_ids`). Its `RoFormerModel` builds the "
    "padding mask alone, where transformers' (`is_decoder=True`) adds the causal one. Each prompt token reads the "
    "ones after it, and the first position's logits part by 6.3e-03; handed a causal mask, the port is torch's model "
    "(`test_paddlenlp_roformer_causal_lm_masks_its_future_tokens_as_transformers`). Its pooler, which transformers' "
    "lacks and its LM never reads, keeps Paddle's own weights (`keep=`).", ""]
