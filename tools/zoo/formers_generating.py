"""PaddleFormers' generation column (the PaddleFormers environment: requirements-formers.txt): every family of
tools/zoo/formers.py whose causal LM builds here, both sides from its tiny config with the cache on and the head
untied on both (each library's own default differs), weights by portcheck.convert with no map, decoded as
tools/zoo/generating.py decodes paddlenlp's: 8 steps on two prompts, the first left-padded, by each library's own
loop (compare_generate's default step), the cache plant expected red at step 1; then by each library's own greedy
generate (step="generate").

    python -m tools.zoo.formers_generating                 # every family; writes its JSON and docs/zoo.md
    python -m tools.zoo.formers_generating --only llama    # some families; writes nothing

Each family runs in a process of its own, at most --timeout seconds.
"""
import argparse
import json
import sys
import time

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch, Paddle)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from portcheck.checkpoints import fleet as formers_standins
from tools import bench_doc
from tools.zoo import formers, recorded

MODULE = "tools.zoo.formers_generating"
CAUSAL = "ForCausalLM"
# why a family whose causal LM builds paddlefleet's own GPTModel (formers_standins.NOTICE) is not built here
FLEET_LM = "its causal LM builds paddlefleet's own GPTModel (paddlefleet is not on PyPI)"
LM_NAMES = {"gemma3_text": "Gemma3ForCausalLM"}  # a causal LM named otherwise than its base model, in both libraries


def lm_classes(family: str) -> tuple:
    """(paddleformers' causal LM class, transformers'), named after the family's base model."""
    import importlib
    base = formers.CLASSES[family]
    name = LM_NAMES.get(family) or base[:-len("Model")] + CAUSAL
    hf_dir = formers.HF_MODULE.get(family, family)
    found = []
    for library, module in (("paddleformers", f"paddleformers.transformers.{family}.modeling"),
                            ("transformers", f"transformers.models.{hf_dir}.modeling_{hf_dir}")):
        held = importlib.import_module(module)
        if not hasattr(held, name):  # a vision-language family: its causal LM is the whole model, not its text tower
            raise LookupError(f"{library} ships no {name} (the causal LM of {base}): nothing of the text model "
                              "alone generates")
        found.append(getattr(held, name))
    return tuple(found)


def build(family: str) -> tuple:
    """(torch model, Paddle model), eval mode, weights converted with no map."""
    import paddle
    import torch

    from portcheck import convert
    from tools.zoo import families
    from tools.zoo.generating import PROMPT
    pd_cls, hf_cls = lm_classes(family)
    settings = {**formers.TINY, **formers.OWN.get(family, {}), "use_cache": True, "tie_word_embeddings": False}
    torch.manual_seed(0)
    paddle.seed(0)
    hf_config = families.no_drops(hf_cls.config_class(**settings))
    hf_config._attn_implementation = "eager"
    pt = hf_cls(hf_config).eval()
    pd = pd_cls(families.no_drops(pd_cls.config_class(**{**settings, **formers.PD_SPELLED.get(family, {})},
                                                      fuse_rms_norm=False)))
    pd.eval()
    pd.set_state_dict(convert(pt, pd, inputs={"input_ids": PROMPT}))
    return pt, pd


def judge_one(family: str) -> dict:
    """The family's row (tools/zoo/generating.py's fields), and each library's own generate's verdict."""
    formers_standins.prepare()
    from portcheck import compare_generate
    from portcheck.core.errors import first_line
    from tools.zoo.generating import MASK, PROMPT, STEPS, judged
    row = {"family": family}
    if family in formers.NOT_BUILT or not formers.CLASSES.get(family):
        return {**row, "outcome": "not built", "said": formers.NOT_BUILT.get(family, "no text model to pair")}
    try:
        pd_cls, hf_cls = lm_classes(family)
        row["classes"] = f"{pd_cls.__name__} / {hf_cls.__name__}"
        pt, pd = build(family)
    except Exception as e:  # noqa: BLE001 - the family's result, said in one line
        said = first_line(e, 300)
        # paddlefleet itself named, or the stand-ins' placeholder provider asked to build paddlefleet's GPTModel
        holder = getattr(e, "obj", None)
        fleet = "paddlefleet" in said or \
            isinstance(holder, type) and issubclass(holder, formers_standins.GPTModelProvider)
        reason = {"reason": formers.REASONS[family]} if family in formers.REASONS else {}
        return {**row, "outcome": "not built", "said": FLEET_LM if fleet else said, **reason}
    row = judged(row, pt, pd)
    try:
        own = compare_generate(pt, pd, PROMPT, max_new_tokens=STEPS, attention_mask=MASK, step="generate",
                               against_itself=False)
        row["generate"] = own.headline()
    except Exception as e:  # noqa: BLE001
        row["generate"] = f"raises: {first_line(e, 200)}"
    reason = formers.REASONS.get(family, "")
    if reason and not row["outcome"].startswith("green"):
        row["reason"] = reason
    return row


def write(results: list, seconds: float, run: dict):
    """docs/bench/zoo_formers_generation.json (this run's rows over those before), then the zoo's pages."""
    recorded.written_over(recorded.FORMERS_GENERATION_JSON, results, seconds, run, formers.FAMILIES)
    from tools.zoo import formers_generating_page
    formers_generating_page.write_table()


def main():
    from portcheck.core.errors import PipelineError
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--only", nargs="+", metavar="FAMILY", help="paddleformers directory names; writes nothing")
    ap.add_argument("--write", action="store_true", help="with --only: write the rows of those families alone")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one family may take (default 300)")
    ap.add_argument("--one", metavar="FAMILY", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(judge_one(args.one)), flush=True)
        return
    unknown = sorted(set(args.only or ()) - set(formers.FAMILIES))
    if unknown:
        raise PipelineError(f"--only {' '.join(unknown)}: not a family of this zoo; the families: "
                            f"{' '.join(formers.FAMILIES)}")
    run = recorded.facts(MODULE, sys.argv)
    start, results = time.time(), []
    for family in args.only or formers.FAMILIES:
        r = recorded.judged_alone(MODULE, family, (), args.timeout, family=family)
        results.append(r)
        print(f"{family} ({r['seconds']} s): {r['outcome']}; {r.get('said') or r.get('plant', '')}; generate: "
              f"{r.get('generate', '')}", flush=True)
        if args.write:
            write(results, time.time() - start, bench_doc.finish(run))
    print(f"{len(results)} families, {time.time() - start:.0f} s")
    if not args.only:
        write(results, time.time() - start, bench_doc.finish(run))
        print(f"wrote docs/bench/{recorded.FORMERS_GENERATION_JSON} and docs/zoo.md")


if __name__ == "__main__":
    import importlib.util
    if importlib.util.find_spec("paddleformers") is not None:
        formers_standins.prepare()  # first: torch, the stand-ins, paddleformers, then the rest
    elif not {"-h", "--help"} & set(sys.argv[1:]):
        raise SystemExit("error: paddleformers is not installed in this venv: run this in the PaddleFormers venv "
                         "(README: Set up), .venv-formers/bin/python -m tools.zoo.formers_generating")
    from portcheck.core.errors import run_main
    run_main(main)
