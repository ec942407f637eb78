"""Every architecture both libraries ship: paddlenlp's base model classes with a transformers counterpart of the same
name (transformers' deprecated models too), each built from one tiny random config (offline, family_settings.py),
converted with no map and judged through portcheck's public API: compare_forward (cumulative and isolated), again
with use_cache off and on where both forwards take it (cached), compare_backward (3 steps), and three plants chosen
from the family's own parts (its first norm's epsilon, its first attention query's weight or, in a network of
convolutions, its first kernel flipped, its word embedding's rows).

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
import shlex
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

from tools import bench_doc
from tools.zoo import recorded
from tools.zoo.family_settings import (  # noqa: F401 (read as families.<NAME> too)
    ALIASES, ATTENTION, CLASSES, DRAWN, ENCODER_DECODER, HEAD, IDS, IMAGE, INPUTS, LAYOUTS, NEEDS, OUTPUTS,
    OUTPUTS_CACHED, OVERRIDES, REASONS, SEEDS, SPELLED, TINY, TOWER, WITHOUT)


def families() -> list:
    """[(paddlenlp directory, transformers directory)] of every architecture both libraries ship."""
    from importlib.util import find_spec  # their folders, read without importing either library (~10 s)
    where = lambda package: Path(find_spec(package).submodule_search_locations[0])
    pd_dirs = sorted(p.name for p in (where("paddlenlp") / "transformers").iterdir() if (p / "modeling.py").exists())
    models = where("transformers") / "models"
    # transformers keeps a model it no longer maintains under models/deprecated (NeZha, ErnieM): still shipped,
    # still imported as transformers.models.deprecated.<name>
    hf_dirs = {p.name: f"deprecated.{p.name}" for p in (models / "deprecated").iterdir() if p.is_dir()}
    hf_dirs.update({p.name: p.name for p in models.iterdir() if p.is_dir() and p.name != "deprecated"})
    return [(d, hf_dirs[ALIASES.get(d, d)]) for d in pd_dirs if ALIASES.get(d, d) in hf_dirs and d != "auto"]


def classes(family: str, hf_dir: str) -> tuple:
    """(paddlenlp's base model class, transformers'), or a one-line reason there is no such pair."""
    pd_mod = importlib.import_module(f"paddlenlp.transformers.{family}.modeling")
    hf_mod = importlib.import_module(f"transformers.models.{hf_dir}.modeling_{hf_dir.rpartition('.')[2]}")
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
    settings = settings_of(family)
    torch.manual_seed(0)
    paddle.seed(0)
    hf_own, pd_own = SPELLED.get(family, ({}, {}))
    hf_config = no_drops(hf_cls.config_class(**settings, **hf_own))
    if hasattr(hf_config, "_attn_implementation"):
        hf_config._attn_implementation = ATTENTION.get(family, "eager")
    pt = hf_cls(hf_config).eval()
    with torch.no_grad():
        for name in DRAWN.get(family, ()):
            pt.get_parameter(name).normal_()
    pd = pd_cls(no_drops(pd_cls.config_class(**settings, **pd_own)))
    pd.eval()
    return pt, pd, given(family, settings)


def settings_of(family: str) -> dict:
    """The family's config settings, given to both sides' config classes."""
    return {k: v for k, v in {**TINY, **OVERRIDES.get(family, {})}.items() if k not in WITHOUT.get(family, ())}


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


def given(family: str, settings: dict, length: int = None) -> dict:
    """The family's inputs: INPUTS' entry, or token ids (and an encoder-decoder's decoder ids, a two-tower model's
    image), each seeded by its name's place in SEEDS (one name's values the same in every family); length: every
    token input that long (the cache pass's)."""
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
        shape = (shape[0], length) if length and kind == "ids" else shape
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
    cached(family, pt, pd, layouts, fast, result)
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
    clean = result["forward"] and (fast or result["backward"]) and all(c["passed"] for c in result.get("cache", ()))
    caught = bool(result["plants"]) and all(p["red"] for p in result["plants"])  # no plant: nothing was caught
    named = all(p.get("named") for p in result["plants"])
    result["outcome"] = ("green, every plant red at its module" if named else "green, every plant red") \
        if clean and caught else "green, a plant green" if clean and result["plants"] else \
        "green, no part to plant in" if clean else "red on the correct port"
    return result


def cached(family: str, pt, pd, layouts, fast: bool, result: dict):
    """result["cache"]: compare_forward with use_cache off and on, given to both forwards, on token inputs HEAD long
    (isolated too unless fast), where the family has a cache: both forwards take use_cache and transformers' model
    returns key and value states with it on ([batch, heads, length, head width], CTRL's the two stacked; BERT's
    returns none, ELECTRA's [batch, length, hidden]: no cache to judge, though paddlenlp's encoders return one):
    [{"use_cache", "passed", "said"}]. The cache outputs judged as every output (a key state paired by its shape
    with another output is red)."""
    import inspect
    import numpy as np
    import torch
    from portcheck import compare_forward
    from portcheck.mapping.trace import tensors
    if not all("use_cache" in inspect.signature(m.forward).parameters for m in (pt, pd)):
        return
    short = given(family, settings_of(family), HEAD)
    with torch.no_grad():
        out = pt.eval()(**{k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in short.items()},
                        use_cache=True)
    states = getattr(out, "past_key_values", None)
    states = states.to_legacy_cache() if hasattr(states, "to_legacy_cache") else states
    if next((t.dim() for _, t in tensors("", states)), 0) < 4:
        return
    result["cache"] = []
    for flag in (False, True):
        try:
            outputs = OUTPUTS_CACHED.get(family, OUTPUTS.get(family)) if flag else OUTPUTS.get(family)
            report = compare_forward(pt.eval(), pd.eval(), {**short, "use_cache": flag}, isolate=not fast,
                                     outputs=outputs, layouts=layouts)
            passed, said = report.passed, "" if report.passed else _red(report)
        except Exception as e:  # noqa: BLE001 (its own library raising is the pass's result)
            passed, said = False, f"compare_forward: {first_line(e)}"[:300]
        result["cache"].append({"use_cache": flag, "passed": passed, "said": said})


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
    said += [f"use_cache {'on' if c['use_cache'] else 'off'} (ids of {HEAD}) "
             f"{'green' if c['passed'] else 'RED ' + c['said']}" for c in r.get("cache", ())]
    said += [f"backward (3 steps) {'green' if r['backward'] else 'RED ' + str(r['backward_said'])}"] \
        if "backward" in r else ["backward not run (--fast)"]
    said += [plants]
    return [r["family"], r["classes"], r["outcome"], reason + "; ".join(said)]


def row(r: dict) -> str:
    return "| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells(r)) + " |"


def write(results: list, seconds: float, run: dict):
    """docs/bench/zoo_families.json: the families of this run over those of the runs before (--only), in the
    families' order; the time, their sum. Each row keeps the facts of the run that judged it (tools/bench_doc.py:
    command, date, CPU, load), the JSON's run lists each once (a row from before they were recorded: {}, "not
    recorded"). The pages read it (pages())."""
    recorded.written_over(recorded.FAMILIES_JSON, results, seconds, run, [f for f, _ in families()])


def pages():
    """Both of the zoo's pages again from the runs recorded, by their own command (recorded.PAGES_COMMAND) in a
    process of its own: the page reads the families' rows (cells, families), so this module never imports it."""
    proc = subprocess.run([sys.executable, *shlex.split(recorded.PAGES_COMMAND)[1:]], cwd=recorded.ROOT)
    if proc.returncode:
        raise PipelineError(f"`{recorded.PAGES_COMMAND}` exited with {proc.returncode}: the run is recorded in "
                            f"docs/bench/{recorded.FAMILIES_JSON}, the pages are as they were")


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
    run = recorded.facts("tools.zoo.families", sys.argv)
    for family in args.only or found:
        r = recorded.judged_alone("tools.zoo.families", family, ["--fast"] * args.fast, args.timeout, family=family)
        results.append(r)
        print(f"{family} ({r['seconds']} s): {row(r)}", flush=True)
        if args.write:  # after each family: a run stopped early keeps what it judged
            write(results, time.time() - start, bench_doc.finish(run))
            pages()
    seconds = time.time() - start
    print(f"{len(results)} families, {seconds:.0f} s")
    if (not args.only or args.write) and not args.fast:
        write(results, seconds, bench_doc.finish(run))
        pages()
        print("wrote docs/bench/zoo_families.json, docs/zoo.md and docs/bench/zoo.md")


if __name__ == "__main__":
    run_main(main)
