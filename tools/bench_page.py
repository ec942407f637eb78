"""How large a comparison's page is for a 7B-shaped model, and how long a headless Chromium takes to open it: the
rows of `python -m portcheck layers` on a Llama-7B pair (32 blocks; each block's attention, MLP and norms, every
module cumulative and isolated), with figures drawn at random, one module planted over its allowance.

    python tools/bench_page.py                      # 32 blocks
    python tools/bench_page.py --blocks 32 --calls 8   # each module called 8 times: thousands of rows

Prints the page's size, the time to write it and Chromium's time to open it and run its script (--dump-dom, the
median of 3), and whether the planted module is marked with its ancestors open.
"""
import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from portcheck.core import page
from portcheck.core.errors import PipelineError, run_main

MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.rotary_emb", "self_attn.o_proj",
           "self_attn", "input_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.act_fn", "mlp.down_proj", "mlp",
           "post_attention_layernorm", "")
PLANTED = "model.layers.17.mlp.down_proj"


def rows(blocks: int, calls: int, rng) -> list:
    names = ["model.embed_tokens"] + [f"model.layers.{b}" + (f".{m}" if m else "") for b in range(blocks)
                                      for m in MODULES] + ["model.norm", "lm_head"]
    out = []
    for name in names:
        for call in range(calls):
            used = 40.0 if name == PLANTED and call == 0 else float(rng.uniform(0.001, 0.6))
            out.append({"name": name if calls == 1 else f"{name}#{call}", "shape": "1x512x4096", "rule":
                        "measured: 16 x torch's own fp32 error", "max diff": used * 1e-5, "mean diff": used * 1e-6,
                        "allowed": 1e-5, "of allowed": used, "verdict": "RED" if used > 1 else "green",
                        "why": "max diff over its allowance" if used > 1 else ""})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--blocks", type=int, default=32, help="decoder blocks (Llama-7B: 32)")
    ap.add_argument("--calls", type=int, default=1, help="calls of each module (1: one forward)")
    args = ap.parse_args()
    if not (1 <= args.blocks <= 1000 and 1 <= args.calls <= 100):
        raise PipelineError("--blocks 1..1000 and --calls 1..100")
    chromium = shutil.which("chromium")
    if chromium is None:
        raise PipelineError("chromium is not installed: apt-get install -y chromium")
    cumulative = rows(args.blocks, args.calls, np.random.RandomState(0))
    isolated = {r["name"]: r for r in rows(args.blocks, args.calls, np.random.RandomState(1))}
    first = cumulative[[r["name"].split("#")[0] for r in cumulative].index(PLANTED)]["name"]
    data = {"title": "portcheck layers", "passed": False, "headline": f"the runs part at {first}",
            "first": {"torch": first, "paddle": first}, "verdicts": [],
            "sections": [{"kind": "tree", "title": "block by block", "rows": cumulative, "isolated": isolated,
                          "first": first}]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.html"
        started = time.perf_counter()
        page.write(data, path)
        wrote = time.perf_counter() - started
        opened = []
        for i in range(3):
            started = time.perf_counter()
            dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                  "--disable-background-networking", "--disable-component-update",
                                  f"--user-data-dir={tmp}/profile{i}", "--dump-dom", path.as_uri()],
                                 capture_output=True, text=True, timeout=300).stdout
            opened.append(time.perf_counter() - started)
        marked = f'id="first-diverging" data-module="{first}"' in dom
        closed = dom.count("<details") - dom.count("<details class=\"node\" open")
        print(f"{len(cumulative)} rows cumulative and {len(isolated)} isolated ({args.blocks} blocks, "
              f"{args.calls} call(s) each): {path.stat().st_size / 1e6:.2f} MB, written in {wrote:.2f} s, "
              f"opened by chromium (--dump-dom, its start included) in {statistics.median(opened):.2f} s "
              f"(median of 3); {first} marked: {marked}; {closed} modules collapsed")
    return 0


if __name__ == "__main__":
    run_main(main)
