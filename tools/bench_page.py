"""How large a comparison's page is at 7B size, how long a headless Chromium takes to open it, and whether it is
usable there: the first diverging module marked, visible, its block open and every other block collapsed; a search
by name and the sort by ratio timed.

    python tools/bench_page.py                         # a 7B-shaped page of figures drawn at random (32 blocks)
    python tools/bench_page.py --calls 8               # each module called 8 times: thousands of rows
    python -m portcheck layers --torch T --paddle P --html big.html    # a real comparison's page, then:
    python tools/bench_page.py --html big.html --first model.layers.17.self_attn.q_proj --label "..."
    python tools/bench_page.py --page                  # docs/bench/page.md again from page.json, nothing measured

The time to open is the page's own, from the navigation's start to the first frame drawn after its load event
(reading, parsing, its script run, style and layout), in a Chromium already started (tools/headless.py), the median
of 3. Each measurement is kept in docs/bench/page.json under its --label, with the run's facts (tools/bench_doc.py),
and the table of all of them is written to its page, docs/bench/page.md (--no-docs: printed only).
"""
import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from portcheck.core import page
from portcheck.core.errors import PipelineError, require, run_main
from portcheck.core.fileio import read_json
from tools import bench_doc

COMMAND = "python tools/bench_page.py"
MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.rotary_emb", "self_attn.o_proj",
           "self_attn", "input_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.act_fn", "mlp.down_proj", "mlp",
           "post_attention_layernorm", "")
PLANTED = "model.layers.17.mlp.down_proj"

# Run in each document before its own script (CDP's, not the page's: its Content-Security-Policy does not apply): when
# the first frame after its load event is drawn, from the navigation's start.
PAINTED = "addEventListener('load', () => requestAnimationFrame(() => requestAnimationFrame(() => " \
          "{ window.__painted = performance.now(); })));"
# What the browser is asked once the page has loaded: its load's timing and what a user sees of the marked module.
SEEN = """(() => {
  const nav = performance.getEntriesByType('navigation')[0], f = document.getElementById('first-diverging');
  const blocks = [...document.querySelectorAll('details.node')]
    .filter(d => /^model\\.layers\\.\\d+$/.test(d.dataset.path));
  const r = f && f.getBoundingClientRect();
  return {load_ms: Math.round(nav.loadEventEnd), dom_ms: Math.round(nav.domContentLoadedEventEnd),
          rows: document.querySelectorAll('.tree .row[data-module]').length,
          first: f && f.dataset.module, visible: !!f && f.checkVisibility() && r.top >= 0 && r.bottom <= innerHeight,
          red: !!f && f.classList.contains('red'), verdict: document.querySelector('header').dataset.verdict,
          blocks: blocks.length,
          open_blocks: blocks.filter(d => d.open).map(d => d.dataset.path),
          closed: [...document.querySelectorAll('details.node')].filter(d => !d.open).length};
})()"""
# A search by name (every row shown or hidden) and the sort by ratio, each timed in the page.
USED = """(() => {
  const q = document.getElementById('search'), t0 = performance.now();
  q.value = 'down_proj'; q.dispatchEvent(new Event('input'));
  const shown = [...document.querySelectorAll('.tree .row[data-module]')].filter(r => r.checkVisibility()).length;
  const t1 = performance.now();
  q.value = ''; q.dispatchEvent(new Event('input'));
  const t2 = performance.now();
  document.getElementById('sort-ratio').click();
  const top = document.querySelector('.tree.flat .row[data-module]');
  return {search_ms: t1 - t0, shown: shown, sort_ms: performance.now() - t2, top: top && top.dataset.module};
})()"""


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


def drawn(blocks: int, calls: int, path: Path) -> str:
    """A 7B-shaped page of figures drawn at random, one module planted over its allowance, written at `path`; the
    planted row's name."""
    cumulative = rows(blocks, calls, np.random.RandomState(0))
    isolated = {r["name"]: r for r in rows(blocks, calls, np.random.RandomState(1))}
    first = cumulative[[r["name"].split("#")[0] for r in cumulative].index(PLANTED)]["name"]
    data = {"title": "portcheck layers", "passed": False, "headline": f"the runs part at {first}",
            "first": {"torch": first, "paddle": first}, "verdicts": [],
            "sections": [{"kind": "tree", "title": "block by block", "rows": cumulative, "isolated": isolated,
                          "first": first}]}
    page.write(data, path)
    return first


def measure(path: Path, first: str, shot: Path = None) -> dict:
    """The page opened 3 times in one headless Chromium: its size, the median time to open, what is seen."""
    from tools.headless import Browser
    opened, seen = [], None
    with Browser(size=(1400, 900)) as b:
        b.call("Page.enable")
        b.call("Page.addScriptToEvaluateOnNewDocument", source=PAINTED)
        for _ in range(3):
            b.open("about:blank")
            b.open(path.resolve().as_uri())
            deadline = time.time() + 600
            while b.value("location.protocol === 'file:' && window.__painted") in (None, False):
                if time.time() > deadline:
                    raise PipelineError(f"{path}: not opened in 600 s")
                time.sleep(0.05)
            seen = b.value(SEEN)
            opened.append(b.value("window.__painted") / 1e3)
        if shot is not None:
            b.shot(shot)
        used = b.value(USED)
    cold = {what: statistics.median(dumped(uri) for _ in range(3)) for what, uri in
            (("page", path.resolve().as_uri()), ("blank", "about:blank"))}
    if seen["first"] != first:
        raise PipelineError(f"{path} marks {seen['first']} as the first diverging module, not {first}")
    return {"MB": round(path.stat().st_size / 1e6, 2), "open_s": round(statistics.median(opened), 2),
            "opens_s": [round(s, 2) for s in opened], **seen,
            "cold_s": round(cold["page"], 2), "cold_blank_s": round(cold["blank"], 2),
            "search_ms": round(used["search_ms"]), "search_shown": used["shown"], "sort_ms": round(used["sort_ms"]),
            "sorted_top": used["top"]}


def dumped(uri: str) -> float:
    """Seconds a new headless Chromium takes to start, open `uri`, run its script and print its DOM (--dump-dom): a
    page opened cold, as by a double-click."""
    from tools.headless import CHROMIUM
    with tempfile.TemporaryDirectory() as profile:
        started = time.perf_counter()
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", f"--user-data-dir={profile}",
                        "--dump-dom", uri], capture_output=True, timeout=600, check=True)
        return time.perf_counter() - started


def table(figures: dict) -> list:
    out = ["| page | rows | size | opens in (cold, Chromium's start too; a blank page's) | first diverging: marked, "
           "visible, red | blocks open / collapsed | search by name | sort by ratio |", "|---" * 8 + "|"]
    for label, f in figures.items():
        opened = f"block {', '.join(p.rsplit('.', 1)[-1] for p in f['open_blocks'])} open" if f["open_blocks"] \
            else "no block open"
        marked = f"`{f['first']}`: {'yes' if f['visible'] else 'NOT VISIBLE'}, {'red' if f['red'] else 'NOT RED'}" \
            if f["first"] else f"none: the page {f['verdict']}"
        out.append(f"| {label} | {f['rows']:,} | {f['MB']:.2f} MB | {f['open_s']:.2f} s ({f['cold_s']:.1f} s; "
                   f"{f['cold_blank_s']:.1f} s) | {marked} | {opened}, "
                   f"{f['blocks'] - len(f['open_blocks'])} of {f['blocks']} collapsed | {f['search_ms']} ms "
                   f"| {f['sort_ms']} ms |")
    return out


def render(figures: dict) -> str:
    """The page, from the JSON (docs/bench/page.json) alone: each label's run said in the header."""
    runs = [f.get(bench_doc.RUN) or {} for f in figures.values()]
    lines = ["# A comparison's page at 7B size, measured", "", bench_doc.header(runs, COMMAND), "",
             "How large a comparison's HTML page is at a Llama-7B's size, how long Chromium takes to open it, and "
             "whether it is usable there. The pages: a Llama-7B-shaped pair (32 blocks, hidden 4096, bf16 shards, "
             "27 GB, random weights: `tools/bench_stream.py`'s) with one bug planted, block 17's `q_proj` weight "
             "left in torch's layout on the Paddle side (a square weight a converter skipped); the same pair clean; "
             "and pages of figures drawn at random in the 7B shape. Measured on a 2-core machine:", "",
             "<!-- block: not run (long) -->", "```",
             "python tools/bench_stream.py --dir DIR --write-only      # the pair, and DIR/.../paddle_q_unconverted/",
             "python -m portcheck layers --torch DIR/.../torch --paddle DIR/.../paddle_q_unconverted --html 7b.html",
             "python tools/bench_page.py --html 7b.html --first model.layers.17.self_attn.q_proj --label \"...\"",
             "python tools/bench_page.py                 # a 7B-shaped page of figures drawn at random",
             "python tools/bench_page.py --calls 8       # each module called 8 times: thousands of rows",
             "```", "", *table(figures), "",
             "`layers --html` on that pair took 15 min at a peak of 2.8 GB resident (`/usr/bin/time -v`) and exited "
             "1, naming `model.layers.17.self_attn.q_proj` cumulative and isolated, as its page does. On the clean "
             "pair it took 15 min and 2.8 GB, green.", "",
             "A 7B Llama's page has 388 rows cumulative, and as many isolated: 12 in each of the 32 blocks (the "
             "block, its attention, the four projections, the MLP and its three, the two norms), then the "
             "embeddings, the final norm, the head and the model's output. The page drawn with each module called "
             "8 times stands for a model of thousands.", "",
             "\"Opens in\" is the page's own time in a Chromium already running, the median of 3: from the "
             "navigation's start to the first frame drawn after its load (reading, parsing, its script, style and "
             "layout). Cold is a new headless Chromium started for the page and printing its DOM (`--dump-dom`), "
             "beside the same for a blank page. Search and sort are timed inside the page."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--blocks", type=int, default=32, help="drawn at random: decoder blocks (Llama-7B: 32)")
    ap.add_argument("--calls", type=int, default=1, help="drawn at random: calls of each module (1: one forward)")
    ap.add_argument("--html", type=Path, help="a page written before (`layers --html`), measured instead")
    ap.add_argument("--first", help="with --html: the module its comparison named first diverging (none: a green "
                    "page, no module marked)")
    ap.add_argument("--label", help="the table's name for this page (default: what was drawn)")
    ap.add_argument("--shot", type=Path, metavar="PNG", help="a screenshot of the page as it opens")
    ap.add_argument("--no-docs", action="store_true", help="print the figures, write nothing to docs/")
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "page.md",
                    help="the page, its figures (.json) beside it: each --label's kept, this one's added")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    held = args.out.with_suffix(".json")
    if args.page:
        require(held, COMMAND)
        bench_doc.write(args.out, render(read_json(held, 1 << 20)))
        return 0
    if not (1 <= args.blocks <= 1000 and 1 <= args.calls <= 100):
        raise PipelineError("--blocks 1..1000 and --calls 1..100")
    if args.first is not None and args.html is None:
        raise PipelineError("--first goes with --html: the module the page's comparison named first diverging")
    if args.html is not None and not args.html.is_file():
        raise PipelineError(f"--html {args.html}: no such file")
    if shutil.which("chromium") is None:
        raise PipelineError("chromium is not installed: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as tmp:
        path, first = args.html, args.first
        if path is None:
            path = Path(tmp) / "big.html"
            started = time.perf_counter()
            first = drawn(args.blocks, args.calls, path)
            print(f"written in {time.perf_counter() - started:.2f} s")
        label = args.label or f"{args.blocks} blocks drawn at random, {args.calls} call(s) of each module"
        facts = bench_doc.start()
        figures = {**measure(path, first, args.shot), bench_doc.RUN: bench_doc.finish(facts)}
    print(json.dumps({label: figures}, indent=1))
    if not args.no_docs:
        figures = {**(read_json(held, 1 << 20) if held.is_file() else {}), label: figures}
        bench_doc.write(held, json.dumps(figures, indent=1) + "\n")
        bench_doc.write(args.out, render(figures))
        print("\n".join(table(figures)))
    return 0


if __name__ == "__main__":
    run_main(main)
