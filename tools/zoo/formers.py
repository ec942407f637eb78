"""paddleformers' families in the zoo (the PaddleFormers environment: requirements-formers.txt): every family both
paddleformers 1.2.0 and transformers 5.3.0 ship whose base text model builds here, each from one tiny random config,
converted with no map and no layouts (each fused layout settled by convert's run on the input) and judged
as tools/zoo/families.py judges paddlenlp's: compare_forward cumulative and isolated, compare_backward over 3 steps,
three plants of the family's own parts (its first RMS norm's epsilon, its first attention query's weight, its word
embedding's rows), each expected red at its module.

    python -m tools.zoo.formers                  # every family; writes docs/bench/zoo_formers.json and docs/zoo.md
    python -m tools.zoo.formers --only llama     # some families; writes nothing
    python -m tools.zoo.formers --only llama --fast   # the suite's part (forward cumulative, the plants)

Each family runs in a process of its own, at most --timeout seconds.
"""
import argparse
import json
import sys
import time

from portcheck.checkpoints import fleet as formers_standins
from portcheck.mapping.fused import Fused
from tools import bench_doc
from tools.zoo import formers_page, recorded

# The sizes every family is built with; a family's own below (its experts, its layer types)
TINY = dict(vocab_size=99, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=64, use_cache=False, rms_norm_eps=1e-6)
EXPERTS = dict(moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2)
OWN = {
    "qwen2_moe": dict(EXPERTS, shared_expert_intermediate_size=32),
    "qwen3_moe": dict(EXPERTS, norm_topk_prob=True),
    "qwen3_next": dict(EXPERTS, shared_expert_intermediate_size=32, linear_num_key_heads=2, linear_num_value_heads=4,
                       linear_key_head_dim=16, linear_value_head_dim=16,
                       layer_types=["linear_attention", "full_attention"]),
    # its RoPE a YaRN of factor 1 (the default's numbers): paddleformers' attention raises KeyError 'factor' on the
    # default RoPE (a finding); head_dim the rotated part of a head, as its attention reads it
    "deepseek_v3": dict(moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                        first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=32, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=16, num_key_value_heads=4, n_shared_experts=1, head_dim=8,
                        rope_scaling=dict(rope_type="yarn", factor=1.0, original_max_position_embeddings=64,
                                          beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)),
    "ernie4_5_moe": dict(moe_intermediate_size=32, moe_num_experts=4, moe_k=2, moe_num_shared_experts=1),
    "glm4_moe": dict(moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=1),
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=64, sliding_window=4,
                    layer_types=["sliding_attention", "full_attention"]),
    "gemma3_text": dict(sliding_window=4, layer_types=["sliding_attention", "full_attention"]),
    **{f: dict(rope_parameters=dict(rope_type="default", rope_theta=10000.0, mrope_section=[2, 3, 3]))
       for f in ("glm_ocr", "qwen2_5_vl", "qwen3_vl")},  # their 3-D RoPE's sections, as wide as half a head
    # GLM-4.5V's text tower rotates half of each head: its 3-D RoPE's sections as wide as a quarter of a head
    "glm4v_moe": dict(rope_parameters=dict(rope_type="default", rope_theta=10000.0, mrope_section=[1, 1, 2],
                                           partial_rotary_factor=0.5)),
    "phi3": dict(pad_token_id=0),  # its default (32000) is past the tiny vocabulary
}
# A setting paddleformers' config reads under another name: given to its side so (Qwen3VLTextConfig sets its
# rope_parameters from rope_scaling, dropping a rope_parameters given)
PD_SPELLED = {"qwen3_vl": dict(rope_theta=10000.0, rope_scaling=dict(rope_type="default", mrope_section=[2, 3, 3]))}
# Flags given to both forwards (paddleformers' GlmOcrTextModel returns its cache unless told not to)
FLAGS = {"glm_ocr": dict(use_cache=False)}
HF_MODULE = {"gemma3_text": "gemma3"}  # transformers' directory, where it is another
# Why a family that is not green is so: a difference of paddleformers' port (formers_page.FINDINGS), the kind first
REASONS = {
    "gemma3_text": "not the same model: paddleformers gives the sliding-window layers the full layers' RoPE base "
                   "(Gemma 3, rotary_emb)",
    "ernie4_5": "not the same model: paddleformers' rope_theta defaults to 10000, transformers' to 500000 (ERNIE 4.5)",
    "ernie4_5_moe": "not the same model: paddleformers' rope_theta defaults to 10000, transformers' to 500000 "
                    "(ERNIE 4.5)",
    "gpt_oss": "not the same model: paddleformers' default YaRN RoPE leaves out original_max_position_embeddings "
               "(transformers: 4096) and takes max_position_embeddings for it (GPT-OSS, rotary_emb)",
    "qwen3_next": "not the same model: paddleformers' Qwen3NextModel hands its full-attention layers no causal mask, "
                  "and its default eager attention then lets each token attend to the later ones (Qwen3-Next, "
                  "self_attn)",
    "deepseek_v3": "not the same model: paddleformers' DeepseekV3Config defaults routed_scaling_factor to 1.0 and "
                   "norm_topk_prob to False, transformers' to 2.5 and True (DeepSeek-V3, mlp); its RoPE given as a YaRN "
                   "of factor 1, the default raising KeyError 'factor' in paddleformers (DeepSeek-V3, self_attn)",
}
# The layout a family's fused module is declared in, where convert's run cannot settle it: Qwen3-Next's attention
# reads its qkv_proj per key-value group, [q and gate of the group's heads | k | v] (paddleformers' own converter's
# fused_qkv), and no layout gives torch's attention, which is causal where paddleformers' is not (REASONS); under
# sdpa, causal, the run settles this layout itself
DECLARED = {"qwen3_next": {"layers.1.self_attn.qkv_proj": Fused(("q_proj", "k_proj", "v_proj"), heads=2,
                                                              widths=(4, 1, 1))}}
# A family that cannot be built here, and why
PADDLEFLEET = "its modeling module imports paddlefleet itself, which is not on PyPI"
NOT_BUILT = {"minimax_m2": PADDLEFLEET, "qwen3_5": PADDLEFLEET, "qwen3_vl_moe": PADDLEFLEET,
             "qwen3_5_moe": "paddleformers' qwen3_5_moe modeling module fails to import (its "
                            "Qwen3_5ForConditionalGeneration needs paddlefleet)",
             "ernie4_5_moe_vl": "paddleformers' one model class is the whole vision-language model "
                                "(Ernie4_5_VLMoeForConditionalGenerationModel), no text tower to pair with "
                                "transformers' (its ernie4_5_vl_moe)",
             "glm_moe_dsa": "paddleformers 1.2.0's module defines no base model class (transformers': GlmMoeDsaModel)",
             "paddleocr_vl": "paddleformers' modeling module raises NameError: name 'triton' is not defined where "
                             "Triton is not installed for Paddle"}
# Each family's base text model class, one name on both sides; transformers' module where its directory is another
CLASSES = {"llama": "LlamaModel", "qwen2": "Qwen2Model", "qwen3": "Qwen3Model", "qwen2_moe": "Qwen2MoeModel",
           "qwen3_moe": "Qwen3MoeModel", "qwen3_next": "Qwen3NextModel", "deepseek_v3": "DeepseekV3Model",
           "ernie4_5": "Ernie4_5Model", "ernie4_5_moe": "Ernie4_5_MoeModel", "gemma3_text": "Gemma3TextModel",
           "glm4_moe": "Glm4MoeModel", "gpt_oss": "GptOssModel", "phi3": "Phi3Model", "minimax_m2": "MiniMaxM2Model",
           # the vision-language families: their text towers, where both sides have one of one name
           "glm4v_moe": "Glm4vMoeTextModel", "glm_ocr": "GlmOcrTextModel", "qwen2_5_vl": "Qwen2_5_VLTextModel",
           "qwen3_vl": "Qwen3VLTextModel", "ernie4_5_moe_vl": "", "glm_moe_dsa": "", "paddleocr_vl": "",
           "qwen3_5": "", "qwen3_5_moe": "", "qwen3_vl_moe": ""}
FAMILIES = list(CLASSES)


def classes(family: str) -> tuple:
    """(paddleformers' base model class, transformers')."""
    import importlib
    hf_dir = HF_MODULE.get(family, family)
    return tuple(getattr(importlib.import_module(module), CLASSES[family]) for module in (
        f"paddleformers.transformers.{family}.modeling", f"transformers.models.{hf_dir}.modeling_{hf_dir}"))


def build(family: str):
    """(torch model, Paddle model, token ids), seeded; float64-ready experts on transformers' side."""
    import numpy as np
    import paddle
    import torch
    from tools.zoo import families
    pd_cls, hf_cls = classes(family)
    settings = {**TINY, **OWN.get(family, {})}
    torch.manual_seed(0)
    paddle.seed(0)
    hf_config = families.no_drops(hf_cls.config_class(**settings))
    hf_config._attn_implementation = "eager"
    pt = hf_cls(hf_config).eval()
    pd_config = families.no_drops(pd_cls.config_class(**{**settings, **PD_SPELLED.get(family, {})},
                                                      fuse_rms_norm=False))
    pd = pd_cls(pd_config)
    pd.eval()
    ids = np.random.RandomState(0).randint(3, TINY["vocab_size"], (2, 8)).astype("int64")
    return pt, pd, {"input_ids": ids, **FLAGS.get(family, {})}


def plants(pd) -> list:
    """Three one-line porting bugs in the Paddle model's own parts: (name, module, edit, undo)."""
    import numpy as np
    import paddle
    layers = dict(pd.named_sublayers())
    out = []
    norm = next((n for n, m in layers.items() if isinstance(getattr(m, "variance_epsilon", getattr(m, "eps", None)),
                                                            float)), None)
    if norm:  # the other of the two defaults these configs use (1e-6, 1e-5): a value read from the wrong config
        attr = "variance_epsilon" if hasattr(layers[norm], "variance_epsilon") else "eps"
        was = getattr(layers[norm], attr)
        eps = 1e-5 if abs(was - 1e-6) < 1e-9 else 1e-6
        out.append((f"{norm}'s epsilon {eps:g}", norm, lambda: setattr(layers[norm], attr, eps),
                    lambda: setattr(layers[norm], attr, was)))
    query = next((n for n, m in layers.items() if isinstance(m, paddle.nn.Linear)
                  and n.rpartition(".")[2] in ("q_proj", "qkv_proj", "q_b_proj")), None)
    if query:  # its query scaled by 1.01 (a scale applied twice, a rounded constant)
        w = layers[query].weight
        out.append((f"{query}'s weight x 1.01", query, lambda w=w: w.set_value(w.numpy() * 1.01), lambda: None))
    emb = next((n for n, m in layers.items() if isinstance(m, paddle.nn.Embedding)), None)
    if emb:
        w = layers[emb].weight
        out.append((f"{emb}'s rows one off", emb, lambda w=w: w.set_value(np.roll(w.numpy(), 1, axis=0)),
                    lambda: None))
    return out


def _convert(pt, pd, x, result: dict, family: str):
    """convert with no map and no layouts (a family's DECLARED given, said in its row): each fused layout settled by
    the run (its line in the row); the layouts it found are what compare_forward and compare_backward cut the fused
    modules by."""
    from portcheck import convert
    from portcheck.mapping.inferred import said
    declared = DECLARED.get(family)
    if declared:
        result["layouts"] = ", ".join(f"`{k}` {said(v)}" for k, v in declared.items())
    state = convert(pt, pd, inputs=x, layouts=declared)
    found = {name.rpartition(".")[2]: said(spec) for name, spec in (state.fused_found or {}).items()}
    if found:  # each module's last name once: every layer's is one layout here
        result["settled"] = ", ".join(f"`{name}` {how}" for name, how in found.items())
    return state, {**(declared or {}), **(state.fused_found or {})} or None


def _own_run(pd, x) -> str:
    """The line the Paddle model's own forward raises on the ids, or ""."""
    import paddle
    from portcheck.core.errors import first_line
    try:
        with paddle.no_grad():
            pd(**{k: paddle.to_tensor(v) if hasattr(v, "dtype") else v for k, v in x.items()})
    except Exception as e:  # noqa: BLE001 (the library's own failure is the family's result)
        return first_line(e)
    return ""


def judge_one(family: str, fast: bool = False) -> dict:
    """The family's results (families.py's judge_one's fields), its REASONS said as its outcome."""
    formers_standins.prepare()  # torch, the stand-ins, paddleformers: before transformers and portcheck
    result = _judge_one(family, fast)
    # a refusal is convert's, and a forward that raises the run's, said as they are: the difference is not what
    # stopped the run
    if family in REASONS and not result["outcome"].startswith(("green", "refused")) and result["outcome"] != "raises":
        result["outcome"], result["reason"] = REASONS[family].partition(":")[0], REASONS[family]
    return result


def _judge_one(family: str, fast: bool) -> dict:
    from portcheck import compare_forward
    from portcheck.core.errors import PipelineError, first_line
    from portcheck.core.keys import ROOT
    from tools.zoo import families
    result = {"family": family, "classes": None}
    if family in NOT_BUILT:
        return {**result, "outcome": "not built", "said": NOT_BUILT[family]}
    try:
        pt, pd, x = build(family)
    except Exception as e:  # noqa: BLE001 (a library's own failure is the family's result)
        return {**result, "outcome": "not built", "said": first_line(e)[:300]}
    result["classes"] = f"{type(pd).__name__} / {type(pt).__name__}"
    raised = _own_run(pd, x)
    if raised:  # the port's forward itself raises on the ids: nothing to convert against, nothing to judge
        return {**result, "outcome": "raises", "said": f"paddleformers' forward: {raised}"[:300]}
    try:
        state, layouts = _convert(pt, pd, x, result, family)
    except PipelineError as e:  # the Paddle model's own run raising where convert runs it is the run's, not a refusal
        return {**result, "outcome": "raises" if "[PC457]" in str(e) else "refused", "said": f"portcheck: {e}"[:300]}
    except Exception as e:  # noqa: BLE001
        return {**result, "outcome": "raises", "said": first_line(e)[:300]}
    pd.set_state_dict(state)
    before = {k: v.numpy().copy() for k, v in pd.state_dict().items()}
    try:
        forward = compare_forward(pt.eval(), pd.eval(), x, isolate=not fast, layouts=layouts)
    except Exception as e:  # noqa: BLE001
        return {**result, "outcome": "raises", "said": f"compare_forward: {first_line(e)}"[:300]}
    if "paddle" in forward.stopped:
        return {**result, "outcome": "raises", "said": f"compare_forward: the Paddle model stopped: "
                                                       f"{forward.stopped['paddle']}"[:300]}
    result["forward"] = forward.passed
    result["forward_said"] = "" if forward.passed else families._red(forward)
    if not fast:
        families._backward(family, pt, pd, x, layouts, before, result)
    result["plants"] = []
    pinned = {t: p for t, p in forward.pairing.modules().items() if ROOT not in (t, p)}
    for name, module, edit, undo in plants(pd):
        pd.set_state_dict(before)
        edit()
        try:
            report = compare_forward(pt.eval(), pd.eval(), x, pinned, layouts=layouts)
            red = [report.both(r.name) for r in report.paired if not r.passed]
            result["plants"].append({"plant": name, "module": module, "red": not report.passed,
                                     "at": red[0] if red else "", "named": any(module in r for r in red[:1])})
        except PipelineError as e:
            result["plants"].append({"plant": name, "module": module, "red": True, "at": f"refused: {e}"[:200]})
        except Exception as e:  # noqa: BLE001
            result["plants"].append({"plant": name, "module": module, "red": None, "at": first_line(e)[:200]})
        undo()
    pd.set_state_dict(before)
    clean = result["forward"] and (fast or result["backward"])
    caught = bool(result["plants"]) and all(p["red"] for p in result["plants"])
    named = all(p.get("named") for p in result["plants"])
    result["outcome"] = ("green, every plant red at its module" if named else "green, every plant red") \
        if clean and caught else "green, a plant green" if clean and result["plants"] else \
        "green, no part to plant in" if clean else "red on the correct port"
    return result


def write(results: list, seconds: float, run: dict):
    """docs/bench/zoo_formers.json (the rows of this run over those before), then the zoo's pages' formers table."""
    recorded.written_over(recorded.FORMERS_JSON, results, seconds, run, FAMILIES)
    formers_page.write_table()


def main():
    from portcheck.core.errors import PipelineError
    from tools.zoo import families
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--only", nargs="+", metavar="FAMILY", help="paddleformers directory names; writes nothing")
    ap.add_argument("--write", action="store_true", help="with --only: write the rows of those families alone")
    ap.add_argument("--fast", action="store_true", help="forward cumulative and the plants, no backward; writes "
                    "nothing")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one family may take (default 300)")
    ap.add_argument("--one", metavar="FAMILY", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(judge_one(args.one, args.fast)), flush=True)
        return
    unknown = sorted(set(args.only or ()) - set(FAMILIES))
    if unknown:
        raise PipelineError(f"--only {' '.join(unknown)}: not a family of this zoo; the families: {' '.join(FAMILIES)}")
    notice = formers_standins.prepare()
    if notice:
        print(notice)
    run = recorded.facts("tools.zoo.formers", sys.argv)
    start, results = time.time(), []
    for family in args.only or FAMILIES:
        r = recorded.judged_alone("tools.zoo.formers", family, ["--fast"] * args.fast, args.timeout, family=family)
        results.append(r)
        print(f"{family} ({r['seconds']} s): {families.row(r)}", flush=True)
        if args.write and not args.fast:
            write(results, time.time() - start, bench_doc.finish(run))
    print(f"{len(results)} families, {time.time() - start:.0f} s")
    if not args.only and not args.fast:
        write(results, time.time() - start, bench_doc.finish(run))
        print(f"wrote docs/bench/{recorded.FORMERS_JSON} and docs/zoo.md")


if __name__ == "__main__":
    import importlib.util
    if importlib.util.find_spec("paddleformers") is not None:
        formers_standins.prepare()  # first: torch, the stand-ins, paddleformers, then portcheck
    elif not {"-h", "--help"} & set(sys.argv[1:]):
        raise SystemExit("error: paddleformers is not installed in this venv: run this in the PaddleFormers venv "
                         "(README: Set up), .venv-formers/bin/python -m tools.zoo.formers")
    from portcheck.core.errors import run_main
    run_main(main)
