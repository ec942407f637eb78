"""What compare_generate costs: a Llama-shaped pair (transformers' LlamaForCausalLM against paddlenlp's, random
weights built offline from a config, Paddle's by portcheck.convert) decoding 16 new tokens from a 16-token prompt,
against the two sides' plain cached decoding of the same tokens (torch's greedy loop, then Paddle's fed torch's
tokens, position_ids given to both, as compare_generate feeds them).

    python tools/bench_generate.py                           # widths 512 and 1024, 4 layers: docs/bench/generate.md
    python tools/bench_generate.py --widths 2048 --layers 16 # the 0.84B pair, added to the same files (~14 GB free)
    python tools/bench_generate.py --page                    # the page again from generate.json, nothing measured

Sizes: hidden h, intermediate 2.75 h, h / 64 heads, h / 512 key-value heads (at least 1), vocabulary 32000.
Three runs are timed at each width (after a warm-up of each, 2 tokens), each its best of --repeats: the plain decoding (both sides), compare_generate
with against_itself=False (the two sides and torch's float64 twin, every step's logits and cache judged) and
compare_generate as called by default (each side also against its own recomputation of the prefix with no cache).
Each time is the process's CPU seconds (every thread's, user + system: on a machine other work shares, the wall
clock counts the waits too) with the wall time beside it. Target: compare_generate at most 3 x the plain
decoding.
"""
import argparse
import json
import os
import time

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from pathlib import Path

import numpy as np

from portcheck.core.errors import run_main
from tools import bench_doc

COMMAND = "python tools/bench_generate.py"
PROMPT, NEW = 16, 16   # prompt tokens, new tokens decoded
TARGET = 3.0           # compare_generate's time over the plain decoding's (issue 83)
RUNS = ("plain", "compare", "default")
SAID = {"plain": "plain cached decoding, both sides", "compare": "compare_generate(against_itself=False)",
        "default": "compare_generate (default: against_itself=True)"}


def sizes(hidden: int, layers: int) -> dict:
    return dict(vocab_size=32000, hidden_size=hidden, intermediate_size=hidden * 11 // 4, num_hidden_layers=layers,
                num_attention_heads=max(1, hidden // 64), num_key_value_heads=max(1, hidden // 512),
                max_position_embeddings=2048, rms_norm_eps=1e-5)


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def peak_gb() -> float:
    """The process's peak resident memory so far (VmHWM), in GB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 / 1e9 for line in f if line.startswith("VmHWM:"))


def pair(config: dict, ids: np.ndarray):
    import paddle
    import torch
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    from portcheck import convert
    torch.manual_seed(0)
    paddle.seed(0)
    pt = LlamaForCausalLM(LlamaConfig(**config, attn_implementation="eager")).eval()
    pd = PaddleLlama(PaddleConfig(**config)).eval()
    pd.set_state_dict(convert(pt, pd, layouts={"LlamaLMHead": "transpose"}, inputs={"input_ids": ids}))
    return pt, pd


def plain(pt, pd, ids: np.ndarray, n: int) -> list:
    """Each side's cached decoding as a user's loop writes it: torch's greedy, Paddle fed torch's tokens."""
    import paddle
    import torch
    tokens = []
    for side, tensor, grad in (("torch", torch.from_numpy, torch.no_grad), ("paddle", paddle.to_tensor,
                                                                             paddle.no_grad)):
        model, step, past, width = (pt if side == "torch" else pd), ids, None, ids.shape[1]
        with grad():
            for s in range(n):
                start = width - step.shape[1]
                kwargs = dict(input_ids=tensor(step), past_key_values=past, use_cache=True,
                              position_ids=tensor(np.arange(start, width, dtype=np.int64)[None]))
                if side == "paddle":
                    kwargs["return_dict"] = True
                out = model(**kwargs)
                past = out.past_key_values
                choice = out.logits[:, -1].numpy().argmax(-1) if side == "torch" else tokens[s]
                if side == "torch":
                    tokens.append(choice)
                step, width = np.asarray(choice).reshape(-1, 1).astype(np.int64), width + 1
    return tokens


def timed(fn, repeats: int) -> dict:
    """fn's best of `repeats` by CPU seconds, its wall time beside it; fn's last result."""
    best, result = None, None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), cpu_seconds()
        result = fn()
        now = {"cpu_s": round(cpu_seconds() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3)}
        best = now if best is None or now["cpu_s"] < best["cpu_s"] else best
    return {**best, "result": result}


def measure(hidden: int, layers: int, repeats: int) -> dict:
    from portcheck import compare_generate
    run = bench_doc.start()
    config = sizes(hidden, layers)
    ids = np.random.RandomState(0).randint(1, config["vocab_size"], (1, PROMPT)).astype("int64")
    pt, pd = pair(config, ids)
    params = sum(p.numel() for p in pt.parameters())
    row = {"hidden": hidden, "layers": layers, "parameters": int(params)}
    plain(pt, pd, ids, 2)  # a warm-up of each path timed below: its first call pays one-time costs
    compare_generate(pt, pd, ids, max_new_tokens=2)
    row["plain"] = timed(lambda: plain(pt, pd, ids, NEW), repeats)
    tokens = [t.tolist() for t in row["plain"].pop("result")]
    for name, kwargs in (("compare", {"against_itself": False}), ("default", {})):
        row[name] = timed(lambda: compare_generate(pt, pd, ids, max_new_tokens=NEW, **kwargs), repeats)
        report = row[name].pop("result")
        row[name]["green"] = bool(report.passed)
        row[name]["same_tokens"] = report.tokens["fed"] == tokens
    row["peak_gb"] = round(peak_gb(), 2)
    row[bench_doc.RUN] = bench_doc.finish(run)
    return row


def ratio(row: dict, name: str, clock: str = "cpu_s") -> float:
    return row[name][clock] / row["plain"][clock]


def runs(rows: list) -> list:
    """One run per command: the widths one command measured, its load before the first and after the last (each
    row's own beside it in the table)."""
    out = {}
    for r in rows:
        run = r[bench_doc.RUN]
        first = out.setdefault(run["command"], dict(run))
        first["load after"] = run["load after"]
    return list(out.values())


def render(data: dict) -> str:
    """The page, from the JSON (docs/bench/generate.json) alone."""
    rows = sorted(data["rows"].values(), key=lambda r: (r["hidden"], r["layers"]))
    lines = ["# generate: what compare_generate costs", "",
             bench_doc.header(runs(rows), COMMAND), "",
             f"A Llama-shaped pair (transformers against paddlenlp, random weights, Paddle's by convert) decoding {NEW} "
             f"new tokens from a {PROMPT}-token prompt, batch 1. Plain: each side's cached decoding of the same "
             "tokens as a user's loop writes it. Times: the process's CPU seconds (every thread's), best of "
             "the row's runs, the wall time in brackets; "
             f"the target is {TARGET:g}x the plain decoding.", "",
             "| hidden | layers | parameters | runs | plain s | against_itself=False s | x plain | default s | x plain "
             "| verdicts | peak GB | 1-min load |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cell = lambda name: f"{r[name]['cpu_s']:.2f} ({r[name]['wall_s']:.2f})"
        green = all(r[n]["green"] and r[n]["same_tokens"] for n in ("compare", "default"))
        load = r[bench_doc.RUN]
        lines.append(f"| {r['hidden']} | {r['layers']} | {r['parameters'] / 1e9:.2f}B | {r['repeats']} | {cell('plain')} | "
                     f"{cell('compare')} | {ratio(r, 'compare'):.2f}x | {cell('default')} | "
                     f"{ratio(r, 'default'):.2f}x | {'green, same tokens' if green else 'NOT green'} | "
                     f"{r['peak_gb']:.1f} | {load['load before']:.1f} / {load['load after']:.1f} |")
    worst = {n: max(ratio(r, n) for r in rows) for n in ("compare", "default")}
    met = lambda n: "within" if worst[n] <= TARGET else "above"
    lines += ["", f"compare_generate with against_itself=False: at most {worst['compare']:.2f}x the plain decoding "
              f"({met('compare')} the {TARGET:g}x target); as called by default, each side also held to its own "
              f"recomputation: at most {worst['default']:.2f}x ({met('default')} it).", "",
              *([] if any(r["hidden"] >= 2048 for r in rows) else
                [f"The issue's 1B pair is not on this page: `{COMMAND} --widths 2048 --layers 16` (hidden 2048, 16 "
                 "layers, 0.84B parameters, ~14 GB free) adds it; on this machine, shared with other work, it did not "
                 "finish in the time its run was given.", ""]),
              "What the default adds: torch's recomputation of the prefix with no cache (one call; its own check "
              "reuses the float64 twin the comparison runs), Paddle's float32 recomputation and its model cast to "
              "float64 recomputing it (one call each). What compare_generate itself adds to the plain decoding: "
              "torch's float64 twin decoding the same tokens (float64 about twice float32's time on a CPU; the whole "
              "torch model cast to float64 once for its run, which the peak memory holds), each step's model call "
              "and cache kept as arrays, and every logit and cached key and value judged."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--widths", default="512,1024", help="hidden sizes, comma-separated (default 512,1024)")
    ap.add_argument("--layers", type=int, default=4, help="decoder layers (default 4)")
    ap.add_argument("--repeats", type=int, default=2, help="timing repeats, best taken (default 2)")
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "generate.md", help="the page; its JSON beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    source = args.out.with_suffix(".json")
    if args.page:
        bench_doc.rewrite(args.out, source, render, COMMAND)
        return
    if args.repeats < 1 or args.layers < 1:
        raise SystemExit("error: --repeats and --layers must be >= 1")
    widths = [int(w) for w in args.widths.split(",")]
    for hidden in widths:
        row = measure(hidden, args.layers, args.repeats)
        row["repeats"] = args.repeats
        # read again before each write: another width's run may have added its row meanwhile
        data = json.loads(source.read_text()) if source.exists() else {"rows": {}}
        data["rows"][f"{hidden}x{args.layers}"] = row
        bench_doc.write(source, json.dumps(data, indent=1) + "\n")
        print(json.dumps({k: v for k, v in row.items() if k != bench_doc.RUN}), flush=True)
    text = render(data)
    bench_doc.write(args.out, text)
    print(text)


if __name__ == "__main__":
    run_main(main)
