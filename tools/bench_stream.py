"""What portcheck.checkpoints.stream costs at 7B: a random Llama pair written as checkpoints (transformers' bf16 safetensors
shards, paddlenlp's as its save_pretrained(..., safe_serialization=True) writes them), compared block by block.

    nice -n 10 python tools/bench_stream.py                  # the 7B shape: ~27 GB of shards under /tmp
    python tools/bench_stream.py --hidden 256 --layers 4     # a quick try (not written to the docs)
    python tools/bench_stream.py --dir DIR --write-only      # the 7B pair kept in DIR, and a planted Paddle side
    python tools/bench_stream.py --records                   # a block's records against their estimate (minutes)
    python tools/bench_stream.py --page                      # docs/bench/stream.md again from stream.json

The pair is written one layer at a time, each layer's tensors (float32 drawn at random, rounded to bfloat16; the
decoder layers take turns among DRAWS draws, the embeddings and the head their own) written twice: for transformers as they are, for paddlenlp in its layout (a Linear's weight transposed, as
convert's layouts put it; a bfloat16 tensor as its bits, uint16, as paddlenlp writes one). Then, each in a process
of its own (its peak resident memory its own, getrusage's, with any children's): one plain forward of each side,
block by block (each block read, run in float32, freed: the least a streamed forward costs); the clean comparison;
the comparison with each bug of --bug planted in layer --plant of the Paddle side (BUGS). The shards are removed
afterwards (--keep keeps them). With --hidden 4096 (the default shape) the
figures go to docs/bench/stream.json and their page, docs/bench/stream.md (tools/bench_doc.py's header).
--records: small pairs (RECORDS) at long token lengths, where one block's records take more than its weights:
the growth of the process's peak resident memory over one comparison, against the estimate the tokens are checked
against before any block runs (checkpoint.block_bytes); added to stream.json, the 7B figures kept.
Targets: peak under 8 GB; a comparison at most 4 x one plain block-by-block forward of each side.
"""
import argparse
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from pathlib import Path

import numpy as np

from portcheck.mapping.layouts import RULES
from portcheck.core.errors import PipelineError, run_main
from tools import bench_doc

PEAK_TARGET_GB = 8.0
TIME_TARGET = 4.0
COMMAND = "python tools/bench_stream.py"
DRAWS = 2          # decoder layers' random draws, layer i written with draw i % DRAWS
# (hidden size, tokens) of --records' pairs: 2 layers, 4 heads, intermediate 3x, vocabulary 256
RECORDS = ((128, "2x1024"), (512, "2x256"))
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def config(a) -> dict:
    return dict(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.heads,
                max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)


def layer_tensors(c: dict, prefix: str, rng) -> dict:
    """{torch name: float32 array} of one block, drawn at random (a Linear's N(0, 0.02), a norm's 1 + N(0, 0.1))."""
    h, m = c["hidden_size"], c["intermediate_size"]
    shapes = {"self_attn.q_proj": (h, h), "self_attn.k_proj": (h, h), "self_attn.v_proj": (h, h),
              "self_attn.o_proj": (h, h), "mlp.gate_proj": (m, h), "mlp.up_proj": (m, h), "mlp.down_proj": (h, m)}
    out = {f"{prefix}.{k}.weight": rng.standard_normal(s, dtype=np.float32) * np.float32(0.02)
           for k, s in shapes.items()}
    for norm in ("input_layernorm", "post_attention_layernorm"):
        out[f"{prefix}.{norm}.weight"] = 1 + rng.standard_normal(h, dtype=np.float32) * np.float32(0.1)
    return out


def write_pair(c: dict, folder: Path, draws: int = DRAWS) -> float:
    """Both checkpoints, one shard per block, the decoder layers taking turns among `draws` draws; the seconds it
    took."""
    import torch
    from paddlenlp.transformers import LlamaConfig as PaddleConfig
    from safetensors.numpy import save_file as save_np
    from safetensors.torch import save_file as save_pt
    from transformers import LlamaConfig
    start = time.perf_counter()
    for side in ("torch", "paddle"):
        (folder / side).mkdir(parents=True)
    LlamaConfig(**c, torch_dtype="bfloat16").save_pretrained(folder / "torch")
    PaddleConfig(**c, dtype="bfloat16").save_pretrained(folder / "paddle")
    rng = np.random.default_rng(0)
    h, v = c["hidden_size"], c["vocab_size"]
    groups = [{"model.embed_tokens.weight": rng.standard_normal((v, h), dtype=np.float32) * np.float32(0.02)}]
    groups += [i for i in range(c["num_hidden_layers"])]
    groups += [{"model.norm.weight": 1 + rng.standard_normal(h, dtype=np.float32) * np.float32(0.1),
                "lm_head.weight": rng.standard_normal((v, h), dtype=np.float32) * np.float32(0.02)}]
    maps = {"torch": {}, "paddle": {}}
    drawn = {}  # {draw: (torch's bf16 tensors, Paddle's arrays)} of a decoder layer, by suffix
    for n, group in enumerate(groups):
        shard = f"model-{n + 1:05d}-of-{len(groups):05d}.safetensors"
        if isinstance(group, int):  # one of `draws` random layers: drawing and transposing 27 GB afresh takes too long
            if group % draws not in drawn:
                pt = {k.split(".", 3)[3]: torch.from_numpy(a).to(torch.bfloat16)
                      for k, a in layer_tensors(c, "model.layers.0", rng).items()}
                drawn[group % draws] = pt, {k: paddle_tensor("model.layers.0." + k, t)[1] for k, t in pt.items()}
            pt = {f"model.layers.{group}.{k}": t for k, t in drawn[group % draws][0].items()}
            pd = {paddle_name(f"model.layers.{group}.{k}"): a for k, a in drawn[group % draws][1].items()}
        else:
            pt = {k: torch.from_numpy(a).to(torch.bfloat16) for k, a in group.items()}
            pd = dict(paddle_tensor(k, t) for k, t in pt.items())
        save_pt(pt, folder / "torch" / shard, metadata={"format": "pt"})
        save_np(pd, folder / "paddle" / shard, metadata={"format": "np"})
        maps["torch"].update({k: shard for k in pt})
        maps["paddle"].update({k: shard for k in pd})
        del pt, pd
        groups[n] = None  # the embeddings' and head's float32 arrays freed once written
    for side in ("torch", "paddle"):
        index = {"metadata": {}, "weight_map": maps[side]}
        (folder / side / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return time.perf_counter() - start


def paddle_name(torch_name: str) -> str:
    return "llama." + torch_name[len("model."):] if torch_name.startswith("model.") else torch_name


def paddle_tensor(name: str, tensor) -> tuple:
    """(paddlenlp's name, its array) of a torch bf16 tensor: its bits as uint16 (paddle's numpy of bfloat16), a
    Linear's weight and the head's in Paddle's [in, out] layout (convert's "transpose" rule)."""
    import torch
    module, _, leaf = name.rpartition(".")
    if module.split(".")[-1] in LINEAR or module == "lm_head":  # transposed by torch: 4x numpy's on 16-bit values
        leaf, tensor = RULES["transpose"](leaf, tensor)
    return f"{paddle_name(module)}.{leaf}", tensor.contiguous().view(torch.int16).numpy().view(np.uint16)


def peak_gb() -> float:
    """This process's peak resident memory with its children's (getrusage: kB on Linux)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) * 1024 / 1e9


# An RMSNorm's epsilon moves its output by about eps / (2 mean(x^2)). With these random weights the hidden states grow
# layer by layer: mean(x^2) at layer 17's post-attention RMSNorm is 495 - 743 (2 x 16 tokens), so 1e-3 for 1e-5 moves
# its output 1e-6 of itself, 8 roundings: below what two correct fp32 kernels differ by there (a sum of 4096 values),
# and no check can see it at these weights. 1.0 moves it 1e-3, as 1e-3 would move a hidden state of mean square 1.
EPSILON = 1.0


def epsilon(layer):
    layer.post_attention_layernorm.variance_epsilon = EPSILON  # paddlenlp's is the config's, 1e-5


def rotary(layer):
    """The port's rotary base 500000 in this layer alone (the config's 10000)."""
    from paddlenlp.transformers.llama.modeling import LlamaRotaryEmbedding
    attention = layer.self_attn
    attention.rotary_emb = LlamaRotaryEmbedding(attention.head_dim, attention.max_position_embeddings, base=5e5)


def swapped(layer):
    """The port's MLP with gate and up swapped: silu(up(x)) * gate(x)."""
    import paddle
    mlp = layer.mlp
    mlp.forward = lambda x: mlp.down_proj(paddle.nn.functional.silu(mlp.up_proj(x)) * mlp.gate_proj(x))


BUGS = {"eps": epsilon, "rope": rotary, "swap": swapped}  # what --bug plants in layer --plant of the Paddle side
UNCONVERTED = "paddle_q_unconverted"  # --write-only's planted Paddle checkpoint (tools/bench_page.py's 7B page)


def unconverted(folder: Path, layer: int) -> Path:
    """folder/UNCONVERTED: paddle/ with layer `layer`'s q_proj weight left in torch's layout (a square weight the
    converter skipped: its shape is right, its values transposed); every other file a hard link to paddle/'s, the
    planted shard written anew (never through a link)."""
    from safetensors.numpy import load_file, save_file
    out = folder / UNCONVERTED
    out.mkdir()
    for f in (folder / "paddle").iterdir():
        (out / f.name).hardlink_to(f)
    name = f"llama.layers.{layer}.self_attn.q_proj.weight"
    shard = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"][name]
    tensors = load_file(out / shard)
    tensors[name] = np.ascontiguousarray(tensors[name].T)
    (out / shard).unlink()
    save_file(tensors, out / shard, metadata={"format": "np"})
    return out


def child(kind: str, folder: Path, tokens: tuple, plant: int, bug: str = "eps") -> dict:
    """One measurement in this process: 'plain', 'clean' or 'plant'."""
    from portcheck.checkpoints import stream
    vocab = json.loads((folder / "torch" / "config.json").read_text())["vocab_size"]
    ids = np.random.RandomState(0).randint(0, vocab, tokens).astype(np.int64)
    import paddlenlp.transformers  # noqa: F401 - the libraries loaded before the clock starts, as in a user's process
    import transformers.models.llama.modeling_llama  # noqa: F401
    start = time.perf_counter()
    out = {"kind": kind}
    if kind == "records":
        return records_child(folder, tokens)
    if kind == "plain":
        out.update(plain_forward(folder, ids))
    else:
        model = None
        if kind == "plant":
            model = stream.paddle_skeleton(folder / "paddle")
            BUGS[bug](model.llama.layers[plant])
            out["bug"] = bug
        report = stream.compare(folder / "torch", folder / "paddle", ids, paddle_model=model)
        out.update(passed=report.passed, first=report.first_diverging, block=report.block_of(report.first_diverging),
                   first_isolated=report.first_isolated, upcast=report.upcast, blocks=len(report.blocks),
                   red_isolated=[b.name for b in report.blocks if not b.isolated.passed],
                   parting=[(m, round(used, 3)) for m, used in report.parting])
    out.update(seconds=round(time.perf_counter() - start, 2), peak_gb=round(peak_gb(), 3))
    return out


def records_child(folder: Path, tokens: tuple) -> dict:
    """One comparison in this process, after one of 16 tokens: how far its peak resident memory rose above where it
    stood (the peak reset first, /proc/self/clear_refs), against checkpoint.block_bytes' estimate of one block's
    records."""
    from portcheck.checkpoints import checkpoint, stream
    c = json.loads((folder / "torch" / "config.json").read_text())
    ids = np.random.RandomState(0).randint(0, c["vocab_size"], tokens).astype(np.int64)
    import paddlenlp.transformers  # noqa: F401 - the libraries loaded before, as in a user's process
    import transformers.models.llama.modeling_llama  # noqa: F401
    status = lambda key: next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                              if line.startswith(key + ":")) * 1024
    stream.compare(folder / "torch", folder / "paddle", ids[:, :16])  # the frameworks' first kernels and caches
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to VmRSS
    before = status("VmRSS")
    report = stream.compare(folder / "torch", folder / "paddle", ids)
    return {"hidden": c["hidden_size"], "tokens": "x".join(map(str, tokens)), "passed": report.passed,
            "grew_mb": round((status("VmHWM") - before) / 2**20),
            "estimate_mb": round(checkpoint.block_bytes(c, *tokens) / 2**20)}


def records(a) -> list:
    """Each of RECORDS' pairs written, then compared in a process of its own (records_child)."""
    out = []
    for hidden, tokens in RECORDS:
        c = dict(vocab_size=256, hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048, rms_norm_eps=1e-5,
                 rope_theta=10000.0, tie_word_embeddings=False)
        folder = Path(tempfile.mkdtemp(prefix="portcheck-bench-records-", dir=a.dir))
        try:
            write_pair(c, folder)
            done = subprocess.run([sys.executable, __file__, "--child", "records", "--dir", str(folder), "--tokens",
                                   tokens], capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode or not lines:
                raise PipelineError(f"the records run failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            out.append(json.loads(lines[-1]))
            print(out[-1], flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return out


def plain_forward(folder: Path, ids) -> dict:
    """One forward of each side, block by block as stream.compare reads them: each block's weights read and
    upcast, run once in float32, freed. {torch_seconds, paddle_seconds}."""
    import paddle
    import torch
    from portcheck.checkpoints import stream
    out = {}
    x = ids
    for side in ("torch", "paddle"):
        start = time.perf_counter()
        shards = stream.Shards(folder / side, side)
        model = stream.torch_skeleton(folder / side) if side == "torch" else stream.paddle_skeleton(folder / side)
        expected = stream._torch_expected(model) if side == "torch" else stream._paddle_expected(model)
        names = stream._matched(shards, expected, {})
        h = x
        for _, path in stream.blocks(model, side):
            if side == "torch":
                stream._load_torch(model, path, shards, names, "cpu")
                with torch.no_grad():
                    h = stream.torch_block(model, path, "cpu")(torch.from_numpy(np.asarray(h))).numpy()
                stream._free_torch(model, path)
            else:
                stream._load_paddle(model, path, shards, names)
                with paddle.no_grad():
                    h = stream.paddle_block(model, path)(paddle.to_tensor(np.asarray(h))).numpy()
                stream._free_paddle(model, path)
        out[f"{side}_seconds"] = round(time.perf_counter() - start, 2)
    return out


def measure(kind: str, folder: Path, a) -> dict:
    """child() in a process of its own, at nice's priority of this one."""
    kind, _, bug = kind.partition(":")
    cmd = [sys.executable, __file__, "--child", kind, "--dir", str(folder), "--tokens", a.tokens,
           "--plant", str(a.plant), "--bug", bug or "eps"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise PipelineError(f"the {kind} run failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    result = json.loads(lines[-1])
    print(result, flush=True)
    return result


def table(r: dict) -> list:
    """One row per run: its verdict (where the runs part, every block red on torch's input), peak and seconds."""
    c, plain = r["config"], r["plain"]
    base = plain["torch_seconds"] + plain["paddle_seconds"]
    runs = [k for k in r if k == "clean" or k.startswith("plant:")]
    peak = max(r[k]["peak_gb"] for k in runs + ["plain"])
    head = (f"{r['parameters'] / 1e9:.2f}B (hidden {c['hidden_size']}, {c['num_hidden_layers']} layers, bf16 on disk, "
            f"{r['disk_gb']:.1f} GB of shards), {r['tokens']} tokens; plain block-by-block forward: torch "
            f"{plain['torch_seconds']:.0f} s + Paddle {plain['paddle_seconds']:.0f} s, peak {plain['peak_gb']:.2f} GB")
    out = [head, "", "| run | verdict | where the runs part (x its allowance) | blocks red on torch's input | peak | "
           "seconds (x plain) |", "|---|---|---|---|---|---|"]
    for k in runs:
        x = r[k]
        what = "clean" if k == "clean" else f"{x['bug']} in layer {r['plant_layer']}"
        parts = ", ".join(f"{m} ({used:,.0f}x)" if used >= 10 else f"{m} ({used:.2f}x)"
                          for m, used in x["parting"]) or "-"
        out.append(f"| {what} | {'green' if x['passed'] else 'RED'} | {parts} | {', '.join(x['red_isolated']) or '-'} "
                   f"| {x['peak_gb']:.2f} GB | {x['seconds']:.0f} ({x['seconds'] / base:.1f}x) |")
    slowest = max(r[k]["seconds"] for k in runs)
    out += ["", f"Peak target (under {PEAK_TARGET_GB:g} GB): {'met' if peak < PEAK_TARGET_GB else '**not met**'} "
            f"({peak:.2f} GB). Time target (a comparison at most {TIME_TARGET:g} x one plain block-by-block forward of "
            f"each side): {'met' if slowest <= TIME_TARGET * base else '**not met**'} ({slowest / base:.1f}x at most). "
            f"Writing the pair took {r['write_seconds']:.0f} s."]
    return out


def render(r: dict) -> str:
    """The page, from the JSON (docs/bench/stream.json) alone."""
    eps = f"{EPSILON:g}"
    lines = ["# Block by block at 7B, measured", "", bench_doc.header(r.get(bench_doc.RUN), COMMAND), "",
             "A random 7B-shaped Llama pair (hidden 4096, intermediate 11008, 32 layers, 32 heads, vocabulary 32000), "
             "written as bf16 safetensors shards, one shard per block, for transformers and as paddlenlp writes its "
             "checkpoint. The decoder layers take turns between two random draws: what is measured does not depend on "
             "the values. Each run is a process of its own: a clean comparison of 2 x 16 tokens, one plain forward "
             "of each side block by block (each block read, run once in float32, freed), and one comparison per bug "
             f"planted in layer {r['plant_layer']} of the Paddle side alone. Peak: the process's peak resident "
             "memory (getrusage).", "", *table(r), "",
             "The figures were taken beside the test suite on a 2-core, 24 GB machine, at nice 0, without "
             "`twin.wide_casts` (torch's float64 run keeping float64 through a model's own casts, which widens the "
             "allowances a little where a module casts down). The seconds are the shared machine's; the ratios to "
             "the plain forward are what to read. The torch side's plain forward is mostly reading and widening "
             "the bf16 shards. The peak is for a pair whose float32 weights would be 54 GB (both sides), the "
             "libraries included.", "",
             "Why the floor is sqrt(n) roundings for rows of n values (docs/tolerances.md, `python "
             "tools/floor_rows.py`): Paddle's CPU mean sums the RMSNorm's 4096 squares left to right, torch's "
             "pairwise. At a floor of 16 roundings the clean pair is red at `model.layers.0.input_layernorm`, 1.07x "
             "its allowance: 16 roundings do not cover a correct kernel's sum of 4096 values. The same row at a 7B "
             "width (`tests/test_stream.py`) is 1.15x its allowance at a floor of 16 and 0.37x with sqrt(n), an "
             "epsilon 1e-6 for 1e-5 there 1,376x. With `twin.wide_casts`, torch's own error there is measured, not "
             "rounded away: 0.76x at a floor of 16, 0.32x with sqrt(n), the epsilon 1,179x.", "",
             f"Why the planted epsilon is {eps}, not 1e-3: an RMSNorm's epsilon moves its output by about "
             "eps / (2 mean(x^2)). With these random weights the hidden states grow layer by layer: mean(x^2) at layer "
             "17's post-attention RMSNorm is 495 - 743 on the 2 x 16 tokens (transformers' layers alone). So 1e-3 "
             "moves that output 1e-6 of itself, 8 roundings: less than two correct kernels' sums of 4096 values "
             f"differ by there, which no check can tell from a correct port. {eps} moves it 1e-3, as 1e-3 would move "
             "a hidden state of mean square 1. Where the hidden states are small (layer 0's input RMSNorm, mean "
             "square 4e-4), 1e-6 for 1e-5 is red."]
    if "records" in r:
        lines += ["", "## A block's records", "", bench_doc.header(r["records"][bench_doc.RUN], COMMAND), "",
                  "Small pairs (2 layers, 4 heads, intermediate 3x the width, vocabulary 256) at long token lengths, "
                  "where one block's records take more than its weights. Before any block runs, the tokens are "
                  "checked against the memory free with an estimate of one block's records "
                  "(`checkpoint.block_bytes`, 20 bytes a value). Grew: how far the process's peak resident memory "
                  "rose above where it stood, over one comparison made after one of 16 tokens (the frameworks' "
                  "first kernels and caches).", "",
                  "| hidden | tokens | verdict | grew | estimate |", "|---|---|---|---|---|"]
        lines += [f"| {x['hidden']} | {x['tokens'].replace('x', ' x ')} | {'green' if x['passed'] else 'RED'} | "
                  f"{x['grew_mb']} MB | {x['estimate_mb']} MB |" for x in r["records"]["pairs"]]
    return "\n".join(lines) + "\n"


def write(r: dict, out: Path):
    bench_doc.write(out.with_suffix(".json"), json.dumps(r, indent=1) + "\n")
    bench_doc.write(out, render(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--intermediate", type=int, default=11008)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--tokens", default="2x16", help="batch x length")
    ap.add_argument("--plant", type=int, default=17, help="the layer the bug is planted in")
    ap.add_argument("--bug", choices=tuple(BUGS), nargs="+", default=list(BUGS), help="the bugs planted, one run "
                    f"each: paddlenlp's post-attention RMSNorm epsilon 1e-5 -> {EPSILON:g} (eps), its rotary base "
                    "10000 -> 500000 (rope), the MLP's gate and up swapped (swap)")
    ap.add_argument("--dir", type=Path, help="where the shards go (default a new folder under the system's temp)")
    ap.add_argument("--keep", action="store_true", help="keep the shards")
    ap.add_argument("--write-only", action="store_true", help="write the pair (torch/, paddle/) and a Paddle side "
                    f"with layer --plant's q_proj weight left in torch's layout ({UNCONVERTED}/), keep them, print "
                    "where, and stop: for `python -m portcheck layers --html` (tools/bench_page.py)")
    ap.add_argument("--records", action="store_true", help="a block's records against their estimate, on small "
                    "pairs at long token lengths (RECORDS), added to the figures")
    ap.add_argument("--child", choices=("plain", "clean", "plant", "records"), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "stream.md",
                    help="the page, its figures (.json) beside it; written for the 7B shape only")
    bench_doc.add_page_flag(ap)
    a = ap.parse_args()
    if a.page:
        bench_doc.rewrite(a.out, a.out.with_suffix(".json"), render, COMMAND)
        return 0
    shape = re.fullmatch(r"([1-9]\d*)x([1-9]\d*)", a.tokens)
    if shape is None:
        raise PipelineError(f"--tokens {a.tokens}: give batch x length, e.g. 2x16")
    tokens = tuple(int(t) for t in shape.groups())
    if a.child:
        print(json.dumps(child(a.child, a.dir, tokens, a.plant, a.bug[0])))
        return 0
    if a.dir is not None and not a.dir.is_dir():
        raise PipelineError(f"--dir {a.dir}: not a folder; give an existing folder with room for the shards")
    if a.records:
        facts = bench_doc.start()
        pairs = records(a)
        r = json.loads(a.out.with_suffix(".json").read_text())  # the 7B figures kept
        write({**r, "records": {"pairs": pairs, bench_doc.RUN: bench_doc.finish(facts)}}, a.out)
        return 0
    c = config(a)
    if not 0 <= a.plant < a.layers:
        raise PipelineError(f"--plant {a.plant}: give a layer from 0 to {a.layers - 1}")
    folder = Path(tempfile.mkdtemp(prefix="portcheck-bench-stream-", dir=a.dir))
    if a.write_only:
        took = write_pair(c, folder)
        print(f"pair written in {took:.0f} s: {folder}/torch, {folder}/paddle and {unconverted(folder, a.plant)}")
        return 0
    facts = bench_doc.start()
    try:
        took = write_pair(c, folder)
        disk = sum(f.stat().st_size for f in folder.rglob("*.safetensors")) / 1e9
        print(f"pair written in {took:.0f} s, {disk:.1f} GB", flush=True)
        h, m, v, n = a.hidden, a.intermediate, a.vocab, a.layers
        r = {"config": c, "tokens": a.tokens, "plant_layer": a.plant, "write_seconds": round(took, 1),
             "disk_gb": round(disk, 2), "parameters": n * (4 * h * h + 3 * h * m + 2 * h) + 2 * v * h + h}
        for kind in ("clean", "plain", *(f"plant:{bug}" for bug in a.bug)):  # each result printed as it comes
            r[kind] = measure(kind, folder, a)
    finally:
        if not a.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print("\n".join(table(r)))
    if (a.hidden, a.layers) == (4096, 32):
        before = a.out.with_suffix(".json")
        kept = {k: v for k, v in json.loads(before.read_text()).items() if k == "records"} if before.is_file() else {}
        write({**r, **kept, bench_doc.RUN: bench_doc.finish(facts)}, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
