"""What inferring the layouts costs: convert with no map and no layouts on a PaddleFormers pair (transformers'
Qwen3Model against paddleformers', random weights, float32), each fused layout (qkv_proj per key-value group,
up_gate_proj) settled by runs on the input, against the same convert with the layouts given (recipes.paddleformers: nothing run)
and one plain forward of each model. Run in the PaddleFormers environment (requirements-formers.txt).

    nice -n 10 .venv-formers/bin/python tools/bench_infer.py                  # a ~1B config (16 layers of 2048)
    nice -n 10 .venv-formers/bin/python tools/bench_infer.py --layers 4       # a smaller one, said on the page
    python tools/bench_infer.py --page         # docs/bench/infer.md again from infer.json, nothing measured

Wall and CPU seconds of this process, each the best of --repeats after nothing warmed (convert sets every tensor: a
first call is a whole call); the cost of inferring is convert's seconds with no layouts less its seconds with them,
said as a multiple of the two plain forwards (torch's and Paddle's on the same ids). Both models are held at once:
the tool reads the memory available first and refuses a config that would not fit, naming the largest that would.
"""
import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, allocator, before torch/paddle load)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from portcheck.core.errors import PipelineError, run_main
from tools import bench_doc

COMMAND = "python tools/bench_infer.py"
PAGE = bench_doc.PAGES / "infer.md"
# Qwen3's shape at about a billion parameters: Qwen3-1.7B's width, heads and vocabulary, 16 of its 28 layers
CONFIG = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_attention_heads=16,
              num_key_value_heads=8, head_dim=128, max_position_embeddings=4096, use_cache=False, rms_norm_eps=1e-6)
HEADROOM = 1.5  # the two models' float32 bytes times this: convert's one tensor at a time, the forwards' activations


def parameters(layers: int) -> int:
    """Qwen3Model's parameter count at CONFIG's width and `layers` layers."""
    h, i, d = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["head_dim"]
    q, kv = CONFIG["num_attention_heads"] * d, CONFIG["num_key_value_heads"] * d
    layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h + 2 * d
    return CONFIG["vocab_size"] * h + layers * layer + h


def available() -> int:
    """Bytes of memory available now (/proc/meminfo's MemAvailable), or 0 where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def best(fn, repeats: int) -> tuple:
    """(wall, CPU) seconds of fn's fastest call of `repeats` (by wall)."""
    runs = []
    for _ in range(repeats):
        wall, spent = time.perf_counter(), cpu()
        fn()
        runs.append((time.perf_counter() - wall, cpu() - spent))
    return min(runs)


def measure(layers: int, seq: int, repeats: int) -> dict:
    from portcheck.checkpoints import fleet
    fleet.prepare()  # torch, the stand-ins, paddleformers: before transformers and the rest of portcheck
    import numpy as np
    import paddle
    import torch
    import transformers
    from paddleformers.transformers.qwen3.configuration import Qwen3Config
    from paddleformers.transformers.qwen3.modeling import Qwen3Model
    from portcheck import convert
    from portcheck.mapping.recipes import paddleformers
    settings = dict(CONFIG, num_hidden_layers=layers)
    torch.manual_seed(0)
    paddle.seed(0)
    pt = transformers.Qwen3Model(transformers.Qwen3Config(**settings)).eval()
    pd = Qwen3Model(Qwen3Config(**settings, fuse_rms_norm=False))
    pd.eval()
    ids = np.random.RandomState(0).randint(3, CONFIG["vocab_size"], (1, seq)).astype("int64")
    layouts = paddleformers(CONFIG["num_attention_heads"], CONFIG["num_key_value_heads"])
    given = best(lambda: convert(pt, pd, inputs=ids, layouts=layouts), repeats)
    said = []
    inferred = best(lambda: said.append(convert(pt, pd, inputs=ids).said), repeats)
    with torch.no_grad():
        t_forward = best(lambda: pt(input_ids=torch.tensor(ids)), repeats)
    with paddle.no_grad():
        p_forward = best(lambda: pd(input_ids=paddle.to_tensor(ids)), repeats)
    forward = tuple(a + b for a, b in zip(t_forward, p_forward))
    cost = tuple(a - b for a, b in zip(inferred, given))
    return {"layers": layers, "parameters": parameters(layers), "seq": seq, "repeats": repeats,
            "convert with layouts given": [round(x, 2) for x in given],
            "convert inferring them": [round(x, 2) for x in inferred],
            "plain forward (torch and Paddle)": [round(x, 2) for x in forward],
            "inferring, over the plain forward": [round(c / f, 2) for c, f in zip(cost, forward)],
            "settled": said[-1].split("; ")[:2]}


def render(r: dict) -> str:
    """The page, from the JSON beside it alone."""
    lines = ["# What inferring the layouts costs", "",
             bench_doc.header(r.get(bench_doc.RUN), "nice -n 10 .venv-formers/bin/" + COMMAND), "",
             f"transformers' Qwen3Model against paddleformers' ({r['parameters'] / 1e9:.2f}B parameters: hidden "
             f"{CONFIG['hidden_size']}, {r['layers']} layers, {CONFIG['num_attention_heads']} heads over "
             f"{CONFIG['num_key_value_heads']} key-value heads, vocabulary {CONFIG['vocab_size']}), random weights, "
             f"float32, one sequence of {r['seq']} ids. Seconds: the best of {r['repeats']}, wall and CPU of the "
             "process.", "",
             "| | wall s | CPU s |", "|---|---|---|"]
    for key in ("convert with layouts given", "convert inferring them", "plain forward (torch and Paddle)",
                "inferring, over the plain forward"):
        wall, spent = r[key]
        unit = "x" if key.startswith("inferring") else ""
        lines.append(f"| {key} | {wall}{unit} | {spent}{unit} |")
    lines += ["", "convert with the layouts given (recipes.paddleformers) runs nothing; with none, each fused "
              "module's layout is settled by runs on the ids, every layer's of one shape at once, before any tensor "
              "is set: the first layer's module around it (its attention, its MLP) alone holds the converted "
              "tensors, fed torch's recorded input, each candidate's run stopping once it returns, the candidates "
              "in turn until one gives torch's values. Inferring costs the difference, said over the two plain "
              "forwards. The layouts it settled:", ""]
    lines += [f"- {line}" for line in r["settled"]]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--layers", type=int, default=16, help="Qwen3 layers at CONFIG's width (default 16: ~1.2B)")
    ap.add_argument("--seq", type=int, default=16, help="ids in the one sequence (default 16)")
    ap.add_argument("--repeats", type=int, default=2, help="calls of each, the best kept (default 2)")
    ap.add_argument("--out", type=Path, default=PAGE, help="the page; its .json beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    json_path = args.out.with_suffix(".json")
    if args.page:
        bench_doc.rewrite(args.out, json_path, render, COMMAND)
        return
    if args.layers < 1 or args.seq < 1 or args.repeats < 1:
        raise PipelineError("--layers, --seq and --repeats take a whole number of 1 or more")
    need, have = 2 * 4 * parameters(args.layers) * HEADROOM, available()
    if have and need > have:
        fits = max((n for n in range(1, args.layers) if 2 * 4 * parameters(n) * HEADROOM <= have), default=0)
        raise PipelineError(f"--layers {args.layers} needs about {need / 2**30:.1f} GiB (both models in float32), "
                            f"{have / 2**30:.1f} GiB is available: " + (f"--layers {fits} fits" if fits else
                                                                        "free some memory first"))
    run = bench_doc.start(env=("OMP_NUM_THREADS",))
    r = measure(args.layers, args.seq, args.repeats)
    r[bench_doc.RUN] = bench_doc.finish(run)
    bench_doc.write(json_path, json.dumps(r, indent=1) + "\n")
    bench_doc.write(args.out, render(r))
    print(render(r))


if __name__ == "__main__":
    run_main(main)
